"""The hourly rollups (migration 024) and the collector's job that recomputes them (insight.rollups).

Every panel answers the same with the rollups as from raw rows alone; the
job counts a replaced or re-sent request once; a store migrated from
migration 023 keeps its answers and gets them from the rollups.
"""

from __future__ import annotations

import dataclasses
import math
import time

import pytest

from promptprism.collector.read.insight import report, rollups
from promptprism.collector.read.insight.queries import QUERIES
from promptprism.collector.read.lineage import LINEAGE_KEY_SQL
from promptprism.collector.store.migrations import migrate
from promptprism.collector.write.rows import build_tables

from ...store.older_schema import write_as_of
from ...write_path_samples import write_records
from . import scenario
from .snapshots import window_snapshot

HOUR = 3600

# On ClickHouse 24.8 too (make test)
pytestmark = pytest.mark.clickhouse


def _answers(store, now_s: int) -> dict:
    """Every panel query over windows with whole and ragged edges, with hour, day and finer buckets.

    On ClickHouse 24.8 (a legacy chdb, ~150 ms of CPU per query) only the window ragged at both ends:
    the same SQL as the other two, which the 26.x pass compares."""
    answers = {}
    windows = [(now_s - 9 * 86400 - 1234, now_s - 86400 + 777)]
    if not store.legacy:
        windows += [(now_s - 7 * 86400, now_s), (now_s - 5 * 86400 + 1800, now_s - 2 * 86400)]
    for since, until in windows:
        known = window_snapshot(store, since, until)
        for name, query in QUERIES.items():
            if name.startswith("genai_"):
                continue
            buckets = (HOUR, 86400, 900) if "bucket_seconds" in query.params else (HOUR,)
            dimensions = ("name", "layer") if "dimension" in query.params else ("name",)
            for bucket in buckets:
                for dimension in dimensions:
                    params = {"since": since, "until": until, "bucket_seconds": bucket, "dimension": dimension,
                              "service": "", "model": "", "process": "", "conversation": "", "limit": 500}
                    answers[(name, since, until, bucket, dimension)] = report.run(store, name, params, known=known)
    return answers



def _same(first, second) -> bool:
    if isinstance(first, float) and isinstance(second, float):
        return math.isclose(first, second, abs_tol=0.011)
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(_same(first[key], second[key]) for key in first)
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(_same(a, b) for a, b in zip(first, second))
    return first == second


def _assert_same_answers(expected: dict, actual: dict) -> None:
    for key, rows in expected.items():
        assert _same(rows, actual[key]), (key, rows, actual[key])


def _count(store, table: str) -> int:
    return int(store.query(f"SELECT count() AS n FROM {store.database}.{table}")[0]["n"])


def test_every_panel_answers_the_same_from_the_rollups(scenario_store, now_ns):
    now_s = now_ns // 10**9
    raw = _answers(scenario_store, now_s)
    assert any(rows for key, rows in raw.items() if key[0] == "cache_breaks_by_block")

    hours = rollups.run_once(scenario_store)
    assert hours and all(hour + HOUR + rollups.SETTLE_SECONDS <= now_s + 1 for hour in hours)
    for table in ("prompt_parts_hourly", "prompt_requests_hourly", "cache_hourly", "rollup_hours"):
        assert _count(scenario_store, table) > 0, table
    _assert_same_answers(raw, _answers(scenario_store, now_s))


def test_readers_take_the_newest_computation_of_an_hour(scenario_store, now_ns):
    now_s = now_ns // 10**9
    rollups.run_once(scenario_store)
    hour = int(scenario_store.query(
        "SELECT toInt64(toUnixTimestamp(max(hour))) AS hour FROM {db:Identifier}.prompt_parts_hourly",
        {"db": scenario_store.database})[0]["hour"])
    params = {"since": now_s - 14 * 86400, "until": now_s, "bucket_seconds": HOUR, "dimension": "name",
              "service": "", "model": "", "process": ""}

    def bytes_in_that_hour() -> float:
        rows = report.run(scenario_store, "growth_series", params)
        label = time.strftime("%Y-%m-%d %H:00:00", time.gmtime(hour))
        return sum(row["bytes_per_request"] for row in rows if row["time"] == label)

    before = bytes_in_that_hour()
    assert before > 0
    # A newer computation of that hour that finds twice the bytes: the panels follow it once it is recorded.
    scenario_store.execute(
        "INSERT INTO {db:Identifier}.prompt_parts_hourly SELECT hour, computed_at + 1, service, model, process_kind, "
        "lineage_key, name, layer, stability, bytes * 2 FROM {db:Identifier}.prompt_parts_hourly "
        "WHERE hour = toDateTime({hour:Int64}, 'UTC')", {"db": scenario_store.database, "hour": hour})
    scenario_store.execute(
        "INSERT INTO {db:Identifier}.prompt_requests_hourly SELECT hour, computed_at + 1, service, model, "
        "process_kind, lineage_key, requests FROM {db:Identifier}.prompt_requests_hourly "
        "WHERE hour = toDateTime({hour:Int64}, 'UTC')", {"db": scenario_store.database, "hour": hour})
    assert bytes_in_that_hour() == before  # not recorded in rollup_hours yet: not used
    scenario_store.execute(
        "INSERT INTO {db:Identifier}.rollup_hours SELECT hour, computed_at + 1 FROM {db:Identifier}.rollup_hours "
        "WHERE hour = toDateTime({hour:Int64}, 'UTC')", {"db": scenario_store.database, "hour": hour})
    assert bytes_in_that_hour() == pytest.approx(2 * before, abs=0.5)


def _records_in_the_past(now_ns: int):
    records = scenario.records(now_ns)
    return [record for record in records if record.started_at_ns < now_ns - 2 * HOUR * 10**9]


def test_a_request_sent_twice_under_two_tokens_counts_once(store, now_ns):
    now_s = now_ns // 10**9
    records = _records_in_the_past(now_ns)
    tables = build_tables([], records)
    for token in ("first", "second"):  # a replay under another deduplication token: two copies until merged
        for table, columns in tables.non_empty():
            store.insert(table, columns, dedup_token=f"{token}-{table}")
    assert _count(store, "requests") == 2 * len(records)
    rollups.run_once(store)
    from_rollups = report.run(store, "growth_series", {
        "since": now_s - 14 * 86400, "until": now_s - (now_s % 86400), "bucket_seconds": 86400,
        "dimension": "service", "service": "", "model": "", "process": ""})
    requests = store.query("SELECT sum(requests) AS n FROM {db:Identifier}.prompt_requests_hourly",
                           {"db": store.database})[0]["n"]
    assert int(requests) == len(records)
    for table in ("requests", "request_docs"):
        store.execute(f"OPTIMIZE TABLE {store.database}.{table} FINAL")
    store.execute(f"TRUNCATE TABLE {store.database}.rollup_hours")
    assert from_rollups == report.run(store, "growth_series", {
        "since": now_s - 14 * 86400, "until": now_s - (now_s % 86400), "bucket_seconds": 86400,
        "dimension": "service", "service": "", "model": "", "process": ""})


def test_a_replacement_row_replaces_the_request_in_the_rollups(store, now_ns):
    """A later, richer row with the same key (issue 11's merged record) replaces the first one."""
    records = _records_in_the_past(now_ns)
    write_records(store, records)
    rollups.run_once(store)
    first = records[0]
    grown = dataclasses.replace(first, blocks=[dataclasses.replace(block) for block in first.blocks])
    grown.blocks[-1] = dataclasses.replace(grown.blocks[-1], size=grown.blocks[-1].size + 1000,
                                           end=grown.blocks[-1].end + 1000)
    grown.prompt_bytes = first.prompt_bytes + 1000
    write_records(store, [grown])
    hour = first.started_at_ns // 10**9 // HOUR * HOUR
    assert hour in rollups.run_once(store)  # dirty: it received a row
    rows = store.query(
        "SELECT sum(bytes) AS bytes FROM {db:Identifier}.prompt_parts_hourly "
        "WHERE (hour, computed_at) IN (SELECT hour, max(computed_at) FROM {db:Identifier}.rollup_hours GROUP BY hour)",
        {"db": store.database})
    assert int(rows[0]["bytes"]) == sum(record.prompt_bytes for record in records) + 1000
    requests = store.query(
        "SELECT sum(requests) AS n FROM {db:Identifier}.prompt_requests_hourly "
        "WHERE (hour, computed_at) IN (SELECT hour, max(computed_at) FROM {db:Identifier}.rollup_hours GROUP BY hour)",
        {"db": store.database})
    assert int(requests[0]["n"]) == len(records)


def test_a_late_request_recomputes_its_hour_and_the_verdicts_after_it(store, now_ns, monkeypatch):
    monkeypatch.setattr(rollups, "OVERLAP_SECONDS", 0)  # only rows received after the last run
    records = _records_in_the_past(now_ns)
    late = records.pop(len(records) // 2)
    write_records(store, records)
    rollups.run_once(store)
    write_records(store, [late])
    hours = rollups.run_once(store)
    late_hour = late.started_at_ns // 10**9 // HOUR * HOUR
    later_in_lineage = {record.started_at_ns // 10**9 // HOUR * HOUR for record in records
                        if record.conversation_id == late.conversation_id
                        and late.started_at_ns < record.started_at_ns <= late.started_at_ns + 86400 * 10**9}
    assert late_hour in hours and later_in_lineage and later_in_lineage <= set(hours)
    # the hours of other requests, more than a day away, are left as they are
    untouched = {record.started_at_ns // 10**9 // HOUR * HOUR for record in records
                 if abs(record.started_at_ns - late.started_at_ns) > 2 * 86400 * 10**9}
    assert untouched and not untouched & set(hours)


def test_lineage_key_column_is_the_lineage_sql_hashed(scenario_store):
    rows = scenario_store.query(
        f"SELECT countIf(lineage_key != {LINEAGE_KEY_SQL}) AS differ, count() AS n FROM {{db:Identifier}}.requests",
        {"db": scenario_store.database})
    assert int(rows[0]["n"]) > 0 and int(rows[0]["differ"]) == 0


def test_a_store_of_migration_23_keeps_its_answers_and_gets_rollups(schema_before, now_ns):
    with schema_before(24) as old:  # migrations up to 023
        write_as_of(old, build_tables([], scenario.records(now_ns)))
        now_s = now_ns // 10**9
        assert "024_hourly_rollups.sql" in migrate(old)
        raw = _answers(old, now_s)
        assert any(raw.values())
        rows = old.query(
            f"SELECT countIf(lineage_key != {LINEAGE_KEY_SQL}) AS differ, count() AS n FROM {{db:Identifier}}.requests",
            {"db": old.database})
        assert int(rows[0]["n"]) == len(scenario.records(now_ns)) and int(rows[0]["differ"]) == 0
        assert rollups.run_once(old)
        _assert_same_answers(raw, _answers(old, now_s))


def test_a_window_whose_hours_are_all_rolled_up_reads_only_its_edges_raw(store, now_ns):
    """Every hour of two days has requests (a run of rolled-up hours without holes: the raw rows are
    read by the ranges before and after it); the answers are still the raw ones."""
    from ...write_path_samples import make_request

    now_s = now_ns // 10**9
    start_ns = (now_s - 3 * 86400) // HOUR * HOUR * 10**9
    records = [make_request(number, started_at_ns=start_ns + number * 1200 * 10**9,
                            turn_text=f"Turn {number}: " + "x" * (number % 7) * 50 + "\n")[1]
               for number in range(3 * 24 * 3 - 12)]
    write_records(store, records)
    windows = [(now_s - 2 * 86400 - 1234, now_s - 86400 + 777), (now_s - 86400, now_s)]

    def answers():
        found = {}
        for since, until in windows:
            known = window_snapshot(store, since, until)
            for name in ("growth_series", "growth_attribution", "cache_series", "cache_breaks_by_block",
                         "cache_misordered"):
                params = {"since": since, "until": until, "bucket_seconds": HOUR, "dimension": "name",
                          "service": "", "model": "", "process": "", "conversation": "", "limit": 500}
                found[(name, since, until)] = report.run(store, name, {key: params[key] for key in QUERIES[name].params},
                                                       known=known)
        return found

    raw = answers()
    assert all(raw[("growth_series", since, until)] for since, until in windows)
    assert len(rollups.run_once(store)) >= 48
    _assert_same_answers(raw, answers())


def test_a_prompt_sent_as_log_events_is_rolled_up_with_its_request(store, now_ns, monkeypatch):
    """The job fills in a system prompt that arrived as GenAI log events, as the view prompt_requests does."""
    from ...event_samples import span_record, write_events
    from ...log_samples import OPENAI_V2_EVENTS, SYSTEM_PROMPT

    # the log records carry the clock's time: the job runs as of two hours later, when their hour is complete
    monkeypatch.setattr(rollups, "OVERLAP_SECONDS", 4 * HOUR)
    hour = now_ns // 10**9 // HOUR * HOUR
    later_ms = (hour + 2 * HOUR + rollups.SETTLE_SECONDS) * 1000
    write_records(store, [span_record(0xAB << 64, 0xAB, hour * 10**9 + 10**9)])
    assert hour in rollups.run_once(store, now_ms=later_ms)
    params = {"since": hour, "until": hour + HOUR, "bucket_seconds": HOUR, "dimension": "name",
              "service": "", "model": "", "process": ""}
    assert report.run(store, "growth_series", params) == []
    write_events(store, OPENAI_V2_EVENTS, 0xAB << 64, 0xAB)
    assert hour in rollups.run_once(store, now_ms=later_ms)
    assert _count(store, "rollup_hours") >= 2
    [point] = report.run(store, "growth_series", params)
    assert point["bytes_per_request"] == len(SYSTEM_PROMPT.encode("utf-8"))
    rows = store.query("SELECT toString(name) AS name, bytes FROM {db:Identifier}.prompt_parts_hourly "
                       "ORDER BY computed_at DESC LIMIT 1", {"db": store.database})
    assert rows == [{"name": "(unmapped)", "bytes": len(SYSTEM_PROMPT.encode("utf-8"))}]
