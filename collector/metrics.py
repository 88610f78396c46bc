"""The collector's own telemetry, served on GET /metrics through prometheus_client.

Each :class:`Metrics` has a registry of its own (tests run many collectors in
one process; the library's global registry would mix them and refuse the
second set of names). prometheus_client picks the exposition format the
scraper asks for (Prometheus text or OpenMetrics) and escapes label values.

Nothing here carries prompt content: only counts, reasons (a fixed
vocabulary), transports, table names and latencies.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

NAMESPACE = "promptprism_collector"

# Export outcomes, one label value each (exports_total{transport, outcome}).
OUTCOME_OK = "ok"
OUTCOME_PARTIAL = "partial"  # accepted, some spans or log records rejected (invalid ids)
OUTCOME_MALFORMED = "malformed"
OUTCOME_TOO_LARGE = "too_large"
OUTCOME_UNAUTHENTICATED = "unauthenticated"
OUTCOME_BACKPRESSURE = "backpressure"
OUTCOME_ERROR = "error"

# Kinds of accepted log records (log_records_received_total{kind}).
LOG_KIND_GENAI_EVENT = "genai_event"  # joined to its request at read time
LOG_KIND_OTHER = "other"  # stored in otel_logs

# Insert latency buckets, in seconds. A chdb insert costs ~7 ms whatever its
# size, so the first buckets split the fixed cost from small groups; a full
# group (sink.MAX_GROUP_SPANS) takes a few hundred ms at ~440k rows/s; a
# ClickHouse server across a network or busy merging takes seconds, and past
# 10 s accepts are backing up (the sink answers retryable at 120 s).
INSERT_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# The sink's statistics (Sink.stats()) published as counters and gauges, with
# their help text; the exposed counter names end in _total.
SINK_COUNTERS = {
    "spans_stored": "spans written to the store",
    "requests_stored": "request records written to the store",
    "batches_accepted": "exports made durable",
    "batches_duplicate": "exports re-sent and recognised as already stored",
    "batches_spooled": "exports written to the spool because the store was down",
    "batches_spooled_under_load": "exports acknowledged from the spool while the writer was busy or another export was being converted, inserted in groups",
    "batches_replayed": "spooled exports moved into the store",
    "backpressure": "exports refused as retryable by the sink",
    "store_unavailable": "times the store was found unreachable",
    "store_errors": "exports the store refused for good",
    "spool_corrupt": "unreadable spool files moved aside",
    "genai_events_stored": "GenAI content log records written to genai_events",
    "log_records_stored": "other log records written to otel_logs",
    "metric_points_stored": "OTLP metric data points written to the otel_metrics_* tables",
}
SINK_GAUGES = {
    "spool_batches": "batches waiting in the on-disk spool",
    "spool_bytes": "bytes in the on-disk spool",
    "pending_batches": "accepted batches waiting for the writer",
    "pending_bytes": "estimated bytes waiting for the writer",
    "store_up": "1 when the store accepted the last write attempt",
}

SinkStats = Callable[[], Mapping[str, float]]


OUTSIDE_RETENTION_PAST = "past"
OUTSIDE_RETENTION_FUTURE = "future"


class Metrics:
    """What the receivers and the ingest path count; ``render`` answers a scrape."""

    def __init__(self, sink_stats: SinkStats | None = None) -> None:
        """``sink_stats``: read at each scrape (the sink's ``stats``; empty while there is no sink)."""
        self.registry = CollectorRegistry()
        self.last_export_at: float | None = None  # time.monotonic() of the newest export, any outcome

        def counter(name: str, help_text: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, help_text, labels, namespace=NAMESPACE, registry=self.registry)

        self.spans_received = counter("spans_received", "spans accepted from OTLP exports")
        self.spans_rejected = counter("spans_rejected", "spans rejected with OTLP partial success (invalid ids)")
        self.spans_outside_retention = counter(
            "spans_outside_retention",
            "spans stored (and counted in spans_received) dated outside what the store keeps and reads: "
            "older than the retention (dropped at the next merge) or more than a day ahead", ("when",))
        for when in (OUTSIDE_RETENTION_PAST, OUTSIDE_RETENTION_FUTURE):
            self.spans_outside_retention.labels(when)  # both series from the start, at 0
        self.requests_received = counter("requests_received", "LLM request records reassembled")
        self.blocks_received = counter("blocks_received", "prompt blocks in mapped requests")
        self.unmapped = counter("unmapped", "requests stored without a block map, by reason", ("reason",))
        self.exports = counter("exports", "OTLP export requests, by transport and outcome", ("transport", "outcome"))
        self.received_bytes = counter("received_bytes", "OTLP payload bytes received (after decompression)",
                                      ("transport",))
        self.log_records_received = counter(
            "log_records_received",
            "log records accepted from OTLP exports: GenAI content events, or other records for otel_logs",
            ("kind",))
        for kind in (LOG_KIND_GENAI_EVENT, LOG_KIND_OTHER):
            self.log_records_received.labels(kind)  # both series from the start, at 0
        self.log_records_rejected = counter(
            "log_records_rejected", "log records dropped with OTLP partial success (invalid trace or span id)")
        self.metric_points_received = counter("metric_points_received", "metric data points accepted from OTLP exports")
        self.genai_events_unjoinable = counter(
            "genai_events_unjoinable", "GenAI content events without a span id, stored in otel_logs instead of joined")
        self.calls_merged = counter(
            "calls_merged_across_exports",
            "request spans folded into the record of their provider call stored by an earlier export")
        self.calls_unmerged = counter(
            "calls_stored_apart",
            "request spans of a call stored by an earlier export that the collector had forgotten: stored apart")
        self.log_tools_joined = counter(
            "log_tool_definitions_joined", "requests given the tool definitions a log record carried")
        self.insert_seconds = Histogram(
            "sink_insert_seconds", "duration of one INSERT into the store, by table", ("table",),
            namespace=NAMESPACE, registry=self.registry, buckets=INSERT_SECONDS_BUCKETS)
        if sink_stats is not None:
            self.registry.register(_SinkStatistics(sink_stats))

    def export_finished(self, transport: str, outcome: str, payload_bytes: int = 0) -> None:
        self.last_export_at = time.monotonic()
        self.exports.labels(transport, outcome).inc()
        self.received_bytes.labels(transport).inc(payload_bytes)

    def ingest_active(self, within: float) -> bool:
        """Whether an export arrived in the last ``within`` seconds."""
        last = self.last_export_at
        return last is not None and time.monotonic() - last <= within

    def batch_accepted(self, spans: int, rejected: int, requests: int, blocks: int,
                       unmapped: Mapping[str, int]) -> None:
        self.spans_received.inc(spans)
        self.spans_rejected.inc(rejected)
        self.requests_received.inc(requests)
        self.blocks_received.inc(blocks)
        for reason, count in unmapped.items():
            self.unmapped.labels(reason).inc(count)

    def calls_joined(self, merged: int, unmerged: int, log_tools: int) -> None:
        self.calls_merged.inc(merged)
        self.calls_unmerged.inc(unmerged)
        self.log_tools_joined.inc(log_tools)

    def spans_dated_outside_retention(self, past: int, future: int) -> None:
        self.spans_outside_retention.labels(OUTSIDE_RETENTION_PAST).inc(past)
        self.spans_outside_retention.labels(OUTSIDE_RETENTION_FUTURE).inc(future)

    def logs_accepted(self, genai_events: int, other_records: int, rejected: int, unjoinable: int) -> None:
        self.log_records_received.labels(LOG_KIND_GENAI_EVENT).inc(genai_events)
        self.log_records_received.labels(LOG_KIND_OTHER).inc(other_records)
        self.log_records_rejected.inc(rejected)
        self.genai_events_unjoinable.inc(unjoinable)

    def metrics_accepted(self, points: int) -> None:
        self.metric_points_received.inc(points)

    def timed(self, store: Any) -> "TimedInserts":
        """``store`` as the sink should see it: every insert observed in ``sink_insert_seconds``."""
        return TimedInserts(store, self.insert_seconds)

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """(body, content type) in the format the scraper's Accept header asks for."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class TimedInserts:
    """Wraps a store: each insert that succeeds is observed, by table, in a histogram.

    The sink makes every insert (writes and spool replays) through
    ``store.insert``, so timing it here measures them all without the sink
    knowing about Prometheus. Everything else is the wrapped store's.
    """

    def __init__(self, store: Any, histogram: Histogram) -> None:
        self._store = store
        self._histogram = histogram

    def insert(self, table: str, columns: Any, *, dedup_token: str | None = None, lane: int = 0) -> None:
        started = time.perf_counter()
        self._store.insert(table, columns, dedup_token=dedup_token, lane=lane)
        self._histogram.labels(table).observe(time.perf_counter() - started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class _SinkStatistics:
    """A prometheus_client collector over ``Sink.stats()``, read at scrape time."""

    def __init__(self, sink_stats: SinkStats) -> None:
        self._sink_stats = sink_stats

    def collect(self) -> Iterator[Metric]:
        stats = self._sink_stats()
        for name, help_text in SINK_COUNTERS.items():
            if name in stats:
                yield CounterMetricFamily(f"{NAMESPACE}_sink_{name}", help_text, value=stats[name])
        for name, help_text in SINK_GAUGES.items():
            if name in stats:
                yield GaugeMetricFamily(f"{NAMESPACE}_sink_{name}", help_text, value=stats[name])
