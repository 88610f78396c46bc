"""What OTLP traces and logs share: parsing protobuf and OTLP/JSON, hex ids, AnyValue → Python.

Pure, no I/O; ``traces`` and ``logs`` build on it. A payload that is not
OTLP at all raises ``MalformedPayload``; ``Rejections`` counts the items
that were left out and words the partial-success answer for them.

Decoding is item by item: a span (or log record) that protobuf or the proto3
JSON parser refuses on its own — invalid UTF-8 in a string, a lone
surrogate, a value nested past the bound, a field of the wrong type — is
rejected with a reason (OTLP partial success) and its neighbours are kept.
The whole payload is parsed in one call first (the common, fast case); only
when that fails is it taken apart span by span (``parse_protobuf_items``,
``parse_json_items``). Rejection reasons are our own words, never the
parser's text (which may quote the payload), so they are safe to log.

The walk over attributes is the receive path's hot loop (~5 µs per event in
Python; README, "The collector", throughput), so ``decode_attributes`` reads
each protobuf ``AnyValue`` once, with the oneof name checked against the
common kinds first.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

SERVICE_NAME = "service.name"  # OTel resource semantic convention

TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8
# The partial-success message names the first few bad items only: a batch of
# 10,000 broken spans must not produce a 10,000-line answer.
MAX_REJECTION_DETAILS = 5
# OTLP nests arrays and kvlists; a value deeper than this is a hostile
# payload, not telemetry, and its span is rejected (Python's own recursion
# limit would be hit near 1,000).
MAX_VALUE_DEPTH = 32
# Messages from a span (or log record) down to its deepest value: Span →
# KeyValue → AnyValue, then two messages (ArrayValue/KeyValueList → AnyValue)
# per level of a value, and some room; the proto3 JSON parser's bound for one item.
MAX_ITEM_MESSAGE_DEPTH = 2 * MAX_VALUE_DEPTH + 8
# …and for a whole request, whose items sit three messages down.
MAX_REQUEST_MESSAGE_DEPTH = MAX_ITEM_MESSAGE_DEPTH + 4
# OTLP times are fixed64; the store's DateTime64(9) and Arrow's nanosecond
# timestamps are signed 64-bit. A broken clock past that (year 2262) is
# stored at the bound rather than failing the whole export.
MAX_TIME_NS = 2**63 - 1


class ValueTooDeep(ValueError):
    """An attribute value (or log body) nested deeper than ``MAX_VALUE_DEPTH``: its item is rejected."""


TOO_DEEP_REASON = f"a value nested deeper than {MAX_VALUE_DEPTH} levels"


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
class Rejections:
    """Items of an export left out (invalid ids, unparseable items): how many, and why for the first few."""

    noun: str  # "span(s)", "log record(s)"
    count: int = 0
    details: list[str] = field(default_factory=list)

    def add(self, detail: str) -> None:
        self.count += 1
        if len(self.details) < MAX_REJECTION_DETAILS:
            self.details.append(detail)

    @property
    def message(self) -> str:
        """The partial-success message: the first details, then how many more."""
        if not self.count:
            return ""
        more = self.count - len(self.details)
        suffix = f"; and {more} more" if more > 0 else ""
        return f"rejected {self.count} {self.noun}: " + "; ".join(self.details) + suffix


# --- parsing ---------------------------------------------------------------


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
    except RecursionError:
        # Python's JSON reader stops near 1,000 levels; the spans inside cannot be told apart.
        raise MalformedPayload("not OTLP/JSON: nested too deeply to read") from None
    if not isinstance(document, dict):
        raise MalformedPayload("OTLP/JSON body must be an object")
    return document


def parse_json_document(document: dict, request_type: type) -> Any:
    """proto3 JSON → ``request_type`` once the hex ids are base64 (see ``hex_ids_to_base64``)."""
    request = request_type()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True,
                              max_recursion_depth=MAX_REQUEST_MESSAGE_DEPTH)
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


def json_items(container: object, camel: str, snake: str) -> list:
    if not isinstance(container, dict):
        return []
    value = container.get(camel, container.get(snake))
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# --- item by item, when the whole payload does not parse ------------------

# Where the items sit in both requests: ExportTraceServiceRequest.resource_spans (1)
# → ResourceSpans.scope_spans (2) → ScopeSpans.spans (2), and the same numbers
# for logs (resource_logs → scope_logs → log_records).
RESOURCES_FIELD, SCOPES_FIELD, ITEMS_FIELD = 1, 2, 2
_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5


def _varint(data: bytes, position: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= end or shift > 63:
            raise MalformedPayload("a truncated or overlong varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def wire_fields(data: bytes, start: int, end: int):
    """Each field of the message in ``data[start:end]``: (number, wire type, value start, value end, field start)."""
    position = start
    while position < end:
        field_start = position
        tag, position = _varint(data, position, end)
        number, wire_type = tag >> 3, tag & 7
        value_start = position
        if wire_type == _VARINT:
            _, position = _varint(data, position, end)
        elif wire_type == _FIXED64:
            position += 8
        elif wire_type == _LENGTH_DELIMITED:
            length, value_start = _varint(data, position, end)
            position = value_start + length
        elif wire_type == _FIXED32:
            position += 4
        else:  # groups (3, 4) are not in OTLP; 6 and 7 do not exist
            raise MalformedPayload(f"wire type {wire_type}")
        if number == 0 or position > end:
            raise MalformedPayload("a field runs past its message")
        yield number, wire_type, value_start, position, field_start


def _split(data: bytes, start: int, end: int, wanted: int) -> tuple[list[tuple[int, int]], bytes]:
    """The ``wanted`` length-delimited fields' extents, and every other field's bytes (the rest of the message)."""
    found, rest = [], []
    for number, wire_type, value_start, value_end, field_start in wire_fields(data, start, end):
        if number == wanted and wire_type == _LENGTH_DELIMITED:
            found.append((value_start, value_end))
        else:
            rest.append(data[field_start:value_end])
    return found, b"".join(rest)


def protobuf_problem(error: Exception) -> str:
    """Why protobuf refused one item, in our words (upb's message names the cause)."""
    text = str(error)
    if "UTF-8" in text:
        return "invalid UTF-8 in a string field"
    if "Depth" in text or "depth" in text:
        return "a value nested deeper than protobuf decodes"
    return "not a valid OTLP protobuf message"


def parse_protobuf_items(payload: bytes, request_type: type, noun: str) -> tuple[Any, list[str]]:
    """The request, and the items left out, each as "<noun> <position>: <why>".

    One ``ParseFromString`` when the payload is sound; otherwise the outer
    messages are taken apart by hand and each item parsed on its own. Only a
    payload whose framing, resource or scope is broken is ``MalformedPayload``.
    """
    request = request_type()
    try:
        request.ParseFromString(payload)
        return request, []
    except (DecodeError, ValueError, TypeError):
        pass
    try:
        return _parse_item_by_item(payload, request_type, noun)
    except MalformedPayload as error:  # the framing, a resource or a scope: the whole payload
        raise MalformedPayload(f"not an OTLP {request_type.__name__}: {error}") from None


def _parse_item_by_item(payload: bytes, request_type: type, noun: str) -> tuple[Any, list[str]]:
    request = request_type()
    resources_name, scopes_name, items_name = _PROTOBUF_LISTS[request_type.DESCRIPTOR.full_name]
    problems: list[str] = []
    position = 0
    resource_extents, _ = _split(payload, 0, len(payload), RESOURCES_FIELD)  # other top-level fields: unknown
    for resource_start, resource_end in resource_extents:
        scope_extents, rest = _split(payload, resource_start, resource_end, SCOPES_FIELD)
        resource = getattr(request, resources_name).add()
        _merge(resource, rest)
        for scope_start, scope_end in scope_extents:
            item_extents, rest = _split(payload, scope_start, scope_end, ITEMS_FIELD)
            scope = getattr(resource, scopes_name).add()
            _merge(scope, rest)
            items = getattr(scope, items_name)
            for item_start, item_end in item_extents:
                item = items.add()
                try:
                    item.ParseFromString(payload[item_start:item_end])
                except (DecodeError, ValueError, TypeError) as error:
                    del items[-1]
                    problems.append(f"{noun} {position}: {protobuf_problem(error)}")
                position += 1
    return request, problems


def _merge(message: Any, data: bytes) -> None:
    try:
        message.MergeFromString(data)
    except (DecodeError, ValueError, TypeError) as error:
        raise MalformedPayload(f"a broken {type(message).__name__}: {error}") from None


# The repeated fields holding resources, scopes and items, by request type.
_PROTOBUF_LISTS = {
    "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest": ("resource_spans", "scope_spans", "spans"),
    "opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest": ("resource_logs", "scope_logs", "log_records"),
}


def json_problem(error: Exception) -> str:
    """Why the proto3 JSON parser refused one item, in our words (its text may quote the payload)."""
    text = str(error)
    if isinstance(error, RecursionError) or "too deep" in text:
        return TOO_DEEP_REASON
    if "surrogate" in text:
        return "a string with a lone surrogate (not valid Unicode)"
    return "not a valid OTLP/JSON item (a field of the wrong type or an invalid value)"


def parse_json_items(document: dict, request_type: type, item_type: type, keys: tuple, noun: str
                     ) -> tuple[Any, list[str]]:
    """``parse_json_document``, item by item when the whole does not parse.

    ``keys``: the (camelCase, snake_case) keys of the resources, scopes and
    items lists. Items the parser refuses alone are removed from ``document``
    and reported; if the rest still does not parse, the fault is outside the
    items and the payload is ``MalformedPayload``.
    """
    try:
        return parse_json_document(document, request_type), []
    except MalformedPayload as whole_error:
        failure = whole_error
    (resources_camel, resources_snake), (scopes_camel, scopes_snake), (items_camel, items_snake) = keys
    problems: list[str] = []
    position = 0
    for resource in json_items(document, resources_camel, resources_snake):
        for scope in json_items(resource, scopes_camel, scopes_snake):
            for key in (items_camel, items_snake):
                items = scope.get(key)
                if not isinstance(items, list):
                    continue
                kept = []
                for item in items:
                    problem = _json_item_problem(item, item_type)
                    if problem:
                        problems.append(f"{noun} {position}: {problem}")
                    else:
                        kept.append(item)
                    position += 1
                items[:] = kept
    if not problems:
        raise failure
    return parse_json_document(document, request_type), problems


def _json_item_problem(item: object, item_type: type) -> str:
    if not isinstance(item, dict):
        return "not a JSON object"
    try:
        json_format.ParseDict(item, item_type(), ignore_unknown_fields=True, max_recursion_depth=MAX_ITEM_MESSAGE_DEPTH)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as error:
        return json_problem(error)
    return ""


# --- walking ---------------------------------------------------------------

_which = AnyValue.WhichOneof


def decode_value(value: AnyValue, depth: int = 0) -> object:
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
        raise ValueTooDeep(TOO_DEEP_REASON)
    if kind == "array_value":
        return [decode_value(item, depth + 1) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {entry.key: decode_value(entry.value, depth + 1) for entry in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value
    return None


def decode_attributes(key_values) -> dict[str, object]:
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
            attributes[entry.key] = decode_value(value)
    return attributes
