"""Size-bounded export: split a batch of spans so no OTLP request exceeds a byte bound.

The BatchSpanProcessor groups spans by count, not by size, and prompt spans
are big (a 512-span batch of prompt spans is ~15 MB; README "Exporting"). A receiver
rejects a request over its message limit as a whole, so one oversized batch
would lose every span in it. :class:`SizeBoundedSpanExporter` sits in front
of the OTLP exporter, estimates each span's encoded size and hands the inner
exporter chunks that stay under the bound, in order.

The estimate is an upper bound on the protobuf encoding, computed from the
span's fields without building the protobuf: encoding a 29 KiB span costs
~1.4 ms (README "Exporting"), and the inner exporter encodes anyway, so encoding twice
would double the export cost for every span.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

logger = logging.getLogger(__name__)

# 16 MiB: a quarter of the collector's 64 MiB receive limit (README "The collector"),
# so a chunk stays accepted even behind a proxy or an OpenTelemetry Collector
# configured tighter than ours, while still holding ~500 content-captured
# prompt spans (~29 KiB each) per request: few enough requests per batch.
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024

# One warning per minute at most about spans larger than the bound: such a
# span is usually one giant prompt repeated on every request, and a log line
# per span would flood the application's log at hundreds of spans per second.
OVERSIZED_SPAN_LOG_INTERVAL_SECONDS = 60.0

# --- protobuf size bounds -----------------------------------------------------
# Upper bounds of the wire encoding (protobuf encoding rules): a field tag is
# 1 byte for the field numbers OTLP uses here, a length prefix is a varint of
# at most 5 bytes for messages under 4 GiB. Strings and attributes, which
# make up most of a prompt span, get their exact prefix from their length.
LENGTH_DELIMITED_OVERHEAD = 1 + 5
# A varint is at most 10 bytes (negative int64), plus its tag.
VARINT_FIELD_BYTES = 1 + 10
# fixed64 (timestamps, doubles) plus tag; fixed32 (flags) plus tag.
FIXED64_FIELD_BYTES = 1 + 8
FIXED32_FIELD_BYTES = 1 + 4
TRACE_ID_FIELD_BYTES = LENGTH_DELIMITED_OVERHEAD + 16
SPAN_ID_FIELD_BYTES = LENGTH_DELIMITED_OVERHEAD + 8
# Span framing: the span's own length prefix, trace id, span id, parent id,
# kind, start/end time, flags, dropped attribute/event/link counts and the
# status message with its code.
SPAN_FIXED_BYTES = (
    LENGTH_DELIMITED_OVERHEAD
    + TRACE_ID_FIELD_BYTES
    + 2 * SPAN_ID_FIELD_BYTES
    + VARINT_FIELD_BYTES
    + 2 * FIXED64_FIELD_BYTES
    + FIXED32_FIELD_BYTES
    + 3 * VARINT_FIELD_BYTES
    + LENGTH_DELIMITED_OVERHEAD
    + VARINT_FIELD_BYTES
)
# Event framing: length prefix, time, dropped attribute count.
EVENT_FIXED_BYTES = LENGTH_DELIMITED_OVERHEAD + FIXED64_FIELD_BYTES + VARINT_FIELD_BYTES
# Link framing: length prefix, trace id, span id, flags, dropped attribute count.
LINK_FIXED_BYTES = (
    LENGTH_DELIMITED_OVERHEAD
    + TRACE_ID_FIELD_BYTES
    + SPAN_ID_FIELD_BYTES
    + FIXED32_FIELD_BYTES
    + VARINT_FIELD_BYTES
)
# ResourceSpans / ScopeSpans framing (length prefixes, schema url, dropped count).
GROUP_FIXED_BYTES = 4 * LENGTH_DELIMITED_OVERHEAD + VARINT_FIELD_BYTES


def _delimited_bytes(content_bytes: int) -> int:
    """A length-delimited field: tag, length prefix (a varint), content."""
    # Comparisons instead of a loop: this runs for every attribute of every span.
    if content_bytes < 0x80:
        return 2 + content_bytes
    if content_bytes < 0x4000:
        return 3 + content_bytes
    if content_bytes < 0x200000:
        return 4 + content_bytes
    if content_bytes < 0x10000000:
        return 5 + content_bytes
    return 6 + content_bytes


def _utf8_length(text: str) -> int:
    # isascii() is a C-speed scan; encoding is only needed for non-ASCII text.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _string_bytes(text: str | None) -> int:
    """Encoded size of a string field, UTF-8 plus tag and length prefix."""
    return _delimited_bytes(_utf8_length(text)) if text else LENGTH_DELIMITED_OVERHEAD


def _value_bytes(value: object) -> int:
    """Encoded size of an AnyValue field (its wrapper included)."""
    if isinstance(value, str):
        inner = _string_bytes(value)
    elif isinstance(value, int):  # bool is an int too; both are varints
        inner = VARINT_FIELD_BYTES
    elif isinstance(value, float):
        inner = FIXED64_FIELD_BYTES
    elif isinstance(value, (bytes, bytearray, memoryview)):
        inner = _delimited_bytes(len(value))
    elif isinstance(value, Mapping):
        inner = _delimited_bytes(_attributes_bytes(value))
    elif isinstance(value, Sequence):
        # AnyValue → ArrayValue → repeated AnyValue.
        inner = _delimited_bytes(sum(_value_bytes(item) for item in value))
    elif value is None:
        inner = 0
    else:
        # Unknown types are sent as their string form by the encoder, or dropped.
        inner = _string_bytes(str(value))
    return _delimited_bytes(inner)


def _attributes_bytes(attributes: Mapping[str, object] | None) -> int:
    """Encoded size of a repeated KeyValue field."""
    if not attributes:
        return 0
    total = 0
    for key, value in attributes.items():
        # Strings are most attributes of a prompt span: sized inline, without
        # the generic _value_bytes call, since this loop is the estimate's cost.
        if value.__class__ is str:
            value_bytes = _delimited_bytes(_delimited_bytes(_utf8_length(value)))
        else:
            value_bytes = _value_bytes(value)
        total += _delimited_bytes(_delimited_bytes(_utf8_length(key)) + value_bytes)
    return total


def estimate_group_bytes(span: ReadableSpan) -> int:
    """An upper bound of the resource and scope framing a span needs in a request."""
    total = GROUP_FIXED_BYTES
    resource = span.resource
    if resource is not None:
        total += _attributes_bytes(resource.attributes) + _string_bytes(resource.schema_url)
    scope = span.instrumentation_scope
    if scope is not None:
        total += _string_bytes(scope.name) + _string_bytes(scope.version) + _string_bytes(scope.schema_url)
        total += _attributes_bytes(getattr(scope, "attributes", None))
    return total


def estimate_span_bytes(span: ReadableSpan) -> int:
    """An upper bound of the span's size inside an ExportTraceServiceRequest.

    Excludes the resource and scope the span is grouped under; see
    :func:`estimate_group_bytes`.
    """
    total = SPAN_FIXED_BYTES + _string_bytes(span.name) + _attributes_bytes(span.attributes)
    # Within a span, the fixed overhead counts the largest length prefix; the
    # events and attributes are counted exactly by their own prefixes.
    context = span.context
    if context is not None and context.trace_state:
        total += _string_bytes(",".join(f"{key}={value}" for key, value in context.trace_state.items()))
    if span.status is not None:
        total += _string_bytes(span.status.description)
    for event in span.events:
        total += EVENT_FIXED_BYTES + _string_bytes(event.name) + _attributes_bytes(event.attributes)
    for link in span.links:
        total += LINK_FIXED_BYTES + _attributes_bytes(link.attributes)
        if link.context is not None and link.context.trace_state:
            total += _string_bytes(",".join(f"{key}={value}" for key, value in link.context.trace_state.items()))
    return total


def _group_key(span: ReadableSpan) -> tuple[int, int]:
    # The encoder groups by resource and scope object; identity is what it uses too.
    return (id(span.resource), id(span.instrumentation_scope))


def split_by_size(spans: Sequence[ReadableSpan], max_request_bytes: int) -> list[list[ReadableSpan]]:
    """Split spans, in order, into chunks whose estimated request size stays under the bound.

    A span whose own estimate exceeds the bound gets a chunk of its own.
    """
    chunks: list[list[ReadableSpan]] = []
    current: list[ReadableSpan] = []
    current_bytes = 0
    current_groups: set[tuple[int, int]] = set()
    for span in spans:
        span_bytes = estimate_span_bytes(span)
        group = _group_key(span)
        group_bytes = 0 if group in current_groups else estimate_group_bytes(span)
        if current and current_bytes + span_bytes + group_bytes > max_request_bytes:
            chunks.append(current)
            current, current_bytes, current_groups = [], 0, set()
            group_bytes = estimate_group_bytes(span)
        current.append(span)
        current_bytes += span_bytes + group_bytes
        current_groups.add(group)
    if current:
        chunks.append(current)
    return chunks


@dataclass
class ExportStatistics:
    """Counters of a :class:`SizeBoundedSpanExporter`, for tests and health checks."""

    batches: int = 0
    requests: int = 0
    spans: int = 0
    failed_requests: int = 0
    failed_spans: int = 0
    # Spans whose estimate alone exceeds the bound: sent alone, may be refused.
    oversized_spans: int = 0


class SizeBoundedSpanExporter(SpanExporter):
    """Wraps a span exporter so that each call it receives stays under a byte bound.

    Chunks are exported in turn; a failed chunk does not stop the ones after
    it (the spans in them are independent requests), and the batch reports
    FAILURE if any chunk failed. Never raises into the caller.
    """

    def __init__(self, inner: SpanExporter, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        if max_request_bytes <= 0:
            raise ValueError(f"max_request_bytes must be positive, got {max_request_bytes}")
        self.inner = inner
        self.max_request_bytes = max_request_bytes
        self.statistics = ExportStatistics()
        self._statistics_lock = threading.Lock()
        self._last_oversized_log = float("-inf")
        self._oversized_since_log = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            chunks = split_by_size(spans, self.max_request_bytes)
        except Exception:  # a span the estimator cannot read must not cost the batch
            logger.exception("could not estimate span sizes; exporting the batch unsplit")
            chunks = [list(spans)] if spans else []
        with self._statistics_lock:
            self.statistics.batches += 1
        result = SpanExportResult.SUCCESS
        for chunk in chunks:
            if len(chunk) == 1:
                self._note_if_oversized(chunk[0])
            try:
                chunk_result = self.inner.export(chunk)
            except Exception:  # exporters should return FAILURE; the app must never see this
                logger.exception("span exporter raised while exporting %d spans", len(chunk))
                chunk_result = SpanExportResult.FAILURE
            with self._statistics_lock:
                self.statistics.requests += 1
                self.statistics.spans += len(chunk)
                if chunk_result is not SpanExportResult.SUCCESS:
                    self.statistics.failed_requests += 1
                    self.statistics.failed_spans += len(chunk)
            if chunk_result is not SpanExportResult.SUCCESS:
                result = SpanExportResult.FAILURE
        return result

    def _note_if_oversized(self, span: ReadableSpan) -> None:
        size = estimate_span_bytes(span) + estimate_group_bytes(span)
        if size <= self.max_request_bytes:
            return
        now = time.monotonic()
        with self._statistics_lock:
            self.statistics.oversized_spans += 1
            self._oversized_since_log += 1
            if now - self._last_oversized_log < OVERSIZED_SPAN_LOG_INTERVAL_SECONDS:
                return
            count, self._oversized_since_log = self._oversized_since_log, 0
            self._last_oversized_log = now
        logger.warning(
            "span %r is about %d bytes, over the %d-byte request bound; sent alone "
            "(%d such spans since the last warning). The receiver may refuse it; "
            "turn content capture off or raise the bound if it does.",
            span.name,
            size,
            self.max_request_bytes,
            count,
        )

    def shutdown(self) -> None:
        try:
            self.inner.shutdown()
        except Exception:
            logger.exception("span exporter raised during shutdown")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        try:
            return self.inner.force_flush(timeout_millis)
        except Exception:
            logger.exception("span exporter raised during force_flush")
            return False
