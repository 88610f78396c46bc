"""Two candidate layouts for the trace route, against today's, measured in the same run (issue 15).

`GET /api/traces/{id}` misses its < 50 ms target: each of its four statements
costs ClickHouse ~6 ms of CPU per table it reads and ~0.3 ms per column,
whatever the rows (README, "Storage and read performance at scale"). This
script builds two prototypes beside a store's own tables, in a database of
their own (dropped at the end; the store's tables are only read), and times
the route's reads on each against today's route, trace by trace in
alternation, each path with its own content cache (read.content_cache):

* ``arrays``: a copy of ``requests`` whose rows also hold their blocks as
  arrays in index order (as tools are since migration 046); the route reads
  the trace's time range, its rows with the arrays, the parts statement
  without its ``blocks`` branch, then the text;
* ``documents``: one row per request in a table sorted by ``(trace_id,
  request_id)``, everything the route shows but the text as one JSON string
  (the request row, its blocks, its content references), read by primary key
  with no time range first, then the text. It leaves out each request's
  predecessor (today read from the conversation's other requests, ~10 ms):
  a layout like this one would have to store it.

Neither prototype builds the request objects (today's route does: ~3–5 ms of
Python), so their figures are a floor. ``--bytes`` measures instead what the
two layouts cost on disk on realistic agent traffic (``_traffic``, as
``storage.py`` loads it), against the tables they would replace or join.

    .venv/bin/python benchmarks/trace_layouts.py --store /tmp/promptprism-1m   # the store reads.py builds
    .venv/bin/python benchmarks/trace_layouts.py --bytes                       # ~3 min, a store of its own
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _traffic  # noqa: E402

from promptprism.collector.read import content, content_cache, lookups, queries, request_view  # noqa: E402
from promptprism.collector.read_limits import ReadStore  # noqa: E402
from promptprism.collector.store.embedded import EmbeddedStore  # noqa: E402
from promptprism.collector.store.migrations import migrate  # noqa: E402
from promptprism.collector.write.reassemble import reassemble  # noqa: E402
from promptprism.collector.write.rows import build_tables  # noqa: E402

DATABASE = "promptprism"
PROTOTYPES = "promptprism_layouts"
RETENTION_DAYS = 3650
WEEK_SECONDS = 7 * 86_400

# A request's blocks in index order, one array per field (a block's start and end are the running sum of sizes).
_BLOCK_ARRAYS = {
    "block_names": ("Array(LowCardinality(String))", "toString(name)"),
    "block_layers": ("Array(LowCardinality(String))", "toString(layer)"),
    "block_stabilities": ("Array(LowCardinality(String))", "toString(stability)"),
    "block_sources": ("Array(LowCardinality(String))", "toString(source)"),
    "block_sizes": ("Array(UInt32)", "toUInt32(size)"),
    "block_sha256": ("Array(FixedString(32))", "toFixedString(unhex(sha256), 32)"),
    "block_content_sha256": ("Array(String)", "content_sha256"),
    "block_redacted": ("Array(Bool)", "redacted"),
}


def _blocks_by_request(database: str, day: str) -> str:
    arrays = ",\n       ".join(f"arrayMap(t -> t.2, arraySort(t -> t.1, groupArray((index, {value})))) AS {name}"
                               for name, (_, value) in _BLOCK_ARRAYS.items())
    return (f"SELECT request_id AS block_request_id,\n       {arrays}\n"
            f"FROM {database}.blocks WHERE toDate(started_at) = '{day}' GROUP BY request_id")


def _days(store: EmbeddedStore) -> list[str]:
    return [row["day"] for row in store.query(
        f"SELECT DISTINCT toString(toDate(started_at)) AS day FROM {store.database}.requests ORDER BY day")]


def build(store: EmbeddedStore) -> None:
    """Both prototypes' tables in PROTOTYPES, from the store's own tables, a day at a time."""
    database = store.database
    store.execute(f"DROP DATABASE IF EXISTS {PROTOTYPES} SYNC")
    store.execute(f"CREATE DATABASE {PROTOTYPES}")
    store.execute(f"CREATE TABLE {PROTOTYPES}.requests AS {database}.requests")
    for name, (kind, _) in _BLOCK_ARRAYS.items():
        store.execute(f"ALTER TABLE {PROTOTYPES}.requests ADD COLUMN {name} {kind} CODEC(ZSTD(1))")
    store.execute(f"""CREATE TABLE {PROTOTYPES}.trace_docs (
        trace_id String CODEC(ZSTD(1)),
        request_id String CODEC(ZSTD(1)),
        started_at DateTime64(9, 'UTC') CODEC(Delta(8), ZSTD(1)),
        doc String CODEC(ZSTD(3))
    ) ENGINE = ReplacingMergeTree PARTITION BY toDate(started_at) ORDER BY (trace_id, request_id)
    SETTINGS index_granularity = 256""")
    columns = [row["name"] for row in store.query(
        "SELECT name FROM system.columns WHERE database = {db:String} AND table = 'requests' "
        "AND default_kind NOT IN ('ALIAS', 'MATERIALIZED', 'EPHEMERAL') ORDER BY position", {"db": database})]
    listed = ", ".join(f"`{column}`" for column in columns)
    arrays = ", ".join(_BLOCK_ARRAYS)
    for day in _days(store):
        started = time.time()
        requests = f"(SELECT * FROM {database}.requests WHERE toDate(started_at) = '{day}')"
        store.execute(f"""
            INSERT INTO {PROTOTYPES}.requests ({listed}, {arrays})
            SELECT {", ".join(f"r.`{column}`" for column in columns)}, {", ".join(f"b.{name}" for name in _BLOCK_ARRAYS)}
            FROM {requests} AS r
            LEFT JOIN ({_blocks_by_request(database, day)}) AS b ON b.block_request_id = r.request_id""")
        # The document: the request row as the read side selects it, its blocks (sha256 as hex, as the API
        # shows it), its content references.
        document_arrays = ", ".join(f"b.{name}" for name in _BLOCK_ARRAYS if name != "block_sha256")
        store.execute(f"""
            INSERT INTO {PROTOTYPES}.trace_docs (trace_id, request_id, started_at, doc)
            SELECT r.trace_id, r.request_id, r.started_at,
                   formatRowNoNewline('JSONEachRow', r.*, {document_arrays},
                                      arrayMap(x -> lower(hex(x)), b.block_sha256) AS block_sha256, c.content_refs)
            FROM (SELECT {queries._REQUEST_COLUMNS}, started_at FROM {database}.requests
                  WHERE toDate(started_at) = '{day}') AS r
            LEFT JOIN ({_blocks_by_request(database, day)}) AS b ON b.block_request_id = r.request_id
            LEFT JOIN (SELECT request_id AS content_request_id, content_refs FROM {database}.request_content
                       WHERE toDate(started_at) = '{day}') AS c ON c.content_request_id = r.request_id""")
        print(f"  {day}: {time.time() - started:.1f} s", file=sys.stderr, flush=True)
    for table in ("requests", "trace_docs"):
        store.execute(f"OPTIMIZE TABLE {PROTOTYPES}.{table} FINAL")


# --- the route on each layout --------------------------------------------------

_ARRAY_COLUMNS = ",\n    " + ", ".join(
    "arrayMap(x -> lower(hex(x)), block_sha256) AS block_sha256" if name == "block_sha256" else name
    for name in _BLOCK_ARRAYS)
ROWS_WITH_ARRAYS = queries.REQUESTS_BY_TRACE.replace(
    "toString(toDate(started_at)) AS day", "toString(toDate(started_at)) AS day" + _ARRAY_COLUMNS, 1).replace(
    "FROM {db:Identifier}.requests", "FROM {prototypes:Identifier}.requests", 1)
# The parts statement without its first branch (blocks): content references and, with members, the members.
PARTS_WITHOUT_BLOCKS = {members: queries.REQUEST_PARTS_SQL[(False, members)].split("\nUNION ALL\n", 1)[1]
                        for members in (False, True)}
DOCUMENTS = ("SELECT doc FROM {prototypes:Identifier}.trace_docs WHERE trace_id = {trace_id:String} "
             "LIMIT 1 BY request_id")


def _text(store: ReadStore, rows: list[dict], references: list[dict]) -> dict:
    keys = [(row["day"], digest) for row in rows for digest in row["block_sha256"]]
    keys += [request_view.content_key(tool) for row in rows for tool in queries.inline_tools(row)]
    keys += content.keys(references)
    return content_cache.read_through(store, keys, queries.contents_for)


def route_with_arrays(store: ReadStore, trace_id: str):
    since_ns, until_ns = queries._trace_window(store, trace_id)
    rows = queries._run(store, ROWS_WITH_ARRAYS, prototypes=PROTOTYPES, trace_id=trace_id, since_ns=since_ns,
                        until_ns=until_ns, limit=queries.TRACE_REQUESTS_MAX)
    starts = [int(row["started_at_ns"]) for row in rows]
    conversations = sorted({row["conversation_id"] for row in rows if row["conversation_id"]})
    parameters = dict(request_ids=json.dumps(sorted({row["request_id"] for row in rows})),
                      threads=json.dumps(sorted({row["conversation_id"] or row["trace_id"] for row in rows})),
                      since_ns=min(starts), until_ns=max(starts))
    if conversations:
        parameters.update(conversation_ids=json.dumps(conversations), limit=queries.CONVERSATION_MEMBERS_MAX,
                          members_since_ns=min(starts) - lookups.PREDECESSOR_WINDOW_NS, members_until_ns=max(starts))
    parts = queries._run(store, PARTS_WITHOUT_BLOCKS[bool(conversations)], **parameters)
    references = [queries.references(json.loads(part["row"])) for part in parts if part["kind"] == "content"]
    return rows, _text(store, rows, references)


def route_with_documents(store: ReadStore, trace_id: str):
    rows = [json.loads(found["doc"]) for found in queries._run(store, DOCUMENTS, prototypes=PROTOTYPES,
                                                                trace_id=trace_id)]
    references = [queries.references({**row, "content_day": row["day"]}) for row in rows if row.get("content_refs")]
    return rows, _text(store, rows, references)


def timed(function):
    started, cpu = time.perf_counter(), time.process_time()
    result = function()
    return (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000, result


def compare_routes(store: EmbeddedStore, traces: int) -> None:
    last = int(store.query(f"SELECT toInt64(toUnixTimestamp(max(started_at))) AS last FROM {store.database}.requests"
                           )[0]["last"])
    trace_ids = [row["trace_id"] for row in store.query(
        f"SELECT trace_id FROM {store.database}.requests WHERE started_at >= fromUnixTimestamp({{since:Int64}}) "
        "ORDER BY sipHash64(request_id, 7) LIMIT {limit:UInt32}", {"since": last - WEEK_SECONDS, "limit": traces})]
    paths = {"today": (ReadStore(store), lambda on, trace_id: lookups.trace(on, trace_id)),
             "arrays": (ReadStore(store), route_with_arrays),
             "documents": (ReadStore(store), route_with_documents)}
    walls: dict[str, list[float]] = {name: [] for name in paths}
    cpus: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    for number, trace_id in enumerate(trace_ids):
        counts = {}
        for name in names[number % 3:] + names[:number % 3]:  # rotating order
            reader, call = paths[name]
            wall, cpu, result = timed(lambda: call(reader, trace_id))
            walls[name].append(wall)
            cpus[name].append(cpu)
            counts[name] = len(result["requests"] if name == "today" else result[0])
        if len(set(counts.values())) != 1:
            raise SystemExit(f"trace {trace_id}: the layouts disagree on its requests: {counts}")
    today = statistics.median(walls["today"])
    print(f"trace route, {len(trace_ids)} traces in rotating order, each path with its own content cache:")
    for name in names:
        wall = statistics.median(walls[name])
        print(f"  {name:10} median {wall:6.1f} ms wall, {statistics.median(cpus[name]):6.1f} ms CPU"
              f"  ({wall / today:.2f}× today's)")
    print("  (arrays and documents build no request objects, ~3–5 ms of today's; documents read no predecessors)")


# --- bytes on disk ---------------------------------------------------------------

def load_traffic(store: EmbeddedStore, conversations: int, seed: int) -> int:
    recent: set = set()
    batch: list = []
    requests = 0

    def flush() -> None:
        nonlocal requests
        spans = [span for conversation in batch for span in conversation]
        records, _ = reassemble(spans)
        tables = build_tables(spans, records, recent)
        recent.update(tables.content_keys)
        for name, table in tables.non_empty():
            store.insert(name, table)
        requests += len(records)
        batch.clear()

    for conversation in _traffic.agent_traffic(seed, conversations, days=1):
        batch.append(conversation)
        if len(batch) == 40:
            flush()
    if batch:
        flush()
    return requests


def compare_bytes(store: EmbeddedStore, requests: int) -> None:
    for database in (store.database, PROTOTYPES):
        for row in store.query("SELECT name FROM system.tables WHERE database = {db:String} "
                               "AND engine LIKE '%MergeTree%'", {"db": database}):
            store.execute(f"OPTIMIZE TABLE {database}.{row['name']} FINAL")
    sizes = {(row["database"], row["table"]): int(row["bytes"]) / requests for row in store.query(
        "SELECT database, table, sum(bytes_on_disk) AS bytes FROM system.parts WHERE active "
        "AND database IN ({ours:String}, {prototypes:String}) GROUP BY database, table",
        {"ours": store.database, "prototypes": PROTOTYPES})}
    total = sum(size for (database, _), size in sizes.items() if database == store.database)

    def ours(table: str) -> float:
        return sizes.get((store.database, table), 0.0)

    arrays = sizes[(PROTOTYPES, "requests")] - ours("requests")
    documents = sizes[(PROTOTYPES, "trace_docs")]
    replaced = ours("requests") + ours("blocks") + ours("request_content")
    print(f"bytes on disk per request, realistic agent traffic ({requests:,} requests, every table merged):")
    print(f"  today: all tables {total:,.0f} B; requests {ours('requests'):.0f}, blocks {ours('blocks'):.0f}, "
          f"request_content {ours('request_content'):.0f}")
    print(f"  arrays: +{arrays:.0f} B on requests; instead of blocks {total + arrays - ours('blocks'):,.0f} B "
          f"({(arrays - ours('blocks')) / total:+.1%}), beside it {total + arrays:,.0f} B ({arrays / total:+.1%})")
    print(f"  documents: {documents:.0f} B as plain JSON, against {replaced:.0f} B of requests + blocks + "
          f"request_content ({documents / replaced:.2f}×)")
    columns = store.query(
        "SELECT column, sum(column_data_compressed_bytes) AS bytes FROM system.parts_columns WHERE active "
        "AND database = {prototypes:String} AND table = 'requests' AND column LIKE 'block\\_%' GROUP BY column "
        "ORDER BY bytes DESC", {"prototypes": PROTOTYPES})
    print("  the arrays by column: " + ", ".join(f"{row['column']} {int(row['bytes']) / requests:.1f}"
                                                 for row in columns if row["column"] in _BLOCK_ARRAYS))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="a store's data directory (benchmarks/reads.py builds a 1 M-request one)")
    parser.add_argument("--traces", type=int, default=40)
    parser.add_argument("--bytes", action="store_true", help="bytes on disk on realistic traffic, in a store of its own")
    parser.add_argument("--conversations", type=int, default=2700, help="with --bytes: agent conversations of 20 turns")
    args = parser.parse_args()
    if not args.bytes and not args.store:
        parser.error("give --store DIR (the route) or --bytes")
    directory = tempfile.mkdtemp(prefix="promptprism-layouts-") if args.bytes else args.store
    store = EmbeddedStore(directory, database=DATABASE, retention_days=RETENTION_DAYS)
    try:
        if args.bytes:
            migrate(store)
            started = time.time()
            requests = load_traffic(store, args.conversations, seed=15)
            print(f"loaded {requests:,} requests in {time.time() - started:.0f} s", file=sys.stderr)
        else:
            migrate(store)  # a store built by an older tree gets the newer migrations
            if not store.query("SELECT version() AS v")[0]["v"].startswith("24."):
                store.execute("SET use_query_condition_cache = 0")
        started = time.time()
        build(store)
        print(f"prototype tables built in {time.time() - started:.0f} s", file=sys.stderr)
        if args.bytes:
            compare_bytes(store, requests)
        else:
            compare_routes(store, args.traces)
    finally:
        store.execute(f"DROP DATABASE IF EXISTS {PROTOTYPES} SYNC")
        store.close()
        if args.bytes:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
