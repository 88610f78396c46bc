"""Decoding span by span (and log record by log record): one bad item never takes its neighbours.

99 good items and one that the parser refuses on its own — invalid UTF-8
(protobuf), a lone surrogate (JSON), a value nested 120 or 1,000 deep —
decode to the 99, and the bad one is counted with a reason in our words.
"""

from __future__ import annotations

import pytest

from promptprism.collector.otlp import MalformedPayload, logs, traces
from promptprism.collector.otlp._parse import MAX_VALUE_DEPTH

from .. import bad_items
from ..bad_items import BAD_POSITION, GOOD

REASONS = {
    "invalid_utf8": "invalid UTF-8 in a string field",
    "lone_surrogate": "a string with a lone surrogate",
    "nested_120": "a value nested deeper than",
    "nested_1000": "a value nested deeper than",
}


@pytest.mark.parametrize("kind", ["invalid_utf8", "nested_120", "nested_1000"])
def test_protobuf_spans(kind):
    result = traces.decode_protobuf(bad_items.traces_protobuf(kind))
    assert [span.name for span in result.spans] == [f"chat {n}" for n in range(GOOD + 1) if n != BAD_POSITION]
    assert result.spans[0].service == bad_items.SERVICE and result.spans[0].scope_name == "bad-items"
    assert result.rejections.count == 1
    assert result.rejections.message.startswith(f"rejected 1 span(s): span {BAD_POSITION}: {REASONS[kind]}")
    assert "\\x" not in result.rejections.message and "bad" not in result.rejections.message  # our words, not the payload


@pytest.mark.parametrize("kind", ["lone_surrogate", "nested_120"])
def test_json_spans(kind):
    result = traces.decode_json(bad_items.traces_json(kind))
    assert len(result.spans) == GOOD and f"chat {BAD_POSITION}" not in {span.name for span in result.spans}
    assert result.rejections.count == 1
    assert result.rejections.message.startswith(f"rejected 1 span(s): span {BAD_POSITION}: {REASONS[kind]}")


@pytest.mark.parametrize("kind", ["invalid_utf8", "nested_120", "nested_1000"])
def test_protobuf_log_records(kind):
    result = logs.decode_protobuf(bad_items.logs_protobuf(kind))
    assert [record.body for record in result.records] == [
        f"record {n}" for n in range(GOOD + 1) if n != BAD_POSITION]
    assert result.rejections.count == 1
    assert result.rejections.message.startswith(f"rejected 1 log record(s): log record {BAD_POSITION}: {REASONS[kind]}")


@pytest.mark.parametrize("kind", ["lone_surrogate", "nested_120"])
def test_json_log_records(kind):
    result = logs.decode_json(bad_items.logs_json(kind))
    assert len(result.records) == GOOD and result.rejections.count == 1
    assert REASONS[kind] in result.rejections.message


def test_a_value_just_past_the_bound_rejects_its_span_and_one_at_it_is_kept():
    """Within protobuf's own limit our bound decides: deeper than MAX_VALUE_DEPTH is rejected, not cut."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    def export(depth):
        request = ExportTraceServiceRequest()
        scope = request.resource_spans.add().scope_spans.add()
        for number in range(2):
            scope.spans.append(bad_items.good_span(number, 1))
        data = request.SerializeToString()
        # Append the nested attribute to the last span by re-framing: decode, add raw bytes, re-encode.
        request.resource_spans[0].scope_spans[0].spans[1].MergeFromString(
            bad_items.field(9, bad_items.field(1, b"deep") + bad_items.field(2, bad_items.nested_value(depth))))
        return data, request.SerializeToString()

    _, at_bound = export(MAX_VALUE_DEPTH)
    result = traces.decode_protobuf(at_bound)
    assert len(result.spans) == 2 and result.rejections.count == 0
    _, past = export(MAX_VALUE_DEPTH + 1)
    result = traces.decode_protobuf(past)
    assert [span.name for span in result.spans] == ["chat 0"] and result.rejections.count == 1
    assert f"span 'chat 1': a value nested deeper than {MAX_VALUE_DEPTH} levels" in result.rejections.message


def test_json_too_deep_for_python_is_malformed_not_a_crash():
    with pytest.raises(MalformedPayload, match="nested too deeply"):
        traces.decode_json(bad_items.deep_json_traces(1000))


def test_json_nested_within_what_python_reads_rejects_only_that_span():
    result = traces.decode_json(bad_items.deep_json_traces(200))
    assert len(result.spans) == GOOD and result.rejections.count == 1


@pytest.mark.parametrize("payload", [
    bad_items.field(1, b"\x12\x05ab"),  # a scope whose length runs past the resource
    bad_items.field(1, bad_items.field(1, b"\x0a\xff")),  # a broken resource
    b"\x0a\x05abc",
])
def test_broken_framing_or_resource_is_still_malformed(payload):
    with pytest.raises(MalformedPayload):
        traces.decode_protobuf(payload)


def test_a_broken_scope_outside_the_spans_is_malformed_in_json():
    document = b'{"resourceSpans": [{"scopeSpans": [{"scope": {"name": ["a list"]}, "spans": []}]}]}'
    with pytest.raises(MalformedPayload):
        traces.decode_json(document)
