"""The collector's memory of stored calls (write/calls.py): a later export's span of a stored call is folded
into that call's record, not stored beside it; an export the sink did not take is undone; a call whose stored
half was forgotten is stored apart (counted), never merged wrongly."""

from __future__ import annotations

from promptprism.collector.write.calls import CallMemory
from promptprism.collector.write.convert import ENCODING_PROTOBUF, convert_traces
from promptprism.collector.write.documents import document_inputs

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
    first.records = second.records = None  # converted by workers: the collector decodes the payloads again
    memory = CallMemory()
    stored = memory.merge(first, _exports()[0], ENCODING_PROTOBUF).converted
    assert [row["merged_span_ids"] for row in _requests(stored)] == [[]]
    later = memory.merge(second, _exports()[1], ENCODING_PROTOBUF).converted
    (row,) = _requests(later)
    assert row["request_id"] == _requests(stored)[0]["request_id"] and len(row["merged_span_ids"]) == 1
    assert later.tables.tables["otel_traces"].num_rows == 1  # the span itself is still stored
    assert (memory.merged, memory.unmerged) == (1, 0)


def test_an_export_the_sink_did_not_take_is_forgotten():
    payloads = _exports()
    memory = CallMemory()
    memory.merge(convert_traces(payloads[0], ENCODING_PROTOBUF), payloads[0], ENCODING_PROTOBUF).finish(accepted=False)
    later = memory.merge(convert_traces(payloads[1], ENCODING_PROTOBUF), payloads[1], ENCODING_PROTOBUF).converted
    assert [row["merged_span_ids"] for row in _requests(later)] == [[]]


def test_a_forgotten_call_is_stored_apart_and_counted():
    payloads = _exports()
    memory = CallMemory(payload_bytes=1)  # no export's payload is kept to rebuild its record from
    first = convert_traces(payloads[0], ENCODING_PROTOBUF)
    first.records = None  # converted by a worker: only the identities came back
    memory.merge(first, payloads[0], ENCODING_PROTOBUF)
    second = convert_traces(payloads[1], ENCODING_PROTOBUF)
    later = memory.merge(second, payloads[1], ENCODING_PROTOBUF).converted
    assert [row["merged_span_ids"] for row in _requests(later)] == [[]]
    assert (memory.merged, memory.unmerged) == (0, 1)


def _openlit_stream() -> tuple[bytes, bytes]:
    """OpenLIT's streamed chat call: its span (traces) and its operation-details record (logs), which carries
    the tool definitions under the parent span's id and the call's response id."""
    from promptprism.collector.write.convert import convert_logs

    scenario = next(case for case in scenarios("openlit-1.45.0") if case.name == "openai_chat_stream")
    traces = [export.payload for export in scenario.exports if export.signal == "traces"]
    logs = [export.payload for export in scenario.exports if export.signal == "logs"]
    assert len(traces) == len(logs) == 1
    (owner,) = convert_logs(logs[0], ENCODING_PROTOBUF).tool_owners
    (call,) = convert_traces(traces[0], ENCODING_PROTOBUF).calls
    assert owner.request_id != call.request_id and owner.response_id == call.response_id
    return traces[0], logs[0]


def _tools_count(converted) -> list[tuple[str, int]]:
    return [(row["request_id"], row["tools_count"]) for row in
            converted.tables.tables["requests"].select(["request_id", "tools_count"]).to_pylist()]


def test_tool_definitions_of_a_log_record_join_their_request_whichever_comes_first():
    from promptprism.collector.write.convert import convert_logs

    traces, logs = _openlit_stream()
    (call,) = convert_traces(traces, ENCODING_PROTOBUF).calls
    tools = len(convert_logs(logs, ENCODING_PROTOBUF).tool_owners[0].tools)
    assert tools >= 1
    # The span first: the log record's export rewrites the stored request with its tools.
    memory = CallMemory()
    assert _tools_count(memory.merge(convert_traces(traces, ENCODING_PROTOBUF), traces, ENCODING_PROTOBUF).converted) == [
        (call.request_id, 0)]
    joined = memory.merge_logs(convert_logs(logs, ENCODING_PROTOBUF)).converted
    assert _tools_count(joined) == [(call.request_id, tools)]
    # The rewritten request row carries them (migration 046); `tools` keeps the log record's own rows.
    assert [len(names) for names in document_inputs(joined.tables.tables["request_docs"]).column("tool_names").to_pylist()] == [tools]
    assert call.request_id not in joined.tables.tables["tools"].column("request_id").to_pylist()
    # The log record first: its tools wait for the span, whose export writes the request with them.
    memory = CallMemory()
    waiting = memory.merge_logs(convert_logs(logs, ENCODING_PROTOBUF)).converted
    assert waiting.tables.tables["requests"].num_rows == 0
    arrived = memory.merge(convert_traces(traces, ENCODING_PROTOBUF), traces, ENCODING_PROTOBUF).converted
    assert _tools_count(arrived) == [(call.request_id, tools)]
    assert [len(names) for names in document_inputs(arrived.tables.tables["request_docs"]).column("tool_names").to_pylist()] == [tools]


def test_an_export_that_replaces_anothers_rows_waits_until_those_are_durable():
    """Two exports can race to the sink: the one folding its span into the other's record is held until the
    first is settled, so that its rows are inserted after the rows they replace."""
    import threading

    payloads = _exports()
    memory = CallMemory()
    first = memory.merge(convert_traces(payloads[0], ENCODING_PROTOBUF), payloads[0], ENCODING_PROTOBUF)
    later = memory.merge(convert_traces(payloads[1], ENCODING_PROTOBUF), payloads[1], ENCODING_PROTOBUF)
    assert later.merged == 1
    waited = threading.Event()
    waiter = threading.Thread(target=lambda: (later.wait(), waited.set()))
    waiter.start()
    held = not waited.wait(0.5)  # a wait that does not hold returns at once; a slow machine only hides that
    first.finish(accepted=True)
    waiter.join(60)
    assert held and waited.is_set()
    # An export folding into nothing waits for nothing.
    alone = CallMemory().merge(convert_traces(payloads[0], ENCODING_PROTOBUF), payloads[0], ENCODING_PROTOBUF)
    alone.wait(timeout=0)
