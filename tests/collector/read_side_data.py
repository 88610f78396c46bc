"""Request records for the read-side tests, and the way they reach the store.

``build_record`` makes a RequestRecord the way reassembly would: blocks tile
the prompt by UTF-8 byte offsets and carry real sha256 digests. ``write``
stores them through the write path's own ``collector.write.rows`` tables.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from dataclasses import dataclass

from promptprism.collector.record import Block, RequestRecord, ToolDefinition

# Recent, whole minute: stored rows must be younger than the tables' TTL, or
# ClickHouse drops their partition on the next merge.
BASE_NS = (int(time.time()) // 60 - 120) * 60 * 1_000_000_000


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Part:
    name: str
    layer: str
    stability: str
    source: str
    text: str


def blocks_for(parts: list[Part], *, capture: bool = True) -> tuple[str, list[Block]]:
    prompt = "".join(part.text for part in parts)
    blocks, offset = [], 0
    for index, part in enumerate(parts):
        size = len(part.text.encode("utf-8"))
        blocks.append(Block(
            index=index, name=part.name, layer=part.layer, stability=part.stability, source=part.source,
            start=offset, end=offset + size, size=size, sha256=sha256(part.text),
            content=part.text if capture else None,
        ))
        offset += size
    return prompt, blocks


def tool(index: int, name: str, description: str, *, capture: bool = True) -> ToolDefinition:
    content = json.dumps({"type": "function", "function": {"name": name, "description": description,
                                                           "parameters": {"type": "object"}}})
    return ToolDefinition(index=index, name=name, size=len(content.encode()), sha256=sha256(content),
                          content=content if capture else None)


def build_record(
    *,
    trace_id: str,
    request_id: str,
    parts: list[Part],
    started_offset_ms: int = 0,
    tools: list[ToolDefinition] | None = None,
    messages: list | None = None,
    response: list | None = None,
    capture: bool = True,
    mapped: bool = True,
    unmapped_reason: str = "",
    **fields,
) -> RequestRecord:
    prompt, blocks = blocks_for(parts, capture=capture)
    tools = tools or []
    messages = messages if messages is not None else [
        {"role": "user", "parts": [{"type": "text", "content": "What is in my calendar today?"}]}]
    response = response if response is not None else [
        {"role": "assistant", "parts": [{"type": "text", "content": "Two meetings."}], "finish_reason": "stop"}]
    body_messages = len(json.dumps(messages).encode())
    prompt_size = len(prompt.encode("utf-8"))
    tools_size = sum(item.size for item in tools)
    defaults = dict(
        trace_id=trace_id,
        request_id=request_id,
        started_at_ns=BASE_NS + started_offset_ms * 1_000_000,
        duration_ns=1_250_000_000,
        span_name="chat gpt-test",
        status_code="Ok",
        service="assistant",
        scope_name="promptprism.instrumentation",
        operation="chat",
        provider="openai",
        model="gpt-test",
        response_model="gpt-test-2026",
        response_id="resp-1",
        finish_reasons=["stop"],
        schema_version=1,
        prompt_bytes=prompt_size,
        prompt_sha256=sha256(prompt),
        mapped=mapped,
        unmapped_reason=unmapped_reason,
        template_name="assistant.system",
        template_origin="builtin",
        declared_block_count=len(blocks) if mapped else 0,
        blocks=blocks if mapped else [],
        tools=tools,
        dialect="chat-completions",
        body_sha256=sha256(prompt + "body"),
        bytes_system=prompt_size + 30,
        bytes_tools=tools_size,
        bytes_messages=body_messages,
        bytes_framing=40,
        bytes_total=prompt_size + 30 + tools_size + body_messages + 40,
        tools_count=len(tools),
        tools_catalog_sha256=sha256("".join(item.sha256 for item in tools)),
        messages_count=len(messages) + 1,
        tokens_estimate=(prompt_size + tools_size + body_messages) // 4,
        context_window=128000,
        headroom_tokens=128000 - (prompt_size + tools_size + body_messages) // 4,
        input_tokens=(prompt_size + tools_size + body_messages) // 4 + 3,
        output_tokens=12,
        cache_read_tokens=0,
        cache_creation_tokens=0,
        system_instructions=json.dumps([{"type": "text", "content": prompt}]) if capture else "",
        input_messages=json.dumps(messages) if capture else "",
        output_messages=json.dumps(response) if capture else "",
        attributes={"gen_ai.request.temperature": "0.2"},
        resource_attributes={"service.name": fields.get("service", "assistant")},
    )
    defaults.update(fields)
    return RequestRecord(**defaults)


def write(store, records: list[RequestRecord]) -> None:
    """Store records the way the sink does: the write path's own tables, one insert per table."""
    from promptprism.collector.write.rows import build_tables

    for name, table in build_tables([], records).non_empty():
        store.insert(name, table)


# --- the shared scenario -------------------------------------------------------

XSS = "<script>alert('xss')</script><img src=x onerror=\"alert('img')\">"

AGENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
FIRST, SECOND, THIRD = "a1b2c3d4e5f60001", "a1b2c3d4e5f60002", "a1b2c3d4e5f60003"
UNMAPPED_TRACE = "0af7651916cd43dd8448eb211c80319c"
UNMAPPED = "b7ad6b7169203331"
NO_CONTENT_TRACE = "5b8efff798038103d269b633813fc60c"
NO_CONTENT = "c0ffee0000000005"
CONVERSATION = "conversation-42"


def agent_parts(memory: str, knowledge: str, extra: list[Part] | None = None) -> list[Part]:
    """A system prompt with multi-byte text early on, so every later offset is a byte offset."""
    return [
        Part("identity", "identity", "static", "builtin", "You are Prism ☕, a careful assistant. Café naïve résumé — 日本語も大丈夫.\n"),
        Part("template", "template", "static", "template", "\nRules you follow:\n"),
        Part("instructions", "instructions", "static", "config", "Answer briefly. Use 🎉 sparingly.\n"),
        *(extra or []),
        Part("memory", "memory", "session", "memory-store", memory),
        Part("knowledge", "knowledge", "turn", "retrieval", knowledge),
        Part("state", "state", "turn", "app", f"State: {XSS}\n"),
    ]


def scenario() -> list[RequestRecord]:
    """An agent loop of three requests that grows, an unmapped prompt, and one without content."""
    memory_one = "User prefers short answers. 🎯\n"
    memory_two = memory_one + "User's calendar is shared with Zoë. " * 12 + "\n"
    tools = [tool(0, "calendar_lookup", f"Look up events {XSS}"), tool(1, "send_email", "Send an e-mail")]
    common = dict(trace_id=AGENT_TRACE, conversation_id=CONVERSATION, process_kind="channel",
                  process_id="web-1", message_id="message-7", run_id="run-1", run_mode="online", tools=tools)
    first = build_record(request_id=FIRST, started_offset_ms=0,
                         parts=agent_parts(memory_one, "Doc: the calendar has two meetings.\n"), **common)
    second = build_record(request_id=SECOND, started_offset_ms=1500,
                          parts=agent_parts(memory_two, "Doc: the calendar has two meetings.\n"),
                          messages=[{"role": "user", "parts": [{"type": "text", "content": f"Hi {XSS}"}]},
                                    {"role": "assistant", "parts": [{"type": "tool_call", "name": "calendar_lookup",
                                                                      "arguments": {"day": "today"}, "id": "call-1"}]},
                                    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call-1",
                                                                 "response": f"2 meetings {XSS}"}]}],
                          response=[{"role": "assistant", "parts": [{"type": "text", "content": f"Done. {XSS}"}],
                                     "finish_reason": "stop"}],
                          **common)
    third = build_record(request_id=THIRD, started_offset_ms=3000,
                         parts=agent_parts(memory_two, "Doc: the calendar has six meetings.\n",
                                           extra=[Part("skills", "skills", "static", "skills-dir",
                                                       "Skill: scheduling — find free slots.\n")]),
                         **common)
    unmapped_prompt = "You are a summarizer. Text contains \u2063 sentinel-like marks ü.\n"
    unmapped = build_record(trace_id=UNMAPPED_TRACE, request_id=UNMAPPED, started_offset_ms=5000,
                            parts=[Part("whole", "template", "static", "template", unmapped_prompt)],
                            mapped=False, unmapped_reason="sentinel_collision", service="summarizer",
                            process_kind="worker", process_id="w-3", model="gpt-small")
    no_content = build_record(trace_id=NO_CONTENT_TRACE, request_id=NO_CONTENT, started_offset_ms=7000,
                              parts=agent_parts("Memory.\n", "Knowledge.\n"), capture=False,
                              service="billing", process_kind="worker", process_id="w-9", run_id="run-2",
                              run_mode="batch", tools=[tool(0, "charge", "Charge a card", capture=False)])
    return [first, second, third, unmapped, no_content]


# --- the real path: OTel SDK spans → OTLP → the collector ----------------------

class ChosenIds:
    """An SDK id generator that hands out the ids the scenario chose, in order."""

    def is_trace_id_random(self) -> bool:
        return False

    def __init__(self):
        self.trace_ids: list[int] = []
        self.span_ids: list[int] = []

    def generate_trace_id(self) -> int:
        return self.trace_ids.pop(0)

    def generate_span_id(self) -> int:
        return self.span_ids.pop(0)


def span_attributes(record: RequestRecord) -> dict:
    from promptprism.wire import names

    attributes = {
        names.GEN_AI_OPERATION_NAME: record.operation,
        names.GEN_AI_PROVIDER_NAME: record.provider,
        names.GEN_AI_REQUEST_MODEL: record.model,
        names.GEN_AI_RESPONSE_MODEL: record.response_model,
        names.GEN_AI_RESPONSE_ID: record.response_id,
        names.GEN_AI_RESPONSE_FINISH_REASONS: list(record.finish_reasons),
        names.GEN_AI_CONVERSATION_ID: record.conversation_id,
        names.SCHEMA_VERSION_ATTR: record.schema_version,
        names.PROMPT_BYTES: record.prompt_bytes,
        names.PROMPT_SHA256: record.prompt_sha256,
        names.PROMPT_MAPPED: record.mapped,
        names.PROMPT_TEMPLATE_NAME: record.template_name,
        names.PROMPT_TEMPLATE_ORIGIN: record.template_origin,
        names.REQUEST_DIALECT: record.dialect,
        names.REQUEST_BODY_SHA256: record.body_sha256,
        names.REQUEST_BYTES_SYSTEM: record.bytes_system,
        names.REQUEST_BYTES_TOOLS: record.bytes_tools,
        names.REQUEST_BYTES_MESSAGES: record.bytes_messages,
        names.REQUEST_BYTES_FRAMING: record.bytes_framing,
        names.REQUEST_BYTES_TOTAL: record.bytes_total,
        names.REQUEST_TOOLS_COUNT: record.tools_count,
        names.REQUEST_TOOLS_CATALOG_SHA256: record.tools_catalog_sha256,
        names.REQUEST_MESSAGES_COUNT: record.messages_count,
        names.REQUEST_TOKENS_ESTIMATE: record.tokens_estimate,
        names.REQUEST_CONTEXT_WINDOW: record.context_window,
        names.REQUEST_HEADROOM_TOKENS: record.headroom_tokens,
        names.MESSAGE_ID: record.message_id,
        names.PROCESS_KIND: record.process_kind,
        names.PROCESS_ID: record.process_id,
        names.RUN_ID: record.run_id,
        names.RUN_MODE: record.run_mode,
        names.ATTEMPT: record.attempt,
        names.GEN_AI_USAGE_INPUT_TOKENS: record.input_tokens,
        names.GEN_AI_USAGE_OUTPUT_TOKENS: record.output_tokens,
        names.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: record.cache_read_tokens,
        names.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: record.cache_creation_tokens,
        names.GEN_AI_SYSTEM_INSTRUCTIONS: record.system_instructions,
        names.GEN_AI_INPUT_MESSAGES: record.input_messages,
        names.GEN_AI_OUTPUT_MESSAGES: record.output_messages,
        **record.attributes,
    }
    if record.mapped:
        attributes[names.PROMPT_BLOCK_COUNT] = len(record.blocks)
    else:
        attributes[names.PROMPT_UNMAPPED_REASON] = record.unmapped_reason
    # Empty strings and unset values are simply not sent, as an instrumentation would.
    return {key: value for key, value in attributes.items() if value not in (None, "", [])}


def block_event(block: Block) -> dict:
    from promptprism.wire import names

    attributes = {
        names.BLOCK_INDEX: block.index, names.BLOCK_NAME: block.name, names.BLOCK_LAYER: block.layer,
        names.BLOCK_STABILITY: block.stability, names.BLOCK_SOURCE: block.source,
        names.BLOCK_START: block.start, names.BLOCK_END: block.end, names.BLOCK_SIZE: block.size,
        names.BLOCK_SHA256: block.sha256,
    }
    if block.content is not None:
        attributes[names.BLOCK_CONTENT] = block.content
    return attributes


def tool_event(item: ToolDefinition) -> dict:
    from promptprism.wire import names

    attributes = {names.TOOL_NAME: item.name, names.TOOL_SIZE: item.size, names.TOOL_SHA256: item.sha256}
    if item.content is not None:
        attributes[names.TOOL_CONTENT] = item.content
    return attributes


def send_over_otlp(records: list[RequestRecord], grpc_endpoint: str) -> None:
    """Each record as the span an instrumented app would send, through the SDK's OTLP/gRPC exporter."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import SpanKind, Status, StatusCode

    from promptprism.wire import names
    from promptprism.instrumentation import span_limits_for_prompts

    for record in records:
        ids = ChosenIds()
        ids.trace_ids.append(int(record.trace_id, 16))
        ids.span_ids.append(int(record.request_id, 16))
        provider = TracerProvider(
            resource=Resource.create({"service.name": record.service, **record.resource_attributes}),
            id_generator=ids,
            span_limits=span_limits_for_prompts(),
        )
        exporter = OTLPSpanExporter(endpoint=grpc_endpoint, insecure=True)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer(record.scope_name or names.TRACER_NAME)
        span = tracer.start_span(record.span_name, kind=SpanKind.CLIENT, start_time=record.started_at_ns,
                                 attributes=span_attributes(record))
        event_time = record.started_at_ns + 1
        if record.mapped:
            for block in record.blocks:
                span.add_event(names.EVENT_PROMPT_BLOCK, block_event(block), timestamp=event_time)
        for item in record.tools:
            span.add_event(names.EVENT_TOOL_DEFINITION, tool_event(item), timestamp=event_time)
        span.set_status(Status(StatusCode.OK))
        span.end(end_time=record.started_at_ns + record.duration_ns)
        provider.shutdown()


@contextlib.contextmanager
def running_collector(migrated_database, data_dir: str, records: list[RequestRecord] | None = None, **flags):
    """A real collector (receivers, sink, UI server with the read side) on free ports, over a
    fresh migrated database (the ``migrated_database`` fixture), with ``records`` sent to it over OTLP."""
    from . import collector_harness

    with migrated_database("read") as store, collector_harness.running_collector(store, data_dir, **flags) as collector:
        endpoints = collector.endpoints()
        if records:
            send_over_otlp(records, endpoints["otlp_grpc"])
        yield collector, store, endpoints["ui"]
