"""Bytes on disk per request: promptprism's tables vs the OpenTelemetry Collector ClickHouse exporter's otel_traces.

The same spans (``_traffic``: realistic agent traffic, and demo-like small
prompts) go two ways in one run, into one embedded store (two databases):

* ``exporter``: the exporter's ``otel_traces`` (migration 002's DDL), every
  attribute and event as sent — block, tool and message text included;
* ``promptprism``: the product's own path — ``reassemble`` then
  ``write.rows.build_tables`` (content-addressed text, otel_traces without the
  moved content) inserted table by table as the sink does, into a store
  migrated with every migration.

Then every table is merged (``OPTIMIZE … FINAL``) and the bytes on disk of
each table are printed per request, with the ratio of all promptprism tables
to the exporter's otel_traces. Content capture is on throughout.

    .venv/bin/python benchmarks/storage.py                       # 1 day at 1 M requests / 14 days density
    .venv/bin/python benchmarks/storage.py --conversations 600 --days 1   # quicker, a sparser day

Density matters: zstd finds a conversation's previous turn only within the
same compressed block, so a sparse store compresses the exporter's repeated
history better than a dense one. The default, 2,700 conversations of 20
turns in one day, is ~71 k requests: the density of 1 M requests in 14 days.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _traffic  # noqa: E402

from promptprism.collector.store.embedded import EmbeddedStore  # noqa: E402
from promptprism.collector.store.migrations import load_migrations, migrate  # noqa: E402
from promptprism.collector.write.reassemble import reassemble  # noqa: E402
from promptprism.collector.write.rows import build_tables, otel_traces_table  # noqa: E402

# The generated traffic is dated 2026-11: nothing may expire while measuring.
RETENTION_DAYS = 3650
# Conversations per insert: a few thousand spans, as the sink groups exports.
CONVERSATIONS_PER_INSERT = 40


def exporter_ddl(database: str) -> str:
    """The exporter's otel_traces, as migration 002 spells it, without our deduplication window."""
    [migration] = [m for m in load_migrations(database=database, retention_days=RETENTION_DAYS)
                   if m.name.startswith("002_")]
    return migration.statements[0].replace(", non_replicated_deduplication_window = 10000", "")


def load(store: EmbeddedStore, exporter: EmbeddedStore, source) -> dict[str, int]:
    stats = {"spans": 0, "requests": 0, "blocks": 0}
    recent: set = set()
    batch: list = []

    def flush() -> None:
        spans = [span for conversation in batch for span in conversation]
        records, _ = reassemble(spans)
        stats["spans"] += len(spans)
        stats["requests"] += len(records)
        stats["blocks"] += sum(len(record.blocks) for record in records)
        exporter.insert("otel_traces", otel_traces_table(spans))
        tables = build_tables(spans, records, recent)
        recent.update(tables.content_keys)  # the sink's recent-content set
        for name, table in tables.non_empty():
            store.insert(name, table)
        batch.clear()

    for conversation in source:
        batch.append(conversation)
        if len(batch) == CONVERSATIONS_PER_INSERT:
            flush()
    if batch:
        flush()
    return stats


def sizes(store: EmbeddedStore, database: str) -> dict[str, tuple[int, int]]:
    for row in store.query("SELECT name FROM system.tables WHERE database = {db:String} AND engine LIKE '%MergeTree%'",
                           {"db": database}):
        store.execute(f"OPTIMIZE TABLE {database}.{row['name']} FINAL")
    rows = store.query("SELECT table, sum(bytes_on_disk) AS bytes, sum(rows) AS rows FROM system.parts "
                       "WHERE active AND database = {db:String} GROUP BY table", {"db": database})
    return {row["table"]: (int(row["bytes"]), int(row["rows"])) for row in rows}


def measure(root: EmbeddedStore, label: str, source) -> float:
    suffix = os.urandom(4).hex()
    store = root.with_database(f"promptprism_{suffix}", retention_days=RETENTION_DAYS)
    exporter = root.with_database(f"exporter_{suffix}", retention_days=RETENTION_DAYS)
    try:
        migrate(store)
        exporter.execute(exporter_ddl(exporter.database))
        started = time.time()
        stats = load(store, exporter, source)
        loaded = time.time() - started
        ours, theirs = sizes(root, store.database), sizes(root, exporter.database)
    finally:
        for database in (store.database, exporter.database):
            root.execute(f"DROP DATABASE IF EXISTS {database} SYNC")
    requests = stats["requests"]
    baseline = theirs["otel_traces"][0]
    total = sum(size for size, _ in ours.values())
    print(f"\n== {label}: ClickHouse {root.query('SELECT version() AS v')[0]['v']}, {requests:,} requests, "
          f"{stats['spans']:,} spans, {stats['blocks']:,} blocks (loaded in {loaded:.0f} s), "
          "bytes on disk after OPTIMIZE FINAL ==")
    print(f"{'table':34} {'rows':>10} {'bytes':>14} {'B/request':>10}")
    for table, (size, rows) in sorted(ours.items(), key=lambda item: -item[1][0]):
        print(f"{'promptprism.' + table:34} {rows:>10,} {size:>14,} {size / requests:>10,.0f}")
    print(f"{'promptprism total':34} {'':>10} {total:>14,} {total / requests:>10,.0f}")
    print(f"{'exporter.otel_traces':34} {theirs['otel_traces'][1]:>10,} {baseline:>14,} {baseline / requests:>10,.0f}")
    ratio = total / baseline
    print(f"ratio: all promptprism tables ÷ the exporter's otel_traces = {ratio:.3f}×")
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=2700, help="agent conversations of 20 turns")
    parser.add_argument("--days", type=int, default=1, help="days the agent conversations are spread over")
    parser.add_argument("--demo-conversations", type=int, default=300, help="demo-like conversations (2–5 turns)")
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="promptprism-storage-")
    root = EmbeddedStore(directory, database="benchmark", retention_days=RETENTION_DAYS)
    try:
        agent = measure(root, f"realistic agent traffic ({args.conversations:,} conversations of 20 turns, "
                              f"{args.days} day(s), 8–16 KB prompts, ~10 tools)",
                        _traffic.agent_traffic(args.seed, args.conversations, days=args.days))
        demo = measure(root, f"demo-like traffic ({args.demo_conversations:,} conversations, prompts < 1 KB)",
                       _traffic.demo_traffic(args.seed, args.demo_conversations))
    finally:
        root.close()
        shutil.rmtree(directory, ignore_errors=True)
    print(f"\nsummary: realistic agent traffic {agent:.3f}× (target ≤ 0.35×), demo-like {demo:.3f}× (reported)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
