"""Other instrumentations' conventions on single spans: provider and operation names, which spans are
requests, the older OpenLLMetry forms (none of the captured versions still sends them), and when two
records are one provider call. The captured exports of the real packages are replayed in
tests/collector/peers."""

from __future__ import annotations

import json

import pytest

from promptprism.collector.conventions.providers import operation_name, provider_name
from promptprism.collector.otlp.model import DecodedSpan
from promptprism.collector.write.reassemble import is_request, reassemble

TRACE = "0af7651916cd43dd8448eb211c80319c"


def span(attributes: dict, *, span_id="00f067aa0ba902b7", parent="", name="chat gpt-4o", scope="peer",
         start=1_000, end=2_000) -> DecodedSpan:
    return DecodedSpan(trace_id=TRACE, span_id=span_id, parent_span_id=parent, trace_state="", name=name,
                       kind="Client", start_time_ns=1_700_000_000_000_000_000 + start,
                       end_time_ns=1_700_000_000_000_000_000 + end, status_code="Unset", status_message="",
                       service="app", resource_attributes={"service.name": "app"}, scope_name=scope,
                       scope_version="1", attributes=attributes, events=[], links=[])


@pytest.mark.parametrize("spelled,expected", [
    ("openai", "openai"), ("openai.chat", "openai"), ("openai.responses", "openai"), ("OpenAI", "openai"),
    ("Anthropic", "anthropic"), ("anthropic.messages", "anthropic"), ("az.ai.openai", "azure.ai.openai"),
    ("azure", "azure.ai.openai"), ("azure.chat", "azure.ai.openai"), ("az.ai.inference", "azure.ai.inference"),
    ("aws.bedrock", "aws.bedrock"), ("amazon-bedrock", "aws.bedrock"), ("vertex_ai", "gcp.vertex_ai"),
    ("google.vertex.chat", "gcp.vertex_ai"), ("gemini", "gcp.gemini"), ("mistralai", "mistral_ai"),
    ("xai.chat", "x_ai"), ("watsonx.ai", "ibm.watsonx.ai"), ("groq.chat", "groq"), ("my-llm", "my-llm"),
    ("", ""), (None, ""), (3, ""),
])
def test_provider_names_take_the_well_known_spelling(spelled, expected):
    assert provider_name(spelled) == expected


def test_operation_names():
    assert [operation_name(name) for name in ("chat", "completion", "embedding", "Chat", "", None)] == [
        "chat", "text_completion", "embeddings", "chat", "", ""]


@pytest.mark.parametrize("attributes,name,scope,expected", [
    ({"openinference.span.kind": "LLM", "llm.model_name": "m"}, "ChatCompletion", "oi", True),
    ({"openinference.span.kind": "CHAIN", "input.value": "x", "llm.model_name": "m"}, "chain", "oi", False),
    ({"openinference.span.kind": "AGENT", "gen_ai.request.model": "m"}, "agent", "oi", False),
    ({"ai.operationId": "ai.generateText.doGenerate", "gen_ai.request.model": "m"}, "x", "ai", True),
    ({"ai.operationId": "ai.generateText", "ai.usage.inputTokens": 5, "ai.prompt": "{}"}, "x", "ai", False),
    ({"ai.operationId": "ai.toolCall", "ai.toolCall.name": "t"}, "x", "ai", False),
    ({"traceloop.span.kind": "workflow", "traceloop.entity.input": "{}"}, "plan.workflow", "traceloop", False),
    ({"gen_ai.operation.name": "execute_tool", "gen_ai.request.model": "m"}, "execute_tool t", "x", False),
    ({"gen_ai.output.messages": "plain return value"}, "plan_trip", "openlit", False),
    ({"gen_ai.usage.input_tokens": 3, "gen_ai.provider.name": "anthropic"}, "anthropic.chat", "x", True),
    ({"gen_ai.system": "openai", "gen_ai.prompt.0.content": "hi"}, "openai.chat", "x", True),
    ({}, "chat claude-sonnet-4-5-fail-500", "openlit.instrumentation.anthropic", True),
    ({}, "POST", "openlit.instrumentation.httpx", False),
    ({"http.url": "http://127.0.0.1/v1/chat/completions", "http.method": "POST"}, "POST", "httpx", False),
])
def test_which_spans_are_requests(attributes, name, scope, expected):
    assert is_request(span(attributes, name=name, scope=scope)) is expected


def test_the_older_openllmetry_forms_fill_the_record():
    older = {
        "gen_ai.system": "OpenAI", "llm.request.type": "chat", "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06", "gen_ai.usage.prompt_tokens": 120,
        "gen_ai.usage.completion_tokens": 9, "llm.usage.total_tokens": 129, "gen_ai.usage.cache_read_input_tokens": 64,
        "gen_ai.usage.cache_creation_input_tokens": 8,
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Hi",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Hello.",
        "gen_ai.completion.0.finish_reason": "stop",
        "llm.request.functions.0.name": "lookup", "llm.request.functions.0.description": "Look up",
        "llm.request.functions.0.parameters": '{"type": "object", "properties": {}}',
    }
    (record,), _ = reassemble([span(older, name="openai.chat")])
    assert (record.provider, record.operation, record.model, record.response_model) == (
        "openai", "chat", "gpt-4o", "gpt-4o-2024-08-06")
    assert (record.input_tokens, record.output_tokens, record.cache_read_tokens, record.cache_creation_tokens) == (
        120, 9, 64, 8)
    assert record.finish_reasons == ["stop"]
    assert [tool.name for tool in record.tools] == ["lookup"] and record.tools_count == 1
    assert json.loads(record.tools[0].content) == {"description": "Look up", "name": "lookup",
                                                   "parameters": {"properties": {}, "type": "object"}}
    assert record.blocks[0].content == "Be brief." and record.prompt_bytes == len("Be brief.")
    assert [message["role"] for message in json.loads(record.input_messages)] == ["system", "user"]
    # Consumed attributes are fields, not copied into the record's attributes as well.
    assert "gen_ai.prompt.0.content" not in record.attributes and "llm.request.functions.0.name" not in record.attributes


def test_cache_writes_under_every_spelling_and_openlit_anthropic_input_tokens():
    for key in ("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_write.input_tokens",
                "gen_ai.usage.cache_creation_input_tokens"):
        (record,), _ = reassemble([span({"gen_ai.request.model": "m", key: 7})])
        assert record.cache_creation_tokens == 7, key
    uncached = {"gen_ai.request.model": "claude", "gen_ai.usage.input_tokens": 18,
                "gen_ai.usage.cache_read.input_tokens": 576, "gen_ai.usage.cache_creation.input_tokens": 57}
    (openlit,), _ = reassemble([span(uncached, scope="openlit.instrumentation.anthropic")])
    (other,), _ = reassemble([span(uncached, scope="opentelemetry.instrumentation.anthropic")])
    assert (openlit.input_tokens, other.input_tokens) == (651, 18)


def anthropic(span_id: str, scope: str, *, parent="aaaaaaaaaaaaaaaa", response_id="", start=1_000, end=2_000,
              model="claude") -> DecodedSpan:
    attributes = {"gen_ai.provider.name": "anthropic", "gen_ai.request.model": model, "gen_ai.usage.input_tokens": 10}
    if response_id:
        attributes["gen_ai.response.id"] = response_id
    return span(attributes, span_id=span_id, parent=parent, scope=scope, start=start, end=end)


def test_one_call_traced_twice_is_one_record_and_two_calls_stay_two():
    sdk = "com.anthropic.sdk.python"
    # Siblings with the same response id; the SDK's span is inside the other's.
    (merged,), _ = reassemble([anthropic("1111111111111111", "openllmetry", response_id="msg_1"),
                               anthropic("2222222222222222", sdk, response_id="msg_1", start=1_100, end=1_900)])
    assert (merged.request_id, merged.merged_span_ids, merged.input_tokens) == (
        "1111111111111111", ["2222222222222222"], 10)
    # Parent and child of different scopes.
    records, _ = reassemble([anthropic("1111111111111111", "openinference"),
                             anthropic("2222222222222222", sdk, parent="1111111111111111", start=1_100, end=1_900)])
    assert [record.request_id for record in records] == ["1111111111111111"]
    # Without response ids: same parent, overlapping, another scope.
    records, _ = reassemble([anthropic("1111111111111111", "openllmetry"),
                             anthropic("2222222222222222", sdk, start=1_100, end=1_900)])
    assert len(records) == 1
    # Two concurrent calls of one library under one parent, one inside the other's time: two requests.
    records, _ = reassemble([anthropic("1111111111111111", "openllmetry"),
                             anthropic("2222222222222222", "openllmetry", start=1_100, end=1_900)])
    assert len(records) == 2
    # Different response ids, or different models, are different calls even across libraries.
    records, _ = reassemble([anthropic("1111111111111111", "openllmetry", response_id="msg_1"),
                             anthropic("2222222222222222", sdk, response_id="msg_2", start=1_100, end=1_900)])
    assert len(records) == 2
    records, _ = reassemble([anthropic("1111111111111111", "openllmetry", model="claude-a"),
                             anthropic("2222222222222222", sdk, model="claude-b", start=1_100, end=1_900)])
    assert len(records) == 2
    # Sequential calls (no overlap) of two libraries are two calls.
    records, _ = reassemble([anthropic("1111111111111111", "openllmetry", start=1_000, end=2_000),
                             anthropic("2222222222222222", sdk, start=3_000, end=4_000)])
    assert len(records) == 2
