"""Group commit: exports that arrive while others are converting share one insert per table.

Each export is acknowledged once durable (in the spool, here), the group is
inserted under one deduplication token recorded in an intent, and the rows
are exactly those of the same exports sent one by one. A store that fails
in the middle of a group loses nothing and doubles nothing: the group is
inserted again under the same token when the store is back.
"""

from __future__ import annotations

import threading
import time

from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from promptprism.collector.store.base import StoreUnavailable
from promptprism.collector.write import sink as sink_module
from promptprism.collector.write.sink import open_sink

from support import wait_until

from ..collector_harness import PARTS, emit_prompt, exporter, running_collector, tracer_for
from ..write_path_samples import make_batch
from .test_sink import counts, now_ns

EXPORTS = 8
SPANS_PER_EXPORT = 2
# Every table an export writes, the materialized views' targets included (a request's blocks and content
# references are in its document, `request_docs`: migration 048).
TABLES = ("requests", "request_docs", "tools", "contents", "request_ids", "trace_threads", "otel_traces",
          "otel_traces_trace_id_ts")


def sdk_exports() -> list[list]:
    """EXPORTS batches of finished SDK spans: prompts sharing their static blocks, each with its own question."""
    memory = InMemorySpanExporter()
    provider, tracer = tracer_for(memory, service="group-commit")
    for number in range(EXPORTS * SPANS_PER_EXPORT):
        parts = [*PARTS[:2], ("question", "template", "turn", f"Question numéro {number} ?")]
        emit_prompt(tracer, parts)
    provider.shutdown()
    spans = list(memory.get_finished_spans())
    return [spans[number:number + SPANS_PER_EXPORT] for number in range(0, len(spans), SPANS_PER_EXPORT)]


def send(collector, number: int, spans) -> SpanExportResult:
    """One export through a real OTLP exporter of the SDK, gRPC or HTTP by turns."""
    span_exporter = exporter(collector, "grpc" if number % 2 == 0 else "http")
    try:
        return span_exporter.export(spans)
    finally:
        span_exporter.shutdown()


def table_rows(store, table: str) -> list[tuple]:
    """Every row of ``table`` (not merged: each insert's own rows), in a fixed order, without the
    columns an insert fills with its own time. Columns filled from the others are compared: a
    `request_docs` row is its keys and its document (``doc``, DEFAULT from the EPHEMERAL inputs)."""
    columns = [row["name"] for row in store.query(
        "SELECT name FROM system.columns WHERE database = {db:String} AND table = {table:String} "
        "AND default_kind IN ('', 'DEFAULT', 'MATERIALIZED') AND position(default_expression, 'now') = 0 "
        "ORDER BY position",
        {"db": store.database, "table": table})]
    assert columns, table
    # Each value as the hex of its text: binary keys are not UTF-8, which JSON output needs.
    listed = ", ".join(f"hex(toString(`{column}`)) AS `{column}`" for column in columns)
    rows = store.query(f"SELECT {listed} FROM {store.database}.{table}")
    return sorted(tuple(row[column] for column in columns) for row in rows)


def test_exports_converted_together_share_one_insert_and_store_the_rows_sent_one_by_one(
        store, second_store, tmp_path, monkeypatch):
    # Linger longer than the test: the group is inserted when no export is being converted any more.
    monkeypatch.setattr(sink_module, "SPOOL_GROUP_LINGER_SECONDS", 600.0)
    exports = sdk_exports()
    with running_collector(store, tmp_path / "grouped", ingest_workers=0) as collector:
        # Another export is being converted all along: each of these is spooled, acknowledged, and waits.
        conversion = collector.sink.converting()
        conversion.__enter__()
        try:
            results: dict[int, SpanExportResult] = {}
            threads = [threading.Thread(target=lambda n=n, spans=spans: results.__setitem__(n, send(collector, n, spans)))
                       for n, spans in enumerate(exports)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
            assert results == dict.fromkeys(range(EXPORTS), SpanExportResult.SUCCESS)
            stats = collector.sink.stats()
            assert stats["batches_spooled_under_load"] == EXPORTS and stats["groups_written"] == 0
            assert counts(store)["otel_traces_raw"] == 0  # acknowledged from the spool, not inserted yet
        finally:
            conversion.__exit__(None, None, None)  # nothing else is coming: the replay inserts at once
        wait_until(lambda: collector.sink.stats()["batches_replayed"] == EXPORTS, timeout=60,
                   message="the spooled exports were not inserted")
        stats = collector.sink.stats()
        assert stats["groups_written"] == 1 and stats["spool_batches"] == 0
    with running_collector(second_store, tmp_path / "one-by-one", ingest_workers=0) as collector:
        for number, spans in enumerate(exports):
            assert send(collector, number, spans) == SpanExportResult.SUCCESS
        assert collector.sink.stats()["groups_written"] == EXPORTS
    assert counts(store)["otel_traces_raw"] == EXPORTS * SPANS_PER_EXPORT
    for table in TABLES:
        assert table_rows(store, table) == table_rows(second_store, table), table
    assert len(table_rows(store, "contents")) == 2 + EXPORTS * SPANS_PER_EXPORT  # shared blocks once


def accepted_one_by_one(store, batches, data_dir) -> None:
    """``batches`` accepted by a sink of their own into ``store``, one after another: what a group must equal."""
    sink = open_sink(store, data_dir=str(data_dir))
    try:
        for batch in batches:
            sink.accept(batch)
    finally:
        sink.close()


class FailsMidGroup:
    """The test's store; once armed, the store goes away after the first table of the next insert."""

    def __init__(self, store):
        self.store = store
        self.armed = False
        self.inserted_before_failing: list[str] = []
        self._lock = threading.Lock()

    def insert(self, table, columns, *, dedup_token=None, lane=0):
        with self._lock:
            if self.armed and self.inserted_before_failing:
                self.armed = False
                raise StoreUnavailable("the store went away in the middle of a group")
            if self.armed:
                self.inserted_before_failing.append(table)
        self.store.insert(table, columns, dedup_token=dedup_token, lane=lane)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_a_store_lost_in_the_middle_of_a_group_loses_and_doubles_nothing(store, second_store, tmp_path, monkeypatch):
    monkeypatch.setattr(sink_module, "SPOOL_GROUP_LINGER_SECONDS", 600.0)
    monkeypatch.setattr(sink_module, "STORE_RETRY_INITIAL_SECONDS", 0.2)
    started = now_ns()
    batches = [make_batch(10 * n, 3, started_at_ns=started) for n in range(5)]
    failing = FailsMidGroup(store)
    sink = open_sink(failing, data_dir=str(tmp_path / "grouped"))
    try:
        conversion = sink.converting()
        conversion.__enter__()
        try:
            for batch in batches[:4]:
                sink.accept(batch)  # spooled: another export is being converted
            assert sink.stats()["spool_batches"] == 4
            failing.armed = True
        finally:
            conversion.__exit__(None, None, None)
        wait_until(lambda: sink.stats()["store_unavailable"] == 1, timeout=60, message="the group was not tried")
        assert failing.inserted_before_failing  # one table of the group is in the store already
        sink.accept(batches[4])  # the store is down: spooled too
        wait_until(lambda: sink.stats()["spool_batches"] == 0, timeout=60, message="the spool was not replayed")
        assert not sink.spool.intents()
        assert sink.stats()["batches_replayed"] == 5
    finally:
        sink.close()
    accepted_one_by_one(second_store, batches, tmp_path / "one-by-one")
    grouped = counts(store)
    assert grouped == counts(second_store)
    assert grouped["requests_raw"] == 15 and grouped["otel_traces_raw"] == 15
    for table in TABLES:
        assert table_rows(store, table) == table_rows(second_store, table), table

