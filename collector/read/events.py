"""GenAI content events joined to their request at read time. Pure.

A request whose span carries no content (another instrumentation sent it as
log records, ``write.genai_events``) is completed here from its ``genai_events`` rows,
found by (trace_id, span_id): the events are turned back into the content
attributes the span would have carried under the latest GenAI conventions
(``gen_ai.input.messages`` with the system message inside, role ``system``;
``gen_ai.output.messages``), and those attributes go through the very code
that reassembles a span (``write.reassemble.build_record``). So the request comes
out exactly as if its content had come on the span: the system prompt as one
unmapped block with its size and hash, the message history, the response.

The read side calls ``join_events`` once per answer, on the rows it loaded,
before it builds request objects; nothing downstream (API, inspector, CLI)
knows which way the content travelled.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ...wire import names
from ..otlp.model import DecodedSpan
from ..write.reassemble import build_record

CONTENT_COLUMNS = ("system_instructions", "input_messages", "output_messages")
_CONTENT_ATTRIBUTES = {
    names.GEN_AI_SYSTEM_INSTRUCTIONS: "system_instructions",
    names.GEN_AI_INPUT_MESSAGES: "input_messages",
    names.GEN_AI_OUTPUT_MESSAGES: "output_messages",
}
NANOSECONDS_PER_SECOND = 1_000_000_000


@dataclass(slots=True)
class JoinedContent:
    """What the join adds besides the row fields it fills in."""

    blocks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # request_id → block rows
    contents: dict[tuple[str, str], str] = field(default_factory=dict)  # (day, sha256) → text


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


# --- events → span content attributes ------------------------------------------

def _parse(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _text_parts(content: Any) -> list[dict[str, Any]]:
    """Message content as semconv parts: a string is one text part; provider-style
    part lists keep their text parts as text and any other part as it came."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return []
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append({"type": "text", "content": part})
        elif isinstance(part, dict) and part.get("type", "text") == "text":
            text = part.get("text", part.get("content"))
            if isinstance(text, str):
                parts.append({"type": "text", "content": text})
        elif isinstance(part, dict):
            parts.append(part)
    return parts


def _tool_call_parts(tool_calls: Any) -> list[dict[str, Any]]:
    """``[{"id", "type": "function", "function": {"name", "arguments"}}]`` → tool_call parts,
    arguments decoded from their JSON text as the span conventions carry them."""
    if not isinstance(tool_calls, list):
        return []
    parts = []
    for call in tool_calls:
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name") or "",
                      "arguments": arguments})
    return parts


def _input_message(event_name: str, body: Any) -> dict[str, Any]:
    body = body if isinstance(body, dict) else {"content": body} if body is not None else {}
    role = body.get("role")
    if not isinstance(role, str) or not role:
        role = event_name[len(names.EVENT_MESSAGE_PREFIX):-len(names.EVENT_MESSAGE_SUFFIX)]
    if role == "tool":
        parts = [{"type": "tool_call_response", "id": body.get("id"), "response": body.get("content")}] \
            if "content" in body else []
    else:
        parts = _tool_call_parts(body.get("tool_calls")) + _text_parts(body.get("content"))
    return {"role": role, "parts": parts}


def _output_message(body: Any) -> tuple[int, dict[str, Any]]:
    body = body if isinstance(body, dict) else {}
    message = body.get("message") if isinstance(body.get("message"), dict) else {}
    index = body.get("index")
    finish_reason = body.get("finish_reason")
    return (index if type(index) is int else 0), {
        "role": message.get("role") or "assistant",
        "parts": _tool_call_parts(message.get("tool_calls")) + _text_parts(message.get("content")),
        "finish_reason": finish_reason if isinstance(finish_reason, str) and finish_reason else "error",
    }


def _any_parts(messages: list[dict[str, Any]]) -> bool:
    # Events sent with content capture off carry roles but no text: the span
    # would have carried no content attribute at all, so neither do we.
    return any(message["parts"] for message in messages)


def span_content(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The content attributes a span would carry, from its GenAI events (any order)."""
    ordered = sorted(events, key=lambda event: (int(event["time_ns"]), int(event["sequence"])))
    inputs: list[dict[str, Any]] = []
    outputs: list[tuple[int, dict[str, Any]]] = []
    details: dict[str, Any] = {}
    for event in ordered:
        name = event["event_name"]
        if name == names.EVENT_INFERENCE_DETAILS:
            attributes = _parse(event["attributes"])
            if isinstance(attributes, dict):
                details.update({key: value for key, value in attributes.items()
                                if key in _CONTENT_ATTRIBUTES and value is not None})
        elif name == names.EVENT_CHOICE:
            outputs.append(_output_message(_parse(event["body"])))
        else:
            inputs.append(_input_message(name, _parse(event["body"])))
    content = dict(details)  # the newer event carries the span's own shape: it wins
    if names.GEN_AI_INPUT_MESSAGES not in content and _any_parts(inputs):
        content[names.GEN_AI_INPUT_MESSAGES] = inputs
    output_messages = [message for _, message in sorted(outputs, key=lambda pair: pair[0])]
    if names.GEN_AI_OUTPUT_MESSAGES not in content and _any_parts(output_messages):
        content[names.GEN_AI_OUTPUT_MESSAGES] = output_messages
    return content


# --- the join ------------------------------------------------------------------

def _day(row: Mapping[str, Any]) -> str:
    if row.get("day"):
        return row["day"]
    seconds = int(row["started_at_ns"]) // NANOSECONDS_PER_SECOND
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).date().isoformat()


def _as_span(row: Mapping[str, Any], attributes: dict[str, Any]) -> DecodedSpan:
    return DecodedSpan(
        trace_id=row["trace_id"], span_id=row["request_id"], parent_span_id="", trace_state="", name="",
        kind="Client", start_time_ns=int(row["started_at_ns"]), end_time_ns=int(row["started_at_ns"]),
        status_code="Unset", status_message="", service="", resource_attributes={}, scope_name="",
        scope_version="", attributes=attributes, events=[], links=[])


def join_events(rows: list[dict[str, Any]], event_rows: Iterable[Mapping[str, Any]]) -> JoinedContent:
    """Fill ``rows`` (in place) from their GenAI events; return the synthesized
    system-prompt block rows and their text for the caller's block and
    content maps. A row whose span carried the content keeps it."""
    by_request: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for event in event_rows:
        by_request.setdefault((event["trace_id"], event["span_id"]), []).append(event)
    joined = JoinedContent()
    for row in rows:
        events = by_request.get((row["trace_id"], row["request_id"]))
        if not events or not needs_events(row):
            continue
        attributes = span_content(events)
        if not attributes:
            continue
        if row.get("prompt_sha256"):  # a prompt hash on the span must match the text
            attributes[names.PROMPT_SHA256] = row["prompt_sha256"]
        record = build_record(_as_span(row, attributes))
        if record is None:
            continue
        for column in CONTENT_COLUMNS:
            if column in row and not row[column]:
                row[column] = getattr(record, column)
        if row["mapped"] or int(row["block_count"] or 0) or not record.blocks:
            continue
        block, day = record.blocks[0], _day(row)
        row["prompt_bytes"], row["prompt_sha256"], row["block_count"] = record.prompt_bytes, record.prompt_sha256, 1
        joined.blocks[row["request_id"]] = [{
            "request_id": row["request_id"], "day": day, "index": block.index, "name": block.name,
            "layer": block.layer, "stability": block.stability, "source": block.source, "start": block.start,
            "end": block.end, "size": block.size, "sha256": block.sha256,
        }]
        if block.content is not None:
            joined.contents[(day, block.sha256)] = block.content
    return joined
