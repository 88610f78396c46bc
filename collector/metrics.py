"""The collector's own counters, served as Prometheus text on GET /metrics.

Counters are cumulative since start-up. Nothing here carries prompt content:
only counts, reasons (a fixed vocabulary) and latencies.
"""

from __future__ import annotations

import threading
from typing import Callable, Mapping

PREFIX = "promptprism_collector"

# Export outcomes, one label value each (exports_total{transport, outcome}).
OUTCOME_OK = "ok"
OUTCOME_PARTIAL = "partial"  # accepted, some spans or log records rejected (invalid ids)
OUTCOME_MALFORMED = "malformed"
OUTCOME_TOO_LARGE = "too_large"
OUTCOME_UNAUTHENTICATED = "unauthenticated"
OUTCOME_BACKPRESSURE = "backpressure"
OUTCOME_ERROR = "error"

# Sink statistics published as gauges / counters, with their help text.
_SINK_GAUGES = {
    "spool_batches": "batches waiting in the on-disk spool",
    "spool_bytes": "bytes in the on-disk spool",
    "pending_batches": "accepted batches waiting for the writer",
    "pending_bytes": "estimated bytes waiting for the writer",
    "store_up": "1 when the store accepted the last write attempt",
    "insert_seconds_last": "duration of the last insert",
}
_SINK_COUNTERS = {
    "spans_stored": "spans written to the store",
    "requests_stored": "request records written to the store",
    "batches_accepted": "exports made durable",
    "batches_duplicate": "exports re-sent and recognised as already stored",
    "batches_spooled": "exports written to the spool because the store was down",
    "batches_replayed": "spooled exports moved into the store",
    "inserts": "INSERT statements",
    "insert_seconds_total": "time spent in INSERT statements",
    "backpressure": "exports refused as retryable by the sink",
    "store_unavailable": "times the store was found unreachable",
    "store_errors": "exports the store refused for good",
    "spool_corrupt": "unreadable spool files moved aside",
    "genai_events_stored": "GenAI content log records written to genai_events",
    "log_records_stored": "other log records written to otel_logs",
}

# Kinds of accepted log records (log_records_received_total{kind}).
LOG_KIND_GENAI_EVENT = "genai_event"  # joined to its request at read time
LOG_KIND_OTHER = "other"  # stored in otel_logs


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans_received = 0
        self.spans_rejected = 0
        self.requests_received = 0
        self.blocks_received = 0
        self.unmapped: dict[str, int] = {}
        self.exports: dict[tuple[str, str], int] = {}
        self.bytes_received: dict[str, int] = {}
        self.log_records_received = {LOG_KIND_GENAI_EVENT: 0, LOG_KIND_OTHER: 0}
        self.log_records_rejected = 0
        self.genai_events_unjoinable = 0

    def export_finished(self, transport: str, outcome: str, payload_bytes: int = 0) -> None:
        with self._lock:
            key = (transport, outcome)
            self.exports[key] = self.exports.get(key, 0) + 1
            self.bytes_received[transport] = self.bytes_received.get(transport, 0) + payload_bytes

    def batch_accepted(self, spans: int, rejected: int, requests: int, blocks: int,
                       unmapped: Mapping[str, int]) -> None:
        with self._lock:
            self.spans_received += spans
            self.spans_rejected += rejected
            self.requests_received += requests
            self.blocks_received += blocks
            for reason, count in unmapped.items():
                self.unmapped[reason] = self.unmapped.get(reason, 0) + count

    def logs_accepted(self, genai_events: int, other_records: int, rejected: int, unjoinable: int) -> None:
        with self._lock:
            self.log_records_received[LOG_KIND_GENAI_EVENT] += genai_events
            self.log_records_received[LOG_KIND_OTHER] += other_records
            self.log_records_rejected += rejected
            self.genai_events_unjoinable += unjoinable

    def render(self, sink_stats: Callable[[], Mapping[str, float]] | None = None) -> str:
        """Prometheus text exposition format 0.0.4."""
        lines: list[str] = []

        def family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {PREFIX}_{name} {help_text}")
            lines.append(f"# TYPE {PREFIX}_{name} {kind}")
            for labels, value in samples:
                lines.append(f"{PREFIX}_{name}{labels} {_number(value)}")

        with self._lock:
            family("spans_received_total", "counter", "spans accepted from OTLP exports", [("", self.spans_received)])
            family("spans_rejected_total", "counter", "spans rejected with OTLP partial success (invalid ids)",
                   [("", self.spans_rejected)])
            family("requests_received_total", "counter", "LLM request records reassembled",
                   [("", self.requests_received)])
            family("blocks_received_total", "counter", "prompt blocks in mapped requests", [("", self.blocks_received)])
            family("unmapped_total", "counter", "requests stored without a block map, by reason",
                   [(_labels(reason=reason), count) for reason, count in sorted(self.unmapped.items())])
            family("exports_total", "counter", "OTLP export requests, by transport and outcome",
                   [(_labels(transport=t, outcome=o), count) for (t, o), count in sorted(self.exports.items())])
            family("received_bytes_total", "counter", "OTLP payload bytes received (after decompression)",
                   [(_labels(transport=t), count) for t, count in sorted(self.bytes_received.items())])
            family("log_records_received_total", "counter",
                   "log records accepted from OTLP exports: GenAI content events, or other records for otel_logs",
                   [(_labels(kind=kind), count) for kind, count in sorted(self.log_records_received.items())])
            family("log_records_rejected_total", "counter",
                   "log records dropped with OTLP partial success (invalid trace or span id)",
                   [("", self.log_records_rejected)])
            family("genai_events_unjoinable_total", "counter",
                   "GenAI content events without a span id, stored in otel_logs instead of joined",
                   [("", self.genai_events_unjoinable)])
        stats = dict(sink_stats()) if sink_stats else {}
        for name, help_text in _SINK_COUNTERS.items():
            if name in stats:
                family(f"sink_{name}_total" if not name.endswith("_total") else f"sink_{name}", "counter",
                       help_text, [("", stats[name])])
        for name, help_text in _SINK_GAUGES.items():
            if name in stats:
                family(f"sink_{name}", "gauge", help_text, [("", stats[name])])
        return "\n".join(lines) + "\n"


def _labels(**labels: str) -> str:
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return str(int(value))
    return repr(float(value))
