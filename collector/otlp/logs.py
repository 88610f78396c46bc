"""OTLP log payloads (protobuf or OTLP/JSON) → ``DecodedLogRecord`` objects.

Pure conversion, no I/O, the logs twin of ``traces`` (both parse with
``_parse``): a payload that is not OTLP at all raises ``MalformedPayload``
(gRPC INVALID_ARGUMENT / HTTP 400); a record that is OTLP but unusable (a
trace or span id of the wrong length, invalid UTF-8, a lone surrogate, a
value nested too deep) is left out and counted, so the
receiver answers with OTLP partial success (``rejected_log_records``)
instead of rejecting its neighbours.

Unlike a span, a log record needs no trace context: empty (or all-zero) ids
mean "not inside a span" and are kept as "".
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from ...wire import names
from ._parse import (
    MAX_TIME_NS,
    SERVICE_NAME,
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    MalformedPayload,
    ValueTooDeep,
    decode_attributes,
    decode_value,
    hex_ids_to_base64,
    json_items,
    load_json_object,
    parse_json_document,
    parse_json_items,
    parse_protobuf_items,
    parse_protobuf_request,
    Rejections,
)
from .model import DecodedLogRecord

# What a hex id that is not hex becomes in OTLP/JSON: one byte, a length no
# id has, so the record is rejected instead of silently losing its context.
_UNPARSEABLE_ID = base64.b64encode(b"\x00").decode("ascii")
_ID_KEYS = (("traceId", "trace_id"), ("spanId", "span_id"))
_JSON_LISTS = (("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"), ("logRecords", "log_records"))


@dataclass(slots=True)
class LogDecodeResult:
    records: list[DecodedLogRecord]
    rejections: Rejections = field(default_factory=lambda: Rejections("log record(s)"))


# --- parsing ---------------------------------------------------------------


def parse_protobuf(payload: bytes) -> ExportLogsServiceRequest:
    return parse_protobuf_request(payload, ExportLogsServiceRequest)


def parse_json(payload: bytes) -> ExportLogsServiceRequest:
    """OTLP/JSON: proto3 JSON mapping with hex trace and span ids and integer enums."""
    return parse_json_document(_json_document(payload), ExportLogsServiceRequest)


def _json_document(payload: bytes) -> dict:
    document = load_json_object(payload)
    for resource_logs in json_items(document, "resourceLogs", "resource_logs"):
        for scope_logs in json_items(resource_logs, "scopeLogs", "scope_logs"):
            for record in json_items(scope_logs, "logRecords", "log_records"):
                hex_ids_to_base64(record, _ID_KEYS, _UNPARSEABLE_ID)
    return document


# --- walking ---------------------------------------------------------------


def _hex_id(raw: bytes, length: int) -> str | None:
    """Hex of a valid id, "" for none (empty or all zero), None when malformed."""
    if not raw or not any(raw):
        return "" if len(raw) in (0, length) else None
    return raw.hex() if len(raw) == length else None


def decode_request(request: ExportLogsServiceRequest, problems: list[str] = ()) -> LogDecodeResult:
    """The request's log records; ``problems``: records the parser already left out (``parse_*_items``)."""
    result = LogDecodeResult(records=[])
    for problem in problems:
        result.rejections.add(problem)
    sequence = 0
    for resource_logs in request.resource_logs:
        try:
            resource_attributes = decode_attributes(resource_logs.resource.attributes)
        except ValueTooDeep as error:  # shared by every record of the resource: none can be stored
            raise MalformedPayload(f"not OTLP: a resource attribute is {error}") from None
        service = resource_attributes.get(SERVICE_NAME)
        service = service if isinstance(service, str) else ""
        for scope_logs in resource_logs.scope_logs:
            scope = scope_logs.scope
            try:
                scope_attributes = decode_attributes(scope.attributes)
            except ValueTooDeep as error:
                raise MalformedPayload(f"not OTLP: a scope attribute is {error}") from None
            for record in scope_logs.log_records:
                trace_id = _hex_id(record.trace_id, TRACE_ID_BYTES)
                span_id = _hex_id(record.span_id, SPAN_ID_BYTES)
                if trace_id is None or span_id is None or (span_id and not trace_id):
                    result.rejections.add(f"log record {sequence}: invalid trace_id {record.trace_id.hex()!r} or "
                                  f"span_id {record.span_id.hex()!r}")
                    sequence += 1
                    continue
                try:
                    attributes = decode_attributes(record.attributes)
                    body = decode_value(record.body) if record.HasField("body") else None
                except ValueTooDeep as error:
                    result.rejections.add(f"log record {sequence}: {error}")
                    sequence += 1
                    continue
                event_name = record.event_name
                if not event_name:
                    legacy = attributes.get(names.EVENT_NAME_ATTRIBUTE)
                    event_name = legacy if isinstance(legacy, str) else ""
                result.records.append(DecodedLogRecord(
                    time_ns=min(record.time_unix_nano or record.observed_time_unix_nano, MAX_TIME_NS),
                    observed_time_ns=min(record.observed_time_unix_nano, MAX_TIME_NS),
                    trace_id=trace_id,
                    span_id=span_id,
                    flags=record.flags,
                    severity_number=record.severity_number,
                    severity_text=record.severity_text,
                    event_name=event_name,
                    body=body,
                    attributes=attributes,
                    service=service,
                    resource_attributes=resource_attributes,  # shared by the resource's records; read-only
                    resource_schema_url=resource_logs.schema_url,
                    scope_name=scope.name,
                    scope_version=scope.version,
                    scope_attributes=scope_attributes,
                    scope_schema_url=scope_logs.schema_url,
                    sequence=sequence,
                ))
                sequence += 1
    return result


def decode_protobuf(payload: bytes) -> LogDecodeResult:
    return decode_request(*parse_protobuf_items(payload, ExportLogsServiceRequest, "log record"))


def decode_json(payload: bytes) -> LogDecodeResult:
    return decode_request(*parse_json_items(_json_document(payload), ExportLogsServiceRequest, LogRecord,
                                            _JSON_LISTS, "log record"))


__all__ = ["LogDecodeResult", "MalformedPayload", "parse_protobuf", "parse_json", "decode_request",
           "decode_protobuf", "decode_json"]
