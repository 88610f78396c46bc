"""Candidate layouts for the trace route, against today's, measured in the same run (issue 15).

`GET /api/traces/{id}` misses its < 50 ms target: each of its four statements
costs ClickHouse ~6 ms of CPU per table it reads and ~0.3 ms per column,
whatever the rows (README, "Storage and read performance at scale"). This
script builds prototypes beside a store's own tables, in a database of their
own (dropped at the end; the store's tables are only read), and times the
route's reads on each against today's route, trace by trace in rotating
order, each path with its own content cache (read.content_cache):

* ``arrays``: a copy of ``requests`` whose rows also hold their blocks as
  arrays in index order (as tools are since migration 046); the route reads
  the trace's time range, its rows with the arrays, the parts statement
  without its ``blocks`` branch, then the text;
* ``documents``: one row per request in a table sorted by ``(trace_id,
  request_id)``, everything the route shows but the text as one JSON string
  (the request row, its blocks, its content references), read by primary key
  with no time range first, then the text. It leaves out each request's
  predecessor (today read from the conversation's other requests, ~10 ms):
  a layout like this one would have to store it;
* ``threads``: the ``arrays`` rows with their content references
  (``request_content.content_refs``), sorted like ``request_content`` by
  ``(thread, started_at, request_id)`` (thread = conversation id, else trace
  id), and a lookup table from a trace to its threads and their time range
  (``trace_threads``). The route reads the lookup, then the rows of the
  trace's threads from one predecessor window before the trace to its end —
  the trace's own requests and their predecessor candidates in one read —,
  then the text;
* ``thread documents``: as ``threads``, but each row is its keys and one JSON
  string (``documents``' content, predecessors included);
* ``+ small text granules``: the same route with ``contents`` in granules of
  32 rows compressed in blocks from 16 KB (today 128 rows, 64 KB), so a key's
  read decompresses ~20 KB instead of ~85 KB.

No prototype builds the request objects (today's route does: ~3–5 ms of
Python), so their figures are a floor. ``--bytes`` measures instead what the
layouts cost on disk on realistic agent traffic (``_traffic``, as
``storage.py`` loads it), against the tables they would replace or join.

    .venv/bin/python benchmarks/trace_layouts.py --store /tmp/promptprism-1m   # the store reads.py builds
    .venv/bin/python benchmarks/trace_layouts.py --bytes                       # ~5 min, a store of its own
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from typing import Any

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


def build(store: EmbeddedStore, small_contents: Iterable[str] = ("contents",)) -> None:
    """The prototypes' tables in PROTOTYPES, from the store's own tables, a day at a time."""
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
    build_threads(store)
    build_small_contents(store, small_contents)


def _columns(store: EmbeddedStore, database: str, table: str) -> list[str]:
    return [row["name"] for row in store.query(
        "SELECT name FROM system.columns WHERE database = {db:String} AND table = {table:String} "
        "AND default_kind NOT IN ('ALIAS', 'MATERIALIZED', 'EPHEMERAL') ORDER BY position",
        {"db": database, "table": table})]


def build_threads(store: EmbeddedStore) -> None:
    """``threads``, ``trace_threads`` and ``thread_docs`` from the ``arrays`` prototype and ``request_content``."""
    # threads: the arrays prototype's columns and codecs, the content references, sorted by thread
    store.execute(f"CREATE TABLE {PROTOTYPES}.threads_columns AS {PROTOTYPES}.requests")
    store.execute(f"ALTER TABLE {PROTOTYPES}.threads_columns ADD COLUMN thread String CODEC(ZSTD(1)), "
                  "ADD COLUMN content_refs String CODEC(ZSTD(1))")
    ddl = store.query(f"SHOW CREATE TABLE {PROTOTYPES}.threads_columns")[0]["statement"]
    store.execute(f"DROP TABLE {PROTOTYPES}.threads_columns SYNC")
    ddl = re.sub(r"\nPRIMARY KEY [^\n]*", "", ddl)
    ddl = re.sub(r"\nORDER BY [^\n]*", "\nORDER BY (thread, started_at, request_id)", ddl)
    store.execute(ddl.replace(f"{PROTOTYPES}.threads_columns", f"{PROTOTYPES}.threads", 1))
    store.execute(f"""CREATE TABLE {PROTOTYPES}.trace_threads (
        trace_id String CODEC(ZSTD(1)),
        thread String CODEC(ZSTD(1)),
        first_start DateTime64(9, 'UTC') CODEC(Delta(8), ZSTD(1)),
        last_start DateTime64(9, 'UTC') CODEC(Delta(8), ZSTD(1))
    ) ENGINE = ReplacingMergeTree PARTITION BY toStartOfWeek(first_start) ORDER BY (trace_id, thread)""")
    store.execute(f"""CREATE TABLE {PROTOTYPES}.thread_docs (
        thread String CODEC(ZSTD(1)),
        started_at DateTime64(9, 'UTC') CODEC(Delta(8), ZSTD(1)),
        request_id String CODEC(ZSTD(1)),
        trace_id String CODEC(ZSTD(1)),
        doc String CODEC(ZSTD(3))
    ) ENGINE = ReplacingMergeTree PARTITION BY toDate(started_at) ORDER BY (thread, started_at, request_id)
    SETTINGS index_granularity = 256""")
    columns = _columns(store, PROTOTYPES, "requests")
    for day in _days(store):
        store.execute(f"""
            INSERT INTO {PROTOTYPES}.threads ({", ".join(f"`{column}`" for column in columns)}, thread, content_refs)
            SELECT {", ".join(f"r.`{column}`" for column in columns)},
                   if(r.conversation_id != '', r.conversation_id, r.trace_id), c.content_refs
            FROM (SELECT * FROM {PROTOTYPES}.requests WHERE toDate(started_at) = '{day}') AS r
            LEFT JOIN (SELECT request_id AS content_request_id, content_refs FROM {store.database}.request_content
                       WHERE toDate(started_at) = '{day}') AS c ON c.content_request_id = r.request_id""")
    store.execute(f"""INSERT INTO {PROTOTYPES}.trace_threads
                      SELECT trace_id, thread, min(started_at), max(started_at) FROM {PROTOTYPES}.threads
                      GROUP BY trace_id, thread""")
    keys = ("thread", "started_at", "request_id", "trace_id")
    body = ", ".join("arrayMap(x -> lower(hex(x)), block_sha256) AS block_sha256" if column == "block_sha256"
                     else f"`{column}`" for column in _columns(store, PROTOTYPES, "threads") if column not in keys)
    store.execute(f"""INSERT INTO {PROTOTYPES}.thread_docs
                      SELECT thread, started_at, request_id, trace_id, formatRowNoNewline('JSONEachRow', {body})
                      FROM {PROTOTYPES}.threads""")
    for table in ("threads", "trace_threads", "thread_docs"):
        store.execute(f"OPTIMIZE TABLE {PROTOTYPES}.{table} FINAL")


# contents in smaller granules: (rows per granule, least bytes per compressed block, codec), smallest first
SMALL_CONTENTS = {"contents": (32, 16_384, "ZSTD(3)"), "contents_64": (64, 32_768, "ZSTD(3)")}


def build_small_contents(store: EmbeddedStore, names: Iterable[str] = ("contents",)) -> None:
    """Copies of ``contents`` with SMALL_CONTENTS' settings (the route reads the one named ``contents``)."""
    for name in names:
        rows, block, codec = SMALL_CONTENTS[name]
        store.execute(f"""CREATE TABLE {PROTOTYPES}.{name} (
            day Date, sha256 String, size UInt64, content String CODEC({codec})
        ) ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY (day, sha256)
        SETTINGS index_granularity = {rows}, min_compress_block_size = {block}, max_compress_block_size = {2 * block}""")
        store.execute(f"INSERT INTO {PROTOTYPES}.{name} SELECT day, sha256, size, content FROM {store.database}.contents")
        store.execute(f"OPTIMIZE TABLE {PROTOTYPES}.{name} FINAL")


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


TRACE_THREADS = """
SELECT thread, toUnixTimestamp64Nano(min(first_start)) AS first_ns, toUnixTimestamp64Nano(max(last_start)) AS last_ns
FROM {prototypes:Identifier}.trace_threads WHERE trace_id = {trace_id:String} GROUP BY thread
"""
_THREAD_WINDOW = """
WHERE thread IN JSONExtract({threads:String}, 'Array(String)')
  AND started_at >= fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
  AND started_at <= fromUnixTimestamp64Nano({until_ns:Int64}, 'UTC')
"""
# The trace's rows and their predecessor candidates: the threads' rows from one window before the trace to its end.
THREAD_ROWS = ROWS_WITH_ARRAYS.replace("FROM {prototypes:Identifier}.requests", "FROM {prototypes:Identifier}.threads", 1
    ).replace("\nWHERE trace_id = {trace_id:String}\n  AND started_at >= fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')"
              "\n  AND started_at <= fromUnixTimestamp64Nano({until_ns:Int64}, 'UTC')\n", _THREAD_WINDOW, 1
    ).replace("\nLIMIT {limit:UInt32}", "", 1
    ).replace("toString(toDate(started_at)) AS day", "toString(toDate(started_at)) AS day, content_refs", 1)
THREAD_DOCUMENTS = ("SELECT trace_id, request_id, toString(toDate(started_at)) AS day, doc\n"
                    "FROM {prototypes:Identifier}.thread_docs" + _THREAD_WINDOW
                    + "ORDER BY started_at, request_id\nLIMIT 1 BY request_id")
assert "{threads:String}" in THREAD_ROWS and "{trace_id:String}" not in THREAD_ROWS and "content_refs" in THREAD_ROWS


def _trace_threads(store: ReadStore, trace_id: str) -> dict[str, Any]:
    found = queries._run(store, TRACE_THREADS, prototypes=PROTOTYPES, trace_id=trace_id)
    return dict(threads=json.dumps(sorted(row["thread"] for row in found)),
                since_ns=min(int(row["first_ns"]) for row in found) - lookups.PREDECESSOR_WINDOW_NS,
                until_ns=max(int(row["last_ns"]) for row in found))


def _with_references(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    references = [queries.references({**row, "content_day": row["day"]}) for row in rows if row.get("content_refs")]
    return rows, references


def route_with_threads(store: ReadStore, trace_id: str):
    rows = queries._run(store, THREAD_ROWS, prototypes=PROTOTYPES, **_trace_threads(store, trace_id))
    rows, references = _with_references([row for row in rows if row["trace_id"] == trace_id])
    return rows, _text(store, rows, references)


def route_with_thread_documents(store: ReadStore, trace_id: str):
    found = queries._run(store, THREAD_DOCUMENTS, prototypes=PROTOTYPES, **_trace_threads(store, trace_id))
    rows, references = _with_references([{**json.loads(row["doc"]), "day": row["day"], "trace_id": row["trace_id"],
                                          "request_id": row["request_id"]}
                                         for row in found if row["trace_id"] == trace_id])
    return rows, _text(store, rows, references)


class SmallTextGranules(ReadStore):
    """The store read as the collector reads it, but the text from the prototype ``contents``."""

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        if sql == queries.CONTENTS_BY_KEY:
            sql = sql.replace("{db:Identifier}.contents", "{prototypes:Identifier}.contents", 1)
            params = {**(params or {}), "prototypes": PROTOTYPES}
        return super().query(sql, params)


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
    today = lambda on, trace_id: lookups.trace(on, trace_id)  # noqa: E731
    paths = {"today": (ReadStore(store), today),
             "today + small text granules": (SmallTextGranules(store), today),
             "arrays": (ReadStore(store), route_with_arrays),
             "documents": (ReadStore(store), route_with_documents),
             "threads": (ReadStore(store), route_with_threads),
             "thread documents": (ReadStore(store), route_with_thread_documents),
             "thread documents + small text granules": (SmallTextGranules(store), route_with_thread_documents)}
    walls: dict[str, list[float]] = {name: [] for name in paths}
    cpus: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    for number, trace_id in enumerate(trace_ids):
        counts = {}
        for name in names[number % len(names):] + names[:number % len(names)]:  # rotating order
            reader, call = paths[name]
            wall, cpu, result = timed(lambda: call(reader, trace_id))
            walls[name].append(wall)
            cpus[name].append(cpu)
            counts[name] = len(result["requests"] if name.startswith("today") else result[0])
        if len(set(counts.values())) != 1:
            raise SystemExit(f"trace {trace_id}: the layouts disagree on its requests: {counts}")
    today = statistics.median(walls["today"])
    print(f"trace route, {len(trace_ids)} traces in rotating order, each path with its own content cache:")
    for name in names:
        wall = statistics.median(walls[name])
        print(f"  {name:40} median {wall:6.1f} ms wall, {statistics.median(cpus[name]):6.1f} ms CPU"
              f"  ({wall / today:.2f}× today's)")
    print("  (the prototypes build no request objects, ~3–5 ms of today's; documents read no predecessors,"
          " threads and thread documents read them with the trace's rows)")


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
    lookup = sizes[(PROTOTYPES, "trace_threads")]
    for name, table in (("threads", "threads"), ("thread documents", "thread_docs")):
        size = sizes[(PROTOTYPES, table)]
        print(f"  {name}: {size:.0f} B and the trace lookup {lookup:.0f} B, against {replaced:.0f} B of requests + "
              f"blocks + request_content: all tables {total + size + lookup - replaced:,.0f} B "
              f"({(size + lookup - replaced) / total:+.1%})")
    for name, (rows, block, codec) in SMALL_CONTENTS.items():
        size = sizes[(PROTOTYPES, name)]
        print(f"  contents in granules of {rows} rows, compressed blocks from {block // 1024} KB, {codec}: "
              f"{size:.0f} B against {ours('contents'):.0f} ({size - ours('contents'):+.0f} B)")


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
        build(store, small_contents=SMALL_CONTENTS if args.bytes else ("contents",))
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
