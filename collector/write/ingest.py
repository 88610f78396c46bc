"""One OTLP export, transport-independent: convert → sink → answer.

Traces go through ``Ingest.export``, logs through ``Ingest.export_logs``,
with the same outcomes. Conversion (parse, decode, reassemble, rows:
``convert``) runs in a worker process when the collector has a pool
(``workers``), else in the calling thread; the sink makes the tables
durable in this process either way.

Both receivers call ``Ingest.export`` with the decompressed payload and turn
its outcome into their protocol's answer; they do no conversion of their
own. The outcome classes map onto SPEC §4's status codes:

- ``MalformedPayload``   → gRPC INVALID_ARGUMENT / HTTP 400
- ``Backpressure``       → gRPC UNAVAILABLE + RetryInfo / HTTP 503 + Retry-After
  (also: every worker busy, a worker died mid-export)
- ``StoreError``         → gRPC INTERNAL / HTTP 500 (the store refused the rows for good)
- an ``ExportOutcome`` with ``rejected_spans`` → OTLP partial success
  (``rejected_log_records`` for logs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .._logsafe import RateLimitedLog, describe_exception
from ..metrics import Metrics, OUTCOME_OK, OUTCOME_PARTIAL
from ..otlp import MalformedPayload
from ..store.base import StoreError
from .convert import ENCODING_JSON, ENCODING_PROTOBUF, KIND_LOGS, KIND_TRACES, LOGS_TOKEN_PREFIX, ConvertedExport
from .convert import convert as convert_in_process

logger = logging.getLogger(__name__)

__all__ = ["ENCODING_JSON", "ENCODING_PROTOBUF", "LOGS_TOKEN_PREFIX", "ExportOutcome", "Ingest", "LogsExportOutcome"]


@dataclass(frozen=True, slots=True)
class ExportOutcome:
    accepted_spans: int
    rejected_spans: int
    error_message: str


@dataclass(frozen=True, slots=True)
class LogsExportOutcome:
    accepted_log_records: int
    rejected_log_records: int
    error_message: str


class Ingest:
    def __init__(self, sink, metrics: Metrics, pool=None):
        """``sink``: ``sink.Sink`` (or anything with its ``accept``);
        ``pool``: a ``workers.ConversionPool``, or None to convert in the calling thread."""
        self.sink = sink
        self.metrics = metrics
        self.pool = pool
        self.bad_payloads = RateLimitedLog(logger)

    def export(self, payload: bytes, encoding: str, transport: str) -> ExportOutcome:
        """Convert and hand to the sink; returns once durable.

        Raises MalformedPayload, sink.Backpressure or StoreError. The dedup
        token is the payload's sha256: a batch re-sent after a timeout has the
        same bytes, so the sink stores it once.
        """
        converted = self._convert(KIND_TRACES, payload, encoding, transport)
        self.sink.accept(converted)
        self.metrics.batch_accepted(converted.received, converted.rejected, converted.requests,
                                    converted.mapped_blocks, converted.unmapped_reasons)
        self._finish(converted, "span(s)", transport, len(payload))
        return ExportOutcome(converted.received, converted.rejected, converted.error_message)

    def export_logs(self, payload: bytes, encoding: str, transport: str) -> LogsExportOutcome:
        """Convert into GenAI content events and other records, hand to the sink.

        Same contract as ``export``. Nothing waits for the spans these events
        belong to: the read side joins the two halves whenever both are stored.
        """
        converted = self._convert(KIND_LOGS, payload, encoding, transport)
        self.sink.accept(converted)
        self.metrics.logs_accepted(converted.genai_events, converted.other_log_records, converted.rejected,
                                   converted.unjoinable_genai_events)
        self._finish(converted, "log record(s)", transport, len(payload))
        return LogsExportOutcome(converted.received, converted.rejected, converted.error_message)

    def _convert(self, kind: str, payload: bytes, encoding: str, transport: str) -> ConvertedExport:
        try:
            if self.pool is not None:
                return self.pool.convert(kind, payload, encoding)
            try:
                return convert_in_process(kind, payload, encoding)
            except MalformedPayload:
                raise
            except Exception as error:  # a value the columns cannot hold: this export only
                self.bad_payloads.warning("cannot convert an OTLP %s export: %s", kind, describe_exception(error))
                raise StoreError("cannot convert the export") from None
        except MalformedPayload as error:
            # The reason, never the payload: it may hold prompt content.
            signal = "" if kind == KIND_TRACES else f"{kind} "
            self.bad_payloads.warning("malformed OTLP %s%s payload over %s (%d bytes): %s",
                                      signal, encoding, transport, len(payload), error.summary)
            raise

    def _finish(self, converted: ConvertedExport, what: str, transport: str, payload_bytes: int) -> None:
        if converted.rejected:
            self.bad_payloads.warning("rejected %d %s over %s: %s", converted.rejected, what, transport,
                                      converted.error_message)
        self.metrics.export_finished(transport, OUTCOME_PARTIAL if converted.rejected else OUTCOME_OK,
                                     payload_bytes)
