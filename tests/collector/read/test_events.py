"""read.events: the stored contributions of GenAI events → the content the span would have carried, joined to request rows.

The contributions are computed at ingest (conventions.events, through the
real logs path here); the read side only combines them.
"""

from __future__ import annotations

import hashlib
import json

from promptprism.collector.otlp.logs import decode_protobuf
from promptprism.collector.otlp.model import DecodedSpan
from promptprism.collector.read.events import event_keys, join_events, needs_events, request_content
from promptprism.collector.write.genai_events import split_logs
from promptprism.collector.write.reassemble import build_record
from promptprism.wire import names

from ..log_samples import (
    OPENAI_V2_EVENTS,
    OPENAI_V2_SPAN_INPUT,
    OPENAI_V2_SPAN_OUTPUT,
    SPAN_ID,
    SYSTEM_PROMPT,
    TRACE_ID,
    logs_payload,
)

TRACE, SPAN = f"{TRACE_ID:032x}", f"{SPAN_ID:016x}"


# What the read side's query selects of each event (queries.GENAI_EVENTS_FOR_REQUESTS).
STORED = ("trace_id", "span_id", "time_ns", "sequence", "contribution", "system_instructions", "input_messages",
          "output_messages", "message", "message_index", "message_has_parts", "instructions_text", "system_text")


def as_row(event) -> dict:
    return {name: getattr(event, name) for name in STORED}


def event_rows(events=OPENAI_V2_EVENTS):
    """Rows as the read side's query returns them: the events as the logs path stores them."""
    return [as_row(event) for event in split_logs(decode_protobuf(logs_payload(events)).records).genai_events]


def details_row(attributes: dict, *, time_ns: int = 1) -> dict:
    """An operation-details event carrying ``attributes``, as stored."""
    from promptprism.collector.conventions.events import contribute
    from promptprism.collector.record import GenAIEvent

    event = GenAIEvent(time_ns, TRACE, SPAN, 0, names.EVENT_INFERENCE_DETAILS, "app", "", "", json.dumps(attributes),
                       "e" * 64)
    contribute(event)
    return as_row(event)


def content_attributes(content) -> dict:
    """A RequestContent as the span attributes it stands for (parsed JSON)."""
    found = {}
    for name, text in ((names.GEN_AI_SYSTEM_INSTRUCTIONS, content.system_instructions),
                       (names.GEN_AI_INPUT_MESSAGES, content.input_messages),
                       (names.GEN_AI_OUTPUT_MESSAGES, content.output_messages)):
        if text:
            found[name] = json.loads(text)
    return found


def request_row(**fields):
    row = {"trace_id": TRACE, "request_id": SPAN, "started_at_ns": 1_772_445_600_000_000_000,
           "day": "2026-03-02", "mapped": False, "block_count": 0, "prompt_bytes": 0, "prompt_sha256": "",
           "system_instructions": "", "input_messages": "", "output_messages": ""}
    row.update(fields)
    return row


def span_mode_record():
    span = DecodedSpan(TRACE, SPAN, "", "", "chat gpt-test", "Client", 1, 2, "Unset", "", "chat-app", {}, "", "",
                       {names.GEN_AI_OPERATION_NAME: "chat", names.GEN_AI_INPUT_MESSAGES: OPENAI_V2_SPAN_INPUT,
                        names.GEN_AI_OUTPUT_MESSAGES: OPENAI_V2_SPAN_OUTPUT}, [], [])
    return build_record(span)


def test_older_events_become_the_latest_span_attributes():
    content = request_content(event_rows())
    assert content_attributes(content) == {names.GEN_AI_INPUT_MESSAGES: json.loads(OPENAI_V2_SPAN_INPUT),
                                           names.GEN_AI_OUTPUT_MESSAGES: json.loads(OPENAI_V2_SPAN_OUTPUT)}
    assert content.system_prompt == (names.GEN_AI_INPUT_MESSAGES, SYSTEM_PROMPT)


def test_order_comes_from_time_and_sequence_not_arrival():
    rows = event_rows()
    assert request_content(list(reversed(rows))) == request_content(rows)


def test_the_newer_details_event_carries_the_span_shape_itself():
    details = {names.GEN_AI_INPUT_MESSAGES: json.loads(OPENAI_V2_SPAN_INPUT),
               names.GEN_AI_OUTPUT_MESSAGES: json.loads(OPENAI_V2_SPAN_OUTPUT), names.GEN_AI_REQUEST_MODEL: "m"}
    content = request_content([details_row(details)])
    assert content_attributes(content) == {key: details[key] for key in (names.GEN_AI_INPUT_MESSAGES,
                                                                         names.GEN_AI_OUTPUT_MESSAGES)}
    assert content.system_prompt == (names.GEN_AI_INPUT_MESSAGES, SYSTEM_PROMPT)


def test_the_newest_details_attribute_wins_and_replaces_the_older_message_events():
    older = details_row({names.GEN_AI_SYSTEM_INSTRUCTIONS: "Old.", names.GEN_AI_OUTPUT_MESSAGES: []}, time_ns=1)
    newer = details_row({names.GEN_AI_SYSTEM_INSTRUCTIONS: [{"type": "image"}],
                         names.GEN_AI_INPUT_MESSAGES: [{"role": "user", "content": "hi"}]}, time_ns=2)
    messages = event_rows()  # older per-message events with a system message
    content = request_content([newer, *messages, older])
    # The newest instructions carry no text: the newest details messages decide, and hold no system message.
    assert content.system_prompt is None
    assert json.loads(content.system_instructions) == [{"type": "image"}]
    assert json.loads(content.input_messages) == [{"role": "user", "content": "hi"}]
    assert content.output_messages == "[]"  # carried by the older details event only


def test_tool_calls_and_results_take_the_span_parts():
    events = (
        (names.EVENT_ASSISTANT_MESSAGE, {"tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "weather", "arguments": '{"city": "Oslo"}'}}]}),
        (names.EVENT_TOOL_MESSAGE, {"content": "3 degrees", "id": "call_1"}),
        (names.EVENT_CHOICE, {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
            "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "clock", "arguments": "{}"}}]}}),
    )
    content = content_attributes(request_content(event_rows(events)))
    assert content[names.GEN_AI_INPUT_MESSAGES] == [
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "weather",
                                         "arguments": {"city": "Oslo"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "3 degrees"}]},
    ]
    assert content[names.GEN_AI_OUTPUT_MESSAGES] == [
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_2", "name": "clock", "arguments": {}}],
         "finish_reason": "tool_calls"}]


def test_events_sent_without_content_add_nothing():
    events = ((names.EVENT_SYSTEM_MESSAGE, None), (names.EVENT_USER_MESSAGE, None),
              (names.EVENT_CHOICE, {"index": 0, "finish_reason": "stop", "message": {"role": "assistant"}}))
    assert content_attributes(request_content(event_rows(events))) == {}
    row = request_row()
    assert join_events([row], event_rows(events)).blocks == {} and row == request_row()


def test_joined_row_equals_the_span_mode_record():
    row = request_row()
    joined = join_events([row], event_rows())
    record = span_mode_record()
    block = record.blocks[0]
    assert block.content == SYSTEM_PROMPT
    assert (row["prompt_bytes"], row["prompt_sha256"], row["block_count"]) == \
        (record.prompt_bytes, record.prompt_sha256, 1)
    assert row["prompt_sha256"] == hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest()
    [block_row] = joined.blocks[SPAN]
    assert {key: block_row[key] for key in ("index", "name", "layer", "stability", "source", "start", "end",
                                            "size", "sha256")} == \
        {"index": 0, "name": block.name, "layer": block.layer, "stability": block.stability, "source": block.source,
         "start": 0, "end": block.size, "size": block.size, "sha256": block.sha256}
    assert joined.contents == {("2026-03-02", block.sha256): SYSTEM_PROMPT}
    assert json.loads(row["input_messages"]) == json.loads(record.input_messages)
    assert json.loads(row["output_messages"]) == json.loads(record.output_messages)


def test_content_on_the_span_wins_and_a_mapped_prompt_is_left_alone():
    mapped = request_row(mapped=True, block_count=3, prompt_bytes=99, input_messages='["span"]',
                         output_messages='["span"]')
    assert not needs_events(mapped)
    assert join_events([mapped], event_rows()).blocks == {} and mapped["input_messages"] == '["span"]'


def test_a_prompt_hash_on_the_span_that_does_not_match_the_text_keeps_the_prompt_out():
    row = request_row(prompt_sha256="0" * 64, prompt_bytes=7)
    joined = join_events([row], event_rows())
    assert joined.blocks == {} and row["prompt_bytes"] == 7
    assert row["input_messages"]  # messages still joined: only the prompt map is in doubt


def test_summary_rows_get_the_prompt_and_keys_are_only_for_rows_missing_content():
    summary = {key: value for key, value in request_row().items() if key not in
               ("day", "system_instructions", "input_messages", "output_messages")}
    complete = request_row(request_id="1" * 16, mapped=True, block_count=2, input_messages="[]",
                           output_messages="[]")
    assert event_keys([summary, complete]) == [(TRACE, SPAN)]
    join_events([summary], event_rows())
    assert summary["prompt_bytes"] == len(SYSTEM_PROMPT.encode()) and summary["block_count"] == 1
