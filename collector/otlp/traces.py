"""OTLP trace payloads (protobuf or OTLP/JSON) → ``DecodedSpan`` objects.

Pure conversion, no I/O. A payload that is not OTLP at all raises
``MalformedPayload`` (gRPC INVALID_ARGUMENT / HTTP 400); a span that is
unusable on its own (an invalid trace or span id, invalid UTF-8, a lone
surrogate, a value nested too deep) is left out and counted, so the
receiver can answer with OTLP partial success instead of rejecting its
neighbours. Parsing and the hot attribute walk are shared with ``logs``
(``_parse``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ._parse import (
    MAX_TIME_NS,
    SERVICE_NAME,
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    MalformedPayload,
    ValueTooDeep,
    decode_attributes,
    hex_ids_to_base64,
    json_items,
    load_json_object,
    parse_json_document,
    parse_json_items,
    parse_protobuf_items,
    parse_protobuf_request,
    Rejections,
)
from .model import SPAN_KINDS, STATUS_CODES, DecodedSpan, SpanEvent, SpanLink

try:  # the compiled walk (setup.py builds it when Cython and a C compiler are there)
    from ._walk import decode_traces as compiled_walk
except ImportError:  # pure Python: same results, several times slower (README, "Ingest throughput")
    compiled_walk = None


@dataclass(slots=True)
class DecodeResult:
    spans: list[DecodedSpan]
    rejections: Rejections = field(default_factory=lambda: Rejections("span(s)"))


# --- parsing ---------------------------------------------------------------


def parse_protobuf(payload: bytes) -> ExportTraceServiceRequest:
    return parse_protobuf_request(payload, ExportTraceServiceRequest)


def parse_json(payload: bytes) -> ExportTraceServiceRequest:
    """OTLP/JSON: proto3 JSON mapping, except that trace and span ids are hex
    (not base64) and enums are integers. Keys may be lowerCamelCase or the
    proto field names; unknown keys are ignored (OTLP spec)."""
    return parse_json_document(_json_document(payload), ExportTraceServiceRequest)


def _json_document(payload: bytes) -> dict:
    document = load_json_object(payload)
    for resource_spans in json_items(document, "resourceSpans", "resource_spans"):
        for scope_spans in json_items(resource_spans, "scopeSpans", "scope_spans"):
            for span in json_items(scope_spans, "spans", "spans"):
                # Not hex → empty: a span must have ids, so validation rejects it.
                hex_ids_to_base64(span, _ID_KEYS, "")
                for link in json_items(span, "links", "links"):
                    hex_ids_to_base64(link, _ID_KEYS, "")
    return document


_ID_KEYS = (("traceId", "trace_id"), ("spanId", "span_id"), ("parentSpanId", "parent_span_id"))
_JSON_LISTS = (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans", "spans"))


def _id_problem(trace_id: bytes, span_id: bytes, parent_span_id: bytes) -> str:
    if len(trace_id) != TRACE_ID_BYTES or not any(trace_id):
        return f"invalid trace_id {trace_id.hex()!r} (need {TRACE_ID_BYTES} bytes, not all zero)"
    if len(span_id) != SPAN_ID_BYTES or not any(span_id):
        return f"invalid span_id {span_id.hex()!r} (need {SPAN_ID_BYTES} bytes, not all zero)"
    if parent_span_id and len(parent_span_id) != SPAN_ID_BYTES:
        return f"invalid parent_span_id {parent_span_id.hex()!r}"
    return ""


def decode_request(request: ExportTraceServiceRequest, problems: list[str] = ()) -> DecodeResult:
    """The request's spans; ``problems``: spans the parser already left out (``parse_*_items``)."""
    result = DecodeResult(spans=[])
    for problem in problems:
        result.rejections.add(problem)
    spans = result.spans
    for resource_spans in request.resource_spans:
        try:
            resource_attributes = decode_attributes(resource_spans.resource.attributes)
        except ValueTooDeep as error:  # shared by every span of the resource: none can be stored
            raise MalformedPayload(f"not OTLP: a resource attribute is {error}") from None
        service = resource_attributes.get(SERVICE_NAME)
        service = service if isinstance(service, str) else ""
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            scope_name, scope_version = scope.name, scope.version
            for span in scope_spans.spans:
                trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
                problem = _id_problem(trace_id, span_id, parent)
                if problem:
                    result.rejections.add(f"span {span.name!r}: {problem}")
                    continue
                status = span.status
                kind = span.kind
                try:
                    attributes = decode_attributes(span.attributes)
                    events = [SpanEvent(min(event.time_unix_nano, MAX_TIME_NS), event.name,
                                        decode_attributes(event.attributes)) for event in span.events]
                    links = [SpanLink(link.trace_id.hex(), link.span_id.hex(), link.trace_state,
                                      decode_attributes(link.attributes)) for link in span.links]
                except ValueTooDeep as error:
                    result.rejections.add(f"span {span.name!r}: {error}")
                    continue
                spans.append(DecodedSpan(
                    trace_id=trace_id.hex(),
                    span_id=span_id.hex(),
                    parent_span_id=parent.hex(),
                    trace_state=span.trace_state,
                    name=span.name,
                    kind=SPAN_KINDS[kind] if 0 <= kind < len(SPAN_KINDS) else SPAN_KINDS[0],
                    start_time_ns=min(span.start_time_unix_nano, MAX_TIME_NS),
                    end_time_ns=min(span.end_time_unix_nano, MAX_TIME_NS),
                    status_code=STATUS_CODES[status.code] if 0 <= status.code < len(STATUS_CODES) else STATUS_CODES[0],
                    status_message=status.message,
                    service=service,
                    resource_attributes=resource_attributes,  # shared by the resource's spans; read-only
                    scope_name=scope_name,
                    scope_version=scope_version,
                    attributes=attributes,
                    events=events,
                    links=links,
                    dropped_events_count=span.dropped_events_count,
                    dropped_attributes_count=span.dropped_attributes_count,
                ))
    return result


def decode_protobuf(payload: bytes | memoryview) -> DecodeResult:
    """The compiled walk when it is built and the payload is the usual shape; else upb + ``decode_request``
    (which also decides everything the walk leaves to it: rejections, merges, unknown fields).
    ``payload`` may be a view (a worker's shared-memory slot): no span keeps a reference to it."""
    if compiled_walk is not None:
        spans = compiled_walk(payload)
        if spans is not None:
            return DecodeResult(spans=spans)
    if not isinstance(payload, bytes):
        payload = bytes(payload)
    return decode_request(*parse_protobuf_items(payload, ExportTraceServiceRequest, "span"))


def decode_json(payload: bytes) -> DecodeResult:
    return decode_request(*parse_json_items(_json_document(payload), ExportTraceServiceRequest, Span,
                                            _JSON_LISTS, "span"))


__all__ = [
    "DecodeResult", "MalformedPayload", "parse_protobuf", "parse_json", "decode_request",
    "decode_protobuf", "decode_json",
]
