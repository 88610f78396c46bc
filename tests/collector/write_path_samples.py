"""Realistic decoded spans and request records for the write-path tests.

Built the way reassembly builds them (a span with block events, the record
with blocks and tools), with content so the contents table is exercised.
"""

from __future__ import annotations

import hashlib

from promptprism.collector.otlp.model import DecodedSpan, SpanEvent, SpanLink
from promptprism.collector.record import Block, RequestRecord, ToolDefinition
from promptprism.collector.write.convert import ConvertedExport
from promptprism.collector.write.rows import build_tables

# 2026-03-02 10:00:00 UTC, for the pure (no store) tests. Tests that write
# to a store use a recent time: rows older than the retention are dropped by
# the TTL on insert.
BASE_NS = 1_772_445_600_000_000_000

SYSTEM_PARTS = (
    ("identity", "identity", "static", "You are Prism, a careful assistant.\n"),
    ("rules", "instructions", "static", "Answer briefly. Cite sources.\n"),
    ("memory", "memory", "session", "The user prefers metric units.\n"),
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_request(number: int, *, started_at_ns: int, turn_text: str | None = None, content: bool = True,
                 service: str = "chat-app") -> tuple[DecodedSpan, RequestRecord]:
    """One LLM request: three shared blocks plus one turn block unique to ``number``."""
    parts = list(SYSTEM_PARTS) + [("question", "state", "turn", turn_text or f"Turn {number}: what is 2+{number}?\n")]
    blocks, offset = [], 0
    for index, (name, layer, stability, text) in enumerate(parts):
        size = len(text.encode("utf-8"))
        blocks.append(Block(index, name, layer, stability, "app", offset, offset + size, size, sha(text),
                            text if content else None))
        offset += size
    prompt = "".join(text for *_, text in parts)
    tool_text = '{"name":"search","parameters":{}}'
    tools = [ToolDefinition(0, "search", len(tool_text), sha(tool_text), tool_text if content else None)]
    trace_id = f"{number + 1:032x}"
    span_id = f"{number + 1:016x}"
    events = [SpanEvent(started_at_ns + 1000 * block.index, "promptprism.prompt.block",
                        {"promptprism.block.index": block.index, "promptprism.block.name": block.name,
                         "promptprism.block.size": block.size, "promptprism.block.sha256": block.sha256})
              for block in blocks]
    span = DecodedSpan(
        trace_id=trace_id, span_id=span_id, parent_span_id="", trace_state="", name="chat gpt-test",
        kind="Client", start_time_ns=started_at_ns, end_time_ns=started_at_ns + 250_000_000,
        status_code="Ok", status_message="", service=service,
        resource_attributes={"service.name": service, "host.cores": 2},
        scope_name="promptprism.instrumentation", scope_version="0.1.0",
        attributes={"gen_ai.request.model": "gpt-test", "gen_ai.usage.input_tokens": 40 + number,
                    "promptprism.prompt.mapped": True, "ratio": 0.5},
        events=events,
        links=[SpanLink("a" * 32, "b" * 16, "", {"kind": "retry"})] if number % 2 else [],
    )
    record = RequestRecord(
        trace_id=trace_id, request_id=span_id, started_at_ns=started_at_ns, duration_ns=250_000_000,
        span_name=span.name, status_code="Ok", service=service, scope_name=span.scope_name,
        operation="chat", provider="openai", model="gpt-test", conversation_id=f"conv-{number % 3}",
        schema_version=1, prompt_bytes=offset, prompt_sha256=sha(prompt), mapped=True,
        declared_block_count=len(blocks), blocks=blocks, tools=tools, tools_count=1,
        input_tokens=40 + number, output_tokens=7, attributes={"ratio": "0.5"},
        resource_attributes={"service.name": service},
    )
    return span, record


def make_requests(first: int, count: int, *, started_at_ns: int,
                  content: bool = True) -> tuple[list[DecodedSpan], list[RequestRecord]]:
    """Requests ``first`` … ``first + count - 1``, 1 ms apart: their spans and their records."""
    pairs = [make_request(number, started_at_ns=started_at_ns + number * 1_000_000, content=content)
             for number in range(first, first + count)]
    return [span for span, _ in pairs], [record for _, record in pairs]


def converted_export(spans: list[DecodedSpan], records: list[RequestRecord], token: str) -> ConvertedExport:
    """What ``convert`` hands the sink for an export of ``spans`` that reassembled into ``records``."""
    return ConvertedExport(build_tables(spans, records), token, received=len(spans), requests=len(records),
                           mapped_blocks=sum(len(record.blocks) for record in records if record.mapped))


def write_records(store, records: list[RequestRecord], *, genai_events=()) -> None:
    """Insert ``records`` (and GenAI events) as the write path lays them out, without spans."""
    for table, columns in build_tables([], records, genai_events=genai_events).non_empty():
        store.insert(table, columns)


def make_batch(first: int, count: int, *, started_at_ns: int, token: str | None = None,
               content: bool = True) -> ConvertedExport:
    """One export of ``count`` requests, as the sink receives it."""
    spans, records = make_requests(first, count, started_at_ns=started_at_ns, content=content)
    return converted_export(spans, records, token or sha(f"batch-{first}-{count}-{started_at_ns}"))
