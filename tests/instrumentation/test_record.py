"""record_llm_request: one span per request with the attributes and events of README "The request span on the wire"."""

from __future__ import annotations

import hashlib
import json
import logging
import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import StatusCode

from promptprism.instrumentation import _capture as capture
from promptprism.instrumentation import _record as record
from promptprism.instrumentation import (
    TemplateCatalog,
    ToolSpec,
    block,
    build_prompt,
    configure_content_capture,
    correlation,
    record_llm_request,
    set_redactor,
)
from promptprism.wire import names

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"


def only_span(exporter):
    spans = exporter.get_finished_spans()
    assert len(spans) == 1
    return spans[0]


def block_events(span):
    return [dict(event.attributes) for event in span.events if event.name == names.EVENT_PROMPT_BLOCK]


def tool_events(span):
    return [dict(event.attributes) for event in span.events if event.name == names.EVENT_TOOL_DEFINITION]


@pytest.fixture
def prompt():
    catalog = TemplateCatalog({"system": "You are Prism.\n{{ memory }}\nTools: {{ hint }}"})
    return catalog.render("system", [block("memory", "Ada likes tea.", layer="memory", stability="session",
                                           source="db:memory"),
                                     block("hint", "use search", layer="instructions", stability="static")])


def test_span_attributes_and_block_events_without_content(exporter, tracer_provider, prompt):
    tools = [ToolSpec("search", '{"name":"search","parameters":{}}'), ToolSpec("read", '{"name":"read"}')]
    with record_llm_request(provider="openai", model="gpt-4o", prompt=prompt, dialect="chat-completions",
                            request_attributes={names.REQUEST_BODY_SHA256: "ab" * 32}, tools=tools,
                            input_messages=[{"role": "user", "content": "hi"}], tracer_provider=tracer_provider,
                            conversation_id="conv-1", message_id="msg-1", attempt=2) as call:
        call.set_response(model="gpt-4o-2024-08-06", response_id="resp-1", finish_reasons=["stop"],
                          input_tokens=120, output_tokens=7, cache_read_tokens=100, cache_creation_tokens=0,
                          output_messages=[{"role": "assistant", "content": "hello"}])
    span = only_span(exporter)
    assert span.name == "chat gpt-4o"
    assert span.kind == trace.SpanKind.CLIENT
    assert span.instrumentation_scope.name == names.TRACER_NAME
    encoded = prompt.text.encode()
    assert dict(span.attributes) == {
        names.GEN_AI_OPERATION_NAME: "chat",
        names.GEN_AI_PROVIDER_NAME: "openai",
        names.GEN_AI_REQUEST_MODEL: "gpt-4o",
        names.SCHEMA_VERSION_ATTR: 1,
        names.REQUEST_DIALECT: "chat-completions",
        names.REQUEST_TOOLS_COUNT: 2,
        names.REQUEST_BODY_SHA256: "ab" * 32,
        names.GEN_AI_CONVERSATION_ID: "conv-1",
        names.MESSAGE_ID: "msg-1",
        names.ATTEMPT: 2,
        names.PROMPT_BYTES: len(encoded),
        names.PROMPT_SHA256: hashlib.sha256(encoded).hexdigest(),
        names.PROMPT_BLOCK_COUNT: 4,
        names.PROMPT_MAPPED: True,
        names.PROMPT_TEMPLATE_NAME: "system",
        names.PROMPT_TEMPLATE_ORIGIN: "builtin",
        names.GEN_AI_RESPONSE_MODEL: "gpt-4o-2024-08-06",
        names.GEN_AI_RESPONSE_ID: "resp-1",
        names.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
        names.GEN_AI_USAGE_INPUT_TOKENS: 120,
        names.GEN_AI_USAGE_OUTPUT_TOKENS: 7,
        names.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 100,
        names.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: 0,
    }
    events = block_events(span)
    assert [event[names.BLOCK_INDEX] for event in events] == [0, 1, 2, 3]
    assert events[1] == {
        names.BLOCK_INDEX: 1, names.BLOCK_NAME: "memory", names.BLOCK_LAYER: "memory",
        names.BLOCK_STABILITY: "session", names.BLOCK_SOURCE: "db:memory",
        names.BLOCK_START: len("You are Prism.\n"), names.BLOCK_END: len("You are Prism.\nAda likes tea."),
        names.BLOCK_SIZE: len("Ada likes tea."),
        names.BLOCK_SHA256: hashlib.sha256(b"Ada likes tea.").hexdigest(),
    }
    for event in events:  # the events alone rebuild a tiling of the prompt bytes
        assert encoded[event[names.BLOCK_START]:event[names.BLOCK_END]] \
            and hashlib.sha256(encoded[event[names.BLOCK_START]:event[names.BLOCK_END]]).hexdigest() \
            == event[names.BLOCK_SHA256]
    assert events[-1][names.BLOCK_END] == len(encoded)
    assert tool_events(span) == [
        {names.TOOL_NAME: "search", names.TOOL_SIZE: len(b'{"name":"search","parameters":{}}'),
         names.TOOL_SHA256: hashlib.sha256(b'{"name":"search","parameters":{}}').hexdigest()},
        {names.TOOL_NAME: "read", names.TOOL_SIZE: 15, names.TOOL_SHA256: hashlib.sha256(b'{"name":"read"}').hexdigest()},
    ]
    assert span.status.status_code == StatusCode.UNSET


def test_content_capture_on_adds_content_variables_and_messages(exporter, tracer_provider, prompt):
    configure_content_capture("SPAN_ONLY")
    with record_llm_request(provider="anthropic", model="claude", prompt=prompt, tracer_provider=tracer_provider,
                            tools=[ToolSpec("search", '{"name":"search"}')],
                            input_messages=[{"role": "user", "content": "héllo"}]) as call:
        call.set_response(output_messages='[{"role":"assistant"}]')
    span = only_span(exporter)
    assert [event[names.BLOCK_CONTENT] for event in block_events(span)] == [b.content for b in prompt.blocks]
    assert all(names.BLOCK_REDACTED not in event for event in block_events(span))
    assert tool_events(span)[0][names.TOOL_CONTENT] == '{"name":"search"}'
    assert json.loads(span.attributes[names.GEN_AI_INPUT_MESSAGES]) == [{"role": "user", "content": "héllo"}]
    assert span.attributes[names.GEN_AI_OUTPUT_MESSAGES] == '[{"role":"assistant"}]'
    assert json.loads(span.attributes[names.PROMPT_TEMPLATE_VARIABLES]) == {
        "memory": "Ada likes tea.", "hint": "use search"}
    # A mapped prompt's text is in its blocks; it is not sent a second time.
    assert names.GEN_AI_SYSTEM_INSTRUCTIONS not in span.attributes


@pytest.mark.parametrize("setting, captured", [("true", True), ("TRUE", True), ("SPAN_AND_EVENT", True),
                                               ("span_only", True), ("false", False), ("NO_CONTENT", False),
                                               ("EVENT_ONLY", False), ("nonsense", False), (None, False)])
def test_environment_variable_decides_capture(monkeypatch, exporter, tracer_provider, prompt, setting, captured):
    if setting is not None:
        monkeypatch.setenv(capture.ENV_CAPTURE_MESSAGE_CONTENT, setting)
    with record_llm_request(provider="openai", model="m", prompt=prompt, tracer_provider=tracer_provider,
                            input_messages="[]"):
        pass
    span = only_span(exporter)
    assert all((names.BLOCK_CONTENT in event) == captured for event in block_events(span))
    assert (names.GEN_AI_INPUT_MESSAGES in span.attributes) == captured


def test_explicit_argument_beats_configuration(exporter, tracer_provider, prompt):
    configure_content_capture(True)
    with record_llm_request(provider="openai", model="m", prompt=prompt, tracer_provider=tracer_provider,
                            capture_content=False):
        pass
    assert all(names.BLOCK_CONTENT not in event for event in block_events(only_span(exporter)))


def test_redaction_masks_content_keeps_original_hashes_and_flags_it(exporter, tracer_provider):
    configure_content_capture(True)
    secret_prompt = build_prompt(["Key: ", block("credentials", f"use {SECRET}", layer="state")])
    with record_llm_request(provider="openai", model="m", prompt=secret_prompt, tracer_provider=tracer_provider,
                            tools=[ToolSpec("call", f'{{"auth":"Bearer {SECRET}"}}')],
                            input_messages=[{"content": SECRET}]):
        pass
    span = only_span(exporter)
    prose, credentials = block_events(span)
    assert SECRET not in credentials[names.BLOCK_CONTENT]
    assert "[REDACTED:api_key]" in credentials[names.BLOCK_CONTENT]
    assert credentials[names.BLOCK_REDACTED] is True
    assert credentials[names.BLOCK_SHA256] == hashlib.sha256(f"use {SECRET}".encode()).hexdigest()
    assert credentials[names.BLOCK_SIZE] == len(f"use {SECRET}")
    assert names.BLOCK_REDACTED not in prose
    assert SECRET not in tool_events(span)[0][names.TOOL_CONTENT]
    assert tool_events(span)[0][names.TOOL_REDACTED] is True
    assert SECRET not in span.attributes[names.GEN_AI_INPUT_MESSAGES]


def test_captured_content_with_lone_surrogates_still_encodes_as_otlp(exporter, tracer_provider):
    # The OTLP protobuf encoder refuses a string with a lone surrogate, and
    # with it the whole batch; such content goes out with U+FFFD instead,
    # flagged like redacted content since it no longer matches its digest.
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    configure_content_capture(True)
    odd = build_prompt(["Read ", block("path", "/data/report-\udcff.txt", layer="state")])
    with record_llm_request(provider="openai", model="m", prompt=odd, tracer_provider=tracer_provider,
                            tools=[ToolSpec("read", '{"name":"read","path":"\udcfe"}')],
                            input_messages=[{"content": "\ud800"}]) as call:
        call.set_response(output_messages="out \udfff")
    span = only_span(exporter)
    encode_spans([span]).SerializeToString()
    prose, path = block_events(span)
    assert path[names.BLOCK_CONTENT] == "/data/report-\ufffd.txt" and path[names.BLOCK_REDACTED] is True
    assert path[names.BLOCK_SHA256] == hashlib.sha256("/data/report-\udcff.txt".encode(
        "utf-8", "surrogatepass")).hexdigest()
    assert names.BLOCK_REDACTED not in prose
    assert tool_events(span)[0][names.TOOL_REDACTED] is True
    assert "\ufffd" in span.attributes[names.GEN_AI_INPUT_MESSAGES]
    assert span.attributes[names.GEN_AI_OUTPUT_MESSAGES] == "out \ufffd"


def test_content_that_is_not_json_is_left_out_and_the_request_still_recorded(exporter, tracer_provider):
    # Jinja2 loops over a dict with tuple keys happily; json.dumps refuses it,
    # and a cycle. Only that content is lost, never the span or the usage.
    from promptprism.instrumentation import render_string

    configure_content_capture(True)
    prompt = render_string("{% for key in table %}{{ key }}{% endfor %} {{ memory }}",
                           [block("memory", "tea", layer="memory")], context={"table": {(1, 2): "a"}})
    cycle: list = []
    cycle.append(cycle)
    before = record.failure_count()
    with record_llm_request(provider="openai", model="m", prompt=prompt, tracer_provider=tracer_provider,
                            input_messages=cycle) as call:
        call.set_response(input_tokens=5, output_tokens=2, output_messages=cycle)
    span = only_span(exporter)
    assert span.attributes[names.PROMPT_BLOCK_COUNT] == len(prompt.blocks) == len(block_events(span))
    assert [event[names.BLOCK_CONTENT] for event in block_events(span)] == [b.content for b in prompt.blocks]
    assert (span.attributes[names.GEN_AI_USAGE_INPUT_TOKENS], span.attributes[names.GEN_AI_USAGE_OUTPUT_TOKENS]) == (5, 2)
    for key in (names.PROMPT_TEMPLATE_VARIABLES, names.GEN_AI_INPUT_MESSAGES, names.GEN_AI_OUTPUT_MESSAGES):
        assert key not in span.attributes
    assert record.failure_count() >= before + 3


def test_a_failing_redactor_drops_content_and_never_leaks_it(exporter, tracer_provider, prompt):
    configure_content_capture(True)

    def broken(text):
        raise RuntimeError("redactor bug")

    set_redactor(broken)
    before = record.failure_count()
    with record_llm_request(provider="openai", model="m", prompt=prompt, tracer_provider=tracer_provider,
                            input_messages="secret"):
        pass
    span = only_span(exporter)
    assert len(block_events(span)) == len(prompt.blocks)
    assert all(names.BLOCK_CONTENT not in event for event in block_events(span))
    assert names.GEN_AI_INPUT_MESSAGES not in span.attributes
    assert record.failure_count() > before


def test_text_prompt_uses_the_rendered_map_or_is_unmapped_not_rendered(exporter, tracer_provider, prompt):
    configure_content_capture(True)
    with record_llm_request(provider="openai", model="m", prompt=prompt.text, tracer_provider=tracer_provider):
        pass
    with record_llm_request(provider="openai", model="m", prompt="Typed by hand", tracer_provider=tracer_provider):
        pass
    looked_up, by_hand = exporter.get_finished_spans()
    assert looked_up.attributes[names.PROMPT_BLOCK_COUNT] == len(prompt.blocks) == len(block_events(looked_up))
    assert by_hand.attributes[names.PROMPT_MAPPED] is False
    assert by_hand.attributes[names.PROMPT_UNMAPPED_REASON] == names.UNMAPPED_NOT_RENDERED
    assert by_hand.attributes[names.PROMPT_BLOCK_COUNT] == 0 and block_events(by_hand) == []
    assert by_hand.attributes[names.PROMPT_SHA256] == hashlib.sha256(b"Typed by hand").hexdigest()
    assert json.loads(by_hand.attributes[names.GEN_AI_SYSTEM_INSTRUCTIONS]) == [
        {"type": "text", "content": "Typed by hand"}]


def test_the_applications_exception_propagates_and_marks_the_span(exporter, tracer_provider, prompt):
    class ProviderDown(Exception):
        pass

    with pytest.raises(ProviderDown, match="503"):
        with record_llm_request(provider="openai", model="m", prompt=prompt, tracer_provider=tracer_provider):
            raise ProviderDown("503 from upstream")
    span = only_span(exporter)
    assert span.status.status_code == StatusCode.ERROR
    assert "503" in span.status.description
    assert span.attributes[names.ERROR_TYPE].endswith("ProviderDown")


def test_span_is_current_inside_the_block(exporter, tracer_provider):
    with record_llm_request(provider="openai", model="m", tracer_provider=tracer_provider) as call:
        assert trace.get_current_span() is call.span
    assert trace.get_current_span() is not call.span


def test_recording_problems_never_reach_the_application(exporter, prompt, caplog):
    class BrokenProvider:
        def get_tracer(self, *args, **kwargs):
            raise RuntimeError("tracer provider exploded")

    before = record.failure_count()
    with caplog.at_level(logging.WARNING, logger=record.__name__):
        with record_llm_request(provider="openai", model="m", prompt=prompt, tracer_provider=BrokenProvider()) as call:
            call.set_response(input_tokens=1)
            result = "the app ran"
    assert result == "the app ran"
    assert record.failure_count() == before + 1
    # Bad values from the app's side are counted, not raised, too.
    with record_llm_request(provider="openai", model="m", tracer_provider=BrokenProvider(), attempt="not a number"):
        pass
    assert record.failure_count() == before + 2


def test_failure_log_is_rate_limited(caplog, monkeypatch):
    monkeypatch.setattr(record, "_last_log_time", float("-inf"))
    with caplog.at_level(logging.WARNING, logger=record.__name__):
        for _ in range(50):
            record.report_failure("something broke")
    assert len([r for r in caplog.records if "something broke" in r.getMessage()]) == 1


def test_correlation_context_and_explicit_arguments(exporter, tracer_provider):
    with correlation(conversation_id="c-outer", process_kind="worker", run_id="run-9", run_mode="batch"):
        with correlation(conversation_id="c-inner", record_id="rec-1"):
            with record_llm_request(provider="openai", model="m", tracer_provider=tracer_provider,
                                    process_id="worker-3", run_mode="online"):
                pass
        with record_llm_request(provider="openai", model="m", tracer_provider=tracer_provider):
            pass
    with record_llm_request(provider="openai", model="m", tracer_provider=tracer_provider):
        pass
    inner, outer, outside = (dict(span.attributes) for span in exporter.get_finished_spans())
    assert inner[names.GEN_AI_CONVERSATION_ID] == "c-inner"
    assert inner[names.RECORD_ID] == "rec-1"
    assert inner[names.PROCESS_KIND] == "worker" and inner[names.PROCESS_ID] == "worker-3"
    assert inner[names.RUN_ID] == "run-9" and inner[names.RUN_MODE] == "online"
    assert outer[names.GEN_AI_CONVERSATION_ID] == "c-outer" and names.RECORD_ID not in outer
    assert names.GEN_AI_CONVERSATION_ID not in outside and names.RUN_ID not in outside


def test_default_sdk_limits_would_drop_blocks_and_that_is_reported(exporter):
    provider = TracerProvider()  # the SDK default: 128 events
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    big = build_prompt([block(f"b{number}", f"{number};", layer="x") for number in range(200)])
    before = record.failure_count()
    with record_llm_request(provider="openai", model="m", prompt=big, tracer_provider=provider):
        pass
    span = only_span(exporter)
    assert span.dropped_events == 200 - 128
    assert span.attributes[names.PROMPT_BLOCK_COUNT] == 200  # the collector sees the shortfall
    assert record.failure_count() == before + 1


def test_prompt_tracer_provider_keeps_a_thousand_blocks(exporter, tracer_provider):
    big = build_prompt([block(f"b{number}", f"{number};", layer="x") for number in range(1500)])
    with record_llm_request(provider="openai", model="m", prompt=big, tracer_provider=tracer_provider,
                            tools=[ToolSpec(f"t{n}", "{}") for n in range(100)]):
        pass
    span = only_span(exporter)
    assert span.dropped_events == 0
    assert [event[names.BLOCK_INDEX] for event in block_events(span)] == list(range(1500))
    assert len(tool_events(span)) == 100


# --- start_llm_request: a request that outlives a with block -------------------------------

DAY_NS = 24 * 3600 * 10**9


def test_started_request_is_recorded_once_when_ended_and_is_not_current(exporter, tracer_provider, prompt):
    call = record.start_llm_request(provider="openai", model="m", prompt=prompt, tracer_provider=tracer_provider)
    assert trace.get_current_span() is not call.span
    assert exporter.get_finished_spans() == ()
    with call.current():
        assert trace.get_current_span() is call.span
    assert trace.get_current_span() is not call.span
    call.set_response(output_tokens=3)
    assert not call.ended
    call.end()
    call.end(ValueError("late"))  # idempotent: neither a second span nor a late error
    assert call.ended
    span = only_span(exporter)
    assert span.attributes[names.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert len(block_events(span)) == len(prompt.blocks)
    assert span.status.status_code == StatusCode.UNSET and names.ERROR_TYPE not in span.attributes


class CountingSpan:
    """Wraps a span and counts what reaches it (the SDK itself would ignore a second end)."""

    def __init__(self, inner):
        self.inner = inner
        self.ends = 0
        self.statuses = 0

    def end(self, end_time=None):
        self.ends += 1
        self.inner.end(end_time)

    def set_status(self, status, description=None):
        self.statuses += 1
        self.inner.set_status(status, description)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_end_from_many_threads_reaches_the_span_once(exporter, tracer_provider):
    import threading

    call = record.start_llm_request(provider="openai", model="m", tracer_provider=tracer_provider)
    call.span = counting = CountingSpan(call.span)
    barrier = threading.Barrier(8)

    def end_with_error():
        barrier.wait()
        call.end(RuntimeError("one of many"))

    threads = [threading.Thread(target=end_with_error) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    call.end()
    assert (counting.ends, counting.statuses) == (1, 1)
    assert len(exporter.get_finished_spans()) == 1


def test_end_with_an_exception_marks_the_span_and_cancellation_does_not(exporter, tracer_provider):
    import asyncio

    failed = record.start_llm_request(provider="openai", model="m", tracer_provider=tracer_provider)
    failed.end(ConnectionError("reset by peer"))
    cancelled = record.start_llm_request(provider="openai", model="m", tracer_provider=tracer_provider)
    cancelled.end(asyncio.CancelledError())
    first, second = exporter.get_finished_spans()
    assert first.status.status_code == StatusCode.ERROR and "reset by peer" in first.status.description
    assert first.attributes[names.ERROR_TYPE] == "ConnectionError"
    assert second.status.status_code == StatusCode.UNSET and names.ERROR_TYPE not in second.attributes


def test_start_time_backdates_the_span_and_its_events_and_keeps_the_real_duration(exporter, tracer_provider,
                                                                                 prompt):
    start_time = time.time_ns() - 3 * DAY_NS
    call = record.start_llm_request(provider="openai", model="m", prompt=prompt, start_time=start_time,
                                    tools=[ToolSpec("search", "{}")], tracer_provider=tracer_provider)
    time.sleep(0.01)
    call.end()
    span = only_span(exporter)
    assert span.start_time == start_time
    assert {event.timestamp for event in span.events} == {start_time}
    assert len(span.events) == len(prompt.blocks) + 1
    assert 10_000_000 <= span.end_time - start_time < 10 * 10**9


def test_explicit_end_time_and_start_time_through_the_context_manager(exporter, tracer_provider):
    start_time = time.time_ns() - DAY_NS
    with record_llm_request(provider="openai", model="m", start_time=start_time, tracer_provider=tracer_provider):
        pass
    explicit = record.start_llm_request(provider="openai", model="m", start_time=start_time,
                                        tracer_provider=tracer_provider)
    explicit.end(end_time=start_time + 5)
    wrapped, ended = exporter.get_finished_spans()
    assert wrapped.start_time == start_time and wrapped.end_time - start_time < 10 * 10**9
    assert (ended.start_time, ended.end_time) == (start_time, start_time + 5)


def test_a_request_that_could_not_start_can_still_be_used_and_ended(prompt):
    class BrokenProvider:
        def get_tracer(self, *args, **kwargs):
            raise RuntimeError("tracer provider exploded")

    before = record.failure_count()
    call = record.start_llm_request(provider="openai", model="m", prompt=prompt, tracer_provider=BrokenProvider())
    with call.current():
        call.set_response(input_tokens=1)
    call.end(RuntimeError("the app's own error"))
    call.end()
    assert record.failure_count() == before + 1


def test_content_over_the_cap_is_named_on_the_span_and_in_one_report(exporter, tracer_provider, caplog,
                                                                      monkeypatch):
    monkeypatch.setattr(record, "MAX_CONTENT_CHARACTERS", 1000)
    monkeypatch.setattr(record, "_last_log_time", -1e9)  # the rate limit starts afresh
    configure_content_capture(True)
    big = "x" * 2000
    prompt = build_prompt(["Intro. ", block("memory", big, layer="memory"), " Outro."])
    with caplog.at_level(logging.WARNING):
        with record_llm_request(provider="openai", model="m", prompt=prompt, tracer_provider=tracer_provider,
                                tools=[ToolSpec("lookup", json.dumps({"name": "lookup", "pad": big}))]) as call:
            call.set_response(output_messages=[{"role": "assistant", "parts": [{"type": "text", "content": big}]}])
    span = only_span(exporter)
    assert span.attributes[names.CONTENT_OMITTED] == (
        "template variables", "block memory", "tool lookup", "output messages")
    memory = next(event for event in block_events(span) if event[names.BLOCK_NAME] == "memory")
    assert names.BLOCK_CONTENT not in memory and memory[names.BLOCK_SIZE] == 2000  # structure is kept
    reports = [record_.getMessage() for record_ in caplog.records if "not captured" in record_.getMessage()]
    assert "block memory, tool lookup" in reports[0]
