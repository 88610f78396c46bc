"""One OTLP export, transport-independent: decode → reassemble → sink.

Traces go through ``Ingest.export``; logs through ``Ingest.export_logs``
(decode_logs → logs.split_logs → sink), with the same outcomes.

Both receivers call ``Ingest.export`` with the decompressed payload and turn
its outcome into their protocol's answer; they do no conversion of their
own. The outcome classes map onto SPEC §4's status codes:

- ``MalformedPayload``   → gRPC INVALID_ARGUMENT / HTTP 400
- ``Backpressure``       → gRPC UNAVAILABLE + RetryInfo / HTTP 503 + Retry-After
- ``StoreError``         → gRPC INTERNAL / HTTP 500 (the store refused the rows for good)
- an ``ExportOutcome`` with ``rejected_spans`` → OTLP partial success
  (``rejected_log_records`` for logs).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

from . import decode_logs
from .decode import MalformedPayload, decode_json, decode_protobuf
from .logs import split_logs
from .metrics import Metrics, OUTCOME_OK, OUTCOME_PARTIAL
from .reassemble import reassemble
from .records import IngestBatch

logger = logging.getLogger(__name__)

ENCODING_PROTOBUF = "protobuf"
ENCODING_JSON = "json"

# Warnings about bad payloads are logged at most once per this many seconds:
# a misconfigured client sending garbage in a loop must not flood the log.
WARNING_INTERVAL_SECONDS = 10.0


# Prefixed to a logs payload before hashing it into the dedup token: the
# sink remembers tokens of both signals in one set.
LOGS_TOKEN_PREFIX = b"otlp-logs\n"


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


class RateLimitedLog:
    """Log a warning at most once per interval; count the ones suppressed."""

    def __init__(self, interval_seconds: float = WARNING_INTERVAL_SECONDS):
        self.interval_seconds = interval_seconds
        self._next = 0.0
        self.suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now < self._next:
            self.suppressed += 1
            return
        self._next = now + self.interval_seconds
        if self.suppressed:
            message += f" ({self.suppressed} similar warnings suppressed)"
            self.suppressed = 0
        logger.warning(message, *args)


class Ingest:
    def __init__(self, sink, metrics: Metrics):
        """``sink``: ``collector.sink.Sink`` (or anything with its ``accept``)."""
        self.sink = sink
        self.metrics = metrics
        self.bad_payloads = RateLimitedLog()

    def export(self, payload: bytes, encoding: str, transport: str) -> ExportOutcome:
        """Decode, reassemble and hand to the sink; returns once durable.

        Raises MalformedPayload, sink.Backpressure or StoreError. The dedup
        token is the payload's sha256: a batch re-sent after a timeout has the
        same bytes, so the sink stores it once.
        """
        try:
            decoded = decode_json(payload) if encoding == ENCODING_JSON else decode_protobuf(payload)
        except MalformedPayload as error:
            # The reason, never the payload: it may hold prompt content.
            self.bad_payloads.warning("malformed OTLP %s payload over %s (%d bytes): %s",
                                      encoding, transport, len(payload), error.summary)
            raise
        records, unmapped = reassemble(decoded.spans)
        batch = IngestBatch(decoded.spans, records, hashlib.sha256(payload).hexdigest(), unmapped)
        self.sink.accept(batch)
        self.metrics.batch_accepted(len(decoded.spans), decoded.rejected_spans, len(records),
                                    sum(len(record.blocks) for record in records if record.mapped), unmapped)
        if decoded.rejected_spans:
            self.bad_payloads.warning("rejected %d span(s) over %s: %s", decoded.rejected_spans, transport,
                                      decoded.error_message)
        self.metrics.export_finished(transport, OUTCOME_PARTIAL if decoded.rejected_spans else OUTCOME_OK,
                                     len(payload))
        return ExportOutcome(len(decoded.spans), decoded.rejected_spans, decoded.error_message)

    def export_logs(self, payload: bytes, encoding: str, transport: str) -> LogsExportOutcome:
        """Decode, split into GenAI content events and other records, hand to the sink.

        Same contract as ``export``. Nothing waits for the spans these events
        belong to: the read side joins the two halves whenever both are stored.
        """
        try:
            if encoding == ENCODING_JSON:
                decoded = decode_logs.decode_json(payload)
            else:
                decoded = decode_logs.decode_protobuf(payload)
        except MalformedPayload as error:
            self.bad_payloads.warning("malformed OTLP logs %s payload over %s (%d bytes): %s",
                                      encoding, transport, len(payload), error.summary)
            raise
        split = split_logs(decoded.records)
        token = hashlib.sha256(LOGS_TOKEN_PREFIX + payload).hexdigest()
        self.sink.accept(IngestBatch([], [], token, genai_events=split.genai_events, log_records=split.log_records))
        self.metrics.logs_accepted(len(split.genai_events), len(split.log_records), decoded.rejected_log_records,
                                   split.unjoinable_genai_events)
        if decoded.rejected_log_records:
            self.bad_payloads.warning("rejected %d log record(s) over %s: %s", decoded.rejected_log_records,
                                      transport, decoded.error_message)
        outcome = OUTCOME_PARTIAL if decoded.rejected_log_records else OUTCOME_OK
        self.metrics.export_finished(transport, outcome, len(payload))
        return LogsExportOutcome(len(decoded.records), decoded.rejected_log_records, decoded.error_message)
