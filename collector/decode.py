"""OTLP trace payloads (protobuf or OTLP/JSON) → ``DecodedSpan`` objects.

Pure conversion, no I/O. A payload that is not OTLP at all raises
``MalformedPayload`` (gRPC INVALID_ARGUMENT / HTTP 400); a span that is OTLP
but unusable (an invalid trace or span id) is left out and counted, so the
receiver can answer with OTLP partial success instead of rejecting its
neighbours.

The walk over attributes is the receive path's hot loop (NOTES.md: ~5 µs
per event in Python), so ``_attributes`` reads each protobuf ``AnyValue``
once, with the oneof name checked against the common kinds first.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from .records import DecodedSpan, SpanEvent, SpanLink

# otel_traces spellings of the OTLP enums (OpenTelemetry Collector ClickHouse exporter).
SPAN_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
STATUS_CODES = ("Unset", "Ok", "Error")

SERVICE_NAME = "service.name"  # OTel resource semantic convention

TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8
# The partial-success message names the first few bad spans only: a batch of
# 10,000 broken spans must not produce a 10,000-line answer.
MAX_REJECTION_DETAILS = 5
# OTLP/JSON nests arrays and kvlists; deeper than this is a hostile payload,
# not telemetry (Python's own recursion limit would be hit near 1,000).
MAX_VALUE_DEPTH = 32
# OTLP times are fixed64; the store's DateTime64(9) and Arrow's nanosecond
# timestamps are signed 64-bit. A broken clock past that (year 2262) is
# stored at the bound rather than failing the whole export.
MAX_TIME_NS = 2**63 - 1


class MalformedPayload(ValueError):
    """The payload is not a decodable OTLP export request.

    Messages read "<what was wrong>: <parser detail>". The detail may quote the
    payload (protobuf's JSON parser echoes offending values), so it goes back
    to the sender only; logs use ``summary``, the part we wrote.
    """

    @property
    def summary(self) -> str:
        return str(self).split(":", 1)[0]


@dataclass(slots=True)
class DecodeResult:
    spans: list[DecodedSpan]
    rejected_spans: int = 0
    rejection_details: list[str] = field(default_factory=list)

    @property
    def error_message(self) -> str:
        return rejection_message(self.rejected_spans, self.rejection_details, "span(s)")


def rejection_message(rejected: int, details: list[str], noun: str) -> str:
    """The partial-success message: the first details, then how many more."""
    if not rejected:
        return ""
    more = rejected - len(details)
    suffix = f"; and {more} more" if more > 0 else ""
    return f"rejected {rejected} {noun}: " + "; ".join(details) + suffix


# --- parsing (shared by traces and logs) -------------------------------------


def parse_protobuf_request(payload: bytes, request_type: type) -> Any:
    request = request_type()
    try:
        request.ParseFromString(payload)
    except (DecodeError, ValueError, TypeError) as error:
        raise MalformedPayload(f"not an OTLP {request_type.__name__}: {error}") from None
    return request


def load_json_object(payload: bytes) -> dict:
    try:
        document = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as error:
        raise MalformedPayload(f"not JSON: {error}") from None
    if not isinstance(document, dict):
        raise MalformedPayload("OTLP/JSON body must be an object")
    return document


def parse_json_document(document: dict, request_type: type) -> Any:
    """proto3 JSON → ``request_type`` once the hex ids are base64 (see ``hex_ids_to_base64``)."""
    request = request_type()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True, max_recursion_depth=MAX_VALUE_DEPTH * 2)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as error:
        raise MalformedPayload(f"not OTLP/JSON: {error}") from None
    return request


def hex_ids_to_base64(message: dict, id_keys: tuple[tuple[str, str], ...], unparseable: str) -> None:
    """Rewrite hex ids (OTLP/JSON) as the base64 proto3 JSON expects; an id
    that is not hex becomes ``unparseable``, which the caller chooses so that
    id validation rejects that one item rather than the whole payload."""
    for camel, snake in id_keys:
        for key in (camel, snake):
            if key in message:
                text = message[key]
                try:
                    raw = bytes.fromhex(text) if isinstance(text, str) else None
                except ValueError:
                    raw = None
                message[key] = unparseable if raw is None else base64.b64encode(raw).decode("ascii")


# --- parsing traces ----------------------------------------------------------


def parse_protobuf(payload: bytes) -> ExportTraceServiceRequest:
    return parse_protobuf_request(payload, ExportTraceServiceRequest)


def parse_json(payload: bytes) -> ExportTraceServiceRequest:
    """OTLP/JSON: proto3 JSON mapping, except that trace and span ids are hex
    (not base64) and enums are integers. Keys may be lowerCamelCase or the
    proto field names; unknown keys are ignored (OTLP spec)."""
    document = load_json_object(payload)
    for resource_spans in _items(document, "resourceSpans", "resource_spans"):
        for scope_spans in _items(resource_spans, "scopeSpans", "scope_spans"):
            for span in _items(scope_spans, "spans", "spans"):
                # Not hex → empty: a span must have ids, so validation rejects it.
                hex_ids_to_base64(span, _ID_KEYS, "")
                for link in _items(span, "links", "links"):
                    hex_ids_to_base64(link, _ID_KEYS, "")
    return parse_json_document(document, ExportTraceServiceRequest)


def _items(container: object, camel: str, snake: str) -> list:
    if not isinstance(container, dict):
        return []
    value = container.get(camel, container.get(snake))
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


_ID_KEYS = (("traceId", "trace_id"), ("spanId", "span_id"), ("parentSpanId", "parent_span_id"))


# --- walking ---------------------------------------------------------------

_which = AnyValue.WhichOneof


def _value(value: AnyValue, depth: int = 0) -> object:
    kind = _which(value, "value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        return value.double_value
    if kind is None:
        return None
    if depth >= MAX_VALUE_DEPTH:
        return None
    if kind == "array_value":
        return [_value(item, depth + 1) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {entry.key: _value(entry.value, depth + 1) for entry in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value
    return None


def _attributes(key_values) -> dict[str, object]:
    # Inlined fast path for scalars: this runs once per attribute of every
    # event, the receive path's hottest loop.
    attributes = {}
    for entry in key_values:
        value = entry.value
        kind = _which(value, "value")
        if kind == "string_value":
            attributes[entry.key] = value.string_value
        elif kind == "int_value":
            attributes[entry.key] = value.int_value
        else:
            attributes[entry.key] = _value(value)
    return attributes


def _id_problem(trace_id: bytes, span_id: bytes, parent_span_id: bytes) -> str:
    if len(trace_id) != TRACE_ID_BYTES or not any(trace_id):
        return f"invalid trace_id {trace_id.hex()!r} (need {TRACE_ID_BYTES} bytes, not all zero)"
    if len(span_id) != SPAN_ID_BYTES or not any(span_id):
        return f"invalid span_id {span_id.hex()!r} (need {SPAN_ID_BYTES} bytes, not all zero)"
    if parent_span_id and len(parent_span_id) != SPAN_ID_BYTES:
        return f"invalid parent_span_id {parent_span_id.hex()!r}"
    return ""


def decode_request(request: ExportTraceServiceRequest) -> DecodeResult:
    result = DecodeResult(spans=[])
    spans = result.spans
    for resource_spans in request.resource_spans:
        resource_attributes = _attributes(resource_spans.resource.attributes)
        service = resource_attributes.get(SERVICE_NAME)
        service = service if isinstance(service, str) else ""
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            scope_name, scope_version = scope.name, scope.version
            for span in scope_spans.spans:
                trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
                problem = _id_problem(trace_id, span_id, parent)
                if problem:
                    result.rejected_spans += 1
                    if len(result.rejection_details) < MAX_REJECTION_DETAILS:
                        result.rejection_details.append(f"span {span.name!r}: {problem}")
                    continue
                status = span.status
                kind = span.kind
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
                    attributes=_attributes(span.attributes),
                    events=[SpanEvent(min(event.time_unix_nano, MAX_TIME_NS), event.name, _attributes(event.attributes))
                            for event in span.events],
                    links=[SpanLink(link.trace_id.hex(), link.span_id.hex(), link.trace_state,
                                    _attributes(link.attributes)) for link in span.links],
                    dropped_events_count=span.dropped_events_count,
                    dropped_attributes_count=span.dropped_attributes_count,
                ))
    return result


def decode_protobuf(payload: bytes) -> DecodeResult:
    return decode_request(parse_protobuf(payload))


def decode_json(payload: bytes) -> DecodeResult:
    return decode_request(parse_json(payload))


def count_spans(request: ExportTraceServiceRequest) -> int:
    return sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)


__all__ = [
    "DecodeResult", "MalformedPayload", "parse_protobuf", "parse_json", "decode_request",
    "decode_protobuf", "decode_json", "count_spans",
]
