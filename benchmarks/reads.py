"""Read timings on a store of ≥ 1 M requests / ≥ 10 M blocks: every API route and every dashboard panel.

The store is built once in promptprism's own schema with INSERT … SELECT
(``_store_1m``: 1 M requests over 14 days, ~11 M block rows), in a store
migrated with every migration, then kept for later runs. Each operation runs
``--runs`` times with a different id or window and the median is printed
with its target; ClickHouse's query condition cache is off (26.x caches the
result of a filter, so a repeated query would look ~10× faster than a new id
or a dashboard refresh). The API routes run the read side's own code
(``read.lookups``: what ``GET /api/…`` calls), in this process, through the
embedded store wrapped as the collector wraps it for readers (``ReadStore``:
one thread and a time limit per query); the panels run the dashboard's SQL (``insight.QUERIES``,
rendered for the store) over 7-day windows with hour buckets, after the
collector's rollup job (``insight.rollups``) has caught up: whole hours from
the hourly rollups, the ragged edges of each window from raw rows.

    .venv/bin/python benchmarks/reads.py --store /tmp/promptprism-1m          # build (8–13 min here) and time
    .venv/bin/python benchmarks/reads.py --store /tmp/promptprism-1m --runs 7  # time again, same store
    .venv/bin/python benchmarks/reads.py --store /tmp/promptprism-1m --only "GET /api/traces" --statements

``--statements`` adds, for each API route timed, its statements one by one:
the median milliseconds ClickHouse takes to plan each (``EXPLAIN PLAN``:
parse, analysis, planning, no rows read) and to run it again (warm caches),
so that the share of a route that no schema change of the rows read can
remove is measured, not guessed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _store_1m  # noqa: E402

from promptprism.collector.read import lookups  # noqa: E402
from promptprism.collector.read_limits import ReadStore  # noqa: E402
from promptprism.collector.read.insight import queries as insight  # noqa: E402
from promptprism.collector.read.insight import rollups  # noqa: E402
from promptprism.collector.store.embedded import EmbeddedStore  # noqa: E402
from promptprism.collector.store.migrations import migrate  # noqa: E402

DATABASE = "promptprism"
RETENTION_DAYS = 3650  # the generated traffic is dated 2026-11: nothing may expire
TARGETS_MS = {"trace": 50, "request": 100, "list": 100, "panel": 1000}
WEEK_SECONDS = 7 * 86_400


def build(store: EmbeddedStore, requests: int, days: int) -> None:
    # _store_1m writes the tables of migration 047's schema; the later migrations bring them forward
    # as they bring a user's store (049 copies every request into its document, 050 drops the old tables)
    migrate(store, up_to=_store_1m.SCHEMA_VERSION)
    for statement in [*_store_1m.model_sql(requests, days), *_store_1m.product_sql(store.database)]:
        started = time.time()
        store.execute(statement)
        print(f"  {time.time() - started:7.1f} s  {' '.join(statement.split())[:90]}", file=sys.stderr, flush=True)
    started = time.time()
    applied = migrate(store)
    print(f"  {time.time() - started:7.1f} s  migrations {', '.join(applied)}", file=sys.stderr, flush=True)
    for row in store.query("SELECT name FROM system.tables WHERE database = {db:String} AND engine LIKE '%MergeTree%'",
                           {"db": store.database}):
        started = time.time()
        store.execute(f"OPTIMIZE TABLE {store.database}.{row['name']} FINAL")
        print(f"  {time.time() - started:7.1f} s  OPTIMIZE {row['name']}", file=sys.stderr, flush=True)
    store.execute("DROP DATABASE IF EXISTS gen")


def timed(function) -> tuple[float, float]:
    """Wall and process-CPU milliseconds of one call (the embedded ClickHouse runs in this process)."""
    started, cpu = time.perf_counter(), time.process_time()
    function()
    return (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, help="data directory of the store (built when it has none)")
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--only", help="comma-separated parts of operation names")
    parser.add_argument("--statements", action="store_true",
                        help="for each API route, each statement's planning and warm run time (see above)")
    args = parser.parse_args()

    fresh = not os.path.exists(os.path.join(args.store, "clickhouse"))
    store = EmbeddedStore(args.store, database=DATABASE, retention_days=RETENTION_DAYS)
    try:
        if fresh:
            started = time.time()
            build(store, args.requests, args.days)
            print(f"built in {time.time() - started:.0f} s", file=sys.stderr)
        migrate(store)  # a store built by an older tree gets the newer migrations
        # What the collector's rollup job does every minute; on a store without rollups yet, every hour.
        started, cpu = time.time(), time.process_time()
        # The generated traffic may be dated ahead of this machine's clock: the job runs as of a day after
        # the last request, so that every hour of it is complete (an hour is rolled up once it has ended).
        last_ms = int(store.query("SELECT toInt64(toUnixTimestamp64Milli(max(started_at))) AS last "
                                  "FROM {db:Identifier}.requests", {"db": store.database})[0]["last"])
        recomputed = rollups.run_once(store, now_ms=max(last_ms + 86_400_000, int(time.time() * 1000)))
        print(f"rollup job: {len(recomputed)} hours recomputed in {time.time() - started:.1f} s "
              f"({time.process_time() - cpu:.1f} s CPU)", file=sys.stderr)
        version = store.query("SELECT version() AS v")[0]["v"]
        if not version.startswith("24."):
            store.execute("SET use_query_condition_cache = 0")
        counts = {row["table"]: int(row["rows"]) for row in store.query(
            "SELECT table, sum(rows) AS rows FROM system.parts WHERE active AND database = {db:String} GROUP BY table",
            {"db": store.database})}
        blocks = int(store.query("SELECT sum(block_count) AS n FROM {db:Identifier}.requests",
                                 {"db": store.database})[0]["n"] or 0)
        print(f"ClickHouse {version}; query condition cache off where it exists; {counts.get('requests', 0):,} "
              f"requests, {blocks:,} blocks, {counts.get('contents', 0):,} contents rows")
        # As the collector gives the read side its store: one thread and a time limit per query.
        run_all(ReadStore(store), args)
    finally:
        store.close()
    return 0


def run_all(store: ReadStore, args) -> None:
    runs = args.runs
    last = int(store.query("SELECT toInt64(toUnixTimestamp(max(started_at))) AS last FROM {db:Identifier}.requests",
                           {"db": store.database})[0]["last"])
    # Ids from the last 7 days, spread over the table.
    sample = store.query(
        "SELECT trace_id, request_id, conversation_id, message_id, run_id, service FROM {db:Identifier}.requests "
        "WHERE started_at >= fromUnixTimestamp({since:Int64}) ORDER BY sipHash64(request_id) LIMIT 200",
        {"db": store.database, "since": last - WEEK_SECONDS})

    def ids(field: str) -> list[str]:
        values = [row[field] for row in sample if row[field]]
        return [values[index % len(values)] for index in range(4 * runs)]

    traces, requests, conversations, messages, run_ids, services = (
        ids("trace_id"), ids("request_id"), ids("conversation_id"), ids("message_id"), ids("run_id"), ids("service"))
    # The diff's b: a request with an earlier one in its conversation (the first has no previous to compare
    # with, a 404). A conversation goes on within a day, so its first request is the earliest since a day
    # before the sampled week. None of them is one the request routes open (their text would be cached).
    opened = set(requests[:2 * runs])
    later = [row["request_id"] for row in store.query(
        "SELECT request_id FROM {db:Identifier}.requests WHERE started_at >= fromUnixTimestamp({since:Int64}) "
        "AND conversation_id != '' AND (conversation_id, started_at) NOT IN ("
        "  SELECT conversation_id, min(started_at) FROM {db:Identifier}.requests"
        "  WHERE started_at >= fromUnixTimestamp({since:Int64} - 86400) AND conversation_id != ''"
        "  GROUP BY conversation_id) "
        "ORDER BY sipHash64(request_id) LIMIT {limit:UInt32}",
        {"db": store.database, "since": last - WEEK_SECONDS, "limit": 4 * runs}) if row["request_id"] not in opened]
    later = later or requests[2 * runs:]  # a store without conversations: any request (a first one answers 404)
    # Other requests for each route: the read side keeps text it has read (read.content_cache), so a
    # request read again would look cheaper than one opened for the first time.
    # Each operation is called with the store to read (``statement_shares`` passes a recording one) and the run.
    operations = [
        ("GET /api/traces/{id}", "trace", lambda on, i: lookups.trace(on, traces[3 * runs + i])),
        ("GET /api/requests/{8-character prefix}", "request", lambda on, i: lookups.request(on, requests[i][:8])),
        ("GET /api/requests/{id}", "request", lambda on, i: lookups.request(on, requests[runs + i])),
        ("GET /api/diff?b={id} (b and its previous request)", "request",
         lambda on, i: lookups.diff(on, "", later[i % len(later)])),
    ]
    list_cases = [
        ("", lambda i: {}),
        ("service=", lambda i: {"service": services[i]}),
        ("conversation=", lambda i: {"conversation": conversations[i]}),
        ("message_id=", lambda i: {"message_id": messages[i]}),
        ("run_id=", lambda i: {"run_id": run_ids[i]}),
        ("process=compactor", lambda i: {"process": "compactor"}),
        ("since=&until= (one day, 2–4 days back)", lambda i: {
            "since": str(last - (3 + i % 3) * 86_400), "until": str(last - (2 + i % 3) * 86_400)}),
    ]
    for label, params in list_cases:
        operations.append((f"GET /api/requests?limit=50&{label}", "list",
                           lambda on, i, params=params: lookups.list_summaries(on, {**params(i), "limit": "50"})))
    hours = random.Random(15).choices(range(21), k=runs)

    def panel(name: str):
        query = insight.QUERIES[name]
        sql = query.render(insight.STORE)

        def call(on, i: int):
            until = last - hours[i] * 3600 - 17
            values = {"since": until - WEEK_SECONDS, "until": until, "bucket_seconds": 3600, "dimension": "layer",
                      "service": "", "model": "", "process": "", "conversation": "", "limit": 500}
            return on.query(sql, {"db": store.database, **{key: values[key] for key in query.params}})
        return call

    for name in insight.QUERIES:
        operations.append((f"panel {name} (7 days, hour buckets)", "panel", panel(name)))
    if args.only:
        wanted = args.only.split(",")
        operations = [operation for operation in operations if any(part in operation[0] for part in wanted)]

    print(f"load average before: {os.getloadavg()[0]:.1f}")
    print(f"{'operation':58} {'median ms':>10} {'target':>8}       {'cpu ms':>7}  runs (ms)")
    missed = 0
    for name, kind, call in operations:
        walls, cpus = [], []
        try:
            for i in range(runs):
                wall, cpu = timed(lambda: call(store, i))
                walls.append(wall)
                cpus.append(cpu)
        except Exception as error:  # a read limit (time, memory) hit: a miss, reported in one line
            missed += 1
            print(f"{name:58} {'FAILED':>10} {'<' + str(TARGETS_MS[kind]):>8} MISS  {type(error).__name__}: "
                  f"{str(error).splitlines()[0][:120]}", flush=True)
            continue
        median = statistics.median(walls)
        ok = median < TARGETS_MS[kind]
        missed += not ok
        print(f"{name:58} {median:10.1f} {'<' + str(TARGETS_MS[kind]):>8} {'ok  ' if ok else 'MISS'} "
              f"{statistics.median(cpus):7.1f}  {' '.join(f'{wall:.0f}' for wall in walls)}", flush=True)
    print(f"targets missed: {missed} of {len(operations)}; load average after: {os.getloadavg()[0]:.1f}")
    if args.statements:
        for name, kind, call in operations:
            if name.startswith("GET /api"):
                statement_shares(store, name, call, runs)


class _Recording:
    """The store with every query's SQL and parameters kept (``statement_shares``); reads as ``store``."""

    def __init__(self, store: ReadStore):
        self.store, self.statements = store, []

    def query(self, sql, params=None):
        self.statements.append((sql, params))
        return self.store.query(sql, params)

    def __getattr__(self, name):
        return getattr(self.store, name)


def statement_shares(store: ReadStore, name: str, call, runs: int) -> None:
    """Each statement of one API route: median ms to plan it (EXPLAIN PLAN) and to run it again."""
    # by statement text, in the order first seen: a route may skip a statement in some runs
    per_statement: dict[str, list[tuple[float, float]]] = {}
    for i in range(runs):
        recording = _Recording(store)  # a new reader: its content cache (read.content_cache) starts empty
        call(recording, i)
        for sql, params in recording.statements:
            plan, _ = timed(lambda: store.query("EXPLAIN PLAN " + sql, params))
            run, _ = timed(lambda: store.query(sql, params))
            per_statement.setdefault(sql, []).append((plan, run))
    print(f"\n{name}: each statement, plan ms (EXPLAIN PLAN) and run ms (again, warm), medians over the runs")
    plans = total = 0.0
    for number, (sql, values) in enumerate(per_statement.items(), 1):
        plan = statistics.median(value[0] for value in values)
        run = statistics.median(value[1] for value in values)
        plans, total = plans + plan * len(values) / runs, total + run * len(values) / runs
        print(f"  {number}. {' '.join(sql.split())[:60]:60} {plan:6.1f} {run:6.1f}  in {len(values)} of {runs} runs")
    print(f"  per route: planning {plans:.1f} of {total:.1f} ms ({100 * plans / max(total, 1e-9):.0f} %)")


if __name__ == "__main__":
    sys.exit(main())
