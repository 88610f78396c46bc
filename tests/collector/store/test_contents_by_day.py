"""Captured text of every day survives merges (migration 006: ``contents`` keyed by (day, sha256)).

The same static block text sent on seven different days is stored once per
day. Before 006 ``contents`` was ordered by sha256 alone, so ``FINAL``
collapsed the seven rows into the newest day's and six of the seven requests
read "content not captured". The store here is written with the schema
before 006 (what a collector of that version wrote), merged, migrated, and
then read as a user reads it: the JSON API, the inspector page and
``promptprism prompt show --content`` against a real collector.
"""

from __future__ import annotations

import datetime
import html
import os
import subprocess
import sys
import uuid

import httpx
import pytest

from promptprism.collector.read import lookups
from promptprism.collector.store.migrations import migrate
from promptprism.collector.store.server import ServerStore
from promptprism.collector.write.rows import build_tables

from chdb_http_fixture import ChdbHttpProcess  # tests/ is on sys.path (rootdir conftest)

from .. import read_side_data as data
from ..collector_harness import running_collector
from .older_schema import write_as_of

IDENTITY = "You are Prism, the careful assistant of a small design studio. Dates are ISO 8601.\n"
# Days back from today, oldest first: seven different days. The oldest is
# three days older than the next, so a retention that drops it keeps the
# others with a margin, whatever the time of day.
DAYS_AGO = (8, 5, 4, 3, 2, 1, 0)
RETENTION_DAYS = 10
SHORTER_RETENTION_DAYS = 7
DAY_NS = 86_400 * 10**9
PROMPTPRISM = [sys.executable, "-c", "import sys; from promptprism.collector.cli import main; sys.exit(main())"]
# Tables with a TTL whose rows a request needs, as docs/operations.md changes them. `blocks` is a
# view of `request_docs` since migration 050 (no TTL of its own; its rows go with their documents).
TTL_COLUMNS = {"requests": "toDateTime(started_at)", "request_docs": "toDateTime(started_at)",
               "trace_threads": "toDateTime(first_start)", "tools": "toDateTime(started_at)", "contents": "day"}


def _midday_ns(days_ago: int) -> int:
    today = datetime.datetime.now(datetime.timezone.utc).replace(hour=12, minute=0, second=0, microsecond=0)
    moment = today - datetime.timedelta(days=days_ago)
    # Today's request must not lie in the future of the read that lists it.
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=1)
    return int(min(moment, now).timestamp()) * 10**9


def week_of_records() -> list:
    records = []
    for number, days_ago in enumerate(DAYS_AGO):
        parts = [data.Part("identity", "identity", "static", "config", IDENTITY),
                 data.Part("state", "state", "turn", "app", f"Day {days_ago} ago, turn {number}.\n")]
        record = data.build_record(trace_id=f"{0xdead0000 + number:032x}", request_id=f"{0xbeef0000 + number:016x}",
                                   parts=parts, conversation_id=f"conversation-{number}",
                                   # A mapped prompt's text travels in its blocks only (README, Content).
                                   system_instructions="")
        record.started_at_ns = _midday_ns(days_ago)
        records.append(record)
    return records


def _written_before_006(store) -> list:
    """Migrations up to 005, a week of rows written by the write path (its blocks as rows of the
    `blocks` table of that time), every table merged."""
    assert migrate(store, up_to=5)[-1] == "005_content_keys.sql"
    records = week_of_records()
    write_as_of(store, build_tables([], records))
    for table in ("requests", "blocks", "tools", "contents"):
        store.execute(f"OPTIMIZE TABLE {store.database}.{table} FINAL")
    return records


def _identity_text(store, request_id: str) -> str | None:
    return lookups.request(store, request_id)["prompt"]["blocks"][0]["content"]


@pytest.fixture
def week_store(chdb_root):
    database = f"test_{uuid.uuid4().hex[:12]}"
    store = chdb_root.with_database(database, retention_days=RETENTION_DAYS)
    yield store
    chdb_root.execute(f"DROP DATABASE IF EXISTS {database} SYNC")


def test_migration_006_keeps_every_day_and_the_api_inspector_and_cli_show_it(week_store, tmp_path):
    store = week_store
    records = _written_before_006(store)
    assert migrate(store)[0] == "006_contents_by_day.sql"
    assert store.query("SELECT sorting_key FROM system.tables WHERE database = {db:String} AND name = 'contents'",
                       {"db": store.database}) == [{"sorting_key": "day, sha256"}]
    assert store.query(f"SELECT count() AS tables FROM system.tables WHERE database = {{db:String}} "
                       f"AND name = 'contents__rebuild'", {"db": store.database}) == [{"tables": 0}]
    # Merged again after the migration: still one row per day.
    store.execute(f"OPTIMIZE TABLE {store.database}.contents FINAL")

    with running_collector(store, tmp_path / "collector") as collector:
        ui = collector.endpoints()["ui"]
        environment = {key: value for key, value in os.environ.items() if not key.startswith("PROMPTPRISM_")}
        for record in records:
            answer = httpx.get(f"{ui}/api/requests/{record.request_id}", timeout=30).json()
            assert answer["prompt"]["blocks"][0]["content"] == IDENTITY, record.started_at_ns
            assert answer["prompt"]["content_captured"] is True
            page = httpx.get(f"{ui}/requests/{record.request_id}", timeout=30).text
            assert html.escape(IDENTITY.strip(), quote=False) in page and "content not captured" not in page
            shown = subprocess.run([*PROMPTPRISM, "prompt", "show", record.request_id, "--content", "--url", ui],
                                   capture_output=True, text=True, env=environment, timeout=60)
            assert shown.returncode == 0, shown.stderr
            assert IDENTITY.strip() in shown.stdout and "(content not captured)" not in shown.stdout

        # The retention shrinks (as docs/operations.md does it): the TTL drops
        # the oldest day, and the six younger requests keep their text.
        for table, column in TTL_COLUMNS.items():
            store.execute(f"ALTER TABLE {store.database}.{table} "
                          f"MODIFY TTL {column} + INTERVAL {SHORTER_RETENTION_DAYS} DAY")
            store.execute(f"OPTIMIZE TABLE {store.database}.{table} FINAL")
        oldest, *younger = records
        assert httpx.get(f"{ui}/api/requests/{oldest.request_id}", timeout=30).status_code == 404
        # the block texts of six days (contents holds the messages too since migration 021)
        assert store.query(f"SELECT count() AS n FROM {store.database}.contents FINAL "
                           "WHERE startsWith(content, 'You are Prism') OR startsWith(content, 'Day ')") == [{"n": 6 * 2}]
        for record in younger:
            answer = httpx.get(f"{ui}/api/requests/{record.request_id}", timeout=30).json()
            assert answer["prompt"]["blocks"][0]["content"] == IDENTITY


def test_a_rerun_of_006_after_an_interruption_converges(week_store):
    """Every statement of 006 may be run again: the runner records the version last."""
    from promptprism.collector.store.migrations import load_migrations

    store = week_store
    records = _written_before_006(store)
    (migration,) = [m for m in load_migrations(database=store.database, retention_days=RETENTION_DAYS)
                    if m.version == 6]
    exchange = next(i for i, statement in enumerate(migration.statements) if statement.startswith("EXCHANGE"))
    for statement in migration.statements[: exchange + 1]:  # interrupted right after the swap
        store.execute(statement)
    assert migrate(store)[0] == "006_contents_by_day.sql"
    assert migrate(store) == []
    for record in records:
        assert _identity_text(store, record.request_id) == IDENTITY


def test_server_store_migrates_a_store_written_before_006(chdb_root, tmp_path):
    server = ChdbHttpProcess(str(tmp_path / "chdb-http")).start()
    database = f"test_{uuid.uuid4().hex[:12]}"
    store = ServerStore(server.url.rsplit("/", 1)[0] + f"/{database}", retention_days=RETENTION_DAYS)
    try:
        store.ensure_database()
        records = _written_before_006(store)
        assert migrate(store)[0] == "006_contents_by_day.sql"
        store.execute(f"OPTIMIZE TABLE {database}.contents FINAL")
        for record in records:
            assert _identity_text(store, record.request_id) == IDENTITY
    finally:
        try:
            store.execute(f"DROP DATABASE IF EXISTS {database}")
            store.close()
        finally:
            server.stop()  # whatever failed above: no fixture process is left behind


# Sorting keys that fix a row's partition without naming it: a timestamp or its
# hour fixes its day. genai_events sorts by a record hash that includes
# the record's time (collector/write/genai_events.py), so equal keys never span two days.
DAY_FIXED_BY = {"toDate(started_at)": {"toStartOfHour(started_at)", "started_at"}, "day": {"day"},
                "toDate(hour)": {"hour"}}  # the hourly rollups (migration 024)
IDENTITY_HOLDS_THE_TIME = {"genai_events"}


def test_no_replacing_table_lets_final_merge_rows_of_different_days(store):
    """FINAL deduplicates by the sorting key across partitions (README "Storage schema", "Keys and FINAL"): every
    ReplacingMergeTree table's sorting key must fix the day its row is partitioned by."""
    tables = store.query("SELECT name, partition_key, sorting_key FROM system.tables "
                         "WHERE database = {db:String} AND engine = 'ReplacingMergeTree'", {"db": store.database})
    assert {"requests", "request_docs", "tools", "contents", "genai_events"} <= {table["name"] for table in tables}
    for table in tables:
        if not table["partition_key"] or table["name"] in IDENTITY_HOLDS_THE_TIME:
            continue
        keys = [key.strip() for key in table["sorting_key"].split(",")]
        assert DAY_FIXED_BY[table["partition_key"]] & set(keys), table
