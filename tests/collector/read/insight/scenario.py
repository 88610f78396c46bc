"""A scripted week-over-week story, as RequestRecords.

Previous week: a support bot sends [identity, instructions, skills_prompt,
memory, user_context] — static, static, static, session, turn — and the
provider serves the stable prefix from its cache. Conversation 1 updates
its memory halfway, which breaks the cache at `memory`.

This week: the skills prompt grew by SKILL_GROWTH bytes. Conversation 1
updates its memory halfway again (another break at `memory`), and on the
last day (conversation 2) a refactor moved the turn block `user_context` in
front of `identity`: those requests re-send the whole stable prompt uncached.

The same three conversations continue from one week to the next (growth is
compared within a lineage: same conversation, service, provider, model and
process kind).
"""

from __future__ import annotations

import hashlib

from promptprism.collector.record import Block, RequestRecord

DAY_NS = 86_400 * 10**9
SERVICE = "support-bot"
MODEL = "gpt-4o"
CONTEXT_WINDOW = 128_000

IDENTITY = "You are Ada, the support assistant of Example Corp. You answer politely and precisely.\n" * 6
INSTRUCTIONS = "- Never promise refunds; link the refund policy instead.\n- Quote order numbers exactly.\n" * 12
SKILLS = "## skill: lookup_order\nCall lookup_order(order_id) when the user mentions an order.\n" * 20
SKILL_GROWTH_TEXT = "## skill: schedule_callback\nOffer a callback slot from schedule_callback(day).\n" * 16
SKILL_GROWTH = len(SKILL_GROWTH_TEXT.encode())

CONVERSATIONS_PER_WEEK = 3
TURNS = 4


def memory_text(conversation: str, version: int = 0) -> str:
    return f"Known about this customer ({conversation}, v{version}): prefers email; premium plan since 2021.\n" * 5


def user_context_text(conversation: str, turn: int) -> str:
    return f"Current time: turn {turn} of {conversation}; channel web; locale en-GB.\n" * 2


def _block(index: int, name: str, layer: str, stability: str, text: str, start: int) -> Block:
    data = text.encode()
    return Block(index=index, name=name, layer=layer, stability=stability, source=f"app.prompts.{name}",
                 start=start, end=start + len(data), size=len(data),
                 sha256=hashlib.sha256(data).hexdigest(), content=text)


def build_blocks(parts: list[tuple[str, str, str, str]]) -> list[Block]:
    blocks, offset = [], 0
    for index, (name, layer, stability, text) in enumerate(parts):
        block = _block(index, name, layer, stability, text, offset)
        blocks.append(block)
        offset = block.end
    return blocks


def _record(*, trace_number: int, started_at_ns: int, conversation: str, blocks: list[Block],
            cache_read_tokens: int, process_kind: str = "channel") -> RequestRecord:
    prompt = "".join(block.content for block in blocks).encode()
    tokens = len(prompt) // 4 + 300
    return RequestRecord(
        trace_id=f"{trace_number:032x}",
        request_id=f"{trace_number:016x}",
        started_at_ns=started_at_ns,
        duration_ns=1_200_000_000,
        span_name=f"chat {MODEL}",
        status_code="Unset",
        service=SERVICE,
        scope_name="promptprism.instrumentation",
        operation="chat",
        provider="openai",
        model=MODEL,
        response_model=MODEL,
        conversation_id=conversation,
        message_id=f"message-{trace_number}",
        process_kind=process_kind,
        schema_version=1,
        prompt_bytes=len(prompt),
        prompt_sha256=hashlib.sha256(prompt).hexdigest(),
        mapped=True,
        template_name="support",
        template_origin="builtin",
        declared_block_count=len(blocks),
        blocks=blocks,
        dialect="chat-completions",
        tokens_estimate=tokens,
        context_window=CONTEXT_WINDOW,
        headroom_tokens=CONTEXT_WINDOW - tokens,
        input_tokens=tokens,
        output_tokens=120,
        cache_read_tokens=cache_read_tokens,
        cache_creation_tokens=0,
    )


# The conversation of this week whose day brings the reorder.
REORDERED_CONVERSATION = 2
MISORDERED_REQUESTS = TURNS


def records(now_ns: int) -> list[RequestRecord]:
    """Previous week: days 12..10 ago; this week: days 5..3 ago (the reorder on day 3)."""
    out: list[RequestRecord] = []
    trace_number = 0x4BF92F3500000000
    for week in ("previous", "current"):
        for conversation_number in range(CONVERSATIONS_PER_WEEK):
            conversation = f"conversation-{conversation_number}"
            day = (12 if week == "previous" else 5) - conversation_number
            reordered = week == "current" and conversation_number == REORDERED_CONVERSATION
            for turn in range(TURNS):
                trace_number += 1
                # Conversation 1 updates its memory at turn 2, each week (v0 → v1, then v1 → v2).
                memory_version = (0 if week == "previous" else 1) + (conversation_number == 1 and turn >= 2)
                identity = ("identity", "identity", "static", IDENTITY)
                instructions = ("instructions", "instructions", "static", INSTRUCTIONS)
                skills = ("skills_prompt", "skills", "static",
                          SKILLS + (SKILL_GROWTH_TEXT if week == "current" else ""))
                memory = ("memory", "memory", "session", memory_text(conversation, memory_version))
                context = ("user_context", "state", "turn", user_context_text(conversation, turn))
                if reordered:
                    parts = [context, identity, instructions, skills, memory]
                else:
                    parts = [identity, instructions, skills, memory, context]
                blocks = build_blocks(parts)
                stable_prefix = 0 if reordered else sum(b.size for b in blocks[:4])
                memory_broke = conversation_number == 1 and turn == 2
                cached = 0 if turn == 0 or memory_broke else stable_prefix // 4
                if memory_broke:
                    cached = sum(b.size for b in blocks[:3]) // 4
                out.append(_record(
                    trace_number=trace_number,
                    started_at_ns=now_ns - day * DAY_NS + turn * 60 * 10**9,
                    conversation=conversation,
                    blocks=blocks,
                    cache_read_tokens=cached,
                ))
    return out


def expected_growth_pct() -> float:
    previous = len((IDENTITY + INSTRUCTIONS + SKILLS).encode()) + len(memory_text("conversation-0").encode())
    previous += len(user_context_text("conversation-0", 0).encode())
    return 100 * SKILL_GROWTH / previous
