import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading

import pyarrow as pa
import pytest

from promptprism.collector.store.base import StoreError, StoreUnavailable
from promptprism.collector.store.embedded import INSERT_DIR, insert_directory
from promptprism.collector.store.migrations import load_migrations, migrate


def test_migrate_creates_tables_once(store):
    tables = {row["name"] for row in store.query(f"SHOW TABLES FROM {store.database}")}
    assert {"requests", "blocks", "tools", "contents", "schema_migrations"} <= tables
    assert migrate(store) == []  # already applied: nothing to do


def test_tables_are_partitioned_by_day_with_ttl(store):
    for table in ("requests", "request_docs", "tools", "contents"):
        ddl = store.query(
            "SELECT create_table_query FROM system.tables WHERE database = {db:String} AND name = {t:String}",
            {"db": store.database, "t": table},
        )[0]["create_table_query"]
        assert "PARTITION BY toDate(" in ddl or "PARTITION BY day" in ddl, table
        assert f"toIntervalDay({store.retention_days})" in ddl, table
        assert "ttl_only_drop_parts = 1" in ddl, table


def test_parameters_are_bound_not_formatted(store):
    hostile = "x' OR 1=1 --"
    store.insert("contents", pa.table({
        "day": pa.array([19000], pa.date32()), "sha256": ["safe"],
        "size": pa.array([1], pa.uint64()), "content": ["a"],
    }))
    rows = store.query(f"SELECT count() AS n FROM {store.database}.contents WHERE sha256 = {{h:String}}", {"h": hostile})
    assert rows == [{"n": 0}]


def test_bad_sql_is_a_store_error(store):
    with pytest.raises(StoreError):
        store.query("SELECT * FROM no_such_database.no_such_table")


def test_bad_database_name_is_rejected():
    with pytest.raises(ValueError, match="identifier"):
        load_migrations(database="x; DROP TABLE y", retention_days=30)


def test_a_failing_migration_is_named_in_the_error(store):
    """A migration that a supported ClickHouse (26.x, or 24.8 in make test's second pass) refuses says which one."""
    from promptprism.collector.store.migrations import Migration, apply_migrations

    bad = Migration(999, "999_needs_a_newer_clickhouse.sql", ("SELECT no_such_function()",))
    with pytest.raises(StoreError, match="migration 999_needs_a_newer_clickhouse.sql failed: .*no_such_function"):
        apply_migrations(store, [bad], set())


def _content_row(text: str) -> pa.Table:
    # Today: the retention TTL drops an older day's rows, sometimes as soon as they are written.
    today = datetime.datetime.now(datetime.timezone.utc).date()
    return pa.table({"day": pa.array([today], pa.date32()), "sha256": [text], "size": pa.array([1], pa.uint64()),
                     "content": [text]})


@pytest.mark.clickhouse  # 24.8 too: its embedded store always inserted through the file
def test_an_insert_goes_through_an_arrow_file_that_does_not_outlive_it(store, tmp_path, monkeypatch):
    """Both chdb versions insert from an Arrow stream file under the data directory (README
    "Ingest throughput"); it is removed whether the store takes the rows or refuses them."""
    made = []

    def mkstemp(*args, **kwargs):
        made.append(real_mkstemp(*args, **kwargs))
        return made[-1]

    real_mkstemp = tempfile.mkstemp
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(store, "_insert_dir", str(tmp_path / "inserts"))
    store.insert("contents", _content_row("kept"))
    assert store.query(f"SELECT content FROM {store.database}.contents") == [{"content": "kept"}]
    with pytest.raises(StoreError):
        store.insert("contents", pa.table({"no_such_column": [1]}))
    assert [(os.path.dirname(path), path.endswith(".arrows")) for _, path in made] == [
        (str(tmp_path / "inserts"), True)] * 2
    assert list((tmp_path / "inserts").iterdir()) == []


@pytest.mark.clickhouse
def test_an_insert_file_that_cannot_be_written_is_the_store_unavailable(store, tmp_path, monkeypatch):
    """A full or unwritable data directory is a store that cannot take rows now (the sink spools
    and retries), not rows the store refused. (A file where the directory should be: root too
    is refused.)"""
    (tmp_path / "data").write_text("not a directory")
    monkeypatch.setattr(store, "_insert_dir", str(tmp_path / "data" / "inserts"))
    with pytest.raises(StoreUnavailable, match="cannot write the insert's Arrow file"):
        store.insert("contents", _content_row("waiting"))
    assert store.query(f"SELECT count() AS n FROM {store.database}.contents") == [{"n": 0}]


def test_opening_a_store_removes_the_insert_files_a_killed_process_left(tmp_path):
    """chdb allows one data directory per process: a second process opens the store."""
    inserts = tmp_path / INSERT_DIR
    inserts.mkdir()
    (inserts / "insert-left.arrows").write_bytes(b"half an insert")
    (inserts / "notes.txt").write_text("not ours")
    script = ("import sys; from promptprism.collector.store.embedded import EmbeddedStore; "
              "EmbeddedStore(sys.argv[1]).close()")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, timeout=120)
    assert sorted(path.name for path in inserts.iterdir()) == ["notes.txt"]


def test_a_data_directory_whose_path_is_a_pattern_to_clickhouse_inserts_each_row_once(tmp_path):
    """ClickHouse's file() reads `*`, `?` and `{…}` in its path as a glob: `{` made every insert
    fail and `*` could read other files too. Such a data directory inserts through a private
    directory under the system's temporary directory instead. (A second process: one chdb each.)"""
    data_dir = tmp_path / "data*{a,b}"
    script = (
        "import json, sys, tempfile; import pyarrow as pa\n"
        "tempfile.tempdir = sys.argv[2]\n"
        "from promptprism.collector.store.embedded import EmbeddedStore\n"
        "store = EmbeddedStore(sys.argv[1], database='globbed')\n"
        "store.execute('CREATE TABLE globbed.t (x UInt32) ENGINE = MergeTree ORDER BY x')\n"
        "store.insert('t', pa.table({'x': pa.array([1, 2, 3], pa.uint32())}))\n"
        "print(json.dumps({'rows': store.query('SELECT count() AS n FROM globbed.t')[0]['n'],"
        " 'directory': store._insert_dir}))\n"
        "store.close()\n")
    (tmp_path / "temporary").mkdir()
    done = subprocess.run([sys.executable, "-c", script, str(data_dir), str(tmp_path / "temporary")],
                          check=True, timeout=120, capture_output=True, text=True)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["rows"] == 3
    directory = answer["directory"]
    assert os.path.dirname(directory) == str(tmp_path / "temporary") and os.listdir(directory) == []
    assert os.stat(directory).st_mode & 0o777 == 0o700


def test_a_shared_insert_directory_not_ours_alone_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    data_dir = str(tmp_path / "data?")
    directory = insert_directory(data_dir)
    assert directory.startswith(str(tmp_path / "promptprism-inserts-"))
    assert insert_directory(data_dir) == directory  # the same each time, so leftovers are found
    os.chmod(directory, 0o777)  # as if another user had made it first, open to all
    with pytest.raises(StoreUnavailable, match="not a directory only this user can open"):
        insert_directory(data_dir)
    assert insert_directory(str(tmp_path / "plain")) == str(tmp_path / "plain" / "inserts")


def test_an_insert_on_the_second_lane_does_not_wait_for_a_statement_on_the_first(store):
    """Lane 1 is a session of its own on the same data directory (README "Ingest throughput"): it
    inserts while a statement holds lane 0, and the rows are the same table's — read on lane 0,
    and a repeat under the same token on lane 0 is dropped."""
    if store.legacy:
        pytest.skip("chdb 2.1.x has one insert lane (it cannot close a second session)")
    assert store.insert_lanes == 2
    holding, release = threading.Event(), threading.Event()

    def hold_lane_0():
        with store._lock.hold(writer=True):
            holding.set()
            release.wait(60)

    holder = threading.Thread(target=hold_lane_0)
    holder.start()
    try:
        assert holding.wait(60)
        inserting = threading.Thread(target=store.insert, args=("contents", _content_row("beside")),
                                     kwargs={"dedup_token": "lanes", "lane": 1})
        inserting.start()
        inserting.join(60)
        finished_while_held = not inserting.is_alive()
    finally:
        release.set()
        holder.join()
        inserting.join()
    assert finished_while_held
    store.insert("contents", _content_row("beside"), dedup_token="lanes", lane=0)
    assert store.query(f"SELECT content FROM {store.database}.contents") == [{"content": "beside"}]


@pytest.mark.clickhouse
def test_a_lane_the_store_does_not_have_is_refused(store):
    with pytest.raises(ValueError, match=f"lane {store.insert_lanes}"):
        store.insert("contents", _content_row("nowhere"), lane=store.insert_lanes)
    assert store.query(f"SELECT count() AS n FROM {store.database}.contents") == [{"n": 0}]
