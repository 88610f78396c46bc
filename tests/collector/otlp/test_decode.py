"""decode: OTLP protobuf and OTLP/JSON payloads → DecodedSpan."""

from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from promptprism.collector.otlp import MalformedPayload
from promptprism.collector.otlp.traces import decode_json, decode_protobuf, parse_protobuf
from promptprism.wire import names

from ..otlp_samples import otlp_json

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
LINKED = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, is_remote=True,
                     trace_flags=TraceFlags(1))


def sdk_spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop-bot", "deployment": "eu"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(names.TRACER_NAME, "0.3")
    with tracer.start_as_current_span("agent"):
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT, links=[Link(LINKED, {"why": "retry"})]) as span:
            span.set_attributes({names.GEN_AI_REQUEST_MODEL: "gpt-4o", names.PROMPT_BYTES: 12,
                                 names.PROMPT_MAPPED: True, "ratio": 0.25, "tags": ["a", "b"], "ints": [1, 2]})
            span.add_event(names.EVENT_PROMPT_BLOCK, {names.BLOCK_INDEX: 0, names.BLOCK_CONTENT: "héllo 🍵"})
            span.set_status(Status(StatusCode.ERROR, "rate limited"))
    provider.shutdown()
    return exporter.get_finished_spans()


def test_protobuf_from_the_sdk_encoder():
    payload = encode_spans(sdk_spans()).SerializeToString()
    result = decode_protobuf(payload)
    assert result.rejections.count == 0 and result.rejections.message == ""
    chat, agent = result.spans
    assert chat.parent_span_id == agent.span_id and agent.parent_span_id == ""
    assert len(chat.trace_id) == 32 and len(chat.span_id) == 16 and chat.trace_id == agent.trace_id
    assert (chat.name, chat.kind, agent.kind) == ("chat gpt-4o", "Client", "Internal")
    assert (chat.status_code, chat.status_message, agent.status_code) == ("Error", "rate limited", "Unset")
    assert chat.service == "shop-bot" and chat.resource_attributes["deployment"] == "eu"
    assert (chat.scope_name, chat.scope_version) == (names.TRACER_NAME, "0.3")
    assert chat.attributes == {names.GEN_AI_REQUEST_MODEL: "gpt-4o", names.PROMPT_BYTES: 12,
                               names.PROMPT_MAPPED: True, "ratio": 0.25, "tags": ["a", "b"], "ints": [1, 2]}
    [event] = chat.events
    assert event.name == names.EVENT_PROMPT_BLOCK
    assert event.attributes == {names.BLOCK_INDEX: 0, names.BLOCK_CONTENT: "héllo 🍵"}
    [link] = chat.links
    assert (link.trace_id, link.span_id, link.attributes) == (
        "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", {"why": "retry"})
    assert chat.end_time_ns >= chat.start_time_ns > 0


@pytest.mark.parametrize("snake", [False, True])
def test_otlp_json_hex_ids_string_int64_and_structured_values(snake):
    result = decode_json(otlp_json(snake=snake))
    [span] = result.spans
    assert (span.trace_id, span.span_id, span.parent_span_id) == (
        "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "")
    assert (span.kind, span.status_code, span.service, span.scope_name) == ("Client", "Ok", "shop-bot", "scope-a")
    assert (span.start_time_ns, span.end_time_ns, span.dropped_events_count) == (
        1_700_000_000_000_000_000, 1_700_000_000_500_000_000, 2)
    assert span.attributes == {
        names.PROMPT_BYTES: 9007199254740993, names.PROMPT_MAPPED: True,
        names.GEN_AI_SYSTEM_INSTRUCTIONS: [{"type": "text", "content": "Be brief."}],
        "temperature": 0.5, "blob": b"\x00\x01"}
    assert span.events[0].attributes == {names.BLOCK_INDEX: 0}
    assert (span.links[0].trace_id, span.links[0].span_id) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")


@pytest.mark.parametrize("bad_ids", [
    {"traceId": "00000000000000000000000000000000"},
    {"traceId": "4bf92f35"},
    {"spanId": "not hex at all!"},
    {"spanId": "0000000000000000"},
    {"parentSpanId": "abcd"},
])
def test_invalid_ids_reject_only_that_span(bad_ids):
    document = json.loads(otlp_json())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append({**spans[0], **bad_ids, "name": "broken"})
    result = decode_json(json.dumps(document).encode())
    assert [span.name for span in result.spans] == ["chat"]
    assert result.rejections.count == 1
    assert result.rejections.message.startswith("rejected 1 span(s): span 'broken': invalid")


def test_many_rejections_keep_the_message_short():
    document = json.loads(otlp_json())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[:] = [{**spans[0], "spanId": ""} for _ in range(100)]
    result = decode_json(json.dumps(document).encode())
    assert result.rejections.count == 100 and result.spans == []
    assert result.rejections.message.count("invalid span_id") == 5 and result.rejections.message.endswith("and 95 more")


@pytest.mark.parametrize("payload", [b"\xff\xff\xff\xff", b"\x0a\x05abc", b"\x0a\xff\xff\xff\xff\x0f"])
def test_garbage_protobuf_is_malformed(payload):
    with pytest.raises(MalformedPayload):
        parse_protobuf(payload)


@pytest.mark.parametrize("payload", [
    b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe",
    b'{"resourceSpans": "nope"}',
])
def test_garbage_json_is_malformed(payload):
    with pytest.raises(MalformedPayload):
        decode_json(payload)


@pytest.mark.parametrize("span", [
    b'{"name": ["a list"]}',
    b'{"attributes": [{"key": "x", "value": ' + b'{"arrayValue": {"values": [' * 200 + b"]}}" * 200 + b"}]}",
    b'"not an object"',
])
def test_a_span_the_json_parser_refuses_is_rejected_alone(span):
    result = decode_json(b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + span + b"]}]}]}")
    assert result.spans == [] and result.rejections.count == 1 and result.rejections.message.startswith("rejected 1 span(s)")


def test_empty_payloads_are_valid_and_empty():
    assert decode_protobuf(b"").spans == []
    assert decode_json(b"{}").spans == []


def test_times_past_the_stores_nanosecond_range_are_clamped_not_a_failed_batch():
    """fixed64 times reach 2**64 - 1; DateTime64(9) and Arrow's ns timestamps stop at 2**63 - 1."""
    from promptprism.collector.write.convert import convert_traces

    too_late = str(2**64 - 1)
    payload = otlp_json({"startTimeUnixNano": too_late, "endTimeUnixNano": too_late,
                         "events": [{"timeUnixNano": too_late, "name": "x"}]})
    [span] = decode_json(payload).spans
    assert span.start_time_ns == span.end_time_ns == span.events[0].time_ns == 2**63 - 1
    assert convert_traces(payload, "json").received == 1
