"""One OTLP export, transport-independent: convert → sink → an outcome.

``Ingest.export`` takes a decompressed traces or logs payload and returns an
``ExportOutcome`` — it does not raise into the receivers. Conversion (parse,
decode, reassemble, rows: ``convert``) runs in a worker process when the
collector has a pool (``workers``), else in the calling thread; the sink
makes the tables durable in this process either way. Between the two, in
this process too, ``calls.CallMemory`` folds a traces export's spans of a call
stored by an earlier export into that call's record (one provider call, one
record, across exports). Each receiver turns
the outcome into its protocol's answer with the one status table in
``receive.answers``, as an OpenTelemetry exporter returns an
``ExportResult`` for its caller to act on.

Outcomes:

- ``OK``: every item stored; ``PARTIAL``: stored, some items left out for
  invalid ids (OTLP partial success);
- ``MALFORMED``: not a decodable OTLP payload;
- ``RETRY``: not stored, try again after ``retry_after_seconds`` (the store is
  down and the spool full, the receiver is full, every worker is busy, a
  worker died mid-export);
- ``REFUSED``: the store refused the rows for good (data it can never accept);
- ``TOO_LARGE``, ``UNAUTHENTICATED``, ``UNSUPPORTED``: what the receivers
  themselves decide before a payload reaches ``export``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass

import pyarrow as pa

from .._logsafe import RateLimitedLog, describe_exception, describe_store_error
from ..metrics import Metrics
from ..otlp import MalformedPayload
from ..store.base import StoreError
from .convert import (
    ENCODING_JSON,
    ENCODING_PROTOBUF,
    KIND_LOGS,
    KIND_METRICS,
    KIND_TRACES,
    LOGS_TOKEN_PREFIX,
    UNCONVERTIBLE,
    ConvertedExport,
)
from .convert import convert as convert_in_process
from .calls import CallMemory
from .sink import Backpressure

logger = logging.getLogger(__name__)

__all__ = ["ENCODING_JSON", "ENCODING_PROTOBUF", "KIND_LOGS", "KIND_METRICS", "KIND_TRACES", "LOGS_TOKEN_PREFIX",
           "ExportOutcome", "Ingest", "OK", "PARTIAL", "MALFORMED", "TOO_LARGE", "RETRY", "REFUSED", "UNAUTHENTICATED", "UNSUPPORTED"]

OK = "ok"
PARTIAL = "partial"
MALFORMED = "malformed"
TOO_LARGE = "too_large"
RETRY = "retry"
REFUSED = "refused"
UNAUTHENTICATED = "unauthenticated"
UNSUPPORTED = "unsupported"  # a Content-Type or Content-Encoding OTLP/HTTP does not define

NANOSECONDS_PER_DAY = 86_400 * 10**9
# Clocks disagree: a span up to a day ahead of ours is ordinary skew, not a bad date.
FUTURE_TOLERANCE_NANOSECONDS = NANOSECONDS_PER_DAY


@dataclass(frozen=True, slots=True)
class ExportOutcome:
    """What became of one export, for the receiver to answer."""

    kind: str  # OK, PARTIAL, MALFORMED, TOO_LARGE, RETRY, REFUSED, UNAUTHENTICATED, UNSUPPORTED
    signal: str = KIND_TRACES  # KIND_TRACES, KIND_LOGS or KIND_METRICS: which OTLP response carries a partial success
    accepted: int = 0  # spans or log records stored
    rejected: int = 0  # left out for invalid ids (PARTIAL)
    # For the sender (never logged: a parser's detail may quote the payload):
    # which items were rejected, why the payload is malformed or not stored.
    message: str = ""
    retry_after_seconds: float = 0.0  # RETRY: how long the sender should wait
    payload_bytes: int = 0


class Ingest:
    def __init__(self, sink, metrics: Metrics, pool=None, *, retention_days: int | None = None,
                 calls: CallMemory | None = None):
        """``sink``: ``sink.Sink`` (or anything with its ``accept``);
        ``pool``: a ``workers.ConversionPool``, or None to convert in the calling thread;
        ``retention_days``: the tables' TTL, to count spans dated outside it (None: not counted);
        ``calls``: the memory of stored calls that merges a later export's spans of them
        (one provider call, one record across exports); a new one when not given."""
        self.sink = sink
        self.metrics = metrics
        self.pool = pool
        self.retention_days = retention_days
        self.calls = calls if calls is not None else CallMemory()
        self.bad_payloads = RateLimitedLog(logger)
        self.refusals = RateLimitedLog(logger)  # data the store refuses comes from clients too

    def export(self, payload: bytes, encoding: str, transport: str, signal: str = KIND_TRACES) -> ExportOutcome:
        """Convert and hand to the sink; returns once the items are durable, or why not.

        The dedup token is the payload's sha256: a batch re-sent after a
        timeout has the same bytes, so the sink stores it once. Nothing waits
        for the other signal: the read side joins a request's spans and GenAI
        log events whenever both are stored.
        """
        size = len(payload)
        arriving = getattr(self.sink, "arriving", None)
        with arriving() if arriving is not None else contextlib.nullcontext():
            return self._export(payload, size, encoding, transport, signal)

    def _export(self, payload: bytes, size: int, encoding: str, transport: str, signal: str) -> ExportOutcome:
        try:
            converted = self._convert(signal, payload, encoding)
            passage = None
            if signal == KIND_TRACES:
                passage = self.calls.merge(converted, payload, encoding)
            elif signal == KIND_LOGS:
                passage = self.calls.merge_logs(converted)
            if passage is not None:
                converted = passage.converted
            try:
                if passage is not None:
                    passage.wait()  # the rows this export replaces are durable first, so its own come after
                self.sink.accept(converted)
            except BaseException:
                if passage is not None:
                    passage.finish(accepted=False)  # not stored: the sender's retry decides again
                raise
            if passage is not None:
                passage.finish(accepted=True)
                if passage.merged or passage.unmerged or passage.log_tools:
                    self.metrics.calls_joined(passage.merged, passage.unmerged, passage.log_tools)
        except MalformedPayload as error:
            # The reason, never the payload: it may hold prompt content.
            what = "" if signal == KIND_TRACES else f"{signal} "
            self.bad_payloads.warning("malformed OTLP %s%s payload over %s (%d bytes): %s",
                                      what, encoding, transport, size, error.summary)
            return ExportOutcome(MALFORMED, signal, message=str(error), payload_bytes=size)
        except Backpressure as error:
            return ExportOutcome(RETRY, signal, message=f"retry later: {error}",
                                 retry_after_seconds=error.retry_after_seconds, payload_bytes=size)
        except StoreError as error:
            self.refusals.error("store refused an OTLP %s export over %s: %s", signal, transport,
                         describe_store_error(error))
            return ExportOutcome(REFUSED, signal, message="the store refused the data", payload_bytes=size)
        if signal == KIND_TRACES:
            self._count_outside_retention(converted)
            self.metrics.batch_accepted(converted.received, converted.rejected, converted.requests,
                                        converted.mapped_blocks, converted.unmapped_reasons)
        elif signal == KIND_METRICS:
            self.metrics.metrics_accepted(converted.metric_points)
        else:
            self.metrics.logs_accepted(converted.genai_events, converted.other_log_records, converted.rejected,
                                       converted.unjoinable_genai_events)
        if converted.rejected:
            what = {KIND_TRACES: "span(s)", KIND_METRICS: "data point(s)"}.get(signal, "log record(s)")
            self.bad_payloads.warning("rejected %d %s over %s: %s", converted.rejected, what, transport,
                                      converted.error_message)
        return ExportOutcome(PARTIAL if converted.rejected else OK, signal, converted.received, converted.rejected,
                             converted.error_message, payload_bytes=size)

    def _count_outside_retention(self, converted: ConvertedExport) -> None:
        """Spans the store keeps but the retention drops at once (dated before it) or that no time
        window reads yet (more than a day ahead): stored as sent, counted apart in /metrics."""
        table = converted.tables.tables.get("otel_traces")
        if self.retention_days is None or table is None or not table.num_rows:
            return
        import pyarrow.compute as compute

        now = time.time_ns()
        starts = table.column("Timestamp").cast(pa.int64())
        past = compute.sum(compute.less(starts, now - self.retention_days * NANOSECONDS_PER_DAY)).as_py() or 0
        future = compute.sum(compute.greater(starts, now + FUTURE_TOLERANCE_NANOSECONDS)).as_py() or 0
        if past or future:
            self.metrics.spans_dated_outside_retention(past, future)

    def _convert(self, signal: str, payload: bytes, encoding: str) -> ConvertedExport:
        """The export's tables; raises MalformedPayload, Backpressure or StoreError.
        The sink knows while it is under way (spooled exports wait for it to share their insert)."""
        converting = getattr(self.sink, "converting", None)
        with converting() if converting is not None else contextlib.nullcontext():
            return self._convert_now(signal, payload, encoding)

    def _convert_now(self, signal: str, payload: bytes, encoding: str) -> ConvertedExport:
        if self.pool is not None:
            return self.pool.convert(signal, payload, encoding)
        try:
            return convert_in_process(signal, payload, encoding)
        except MalformedPayload:
            raise
        except Exception as error:  # a value the columns cannot hold: this export only, and for good
            self.bad_payloads.warning("cannot convert an OTLP %s export: %s", signal, describe_exception(error))
            raise MalformedPayload(UNCONVERTIBLE) from None
