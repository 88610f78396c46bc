"""Real openai/anthropic clients against the local fake provider: one span per request.

The span is the one README "The request span on the wire" describes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid

import anthropic
import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

from promptprism.instrumentation import TemplateCatalog, block, correlation, failure_count
from promptprism.instrumentation.providers import (
    instrument_anthropic,
    instrument_openai,
    uninstrument_openai,
)
from promptprism.instrumentation.providers import _transport as transport
from promptprism.wire import names

SYSTEM_TEMPLATE = "You are {{ identity }}.\n\n## Memory\n{{ memory }}\n\n## Rules\nBe brief.\n"
CONTEXT_WINDOW = 50_000


def rendered_prompt(memory: str = "The user prefers tea."):
    catalog = TemplateCatalog({"system": SYSTEM_TEMPLATE})
    return catalog.render("system", [
        block("identity", "Ada, a careful assistant", layer="identity", stability="static", source="config"),
        # A unique value per test: the prompt registry is process-wide.
        block("memory", f"{memory} ({uuid.uuid4().hex})", layer="memory", stability="session", source="store"),
    ])


# --- one call per dialect, sync or async, streamed or not ----------------------------------


def make_client(dialect: str, fake_provider, spans, *, is_async: bool, **options):
    if dialect == names.DIALECT_ANTHROPIC_MESSAGES:
        client_class = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        client = client_class(base_url=fake_provider.anthropic_base_url, api_key="test", max_retries=0)
        return instrument_anthropic(client, tracer_provider=spans.tracer_provider, context_window=CONTEXT_WINDOW,
                                    **options)
    client_class = openai.AsyncOpenAI if is_async else openai.OpenAI
    client = client_class(base_url=fake_provider.openai_base_url, api_key="test", max_retries=0)
    return instrument_openai(client, tracer_provider=spans.tracer_provider, context_window=CONTEXT_WINDOW, **options)


def request_arguments(dialect: str, system_text: str | None, *, stream: bool, model: str | None = None,
                      with_tools: bool = True) -> tuple[str, dict]:
    """(client method path, keyword arguments) for one request with the system prompt in its place."""
    if dialect == names.DIALECT_CHAT_COMPLETIONS:
        messages = ([{"role": "system", "content": system_text}] if system_text is not None else []) + [
            {"role": "user", "content": "What is on my list today?"}]
        arguments = {"model": model or "gpt-4o", "messages": messages}
        if with_tools:
            arguments["tools"] = [{"type": "function", "function": {
                "name": "read_list", "description": "Read the list", "parameters": {"type": "object"}}}]
        if stream:
            arguments["stream_options"] = {"include_usage": True}
        return "chat.completions.create", arguments
    if dialect == names.DIALECT_OPENAI_RESPONSES:
        arguments = {"model": model or "gpt-5", "input": [{"role": "user", "content": "What is on my list today?"}],
                     "reasoning": {"effort": "low"}}
        if system_text is not None:
            arguments["instructions"] = system_text
        if with_tools:
            arguments["tools"] = [{"type": "function", "name": "read_list", "parameters": {"type": "object"}}]
        return "responses.create", arguments
    arguments = {"model": model or "claude-test-model", "max_tokens": 512,
                 "messages": [{"role": "user", "content": "What is on my list today?"}]}
    if system_text is not None:
        arguments["system"] = system_text
    if with_tools:
        arguments["tools"] = [{"name": "read_list", "description": "Read the list",
                               "input_schema": {"type": "object"}}]
    return "messages.create", arguments


def usage_of(dialect: str, usage) -> tuple[int, int]:
    """(input tokens incl. cached, output tokens) as the SDK reported them."""
    if dialect == names.DIALECT_CHAT_COMPLETIONS:
        return usage.prompt_tokens, usage.completion_tokens
    if dialect == names.DIALECT_OPENAI_RESPONSES:
        return usage.input_tokens, usage.output_tokens
    total = usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
    return total, usage.output_tokens


def _method(client, path: str):
    target = client
    for part in path.split("."):
        target = getattr(target, part)
    return target


def _stream_usage(dialect: str, items) -> tuple[int, int] | None:
    usage = None
    for item in items:
        if dialect == names.DIALECT_CHAT_COMPLETIONS and getattr(item, "usage", None):
            usage = usage_of(dialect, item.usage)
        elif dialect == names.DIALECT_OPENAI_RESPONSES and item.type == "response.completed":
            usage = usage_of(dialect, item.response.usage)
        elif dialect == names.DIALECT_ANTHROPIC_MESSAGES and item.type == "message_start":
            usage = usage_of(dialect, item.message.usage)
        elif dialect == names.DIALECT_ANTHROPIC_MESSAGES and item.type == "message_delta":
            usage = (usage[0], item.usage.output_tokens)
    return usage


def send(client, dialect: str, arguments: tuple[str, dict], *, stream: bool, is_async: bool):
    """Make the call like an app would; returns the usage the SDK saw."""
    path, keywords = arguments
    method = _method(client, path)
    if not is_async:
        if not stream:
            return usage_of(dialect, method(**keywords).usage)
        return _stream_usage(dialect, list(method(**keywords, stream=True)))

    async def run():
        if not stream:
            return usage_of(dialect, (await method(**keywords)).usage)
        items = [item async for item in await method(**keywords, stream=True)]
        return _stream_usage(dialect, items)

    return asyncio.run(run())


def canonical_sha256(raw: bytes) -> str:
    body = json.loads(raw)
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


# --- the matrix -------------------------------------------------------------------------------

MATRIX = [(dialect, is_async, stream) for dialect in names.DIALECTS for is_async in (False, True)
          for stream in (False, True)]


@pytest.mark.parametrize("dialect", names.DIALECTS)
def test_the_manifest_of_what_a_real_client_sent_fits_its_json_schema(fake_provider, spans, dialect):
    import jsonschema

    from promptprism.instrumentation.manifest import build_manifest, json_schema

    client = make_client(dialect, fake_provider, spans, is_async=False)
    send(client, dialect, request_arguments(dialect, rendered_prompt().text, stream=True), stream=True, is_async=False)
    body = json.loads(fake_provider.received[-1].body)
    manifest = build_manifest(body, dialect, context_window=CONTEXT_WINDOW, endpoint=fake_provider.url)
    jsonschema.validate(manifest.to_json(), json_schema(), cls=jsonschema.Draft202012Validator)
    # The same manifest the wrapper put on the span.
    attributes = dict(spans.only().attributes)
    assert {key: attributes[key] for key in manifest.attributes()} == manifest.attributes()


@pytest.mark.parametrize("dialect,is_async,stream", MATRIX,
                         ids=[f"{d}-{'async' if a else 'sync'}-{'stream' if s else 'plain'}" for d, a, s in MATRIX])
def test_each_dialect_sync_async_stream_plain_records_one_span(fake_provider, spans, dialect, is_async, stream):
    prompt = rendered_prompt()
    client = make_client(dialect, fake_provider, spans, is_async=is_async)
    sdk_usage = send(client, dialect, request_arguments(dialect, prompt.text, stream=stream),
                     stream=stream, is_async=is_async)

    span = spans.only()
    attributes = dict(span.attributes)
    received = fake_provider.received[-1]
    expected_provider = names.PROVIDER_ANTHROPIC if dialect == names.DIALECT_ANTHROPIC_MESSAGES else names.PROVIDER_OPENAI
    assert span.kind == trace.SpanKind.CLIENT
    assert attributes[names.GEN_AI_PROVIDER_NAME] == expected_provider
    assert attributes[names.GEN_AI_OPERATION_NAME] == names.OPERATION_CHAT
    assert attributes[names.REQUEST_DIALECT] == dialect
    assert attributes[names.GEN_AI_REQUEST_STREAM] is stream

    # The manifest describes exactly the bytes that went out.
    assert attributes[names.REQUEST_BODY_SHA256] == canonical_sha256(received.body)
    total = attributes[names.REQUEST_BYTES_TOTAL]
    assert total == len(json.dumps(json.loads(received.body), sort_keys=True, separators=(",", ":"),
                                   ensure_ascii=False).encode())
    assert sum(attributes[key] for key in (names.REQUEST_BYTES_SYSTEM, names.REQUEST_BYTES_TOOLS,
                                           names.REQUEST_BYTES_MESSAGES, names.REQUEST_BYTES_FRAMING)) == total
    assert attributes[names.REQUEST_BYTES_SYSTEM] >= len(prompt.text.encode())
    assert attributes[names.REQUEST_TOOLS_COUNT] == 1
    assert attributes[names.REQUEST_CONTEXT_WINDOW] == CONTEXT_WINDOW
    assert attributes[names.REQUEST_HEADROOM_TOKENS] < CONTEXT_WINDOW
    assert attributes[names.REQUEST_MANIFEST_SCHEMA_VERSION] == 1

    # The block map of the prompt the app rendered.
    assert attributes[names.PROMPT_MAPPED] is True
    assert attributes[names.PROMPT_SHA256] == prompt.sha256
    assert attributes[names.PROMPT_TEMPLATE_NAME] == "system"
    block_events = [event for event in span.events if event.name == names.EVENT_PROMPT_BLOCK]
    assert attributes[names.PROMPT_BLOCK_COUNT] == len(block_events) == len(prompt.blocks)
    assert [event.attributes[names.BLOCK_NAME] for event in block_events] == [b.name for b in prompt.blocks]
    tool_events = [event for event in span.events if event.name == names.EVENT_TOOL_DEFINITION]
    assert [event.attributes[names.TOOL_NAME] for event in tool_events] == ["read_list"]

    # Usage as the SDK saw it, recorded once the response (or stream) ended.
    assert sdk_usage is not None
    assert (attributes[names.GEN_AI_USAGE_INPUT_TOKENS], attributes[names.GEN_AI_USAGE_OUTPUT_TOKENS]) == sdk_usage
    assert names.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS in attributes
    assert attributes[names.GEN_AI_RESPONSE_FINISH_REASONS]
    assert attributes[names.GEN_AI_RESPONSE_ID]
    assert span.status.status_code == StatusCode.UNSET


# --- system prompt shapes -----------------------------------------------------------------


@pytest.mark.parametrize("dialect,shape", [
    (names.DIALECT_CHAT_COMPLETIONS, "developer message"),
    (names.DIALECT_OPENAI_RESPONSES, "leading system item"),
    (names.DIALECT_ANTHROPIC_MESSAGES, "list of text blocks"),
])
def test_second_system_prompt_shape_is_mapped_too(fake_provider, spans, dialect, shape):
    prompt = rendered_prompt()
    client = make_client(dialect, fake_provider, spans, is_async=False)
    if dialect == names.DIALECT_CHAT_COMPLETIONS:
        client.chat.completions.create(model="o3", messages=[
            {"role": "developer", "content": [{"type": "text", "text": prompt.text}]},
            {"role": "user", "content": "hi"}])
    elif dialect == names.DIALECT_OPENAI_RESPONSES:
        client.responses.create(model="gpt-5", input=[
            {"role": "system", "content": prompt.text}, {"role": "user", "content": "hi"}])
    else:
        # Split for cache_control at a block boundary: the joined text is the rendered prompt.
        first, second = prompt.text[:prompt.blocks[1].end], prompt.text[prompt.blocks[1].end:]
        client.messages.create(model="claude", max_tokens=64, messages=[{"role": "user", "content": "hi"}], system=[
            {"type": "text", "text": first, "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": second}])
    attributes = dict(spans.only().attributes)
    assert attributes[names.PROMPT_MAPPED] is True, shape
    assert attributes[names.PROMPT_SHA256] == prompt.sha256


@pytest.mark.parametrize("dialect", names.DIALECTS)
def test_text_not_rendered_through_promptprism_is_unmapped(fake_provider, spans, dialect):
    client = make_client(dialect, fake_provider, spans, is_async=False)
    text = f"A hand-written system prompt {uuid.uuid4().hex}."
    send(client, dialect, request_arguments(dialect, text, stream=False), stream=False, is_async=False)
    attributes = dict(spans.only().attributes)
    assert attributes[names.PROMPT_MAPPED] is False
    assert attributes[names.PROMPT_UNMAPPED_REASON] == names.UNMAPPED_NOT_RENDERED
    assert attributes[names.PROMPT_BYTES] == len(text.encode())


def test_no_system_prompt_records_the_request_without_prompt_attributes(fake_provider, spans):
    client = make_client(names.DIALECT_CHAT_COMPLETIONS, fake_provider, spans, is_async=False)
    send(client, names.DIALECT_CHAT_COMPLETIONS, request_arguments(names.DIALECT_CHAT_COMPLETIONS, None, stream=False),
         stream=False, is_async=False)
    attributes = dict(spans.only().attributes)
    assert attributes[names.REQUEST_BYTES_SYSTEM] == 0
    assert names.PROMPT_SHA256 not in attributes


# --- errors, streams that break, and the app's own context ----------------------------------


@pytest.mark.parametrize("is_async", [False, True])
def test_broken_stream_keeps_what_arrived_and_marks_the_error(fake_provider, spans, is_async):
    client = make_client(names.DIALECT_ANTHROPIC_MESSAGES, fake_provider, spans, is_async=is_async)
    arguments = request_arguments(names.DIALECT_ANTHROPIC_MESSAGES, "sys", stream=True, model="claude-abort-stream")
    # The SDK lets the transport's error through mid-stream (not an APIError).
    with pytest.raises(Exception, match="incomplete chunked read|peer closed"):
        send(client, names.DIALECT_ANTHROPIC_MESSAGES, arguments, stream=True, is_async=is_async)
    span = spans.only()
    attributes = dict(span.attributes)
    assert span.status.status_code == StatusCode.ERROR
    assert names.ERROR_TYPE in attributes
    # message_start arrived before the break: its input usage is on the span.
    assert attributes[names.GEN_AI_USAGE_INPUT_TOKENS] > 0
    assert attributes[names.GEN_AI_RESPONSE_ID].startswith("msg_")


HOSTILE_MODEL = "gpt-fail-400-\x1b[31m<script>alert(1)</script>"


def test_provider_error_text_is_allowlisted_on_the_span(fake_provider, spans):
    client = make_client(names.DIALECT_CHAT_COMPLETIONS, fake_provider, spans, is_async=False)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=HOSTILE_MODEL, messages=[{"role": "user", "content": "hi"}])
    span = spans.only()
    assert span.status.status_code == StatusCode.ERROR
    assert dict(span.attributes)[names.ERROR_TYPE] == "400"
    description = span.status.description
    assert "HTTP 400" in description and "does not exist" in description
    assert "\x1b" not in description and "<script>" not in description


def test_requests_that_are_not_llm_calls_pass_through_unrecorded(fake_provider, spans):
    client = make_client(names.DIALECT_CHAT_COMPLETIONS, fake_provider, spans, is_async=False)
    with pytest.raises(openai.NotFoundError):
        client.models.list()
    anthropic_client = make_client(names.DIALECT_ANTHROPIC_MESSAGES, fake_provider, spans, is_async=False)
    with pytest.raises(anthropic.NotFoundError):
        anthropic_client.messages.count_tokens(model="claude", messages=[{"role": "user", "content": "hi"}])
    assert spans.finished() == []


def test_recording_failures_never_reach_the_app(fake_provider, spans, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("manifest exploded")

    monkeypatch.setattr(transport, "build_manifest", broken)
    before = failure_count()
    client = make_client(names.DIALECT_CHAT_COMPLETIONS, fake_provider, spans, is_async=False)
    response = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert response.choices[0].message.content
    assert failure_count() == before + 1
    assert spans.finished() == []


def test_a_request_made_inside_the_sdks_export_path_is_not_recorded(fake_provider, spans):
    """The SDK's BatchSpanProcessor sets OpenTelemetry's suppression key around export: a provider
    call made from there (an exporter's own traffic) is not recorded, and one made outside is."""
    client = make_client(names.DIALECT_CHAT_COMPLETIONS, fake_provider, spans, is_async=False)
    answers = []

    class CallingExporter(SpanExporter):
        def export(self, batch):
            answers.append(client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}]))
            return SpanExportResult.SUCCESS

    other_provider = TracerProvider()
    other_provider.add_span_processor(BatchSpanProcessor(CallingExporter()))
    other_provider.get_tracer("app").start_span("work").end()
    assert other_provider.force_flush()
    other_provider.shutdown()
    assert len(answers) == 1 and answers[0].choices[0].message.content  # the call went through
    assert spans.finished() == []
    # Control: a provider call outside the export path is recorded.
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert len(spans.finished()) == 1


def test_opentelemetry_instrumentations_suppression_is_honoured(fake_provider, spans):
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    client = make_client(names.DIALECT_CHAT_COMPLETIONS, fake_provider, spans, is_async=False)
    with suppress_instrumentation():
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert spans.finished() == []


def test_span_nests_under_the_app_span_and_leaves_the_app_context_alone(fake_provider, spans):
    client = make_client(names.DIALECT_CHAT_COMPLETIONS, fake_provider, spans, is_async=False)
    tracer = spans.tracer_provider.get_tracer("app")
    with correlation(conversation_id="conv-7", process_kind="worker"):
        with tracer.start_as_current_span("turn") as turn:
            stream = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}],
                                                    stream=True)
            # Mid-stream, the app's span is still the current one.
            assert trace.get_current_span() is turn
    # The stream finishes outside both blocks; the span keeps what it started with.
    for _ in stream:
        pass
    request = next(span for span in spans.finished() if span.name.startswith("chat"))
    assert request.parent.span_id == turn.get_span_context().span_id
    assert dict(request.attributes)[names.GEN_AI_CONVERSATION_ID] == "conv-7"
    assert dict(request.attributes)[names.PROCESS_KIND] == "worker"


@pytest.mark.parametrize("dialect", names.DIALECTS)
def test_content_capture_records_input_and_streamed_output(fake_provider, spans, dialect):
    client = make_client(dialect, fake_provider, spans, is_async=False, capture_content=True)
    send(client, dialect, request_arguments(dialect, rendered_prompt().text, stream=True, with_tools=False),
         stream=True, is_async=False)
    attributes = dict(spans.only().attributes)
    output = json.loads(attributes[names.GEN_AI_OUTPUT_MESSAGES])
    assert output[0]["role"] == "assistant"
    assert output[0]["parts"][0]["content"].startswith("Understood.")
    input_messages = json.loads(attributes[names.GEN_AI_INPUT_MESSAGES])
    assert input_messages == [{"role": "user", "parts": [{"type": "text", "content": "What is on my list today?"}]}]


def test_tool_call_answers_are_recorded(fake_provider, spans):
    client = make_client(names.DIALECT_CHAT_COMPLETIONS, fake_provider, spans, is_async=False, capture_content=True)
    path, arguments = request_arguments(names.DIALECT_CHAT_COMPLETIONS, None, stream=True)
    for _ in client.chat.completions.create(**arguments, tool_choice="required", stream=True):
        pass
    attributes = dict(spans.only().attributes)
    assert attributes[names.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    output = json.loads(attributes[names.GEN_AI_OUTPUT_MESSAGES])
    assert output[0]["parts"][0]["name"] == "read_list"


def test_uninstrument_and_copies(fake_provider, spans):
    client = make_client(names.DIALECT_CHAT_COMPLETIONS, fake_provider, spans, is_async=False)
    client.with_options(timeout=5).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "a"}])
    assert len(spans.finished()) == 1  # a copy shares the instrumented transport
    assert uninstrument_openai(client) is True
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "b"}])
    assert len(spans.finished()) == 1


def test_instrumenting_something_else_is_a_clear_error():
    with pytest.raises(TypeError):
        instrument_openai(object())


@pytest.mark.parametrize("dialect,stream", [(dialect, stream) for dialect in names.DIALECTS for stream in (False, True)])
def test_gzip_compressed_answers_are_read_like_plain_ones(fake_provider, spans, dialect, stream):
    client = make_client(dialect, fake_provider, spans, is_async=False)
    path, arguments = request_arguments(dialect, rendered_prompt().text, stream=stream)
    arguments["extra_headers"] = {"x-fake-gzip": "1"}
    sdk_usage = send(client, dialect, (path, arguments), stream=stream, is_async=False)
    attributes = dict(spans.only().attributes)
    assert (attributes[names.GEN_AI_USAGE_INPUT_TOKENS], attributes[names.GEN_AI_USAGE_OUTPUT_TOKENS]) == sdk_usage
    assert attributes[names.GEN_AI_RESPONSE_FINISH_REASONS]


@pytest.mark.parametrize("dialect", [names.DIALECT_CHAT_COMPLETIONS, names.DIALECT_ANTHROPIC_MESSAGES])
def test_clock_backdates_requests_and_a_raising_clock_falls_back_to_now(fake_provider, spans, dialect):
    import time

    week_ago = time.time_ns() - 7 * 24 * 3600 * 10**9
    client = make_client(dialect, fake_provider, spans, is_async=False, clock=lambda: week_ago)
    send(client, dialect, request_arguments(dialect, rendered_prompt().text, stream=True), stream=True, is_async=False)
    span = spans.only()
    assert span.start_time == week_ago
    assert {event.timestamp for event in span.events} == {week_ago}
    assert 0 < span.end_time - week_ago < 60 * 10**9  # the real duration, not a week

    def broken_clock() -> int:
        raise RuntimeError("clock stopped")

    before = failure_count()
    client = make_client(dialect, fake_provider, spans, is_async=False, clock=broken_clock)
    started = time.time_ns()
    send(client, dialect, request_arguments(dialect, rendered_prompt().text, stream=False), stream=False,
         is_async=False)
    assert failure_count() == before + 1
    assert spans.exporter.get_finished_spans()[-1].start_time >= started


def test_a_rendered_part_beside_hand_written_text_records_the_whole_prompt_unmapped(fake_provider, spans):
    """A map of one part would understate the system prompt: the whole text is recorded, unmapped."""
    prompt = rendered_prompt()
    extra = f"Hand-written addendum {uuid.uuid4().hex}."
    client = make_client(names.DIALECT_ANTHROPIC_MESSAGES, fake_provider, spans, is_async=False)
    client.messages.create(model="claude", max_tokens=64, messages=[{"role": "user", "content": "hi"}], system=[
        {"type": "text", "text": prompt.text, "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": extra}])
    attributes = dict(spans.only().attributes)
    assert attributes[names.PROMPT_MAPPED] is False
    assert attributes[names.PROMPT_UNMAPPED_REASON] == names.UNMAPPED_NOT_RENDERED
    assert attributes[names.PROMPT_BYTES] == len((prompt.text + extra).encode())
