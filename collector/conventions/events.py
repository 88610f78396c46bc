"""GenAI log events → what each contributes to its request, computed once, at ingest. Pure.

Other GenAI instrumentations (opentelemetry-instrumentation-openai-v2 and the
util-genai family) send prompt content as log records carrying their span's
trace and span ids: ``gen_ai.<role>.message`` and ``gen_ai.choice`` (older
conventions), ``gen_ai.client.inference.operation.details`` (newer). Each is
stored as a ``genai_events`` row (``record.GenAIEvent``) together with its
contribution, computed here (``contribute``) when it is received, so that whoever puts
a request together — ``read.events`` in Python, the ``event_prompts`` view
in SQL — only joins and aggregates stored columns:

- ``contribution``: ``details`` — the newer event carries the span's own content
  attributes, and the newest event wins per attribute; ``input`` — one
  input message; ``output`` — one output message (a choice);
- ``system_instructions``, ``input_messages``, ``output_messages``
  (``details``): the attributes as JSON text, as the span would carry them;
  None when the event does not carry one;
- ``message`` (``input``, ``output``): the one message in the current
  conventions' shape (``{"role", "parts", …}``) as JSON text;
  ``message_index``: an output's position in the response;
  ``message_has_parts``: the message carries content (events sent with
  content capture off carry roles and nothing else);
- ``instructions_text`` (``details``): the text of its system instructions;
  ``system_text``: the system and developer text of its input messages
  (``details``), or of its message when that is a system or developer
  message (``input``) — None when there is none.

How a request combines its events (README, "OTLP logs"): the system prompt is
the newest system instructions' text; else the newest ``details`` input
messages' system text; else the system text of the ``input`` messages in
time order, joined by a blank line. Input and output messages are the newest
``details`` attribute, else the ``input`` messages in time order (the
``output`` messages by index) when any of them carries content.
"""

from __future__ import annotations

from typing import Any

from ...wire import names
from ..record import GenAIEvent
from ._convention import json_text, parsed
from .system_prompt import SYSTEM_ROLES, instructions_text, message_text, messages_system_text

# Which rule combines an event with the others of its request.
DETAILS, INPUT, OUTPUT = "details", "input", "output"
# Bumped when the rule below changes: migration steps recompute the rows stored under an older one.
CONTRIBUTION_VERSION = 1

_WHOLE_EVENT_NAMES = frozenset({names.EVENT_CHOICE, names.EVENT_INFERENCE_DETAILS})


def is_genai_content_event(event_name: str) -> bool:
    """A GenAI content event: gen_ai.<role>.message, gen_ai.choice, or the newer operation details."""
    if event_name in _WHOLE_EVENT_NAMES:
        return True
    if not (event_name.startswith(names.EVENT_MESSAGE_PREFIX) and event_name.endswith(names.EVENT_MESSAGE_SUFFIX)):
        return False
    role = event_name[len(names.EVENT_MESSAGE_PREFIX):-len(names.EVENT_MESSAGE_SUFFIX)]
    return bool(role) and "." not in role  # gen_ai.system.message, not gen_ai.a.b.message


def contribute(event: GenAIEvent) -> None:
    """Fill ``event``'s contribution fields from its name, body and attributes (their stored JSON text)."""
    event.contribution_version = CONTRIBUTION_VERSION
    if event.event_name == names.EVENT_INFERENCE_DETAILS:
        event.contribution = DETAILS
        attributes = _parse(event.attributes_json)
        if not isinstance(attributes, dict):
            return
        instructions = attributes.get(names.GEN_AI_SYSTEM_INSTRUCTIONS)
        inputs = attributes.get(names.GEN_AI_INPUT_MESSAGES)
        event.system_instructions = _content_text(instructions)
        event.input_messages = _content_text(inputs)
        event.output_messages = _content_text(attributes.get(names.GEN_AI_OUTPUT_MESSAGES))
        event.instructions_text = instructions_text(instructions) if instructions is not None else None
        event.system_text = messages_system_text(inputs) if inputs is not None else None
        return
    if event.event_name == names.EVENT_CHOICE:
        event.contribution = OUTPUT
        event.message_index, message = _output_message(_parse(event.body_json))
    else:
        event.contribution = INPUT
        message = _input_message(event.event_name, _parse(event.body_json))
        event.system_text = message_text(message) if message["role"] in SYSTEM_ROLES else None
    event.message = json_text(message)
    event.message_has_parts = bool(message["parts"])


def _content_text(value: Any) -> str | None:
    """A content attribute as the span would carry it (JSON text), None when absent."""
    if value is None:
        return None
    return value if isinstance(value, str) else json_text(value)


def _parse(text: str) -> Any:
    """Stored JSON text parsed; empty text is nothing."""
    return parsed(text) if text else None


# --- event bodies → messages in the current conventions' shape ---------------------------

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
        parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name") or "",
                      "arguments": parsed(function.get("arguments"))})
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
