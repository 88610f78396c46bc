"""What OTLP traces and logs share: parsing protobuf and OTLP/JSON, hex ids, AnyValue → Python.

Pure, no I/O; ``traces`` and ``logs`` build on it. A payload that is not
OTLP at all raises ``MalformedPayload``; ``rejection_message`` words the
partial-success answer for the items that were left out.

The walk over attributes is the receive path's hot loop (~5 µs per
event in Python; README, "The collector", throughput), so ``decode_attributes`` reads each protobuf
``AnyValue`` once, with the oneof name checked against the common kinds first.
"""

from __future__ import annotations

import base64
import json
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


def rejection_message(rejected: int, details: list[str], noun: str) -> str:
    """The partial-success message: the first details, then how many more."""
    if not rejected:
        return ""
    more = rejected - len(details)
    suffix = f"; and {more} more" if more > 0 else ""
    return f"rejected {rejected} {noun}: " + "; ".join(details) + suffix


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


def json_items(container: object, camel: str, snake: str) -> list:
    if not isinstance(container, dict):
        return []
    value = container.get(camel, container.get(snake))
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


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
        return None
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
