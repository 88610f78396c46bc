"""Request body → where each dialect keeps system, tools and messages.

The three dialects (Chat Completions, Anthropic Messages, OpenAI Responses)
put the same things in different places. This module walks a body and hands
back the values each byte class owns (:class:`BodyShape`), the system prompt
as text (for the block map), the tool definitions (for the span) and the
few parameters the manifest reads (output cap, reasoning). It never counts
bytes itself; :mod:`.manifest` does that in canonical JSON. Standard library
only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..wire import names
from ..wire.canonical import canonical_json

# Content parts that carry files, images or audio rather than text.
ATTACHMENT_PART_TYPES = frozenset({
    "image_url", "input_audio", "file",  # chat-completions
    "input_image", "input_file",  # openai-responses
    "image", "document",  # anthropic-messages
})
# Roles whose leading messages form the system prompt in message-list dialects.
SYSTEM_ROLES = frozenset({"system", "developer"})
# Chat Completions roles that carry a tool's output back to the model.
CHAT_TOOL_RESULT_ROLES = frozenset({"tool", "function"})
# Output-token caps, in the order a dialect prefers them.
MAX_OUTPUT_KEYS = ("max_completion_tokens", "max_output_tokens", "max_tokens")


@dataclass
class BodyShape:
    """The values each byte class owns, in body order (disjoint subtrees)."""

    system: list[Any] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)
    messages: list[Any] = field(default_factory=list)
    tool_results: list[Any] = field(default_factory=list)
    attachments: list[Any] = field(default_factory=list)
    # The system prompt as text: what the app rendered, for the block map.
    system_texts: list[str] = field(default_factory=list)


def body_shape(body: Mapping[str, Any], dialect: str) -> BodyShape:
    return _SHAPES[dialect](body)


def _chat_completions(body: Mapping[str, Any]) -> BodyShape:
    shape = BodyShape()
    for key in ("tools", "functions"):  # `functions` is the legacy spelling
        shape.tools.extend(_list(body.get(key)))
    for message in _take_leading_system(_list(body.get("messages")), shape):
        role = message.get("role") if isinstance(message, Mapping) else None
        shape.messages.append(message)
        if role in CHAT_TOOL_RESULT_ROLES:
            shape.tool_results.append(message)
        if isinstance(message, Mapping):
            shape.attachments.extend(_attachments(message.get("content")))
    return shape


def _anthropic_messages(body: Mapping[str, Any]) -> BodyShape:
    shape = BodyShape()
    system = body.get("system")
    if isinstance(system, list):
        shape.system.extend(system)
    elif system is not None:
        shape.system.append(system)
    if system is not None:
        shape.system_texts.append(_text_of(system))
    shape.tools.extend(_list(body.get("tools")))
    for message in _list(body.get("messages")):
        shape.messages.append(message)
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in _list(content):
            block_type = block.get("type") if isinstance(block, Mapping) else None
            # tool_result, and server tools' *_tool_result blocks
            if isinstance(block_type, str) and block_type.endswith("tool_result"):
                shape.tool_results.append(block)
        shape.attachments.extend(_attachments(content))
    return shape


def _openai_responses(body: Mapping[str, Any]) -> BodyShape:
    shape = BodyShape()
    instructions = body.get("instructions")
    if instructions is not None:
        shape.system.append(instructions)
        shape.system_texts.append(_text_of(instructions))
    shape.tools.extend(_list(body.get("tools")))
    items = body.get("input")
    if not isinstance(items, list):
        # A bare string input is one user message.
        if items is not None:
            shape.messages.append(items)
        return shape
    for item in _take_leading_system(items, shape):
        shape.messages.append(item)
        item_type = item.get("type") if isinstance(item, Mapping) else None
        if isinstance(item_type, str) and item_type.endswith("_output") and item_type != "output_text":
            # function_call_output, custom_tool_call_output, computer_call_output …
            shape.tool_results.append(item)
        if isinstance(item, Mapping):
            shape.attachments.extend(_attachments(item.get("content")))
    return shape


def _take_leading_system(items: list[Any], shape: BodyShape) -> list[Any]:
    """Move the leading run of system and developer messages into ``shape.system``; return the rest.

    Only the leading run is the system prompt: it is what the app rendered
    and what the provider caches as the prefix. A system message later in the
    history is part of the conversation.
    """
    for position, item in enumerate(items):
        role = item.get("role") if isinstance(item, Mapping) else None
        if role not in SYSTEM_ROLES:
            return items[position:]
        shape.system.append(item)
        shape.system_texts.append(_text_of(item.get("content")))
    return []


_SHAPES = {
    names.DIALECT_CHAT_COMPLETIONS: _chat_completions,
    names.DIALECT_ANTHROPIC_MESSAGES: _anthropic_messages,
    names.DIALECT_OPENAI_RESPONSES: _openai_responses,
}


def detect_dialect(body: Mapping[str, Any]) -> str:
    """Best guess from the body alone; the provider wrappers know it from the URL.

    Ambiguous bodies (a model, user messages and ``max_tokens``) are read as
    Anthropic, which requires ``max_tokens``; Chat Completions has moved to
    ``max_completion_tokens``. ``--dialect`` overrides the guess.
    """
    if "messages" not in body and ("input" in body or "instructions" in body):
        return names.DIALECT_OPENAI_RESPONSES
    if "system" in body or "thinking" in body or "anthropic_version" in body:
        return names.DIALECT_ANTHROPIC_MESSAGES
    chat_keys = ("max_completion_tokens", "reasoning_effort", "stream_options", "response_format",
                 "functions", "n", "logprobs", "frequency_penalty", "presence_penalty")
    if any(key in body for key in chat_keys):
        return names.DIALECT_CHAT_COMPLETIONS
    for message in _list(body.get("messages")):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") in SYSTEM_ROLES | CHAT_TOOL_RESULT_ROLES or "tool_calls" in message:
            return names.DIALECT_CHAT_COMPLETIONS
        for block in _list(message.get("content")):
            if isinstance(block, Mapping) and block.get("type") in ("tool_use", "tool_result", "thinking", "image", "document"):
                return names.DIALECT_ANTHROPIC_MESSAGES
    for tool in _list(body.get("tools")):
        if isinstance(tool, Mapping) and "input_schema" in tool:
            return names.DIALECT_ANTHROPIC_MESSAGES
        if isinstance(tool, Mapping) and "function" in tool:
            return names.DIALECT_CHAT_COMPLETIONS
    if "max_tokens" in body:
        return names.DIALECT_ANTHROPIC_MESSAGES
    return names.DIALECT_CHAT_COMPLETIONS


# --- text for the block map and tool definitions for the span ---------------------


def body_system_text(body: Mapping[str, Any], dialect: str) -> str | None:
    """The system prompt as a provider request body of ``dialect`` carries it (the collector reads
    the same idea from span attributes: ``collector.conventions.system_prompt``)."""
    texts = [text for text in _SHAPES[dialect](body).system_texts if text]
    return "".join(texts) if texts else None


def tool_definitions(body: Mapping[str, Any], dialect: str) -> list[tuple[str, str]]:
    """(name, canonical JSON text) per tool, in request order, for the span's tool events."""
    tools = _SHAPES[dialect](body).tools
    return [(str(tool_name(tool, dialect) or ""), canonical_json(tool)) for tool in tools]


def tool_name(tool: Any, dialect: str) -> Any:
    """A tool definition's name (or a built-in tool's type), as the body spells it."""
    if not isinstance(tool, Mapping):
        return None
    if dialect == names.DIALECT_CHAT_COMPLETIONS:
        for nested in ("function", "custom"):
            inner = tool.get(nested)
            if isinstance(inner, Mapping) and "name" in inner:
                return inner["name"]
    # Built-in tools (web_search, code_interpreter …) have a type, not a name.
    return tool.get("name", tool.get("type"))


def reasoning_settings(body: Mapping[str, Any], dialect: str) -> tuple[Any, int | None]:
    """(effort word, thinking budget in tokens), wherever the dialect keeps them."""
    effort: Any = None
    budget: int | None = None
    reasoning = body.get("reasoning")
    if isinstance(reasoning, Mapping):
        effort = reasoning.get("effort")
    if body.get("reasoning_effort") is not None:
        effort = body.get("reasoning_effort")
    if dialect == names.DIALECT_ANTHROPIC_MESSAGES:
        thinking = body.get("thinking")
        if isinstance(thinking, Mapping):
            budget = _as_int(thinking.get("budget_tokens"))
            effort = thinking.get("type")  # enabled / adaptive / disabled
        output_config = body.get("output_config")
        if isinstance(output_config, Mapping) and output_config.get("effort") is not None:
            effort = output_config["effort"]
    return effort, budget


def _text_of(content: Any) -> str:
    """The text of a content value: a string, a text part, or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        text = content.get("text")
        return text if isinstance(text, str) else ""
    if isinstance(content, list):
        return "".join(_text_of(part) for part in content)
    return ""


def _attachments(content: Any) -> Iterable[Any]:
    """Attachment parts anywhere in a content value (tool results nest them)."""
    for part in _list(content):
        if not isinstance(part, Mapping):
            continue
        if part.get("type") in ATTACHMENT_PART_TYPES:
            yield part
        elif isinstance(part.get("content"), list):
            yield from _attachments(part["content"])


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def max_output_tokens(body: Mapping[str, Any]) -> int | None:
    """The request's output-token cap, under the first key of :data:`MAX_OUTPUT_KEYS` it uses."""
    for key in MAX_OUTPUT_KEYS:
        value = _as_int(body.get(key))
        if value is not None:
            return value
    return None
