"""The same store tests against both stores: embedded chdb and the server store
(clickhouse-connect over HTTP to chdb behind the ClickHouse HTTP interface,
tests/chdb_http_fixture.py, in a subprocess). Plus the store-down path:
accept while the server is stopped, replay once it is back."""

from __future__ import annotations

import contextlib
import datetime
import gzip
import time
import urllib.request
import uuid

import pyarrow as pa
import pytest

from promptprism.collector.read import lookups
from promptprism.collector.store import open_store
from promptprism.collector.store.base import StoreError, StoreUnavailable
from promptprism.collector.store.migrations import migrate
from promptprism.collector.store.server import ServerStore, parse_url
from promptprism.collector.write.rows import build_tables
from promptprism.collector.write.sink import open_sink

from chdb_http_fixture import ChdbHttpProcess  # tests/ is on sys.path (rootdir conftest)
from support import REPOSITORY, copy_schema, read_schema

from ..write_path_samples import make_batch, make_requests
from .older_schema import write_as_of

# The exporter's otel_traces columns and types (ALIAS columns included), as
# system.columns reports them.
OTEL_TRACES_COLUMNS = [
    ("Timestamp", "DateTime64(9)"), ("TraceId", "String"), ("SpanId", "String"), ("ParentSpanId", "String"),
    ("TraceState", "String"), ("SpanName", "LowCardinality(String)"), ("SpanKind", "LowCardinality(String)"),
    ("ServiceName", "LowCardinality(String)"), ("ResourceAttributes", "Map(LowCardinality(String), String)"),
    ("ScopeName", "String"), ("ScopeVersion", "String"),
    ("SpanAttributes", "Map(LowCardinality(String), String)"), ("Duration", "UInt64"),
    ("StatusCode", "LowCardinality(String)"), ("StatusMessage", "String"),
    ("Events.Timestamp", "Array(DateTime64(9))"), ("Events.Name", "Array(LowCardinality(String))"),
    ("Events.Attributes", "Array(Map(LowCardinality(String), String))"),
    ("Links.TraceId", "Array(String)"), ("Links.SpanId", "Array(String)"), ("Links.TraceState", "Array(String)"),
    ("Links.Attributes", "Array(Map(LowCardinality(String), String))"),
    ("ResourceAttributeItems", "Array(String)"), ("SpanAttributeItems", "Array(String)"),
]
# The tables the write path fills (rows.TABLES), partitioned by day. `blocks` is a view of
# `request_docs` since migration 050 (one row per block of each document), counted through it.
ALL_TABLES = ("requests", "request_docs", "tools", "contents", "otel_traces")


def tool_count(store, database: str) -> int:
    """The tool definitions stored with their requests (in each one's document since migration 051;
    on its `requests` row from 046), every copy counted."""
    return int(store.query(f"SELECT sum(JSONLength(doc, 'tool_names')) AS n FROM {database}.request_docs")[0]["n"])


def now_ns() -> int:
    return time.time_ns() - 3_600 * 10**9


@pytest.fixture(scope="module")
def http_clickhouse(tmp_path_factory):
    server = ChdbHttpProcess(str(tmp_path_factory.mktemp("chdb-http"))).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server_template(http_clickhouse):
    """Every migration applied once on the server store, to a database dropped once ``any_store``'s
    copies have its ``Schema`` (as the embedded ``migrated_template``)."""
    database = f"template_{uuid.uuid4().hex[:12]}"
    store = ServerStore(http_clickhouse.url.rsplit("/", 1)[0] + f"/{database}", auto_migrate=True)
    try:
        store.ensure_database()  # connects, creates the database and migrates
        return read_schema(store, database)
    finally:
        store.execute(f"DROP DATABASE IF EXISTS {database} SYNC")
        store.close()


@pytest.fixture(params=["embedded", "server"])
def any_store(request, migrated_template):
    """A fresh, migrated database on either store: a copy of the schema the migrations made on
    that store (as the ``store`` fixture's); ``any_migrated_store`` runs the migrations themselves."""
    schema = migrated_template if request.param == "embedded" else request.getfixturevalue("server_template")
    with _empty_database(request) as store:
        copy_schema(store, schema)
        yield store


@pytest.fixture(params=["embedded", "server"])
def any_migrated_store(request):
    """A fresh database on either store, migrated."""
    with _empty_database(request) as store:
        assert migrate(store)[0] == "001_initial.sql"
        yield store


@pytest.fixture(params=["embedded", "server"])
def any_empty_store(request):
    """A fresh database on either store, not migrated."""
    with _empty_database(request) as store:
        yield store


@contextlib.contextmanager
def _empty_database(request):
    database = f"test_{uuid.uuid4().hex[:12]}"
    if request.param == "embedded":
        store = request.getfixturevalue("chdb_root").with_database(database)
    else:
        server = request.getfixturevalue("http_clickhouse")
        store = ServerStore(server.url.rsplit("/", 1)[0] + f"/{database}")
        store.ensure_database()
    try:
        yield store
    finally:
        store.execute(f"DROP DATABASE IF EXISTS {database} SYNC")
        if request.param == "server":
            store.close()


def raw_count(store, table: str) -> int:
    return store.query(f"SELECT count() AS n FROM {store.database}.{table}")[0]["n"]


@pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)
def test_migrations_create_every_table_once(any_migrated_store):
    store = any_migrated_store
    tables = {row["name"] for row in store.query(f"SHOW TABLES FROM {store.database}")}
    assert {*ALL_TABLES, "blocks", "trace_threads", "trace_threads_mv", "otel_traces_trace_id_ts",
            "otel_traces_trace_id_ts_mv", "schema_migrations"} <= tables
    assert "request_content" not in tables  # dropped by migration 050
    assert migrate(store) == []


def test_otel_traces_has_the_exporter_schema(any_store):
    columns = any_store.query(
        "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = 'otel_traces' ORDER BY position",
        {"db": any_store.database})
    assert [(c["name"], c["type"]) for c in columns] == OTEL_TRACES_COLUMNS
    ddl = any_store.query(
        "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = 'otel_traces'",
        {"db": any_store.database})[0]["engine_full"]
    assert ddl.startswith("MergeTree PARTITION BY toDate(Timestamp) PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))")
    assert f"TTL toDateTime(Timestamp) + toIntervalDay({any_store.retention_days})" in ddl
    assert "ttl_only_drop_parts = 1" in ddl


def test_every_table_is_partitioned_by_day_with_the_retention_ttl(any_store):
    rows = any_store.query(
        "SELECT name, engine_full FROM system.tables WHERE database = {db:String} AND engine LIKE '%MergeTree'",
        {"db": any_store.database})
    engines = {row["name"]: row["engine_full"] for row in rows}
    for table in ALL_TABLES:
        assert "PARTITION BY toDate(" in engines[table] or "PARTITION BY day" in engines[table], table
        assert f"toIntervalDay({any_store.retention_days})" in engines[table], table
        assert "ttl_only_drop_parts = 1" in engines[table], table
        assert "non_replicated_deduplication_window = 10000" in engines[table], table


@pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)
def test_text_of_a_request_dated_past_clickhouse_dates_is_taken_and_found(any_store):
    """A start 65,536 days ahead: past ClickHouse's last Date, which both stores' Arrow inputs
    refuse (error 321); its text is filed under the day toDate(started_at) wraps to — today —,
    where the read side looks."""
    day_ns = 86_400 * 10**9
    started_at_ns = (time.time_ns() // day_ns + (1 << 16)) * day_ns + 3_600 * 10**9
    spans, records = make_requests(0, 1, started_at_ns=started_at_ns)
    for name, table in build_tables(spans, records).non_empty():
        any_store.insert(name, table)
    shown = lookups.request(any_store, records[0].request_id)
    assert [block["content"] for block in shown["prompt"]["blocks"]] == [block.content for block in records[0].blocks]
    today = datetime.date(1970, 1, 1) + datetime.timedelta(days=started_at_ns // day_ns - (1 << 16))
    assert any_store.query(f"SELECT DISTINCT toString(day) AS day FROM {any_store.database}.contents") == [
        {"day": today.isoformat()}]


@pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)
def test_rows_round_trip_with_identical_values(any_store):
    # Inside the retention window (older rows are dropped by the TTL on insert).
    second = now_ns() // 10**9
    spans, records = make_requests(0, 2, started_at_ns=second * 10**9 + 123_456_789)
    started = datetime.datetime.fromtimestamp(second, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    for name, table in build_tables(spans, records).non_empty():
        any_store.insert(name, table)
    row = any_store.query(
        f"SELECT started_at, input_tokens, cache_read_tokens, mapped, block_count "
        f"FROM {any_store.database}.requests FINAL WHERE request_id = {{id:String}}", {"id": f"{1:016x}"})
    assert row == [{"started_at": f"{started}.123456789", "input_tokens": 40, "cache_read_tokens": None,
                    "mapped": True, "block_count": 4}]
    # the fields only a request object shows are in its document (migration 051)
    document = any_store.query(
        f"SELECT started_at, JSONExtract(doc, 'input_tokens', 'Nullable(Int64)') AS input_tokens, "
        f"JSONExtract(doc, 'cache_read_tokens', 'Nullable(Int64)') AS cache_read_tokens, "
        f"JSONExtract(doc, 'finish_reasons', 'Array(String)') AS finish_reasons, "
        f"JSONExtract(doc, 'attributes', 'Map(String, String)') AS attributes "
        f"FROM {any_store.database}.request_docs FINAL WHERE request_id = {{id:String}}", {"id": f"{1:016x}"})
    assert document == [{"started_at": f"{started}.123456789", "input_tokens": 40, "cache_read_tokens": None,
                         "finish_reasons": [], "attributes": {"ratio": "0.5"}}]
    span = any_store.query(
        f"SELECT SpanAttributes['gen_ai.usage.input_tokens'] AS tokens, length(Events.Name) AS events, Duration "
        f"FROM {any_store.database}.otel_traces WHERE TraceId = {{t:String}}", {"t": f"{2:032x}"})
    assert span == [{"tokens": "41", "events": 4, "Duration": 250000000}]
    lookup = any_store.query(
        f"SELECT TraceId, min(Start) AS start FROM {any_store.database}.otel_traces_trace_id_ts "
        f"WHERE TraceId = {{t:String}} GROUP BY TraceId", {"t": f"{2:032x}"})
    # request 1 starts 1 ms after request 0; the lookup table keeps whole seconds
    assert lookup == [{"TraceId": f"{2:032x}", "start": started}]


def test_a_repeated_insert_with_its_token_is_dropped(any_store):
    tables = build_tables(*make_requests(0, 3, started_at_ns=now_ns()))
    for _ in range(3):
        for name, table in tables.non_empty():
            any_store.insert(name, table, dedup_token="group-1")
    # each request's tool is in its document (migrations 046, 051): none in `tools`
    assert {table: raw_count(any_store, table) for table in (*ALL_TABLES, "blocks")} == {
        "requests": 3, "request_docs": 3, "blocks": 12, "tools": 0, "contents": 7, "otel_traces": 3}
    assert tool_count(any_store, any_store.database) == 3


@pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)
def test_parameters_are_bound_not_formatted(any_store):
    hostile = "x' OR 1=1 --"
    any_store.insert("contents", pa.table({"day": pa.array([19000], pa.date32()), "sha256": ["safe"],
                                           "size": pa.array([1], pa.uint64()), "content": ["a"]}))
    rows = any_store.query(f"SELECT count() AS n FROM {any_store.database}.contents WHERE sha256 = {{h:String}}",
                           {"h": hostile})
    assert rows == [{"n": 0}]


def test_bad_sql_is_a_store_error_not_unavailable(any_store):
    with pytest.raises(StoreError) as raised:
        any_store.query("SELECT * FROM no_such_database.no_such_table")
    assert not isinstance(raised.value, StoreUnavailable)


@pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)
def test_a_database_with_only_001_is_migrated_forward_and_reads_old_rows(any_empty_store):
    legacy = any_empty_store
    old = legacy.database
    assert migrate(legacy, up_to=1) == ["001_initial.sql"]
    spans, records = make_requests(0, 2, started_at_ns=now_ns())
    old_tables = build_tables([], records)  # 001 has no otel_traces
    write_as_of(legacy, old_tables)  # the columns 001 has: what a collector of that version wrote
    assert migrate(legacy)[:5] == ["002_otel_traces_dedup.sql", "003_logs.sql", "004_event_prompts.sql",
                                   "005_content_keys.sql", "006_contents_by_day.sql"]
    rows = legacy.query(f"SELECT request_id, block_count, received_at > '2000-01-01' AS has_default "
                        f"FROM {old}.requests FINAL ORDER BY request_id")
    assert rows == [{"request_id": f"{1:016x}", "block_count": 4, "has_default": True},
                    {"request_id": f"{2:016x}", "block_count": 4, "has_default": True}]
    # the old rows' documents (copied by migration 049) and their blocks through the view of 050
    assert raw_count(legacy, "request_docs") == 2 and raw_count(legacy, "blocks") == 8
    new = build_tables(spans, [])
    legacy.insert("otel_traces", new.tables["otel_traces"])
    assert raw_count(legacy, "otel_traces") == 2
    # Old block and tool rows have no content_sha256: their text is
    # found under sha256, with no problem and nothing flagged redacted.
    assert legacy.query(f"SELECT DISTINCT content_sha256, redacted FROM {old}.blocks") == [
        {"content_sha256": "", "redacted": False}]
    sent = records[0]
    request = lookups.request(legacy, sent.request_id)
    prompt = request["prompt"]
    assert [block["content"] for block in prompt["blocks"]] == [block.content for block in sent.blocks]
    assert prompt["problems"] == [] and not any(block["redacted"] for block in prompt["blocks"])
    assert prompt["text"] is not None and prompt["redacted"] is False
    assert [tool["content"] for tool in request["tools"]] == [tool.content for tool in sent.tools]


# --- server store only -----------------------------------------------------------

def test_store_url_is_parsed_into_connection_arguments():
    assert parse_url("https://reader:p%40ss@ch.example:9443/prism") == {
        "host": "ch.example", "port": 9443, "username": "reader", "password": "p@ss", "secure": True,
        "database": "prism"}
    assert parse_url("http://ch:8123")["database"] == "promptprism"
    with pytest.raises(ValueError):
        parse_url("http://ch:8123/bad-name; DROP")
    with pytest.raises(ValueError):
        parse_url("ftp://ch/x")


def test_unreachable_server_is_store_unavailable(port):
    store = ServerStore(f"http://default:x@127.0.0.1:{port}/promptprism")
    with pytest.raises(StoreUnavailable):
        store.query("SELECT 1")
    assert store.ping() is False


@pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)
def test_open_store_picks_the_server_store_for_a_url(http_clickhouse):
    database = f"test_{uuid.uuid4().hex[:12]}"
    store = open_store(http_clickhouse.url.rsplit("/", 1)[0] + f"/{database}", retention_days=7)
    try:
        assert isinstance(store, ServerStore) and store.retention_days == 7
        assert raw_count(store, "otel_traces") == 0  # migrated on first use
    finally:
        store.execute(f"DROP DATABASE IF EXISTS {database} SYNC")
        store.close()


@pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)
def test_fixture_speaks_native_chunked_inserts_and_gzip(http_clickhouse):
    import clickhouse_connect

    arguments = parse_url(http_clickhouse.url)
    arguments.pop("database")
    client = clickhouse_connect.get_client(**arguments, compress=False)
    # A database of its own and MergeTree: chdb 2.1.x (ClickHouse 24.8) keeps neither
    # a table in `default` nor Memory rows from one statement to the next.
    client.command("CREATE DATABASE IF NOT EXISTS fixture_probe")
    client.command("CREATE TABLE IF NOT EXISTS fixture_probe.native_probe (n UInt32, s String) ENGINE = MergeTree ORDER BY n")
    client.insert("native_probe", [[1, "a"], [2, "b"]], column_names=["n", "s"], database="fixture_probe")  # FORMAT Native
    assert client.query("SELECT sum(n) FROM fixture_probe.native_probe").result_rows == [(3,)]
    request = urllib.request.Request(
        f"http://127.0.0.1:{http_clickhouse.port}/?param_x=5", method="POST",
        data=gzip.compress(b"SELECT {x:UInt8} + 1 AS y FORMAT JSONEachRow"), headers={"Content-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.read() == b'{"y":6}\n' and answer.headers["X-ClickHouse-Format"] == "JSONEachRow"
    client.command("DROP DATABASE fixture_probe")
    client.close()


def test_store_down_then_back_every_record_once(tmp_path):
    """Accept while the server is stopped (spooled), restart it, replay, no duplicates."""
    server = ChdbHttpProcess(str(tmp_path / "clickhouse"), database="down_test").start()
    store = ServerStore(server.url, auto_migrate=True)
    sink = open_sink(store, data_dir=str(tmp_path / "collector"))
    batches = [make_batch(10 * n, 2, started_at_ns=now_ns()) for n in range(4)]
    try:
        sink.accept(batches[0])
        assert sink.stats()["spool_batches"] == 0
        server.stop()
        for batch in batches[1:]:
            sink.accept(batch)  # returns: in the spool
        assert sink.stats()["spool_batches"] >= 1 and sink.stats()["store_up"] == 0
        server.start()
        deadline = time.monotonic() + 60
        while sink.stats()["spool_batches"]:
            assert time.monotonic() < deadline, sink.stats()
            time.sleep(0.1)
        for batch in batches:
            sink.accept(batch)  # resends after the outage change nothing
        counts = {table: raw_count(store, table) for table in (*ALL_TABLES, "blocks")}
        assert counts == {"requests": 8, "request_docs": 8, "blocks": 32, "tools": 0, "contents": 12,
                          "otel_traces": 8}
        assert tool_count(store, store.database) == 8
        ids = store.query("SELECT SpanId, count() AS n FROM down_test.otel_traces GROUP BY SpanId HAVING n > 1")
        assert ids == []
    finally:
        sink.close()
        store.close()
        server.stop()


def run_migrate_verb(argv: list[str]) -> int:
    """The `migrate` verb through its own parser (the CLI registers it the same way)."""
    import argparse

    from promptprism.collector.cli import migrate as verb

    parser = argparse.ArgumentParser(prog="promptprism")
    verb.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["migrate", *argv])
    return args.handler(args)


def test_migrate_verb_applies_then_reports_up_to_date(http_clickhouse, capsys):
    database = f"test_{uuid.uuid4().hex[:12]}"
    url = http_clickhouse.url.rsplit("/", 1)[0] + f"/{database}"
    assert run_migrate_verb(["--store", url, "--retention-days", "9"]) == 0
    assert "applied 001_initial.sql, 002_otel_traces_dedup.sql, 003_logs.sql" in capsys.readouterr().out
    assert run_migrate_verb(["--store", url]) == 0
    assert "schema up to date" in capsys.readouterr().out
    store = ServerStore(url)
    try:
        ddl = store.query("SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = 'requests'",
                          {"db": database})[0]["engine_full"]
        assert "toIntervalDay(9)" in ddl
    finally:
        store.execute(f"DROP DATABASE IF EXISTS {database} SYNC")
        store.close()


def test_migrate_verb_prints_the_ddl_without_connecting(capsys):
    assert run_migrate_verb(["--print", "--store", "http://u:p@127.0.0.1:1/prism", "--retention-days", "7"]) == 0
    out = capsys.readouterr().out
    assert "CREATE TABLE IF NOT EXISTS prism.otel_traces" in out
    assert "toIntervalDay(7)" in out and "${" not in out


def test_migrate_verb_unreachable_server_is_one_line_error(port):
    from promptprism.collector.cli import CommandError

    with pytest.raises(CommandError, match="cannot migrate prism"):
        run_migrate_verb(["--store", f"http://u:p@127.0.0.1:{port}/prism"])


def readme_schema_queries() -> list[str]:
    """The ```sql blocks of the README's storage-schema section."""
    import re

    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- schema -->", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sql\n(.*?)```", section, re.S)


def test_readme_lists_five_queries():
    assert len(readme_schema_queries()) == 5


@pytest.mark.parametrize("number", range(5))
def test_readme_query_runs_and_answers(any_store, number):
    import re

    for name, table in build_tables(*make_requests(0, 3, started_at_ns=now_ns())).non_empty():
        any_store.insert(name, table)
    sql = readme_schema_queries()[number].replace("promptprism.", f"{any_store.database}.")
    known = {"service": "chat-app", "trace_id": f"{2:032x}", "request_id": f"{2:016x}"}
    params = {name: known[name] for name in re.findall(r"\{(\w+):", sql)}
    rows = any_store.query(sql, params)
    assert rows, sql
    if "c.content" in sql:  # the block text comes back through contents
        assert [row["b.name"] if "b.name" in row else row["name"] for row in rows][:1] == ["identity"]
        assert rows[0]["content"] == "You are Prism, a careful assistant.\n"
