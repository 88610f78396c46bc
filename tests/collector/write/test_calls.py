"""The collector's memory of stored calls (write/calls.py): a later export's span of a stored call is folded
into that call's record, not stored beside it; an export the sink did not take is undone; a call whose stored
half was forgotten is stored apart (counted), never merged wrongly."""

from __future__ import annotations

from promptprism.collector.write.calls import CallMemory
from promptprism.collector.write.convert import ENCODING_PROTOBUF, convert_traces

from ..peers.peer_captures import scenarios
from ..peers.test_peer_captures import one_span_per_export


def _exports(name: str = "dup_with_sdk_spans") -> list[bytes]:
    """The SDK's span of the call alone, then OpenInference's (its parent) alone."""
    scenario = next(case for case in scenarios("openinference-anthropic-3.1.0") if case.name == name)
    payloads = [export.payload for export in one_span_per_export(scenario, reverse=False).exports]
    requests = [payload for payload in payloads if convert_traces(payload, ENCODING_PROTOBUF).calls]
    assert len(requests) == 2
    return requests


def _requests(converted) -> list[dict]:
    return converted.tables.tables["requests"].select(["request_id", "merged_span_ids"]).to_pylist()


def test_the_later_span_replaces_the_stored_record_under_its_identity():
    first, second = [convert_traces(payload, ENCODING_PROTOBUF) for payload in _exports()]
    memory = CallMemory()
    stored, _ = memory.merge(first, _exports()[0], ENCODING_PROTOBUF)
    assert [row["merged_span_ids"] for row in _requests(stored)] == [[]]
    later, _ = memory.merge(second, _exports()[1], ENCODING_PROTOBUF)
    (row,) = _requests(later)
    assert row["request_id"] == _requests(stored)[0]["request_id"] and len(row["merged_span_ids"]) == 1
    assert later.tables.tables["otel_traces"].num_rows == 1  # the span itself is still stored
    assert (memory.merged, memory.unmerged) == (1, 0)


def test_an_export_the_sink_did_not_take_is_forgotten():
    payloads = _exports()
    memory = CallMemory()
    _, undo = memory.merge(convert_traces(payloads[0], ENCODING_PROTOBUF), payloads[0], ENCODING_PROTOBUF)
    undo()
    later, _ = memory.merge(convert_traces(payloads[1], ENCODING_PROTOBUF), payloads[1], ENCODING_PROTOBUF)
    assert [row["merged_span_ids"] for row in _requests(later)] == [[]]


def test_a_forgotten_call_is_stored_apart_and_counted():
    payloads = _exports()
    memory = CallMemory(payload_bytes=1)  # no export's payload is kept to rebuild its record from
    first = convert_traces(payloads[0], ENCODING_PROTOBUF)
    first.records = None  # converted by a worker: only the identities came back
    memory.merge(first, payloads[0], ENCODING_PROTOBUF)
    second = convert_traces(payloads[1], ENCODING_PROTOBUF)
    later, _ = memory.merge(second, payloads[1], ENCODING_PROTOBUF)
    assert [row["merged_span_ids"] for row in _requests(later)] == [[]]
    assert (memory.merged, memory.unmerged) == (0, 1)
