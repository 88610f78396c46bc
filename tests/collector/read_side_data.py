"""Request records for the read-side tests, and the way they reach the store.

``build_record`` makes a RequestRecord the way reassembly would: blocks tile
the prompt by UTF-8 byte offsets and carry real sha256 digests. ``write``
stores them through the write path's own ``collector.rows`` tables.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

from promptprism.collector.records import Block, RequestRecord, ToolDefinition

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
    from promptprism.collector.rows import build_tables

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
