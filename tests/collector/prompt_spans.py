"""Builders for prompt spans, shared by the collector's receive-path tests.

Blocks are computed from real text with the wire names from ``names``, so
the tests state the prompt and the expected byte map follows from it.
"""

from __future__ import annotations

import hashlib

from promptprism.collector.otlp.model import DecodedSpan, SpanEvent
from promptprism.wire import names

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"


def sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def block_events(parts, *, content: bool = True) -> tuple[str, list[dict]]:
    """parts: (name, layer, stability, text) → (prompt text, block event attributes)."""
    events, position = [], 0
    for index, (name, layer, stability, text) in enumerate(parts):
        data = text.encode("utf-8")
        attributes = {
            names.BLOCK_INDEX: index, names.BLOCK_NAME: name, names.BLOCK_LAYER: layer,
            names.BLOCK_STABILITY: stability, names.BLOCK_SOURCE: f"template:{name}",
            names.BLOCK_START: position, names.BLOCK_END: position + len(data),
            names.BLOCK_SIZE: len(data), names.BLOCK_SHA256: sha(data),
        }
        if content:
            attributes[names.BLOCK_CONTENT] = text
        events.append(attributes)
        position += len(data)
    return "".join(text for *_, text in parts), events


def prompt_attributes(prompt: str, block_count: int, **extra) -> dict:
    attributes = {
        names.SCHEMA_VERSION_ATTR: names.SCHEMA_VERSION,
        names.GEN_AI_OPERATION_NAME: names.OPERATION_CHAT,
        names.GEN_AI_PROVIDER_NAME: names.PROVIDER_OPENAI,
        names.GEN_AI_REQUEST_MODEL: "gpt-4o",
        names.PROMPT_BYTES: len(prompt.encode("utf-8")),
        names.PROMPT_SHA256: sha(prompt),
        names.PROMPT_BLOCK_COUNT: block_count,
        names.PROMPT_MAPPED: True,
    }
    attributes.update(extra)
    return attributes


def decoded_span(attributes: dict, events: list[dict] = (), *, span_id: str = SPAN_ID,
                 event_name: str = names.EVENT_PROMPT_BLOCK, dropped_events: int = 0,
                 extra_events: list[SpanEvent] = ()) -> DecodedSpan:
    return DecodedSpan(
        trace_id=TRACE_ID, span_id=span_id, parent_span_id="", trace_state="", name="chat gpt-4o",
        kind="Client", start_time_ns=1_700_000_000_000_000_000, end_time_ns=1_700_000_000_250_000_000,
        status_code="Unset", status_message="", service="shop-bot",
        resource_attributes={"service.name": "shop-bot"}, scope_name=names.TRACER_NAME, scope_version="0.1",
        attributes=attributes,
        events=[SpanEvent(1_700_000_000_000_000_001, event_name, dict(event)) for event in events] + list(extra_events),
        links=[], dropped_events_count=dropped_events,
    )
