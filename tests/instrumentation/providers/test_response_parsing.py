"""Pure response parsing: SSE framing at any chunk boundary, usage per dialect, provider errors."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from promptprism.instrumentation.providers._responses import ResponseParser, ServerSentEvents
from promptprism.wire import names

ANTHROPIC_STREAM = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"claude-x",'
    '"usage":{"input_tokens":10,"cache_read_input_tokens":300,"cache_creation_input_tokens":50,"output_tokens":1}}}\n\n'
    ": keep-alive comment\n\n"
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hé "}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"there"}}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
).encode()


def parse_stream(dialect: str, chunks) -> ResponseParser:
    parser = ResponseParser(dialect)
    framing = ServerSentEvents()
    for chunk in chunks:
        for event, data in framing.feed(chunk):
            parser.feed_event(data, event)
    for event, data in framing.flush():
        parser.feed_event(data, event)
    return parser


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, len(ANTHROPIC_STREAM)), max_size=30))
def test_sse_events_survive_any_chunk_boundaries(cuts):
    points = sorted(set(cuts))
    chunks = [ANTHROPIC_STREAM[start:end] for start, end in zip([0, *points], [*points, len(ANTHROPIC_STREAM)])]
    summary = parse_stream(names.DIALECT_ANTHROPIC_MESSAGES, chunks).summary
    assert summary.input_tokens == 10 + 300 + 50  # whole prompt, cached part included
    assert summary.cache_read_tokens == 300 and summary.cache_creation_tokens == 50
    assert summary.output_tokens == 7
    assert "".join(summary.text) == "Hé there"  # a multi-byte character split across chunks stays whole
    assert summary.finish_reasons == ["end_turn"] and summary.response_id == "msg_1"


def test_crlf_framing_and_a_last_event_without_blank_line():
    stream = (b'data: {"id":"c1","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}\r\n\r\n'
              b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,'
              b'"prompt_tokens_details":{"cached_tokens":8}}}')
    summary = parse_stream(names.DIALECT_CHAT_COMPLETIONS, [stream]).summary
    assert (summary.input_tokens, summary.output_tokens, summary.cache_read_tokens) == (12, 3, 8)
    assert summary.text == ["ok"]


def test_sse_lines_end_only_at_cr_or_lf_not_at_unicode_line_separators():
    # JSON may carry U+2028, U+2029 and U+0085 unescaped; the SSE format ends
    # lines only at CR, LF or CRLF, so they are part of the data.
    text = "a\u2028b\u2029c\x85d\x1ce"
    delta = json.dumps({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                       ensure_ascii=False)
    stream = f"event: content_block_delta\ndata: {delta}\n\n".encode()
    summary = parse_stream(names.DIALECT_ANTHROPIC_MESSAGES, [stream]).summary
    assert summary.text == [text]


def test_chat_tool_call_deltas_are_assembled():
    events = [
        {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "function": {"name": "search", "arguments": '{"q":'}}]}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": '"tea"}'}}]}, "finish_reason": "tool_calls"}]},
    ]
    parser = ResponseParser(names.DIALECT_CHAT_COMPLETIONS)
    for event in events:
        parser.feed_event(json.dumps(event))
    parser.feed_event("[DONE]")
    call = parser.summary.tool_calls[0]
    assert (call.identifier, call.name, call.arguments) == ("call_1", "search", '{"q":"tea"}')
    assert parser.summary.output_messages()[0]["finish_reason"] == "tool_calls"


def test_responses_final_object_and_incomplete_reason():
    parser = ResponseParser(names.DIALECT_OPENAI_RESPONSES)
    parser.feed_json({"id": "resp_1", "model": "gpt-5", "status": "incomplete",
                      "incomplete_details": {"reason": "max_output_tokens"},
                      "output": [{"type": "message", "content": [{"type": "output_text", "text": "partial"}]}],
                      "usage": {"input_tokens": 40, "output_tokens": 16, "input_tokens_details": {"cached_tokens": 32}}})
    summary = parser.summary
    assert summary.finish_reasons == ["max_output_tokens"]
    assert (summary.input_tokens, summary.output_tokens, summary.cache_read_tokens) == (40, 16, 32)
    assert summary.text == ["partial"]


def test_provider_errors_in_bodies_and_streams():
    parser = ResponseParser(names.DIALECT_ANTHROPIC_MESSAGES)
    parser.feed_event('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', "error")
    assert (parser.summary.error_type, parser.summary.error_message) == ("overloaded_error", "Overloaded")
    parser = ResponseParser(names.DIALECT_CHAT_COMPLETIONS)
    parser.feed_json({"error": {"message": "bad", "type": "invalid_request_error"}})
    assert parser.summary.error_type == "invalid_request_error"


def test_garbage_is_ignored_not_raised():
    parser = ResponseParser(names.DIALECT_OPENAI_RESPONSES)
    for data in ("not json", "[1,2]", '{"type": 5}', '{"type":"response.completed","response":"x"}'):
        parser.feed_event(data)
    parser.feed_json(["not", "an", "object"])
    assert parser.summary.input_tokens is None
