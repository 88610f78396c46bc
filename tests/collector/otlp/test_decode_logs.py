"""otlp.logs: OTLP log payloads (protobuf, JSON) → DecodedLogRecord."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from promptprism.collector.otlp import MalformedPayload
from promptprism.collector.otlp.logs import decode_json, decode_protobuf, parse_protobuf
from promptprism.wire import names

from ..log_samples import OPENAI_V2_EVENTS, SPAN_ID, SYSTEM_PROMPT, TRACE_ID, WARNING, logs_payload


def test_protobuf_from_the_sdk_encoder_keeps_order_ids_and_bodies():
    result = decode_protobuf(logs_payload(extra=[WARNING]))
    assert result.rejections.count == 0
    records = result.records
    assert [record.event_name for record in records] == [name for name, _ in OPENAI_V2_EVENTS] + [""]
    assert [record.sequence for record in records] == list(range(6))
    first = records[0]
    assert (first.trace_id, first.span_id) == (f"{TRACE_ID:032x}", f"{SPAN_ID:016x}")
    assert first.body == {"content": SYSTEM_PROMPT}
    assert first.attributes == {names.GEN_AI_SYSTEM: "openai"}
    assert first.service == "chat-app" and first.scope_name == "opentelemetry.instrumentation.openai_v2"
    assert first.scope_version == "2.4b0" and first.flags == 1
    # The SDK leaves the record's own time unset; the observed time stands in.
    assert first.time_ns == first.observed_time_ns > 0
    warning = records[-1]
    assert (warning.severity_text, warning.severity_number, warning.body) == ("WARN", 13, "disk almost full")


def test_json_with_hex_ids_decodes_like_protobuf():
    request = parse_protobuf(logs_payload())
    document = json_format.MessageToDict(request)
    for resource in document["resourceLogs"]:
        for scope in resource["scopeLogs"]:
            for record in scope["logRecords"]:
                for key in ("traceId", "spanId"):
                    record[key] = base64.b64decode(record[key]).hex()
    from_json = decode_json(json.dumps(document).encode()).records
    from_protobuf = decode_protobuf(request.SerializeToString()).records
    assert [(r.trace_id, r.span_id, r.event_name, r.body) for r in from_json] == \
        [(r.trace_id, r.span_id, r.event_name, r.body) for r in from_protobuf]


def test_a_record_without_span_context_is_kept_with_empty_ids():
    records = decode_protobuf(logs_payload(span_id=0, extra=[WARNING])).records
    assert {(record.trace_id, record.span_id) for record in records} == {("", "")}


def test_event_name_from_the_older_attribute():
    request = ExportLogsServiceRequest()
    record = request.resource_logs.add().scope_logs.add().log_records.add()
    attribute = record.attributes.add()
    attribute.key, attribute.value.string_value = names.EVENT_NAME_ATTRIBUTE, names.EVENT_CHOICE
    record.time_unix_nano = 5
    assert decode_protobuf(request.SerializeToString()).records[0].event_name == names.EVENT_CHOICE


def test_bad_ids_are_rejected_alone_with_partial_success():
    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    good = scope.log_records.add()
    good.trace_id, good.span_id = bytes(range(1, 17)), bytes(range(1, 9))
    short = scope.log_records.add()
    short.trace_id = b"\x01\x02"
    orphan = scope.log_records.add()  # a span id without a trace id means nothing
    orphan.span_id = bytes(range(1, 9))
    result = decode_protobuf(request.SerializeToString())
    assert len(result.records) == 1 and result.rejections.count == 2
    assert result.rejections.message.startswith("rejected 2 log record(s): log record 1: invalid trace_id '0102'")


def test_json_id_that_is_not_hex_rejects_the_record_not_the_payload():
    document = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"traceId": "zz" * 16, "spanId": "01" * 8, "body": {"stringValue": "x"}},
        {"body": {"stringValue": "no context"}},
    ]}]}]}
    result = decode_json(json.dumps(document).encode())
    assert result.rejections.count == 1
    assert [record.body for record in result.records] == ["no context"]


@pytest.mark.parametrize("payload, decode", [
    (b"\xff\xff\xff", decode_protobuf),
    (b"{not json", decode_json),
    (b"[1, 2]", decode_json),
    (b'{"resourceLogs": "nope"}', decode_json),
])
def test_malformed_payloads_raise(payload, decode):
    with pytest.raises(MalformedPayload):
        decode(payload)


def test_a_record_the_json_parser_refuses_is_rejected_alone():
    payload = json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"timeUnixNano": "soon"}, {"body": {"stringValue": "kept"}}]}]}]}).encode()
    result = decode_json(payload)
    assert [record.body for record in result.records] == ["kept"]
    assert result.rejections.message.startswith("rejected 1 log record(s): log record 0: not a valid OTLP/JSON item")


def test_times_past_the_stores_nanosecond_range_are_clamped_not_a_failed_batch():
    from promptprism.collector.write.convert import convert_logs

    request = parse_protobuf(logs_payload())
    for resource in request.resource_logs:
        for scope in resource.scope_logs:
            for record in scope.log_records:
                record.time_unix_nano = record.observed_time_unix_nano = 2**64 - 1
    payload = request.SerializeToString()
    records = decode_protobuf(payload).records
    assert records and all(r.time_ns == r.observed_time_ns == 2**63 - 1 for r in records)
    assert convert_logs(payload, "protobuf").received == len(records)
