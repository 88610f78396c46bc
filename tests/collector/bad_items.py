"""Exports of 99 good spans (or log records) and one bad one, built byte by byte.

The bad item is one that protobuf or the proto3 JSON parser refuses on its
own (issue 14): invalid UTF-8 in a span name (protobuf), a lone surrogate
(JSON), or an attribute value nested ``depth`` levels deep. The OTel SDK
cannot produce these, so the protobuf is assembled from serialized parts
with the wire format's own framing, and the JSON with ``json.dumps``.
Shared by the decode tests and the receive tests over real gRPC and HTTP.
"""

from __future__ import annotations

import json
import time

from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from promptprism.wire import names

GOOD = 99
BAD_POSITION = 42  # among the 100 items
SERVICE = "bad-item-test"
KINDS = ("invalid_utf8", "lone_surrogate", "nested_120", "nested_1000")


def varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def field(number: int, data: bytes) -> bytes:
    """One length-delimited field."""
    return varint(number << 3 | 2) + varint(len(data)) + data


def nested_value(depth: int) -> bytes:
    """An AnyValue holding arrays ``depth`` deep around one string, serialized (protobuf refuses to build it)."""
    value = field(1, b"deep")  # AnyValue.string_value
    for _ in range(depth):
        value = field(5, field(1, value))  # AnyValue.array_value → ArrayValue.values
    return value


def nested_json(depth: int) -> dict:
    value: dict = {"stringValue": "deep"}
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


def trace_id(number: int) -> bytes:
    return (0xA000_0000_0000_0000_0000_0000_0000_0000 + number).to_bytes(16, "big")


def span_id(number: int) -> bytes:
    return (0xB000_0000_0000_0000 + number).to_bytes(8, "big")


def good_span(number: int, now: int) -> Span:
    span = Span(trace_id=trace_id(number), span_id=span_id(number), name=f"chat {number}", kind=Span.SPAN_KIND_CLIENT,
                start_time_unix_nano=now, end_time_unix_nano=now + 1_000_000)
    span.attributes.extend([KeyValue(key=names.GEN_AI_REQUEST_MODEL, value=AnyValue(string_value="gpt-4o")),
                            KeyValue(key=names.GEN_AI_OPERATION_NAME, value=AnyValue(string_value="chat"))])
    return span


def good_record(number: int, now: int) -> LogRecord:
    return LogRecord(time_unix_nano=now, trace_id=trace_id(number), span_id=span_id(number),
                     body=AnyValue(string_value=f"record {number}"), severity_text="INFO")


def traces_protobuf(kind: str, now: int | None = None) -> bytes:
    """ExportTraceServiceRequest: one resource, one scope, ``GOOD`` spans and a bad one at ``BAD_POSITION``."""
    now = now or time.time_ns()
    spans = []
    for number in range(GOOD + 1):
        data = good_span(number, now).SerializeToString()
        if number == BAD_POSITION:
            # Span.name is field 5; Span.attributes field 9 (KeyValue: key 1, value 2).
            data = data + (field(5, b"bad \xff\xfe name") if kind == "invalid_utf8" else
                           field(9, field(1, b"deep") + field(2, nested_value(120 if kind == "nested_120" else 1000))))
        spans.append(field(2, data))  # ScopeSpans.spans
    scope = field(1, InstrumentationScope(name="bad-items").SerializeToString())
    resource = Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value=SERVICE))])
    resource_spans = field(1, resource.SerializeToString()) + field(2, scope + b"".join(spans))
    return field(1, resource_spans)


def logs_protobuf(kind: str, now: int | None = None) -> bytes:
    now = now or time.time_ns()
    records = []
    for number in range(GOOD + 1):
        data = good_record(number, now).SerializeToString()
        if number == BAD_POSITION:
            # LogRecord.severity_text is field 3 (a string); LogRecord.body field 5 (an AnyValue).
            data = data + (field(3, b"bad \xff\xfe text") if kind == "invalid_utf8" else
                           field(5, nested_value(120 if kind == "nested_120" else 1000)))
        records.append(field(2, data))  # ScopeLogs.log_records
    scope = field(1, InstrumentationScope(name="bad-items").SerializeToString())
    resource = Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value=SERVICE))])
    resource_logs = field(1, resource.SerializeToString()) + field(2, scope + b"".join(records))
    return field(1, resource_logs)


def _json_item(message, number: int) -> dict:
    item = json_format.MessageToDict(message)
    for key in ("traceId", "spanId"):
        if key in item:
            item[key] = (trace_id(number) if key == "traceId" else span_id(number)).hex()
    return item


def traces_json(kind: str, now: int | None = None) -> bytes:
    now = now or time.time_ns()
    spans = [_json_item(good_span(number, now), number) for number in range(GOOD + 1)]
    bad = spans[BAD_POSITION]
    if kind == "lone_surrogate":
        bad["name"] = "bad \ud800 name"
    else:
        bad["attributes"].append({"key": "deep", "value": nested_json(120)})
    document = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": SERVICE}}]},
        "scopeSpans": [{"scope": {"name": "bad-items"}, "spans": spans}]}]}
    return json.dumps(document).encode()


def logs_json(kind: str, now: int | None = None) -> bytes:
    now = now or time.time_ns()
    records = [_json_item(good_record(number, now), number) for number in range(GOOD + 1)]
    bad = records[BAD_POSITION]
    if kind == "lone_surrogate":
        bad["severityText"] = "bad \ud800 text"
    else:
        bad["body"] = nested_json(120)
    document = {"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": SERVICE}}]},
        "scopeLogs": [{"scope": {"name": "bad-items"}, "logRecords": records}]}]}
    return json.dumps(document).encode()


def deep_json_traces(depth: int) -> bytes:
    """Good spans and one whose attribute nests ``depth`` deep, as text (``json.dumps`` would
    recurse as deep): past ~330 levels Python's JSON reader itself gives up on the document."""
    now = time.time_ns()
    spans = [_json_item(good_span(number, now), number) for number in range(GOOD + 1)]
    marker = {"key": "deep", "value": "DEEP-VALUE"}
    spans[BAD_POSITION]["attributes"].append(marker)
    text = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    value = '{"arrayValue": {"values": [' * depth + '{"stringValue": "deep"}' + "]}}" * depth
    return text.replace('"DEEP-VALUE"', value).encode()
