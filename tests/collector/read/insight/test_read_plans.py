"""The read side's SQL for the insight queries (hours.Known, report.Snapshot) and what the overview reads.

The API, the CLI and the overview page run the rollup queries with the
rolled-up hours written in as constants (and the table ``requests`` for the
view ``prompt_requests`` when no log event carries a prompt); Grafana runs
the SQL that finds both out itself. Both give the same answers, before and
after the rollup job; and every read of the overview page stays inside its
window (the day partitions before it are pruned).
"""

from __future__ import annotations

import datetime
import math
import re

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from promptprism.collector.read.insight import report, rollups
from promptprism.collector.read.insight.queries import QUERIES
from promptprism.collector.read.insight.report import Filters, Window
from promptprism.collector.read.insight.routes import insight_routes

from .snapshots import window_snapshot

# On ClickHouse 24.8 too (make test)
pytestmark = pytest.mark.clickhouse

HOUR = 3600
DAY = 86400
# Columns filled by any(): either copy is right.
_ANY_COLUMNS = {"example_trace_id"}


def _same(first, second) -> bool:
    if isinstance(first, float) and isinstance(second, float):
        return math.isclose(first, second, abs_tol=0.011)
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(
            key in _ANY_COLUMNS or _same(first[key], second[key]) for key in first)
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(_same(a, b) for a, b in zip(first, second))
    return first == second


def _both_ways(store, now_s: int) -> None:
    # On ClickHouse 24.8 (a legacy chdb, ~150 ms of CPU per query) the window ragged at both ends and
    # hour buckets only: the rest is the same SQL, which the 26.x pass compares.
    windows = [(now_s - 9 * DAY - 1234, now_s - DAY + 777)] + ([] if store.legacy else [(now_s - 7 * DAY, now_s)])
    buckets = (HOUR,) if store.legacy else (HOUR, 900)
    for since, until in windows:
        known = window_snapshot(store, since, until)
        for name, query in QUERIES.items():
            if name.startswith("genai_"):
                continue
            for bucket in (buckets if "bucket_seconds" in query.params else (HOUR,)):
                for dimension in (("name", "layer") if "dimension" in query.params else ("name",)):
                    params = {"since": since, "until": until, "bucket_seconds": bucket, "dimension": dimension,
                              "service": "", "model": "", "process": "", "conversation": "", "limit": 500}
                    panel = report.run(store, name, params, lookup=True)
                    read_side = report.run(store, name, params, known=known)
                    assert _same(panel, read_side), (name, since, until, bucket, dimension, panel, read_side)
        window = Window(since, until)
        by_name, by_layer = report.growth_by_name_and_layer(store, window, Filters(), bucket="1h")
        assert _same(by_name, report.growth(store, window, Filters(), dimension="name", series=False))
        assert _same(by_layer, report.growth(store, window, Filters(), dimension="layer", bucket="1h"))


def test_the_read_side_sql_answers_as_the_panels_sql(scenario_store, now_ns):
    now_s = now_ns // 10**9
    _both_ways(scenario_store, now_s)  # nothing rolled up: no rollup branch at all
    assert rollups.run_once(scenario_store)
    _both_ways(scenario_store, now_s)  # whole hours from the rollups, the edges raw


def test_the_known_hours_become_time_ranges():
    from promptprism.collector.read.insight import hours

    plan = hours.Known((7200, 10800, 18000), {"since": 0, "until": 10**6})
    assert plan.ctes(hours.INSIDE_WINDOW) == [] and plan.hours == (7200, 10800, 18000)
    condition = plan.not_rolled("started_at")
    assert condition == ("(started_at < toDateTime(7200, 'UTC') OR (started_at >= toDateTime(14400, 'UTC')"
                         " AND started_at < toDateTime(18000, 'UTC')) OR started_at >= toDateTime(21600, 'UTC'))")
    # an hour a query's conditions leave out is read raw
    plan = hours.Known((7200, 10800), {"since": 8000, "until": 10**6})
    plan.ctes(hours.INSIDE_WINDOW)
    assert plan.hours == (10800,) and plan.union("rolled", "raw") == "rolled\n        UNION ALL\n        raw"
    one_conversation = hours.Known((10800,), {"since": 0, "until": 10**6, "conversation": "c"})
    one_conversation.ctes(hours.INSIDE_WINDOW, hours.CONVERSATION_UNSET)
    assert one_conversation.hours == ()
    empty = hours.Known((), {"since": 0, "until": 10**6})
    empty.ctes(hours.INSIDE_WINDOW)
    assert empty.union("rolled", "raw") == "raw" and empty.not_rolled("started_at") == "1 = 1"


_READ = re.compile(r"ReadFromMergeTree \(([^)]+)\)")
_PARTS = re.compile(r"Parts: (\d+)/(\d+)")


def _reads(store, sql: str, params) -> list[tuple[str, int]]:
    """(table, parts selected) of every MergeTree read in the query's plan."""
    lines = [row["explain"] for row in store.query("EXPLAIN indexes = 1 " + sql, params)]
    reads: list[tuple[str, int]] = []
    for line in lines:
        if (match := _READ.search(line)) is not None:
            reads.append((match.group(1).split(".")[-1], -1))
        elif reads and (match := _PARTS.search(line)) is not None:
            table, selected = reads[-1]
            # the last index applied selects the fewest
            reads[-1] = (table, int(match.group(1)) if selected < 0 else min(selected, int(match.group(1))))
    return reads


def _parts_before(store, day: datetime.date) -> dict[str, int]:
    rows = store.query("SELECT table, partition FROM system.parts WHERE database = {db:String} AND active",
                       {"db": store.database})
    before: dict[str, int] = {}
    for row in rows:
        partition = row["partition"].strip("'")
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", partition) and datetime.date.fromisoformat(partition) < day:
            before[row["table"]] = before.get(row["table"], 0) + 1
    return before


@pytest.mark.parametrize("rolled_up", [False, True], ids=["raw", "rolled-up"])
def test_the_overview_reads_only_its_window(scenario_store, now_ns, monkeypatch, rolled_up):
    """The scenario's previous week (10–12 days ago) lies before the default 7-day window; no read of
    the page (the cache analysis looks one day further back) selects a part of those days."""
    store = scenario_store
    if rolled_up:
        assert rollups.run_once(store)
    now_s = now_ns // 10**9
    earliest = datetime.datetime.fromtimestamp(now_s - 8 * DAY - HOUR, datetime.timezone.utc).date()
    outside = _parts_before(store, earliest)
    assert outside.get("requests") and outside.get("request_docs")
    original = store.query
    captured = []

    def query(sql, params=None, **settings):
        captured.append((sql, dict(params or {})))
        return original(sql, params, **settings)

    monkeypatch.setattr(store, "query", query)
    page = TestClient(Starlette(routes=insight_routes(store))).get("/overview")
    monkeypatch.setattr(store, "query", original)
    assert page.status_code == 200 and "Prompt growth" in page.text
    checked = set()
    for sql, params in captured:
        if "system." in sql or "genai_events" in sql:
            continue
        for table, selected in _reads(store, sql, params):
            total = len([1 for row in store.query(
                "SELECT 1 AS part FROM system.parts WHERE database = {db:String} AND table = {table:String} AND active",
                {"db": store.database, "table": table})])
            if outside.get(table):
                assert 0 <= selected <= total - outside[table], (table, selected, total, outside, sql)
                checked.add(table)
    assert {"requests", "request_docs"} <= checked  # `blocks` is a view of the documents
    if rolled_up:  # (the growth periods hold no whole hour with requests here: raw rows only)
        assert "cache_hourly" in checked
