"""GenAI content events joined to their request at read time. Pure.

A request whose span carries no content (another instrumentation sent it as
log records, ``write.genai_events``) is completed here from its
``genai_events`` rows, found by (trace_id, span_id). What each event
contributes was computed when it was received (``conventions.events``);
this module only combines the stored contributions — the newest
operation-details attribute wins, messages keep their order — so the
request comes out as if its content had come on the span: the system
prompt as one unmapped block with its size and hash, the message history,
the response. The ``event_prompts`` view (migration 008) combines the same
columns the same way for SQL readers.

The read side calls ``join_events`` once per answer, on the rows it loaded,
before it builds request objects; nothing downstream (API, inspector, CLI)
knows which way the content travelled.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ...wire import names
from ..conventions.events import DETAILS, INPUT, OUTPUT
from ..conventions.system_prompt import MESSAGE_SEPARATOR, WHOLE_PROMPT_BLOCK_NAME, WHOLE_PROMPT_LAYER, whole_prompt

CONTENT_COLUMNS = ("system_instructions", "input_messages", "output_messages")
NANOSECONDS_PER_SECOND = 1_000_000_000


@dataclass(slots=True)
class JoinedContent:
    """What the join adds besides the row fields it fills in."""

    blocks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # request_id → block rows
    contents: dict[tuple[str, str], str] = field(default_factory=dict)  # (day, sha256) → text


@dataclass(slots=True)
class RequestContent:
    """A request's content as its events carry it, in the span's own shape (JSON text)."""

    system_instructions: str = ""
    input_messages: str = ""
    output_messages: str = ""
    system_prompt: tuple[str, str] | None = None  # (attribute it came from, text)


def needs_events(row: Mapping[str, Any]) -> bool:
    """Whether a request row may be missing content that travelled as logs.

    Summary rows (no content columns) only need the system prompt; full rows
    also need messages and the response.
    """
    if not row["mapped"] and int(row["block_count"] or 0) == 0:
        return True
    return any(column in row and not row[column] for column in ("input_messages", "output_messages"))


def event_keys(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(trace_id, span_id) of the rows worth a look-up."""
    return sorted({(row["trace_id"], row["request_id"]) for row in rows if needs_events(row)})


def _messages(events: list[Mapping[str, Any]]) -> str:
    """Stored messages as one JSON array; "" when none carries content (capture was off)."""
    if not any(event["message_has_parts"] for event in events):
        return ""
    return "[" + ",".join(event["message"] for event in events) + "]"


def request_content(events: Iterable[Mapping[str, Any]]) -> RequestContent:
    """One request's content from its events' stored contributions (any order)."""
    newest: dict[str, Mapping[str, Any]] = {}  # details attribute → the newest event carrying it
    inputs, outputs = [], []
    for event in sorted(events, key=lambda event: (int(event["time_ns"]), int(event["sequence"]))):
        kind = event["contribution"]
        if kind == DETAILS:
            newest.update((column, event) for column in CONTENT_COLUMNS if event[column] is not None)
        elif kind == INPUT:
            inputs.append(event)
        elif kind == OUTPUT:
            outputs.append(event)
    outputs.sort(key=lambda event: int(event["message_index"]))  # stable: equal indexes keep time order
    content = RequestContent(
        system_instructions=newest["system_instructions"]["system_instructions"] if "system_instructions" in newest else "",
        input_messages=newest["input_messages"]["input_messages"] if "input_messages" in newest else _messages(inputs),
        output_messages=newest["output_messages"]["output_messages"] if "output_messages" in newest else _messages(outputs),
    )
    instructions = newest.get("system_instructions")
    if instructions is not None and instructions["instructions_text"] is not None:
        content.system_prompt = (names.GEN_AI_SYSTEM_INSTRUCTIONS, instructions["instructions_text"])
    elif "input_messages" in newest:  # the newer event's messages replace the older per-message events
        text = newest["input_messages"]["system_text"]
        content.system_prompt = (names.GEN_AI_INPUT_MESSAGES, text) if text is not None else None
    else:
        texts = [event["system_text"] for event in inputs if event["system_text"] is not None]
        content.system_prompt = (names.GEN_AI_INPUT_MESSAGES, MESSAGE_SEPARATOR.join(texts)) if texts else None
    return content


# --- the join ------------------------------------------------------------------

def _day(row: Mapping[str, Any]) -> str:
    if row.get("day"):
        return row["day"]
    seconds = int(row["started_at_ns"]) // NANOSECONDS_PER_SECOND
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).date().isoformat()


def join_events(rows: list[dict[str, Any]], event_rows: Iterable[Mapping[str, Any]]) -> JoinedContent:
    """Fill ``rows`` (in place) from their GenAI events; return the system-prompt
    block rows and their text for the caller's block and content maps. A row
    whose span carried the content keeps it."""
    by_request: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for event in event_rows:
        by_request.setdefault((event["trace_id"], event["span_id"]), []).append(event)
    joined = JoinedContent()
    for row in rows:
        events = by_request.get((row["trace_id"], row["request_id"]))
        if not events or not needs_events(row):
            continue
        content = request_content(events)
        for column in CONTENT_COLUMNS:
            if column in row and not row[column]:
                row[column] = getattr(content, column)
        if row["mapped"] or int(row["block_count"] or 0) or content.system_prompt is None:
            continue
        source, text = content.system_prompt
        prompt = whole_prompt(text, row.get("prompt_sha256") or "")
        if prompt is None or not prompt[0]:  # no bytes to stand for, or not the prompt the span describes
            continue
        encoded, digest = prompt
        day = _day(row)
        row["prompt_bytes"], row["prompt_sha256"], row["block_count"] = len(encoded), digest, 1
        joined.blocks[row["request_id"]] = [{
            "request_id": row["request_id"], "day": day, "index": 0, "name": WHOLE_PROMPT_BLOCK_NAME,
            "layer": WHOLE_PROMPT_LAYER, "stability": names.STABILITY_UNKNOWN, "source": source, "start": 0,
            "end": len(encoded), "size": len(encoded), "sha256": digest,
        }]
        joined.contents[(day, digest)] = text
    return joined
