"""Request body → GenAI-convention input messages, for content capture.

Pure: the transport calls it only when content capture is on, on the body
the SDK is about to send. Each dialect's non-system messages (as
:mod:`.._dialects` finds them) become ``{"role", "parts"}`` objects with
``text``, ``tool_call`` and ``tool_call_response`` parts; attachments are
named by their kind, never copied.
"""

from __future__ import annotations

from typing import Any, Mapping

from .._dialects import body_shape


def _parts(content: Any) -> list[dict[str, Any]]:
    """Provider content → GenAI-convention message parts."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            parts.append({"type": "text", "content": part["text"]})
        elif kind == "tool_use":
            parts.append({"type": "tool_call", "id": part.get("id"), "name": part.get("name"),
                          "arguments": part.get("input")})
        elif kind == "tool_result":
            parts.append({"type": "tool_call_response", "id": part.get("tool_use_id"),
                          "response": part.get("content")})
        else:
            parts.append({"type": str(kind)})  # images, documents …: the kind, not the bytes
    return parts


def input_messages(body: Mapping[str, Any], dialect: str) -> list[dict[str, Any]]:
    """The request's non-system messages as GenAI-convention input messages."""
    messages: list[dict[str, Any]] = []
    for message in body_shape(body, dialect).messages:
        if isinstance(message, str):  # Responses API: a bare string input
            messages.append({"role": "user", "parts": _parts(message)})
            continue
        if not isinstance(message, Mapping):
            continue
        kind = message.get("type")
        if kind == "function_call":
            messages.append({"role": "assistant", "parts": [{"type": "tool_call", "id": message.get("call_id"),
                                                             "name": message.get("name"),
                                                             "arguments": message.get("arguments")}]})
        elif isinstance(kind, str) and kind.endswith("_output"):
            messages.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": message.get("call_id"),
                                                        "response": message.get("output")}]})
        else:
            role = str(message.get("role", "user"))
            parts = _parts(message.get("content"))
            for call in message.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
                    parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                                  "arguments": function.get("arguments")})
            if role == "tool":
                parts = [{"type": "tool_call_response", "id": message.get("tool_call_id"),
                          "response": message.get("content")}]
            messages.append({"role": role, "parts": parts})
    return messages
