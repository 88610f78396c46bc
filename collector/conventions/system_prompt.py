"""The system prompt and messages as other GenAI instrumentations send them.

Pure. Spans without a promptprism block map still tell us the system prompt
when content capture was on, in one of several shapes:

- ``gen_ai.system_instructions``: a list of parts ``[{"type": "text",
  "content": …}]``, as a JSON string or a structured (array/kvlist) value;
- ``gen_ai.input.messages``: messages whose ``role`` is ``system``, with
  ``parts`` (current semconv) or ``content`` (a string, or provider-style
  ``[{"type": "text", "text": …}]``);
- the older flattened ``gen_ai.prompt.N.role`` / ``gen_ai.prompt.N.content``.
"""

from __future__ import annotations

import hashlib
import json

from ...wire import names

SYSTEM_ROLES = ("system", "developer")  # OpenAI renamed system to developer for o-series models
# Messages are joined into one prompt text the way chat templates separate them.
MESSAGE_SEPARATOR = "\n\n"
# gen_ai.prompt.N: N beyond this is not a real prompt (and would make the scan unbounded).
MAX_LEGACY_MESSAGES = 10_000
# The block that stands for a whole system prompt seen without a map.
WHOLE_PROMPT_BLOCK_NAME = "system"
WHOLE_PROMPT_LAYER = "unknown"  # no map says which layers it holds


def system_prompt_text(attributes: dict) -> tuple[str, str] | None:
    """(attribute it came from, text), or None when no system text was captured."""
    if names.GEN_AI_SYSTEM_INSTRUCTIONS in attributes:
        text = instructions_text(attributes[names.GEN_AI_SYSTEM_INSTRUCTIONS])
        if text is not None:
            return names.GEN_AI_SYSTEM_INSTRUCTIONS, text
    if names.GEN_AI_INPUT_MESSAGES in attributes:
        text = messages_system_text(attributes[names.GEN_AI_INPUT_MESSAGES])
        if text is not None:
            return names.GEN_AI_INPUT_MESSAGES, text
    inputs, _ = legacy_messages(attributes)
    texts = [message["content"] for message in inputs
             if message.get("role") in SYSTEM_ROLES and isinstance(message.get("content"), str)]
    if texts:
        return names.GEN_AI_PROMPT_PREFIX + "N.content", MESSAGE_SEPARATOR.join(texts)
    return None


def instructions_text(value: object) -> str | None:
    """The text of a ``gen_ai.system_instructions`` value (parts, JSON text of parts, or plain text)."""
    instructions = _structured(value)
    if instructions is None:
        return None
    if isinstance(instructions, str):
        return instructions
    return _parts_text(instructions)


def messages_system_text(value: object) -> str | None:
    """The system and developer messages of a ``gen_ai.input.messages`` value, joined; None without any."""
    messages = _structured(value)
    if not isinstance(messages, list):
        return None
    texts = [message_text(message) for message in messages
             if isinstance(message, dict) and message.get("role") in SYSTEM_ROLES]
    texts = [text for text in texts if text is not None]
    return MESSAGE_SEPARATOR.join(texts) if texts else None


def whole_prompt(text: str, declared_sha256: str = "") -> tuple[bytes, str] | None:
    """A system prompt seen without a map: its UTF-8 bytes and sha256, or None when it
    cannot stand for the prompt (half a character escaped in JSON: no bytes to measure;
    a prompt hash declared on the span that is not this text's)."""
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    digest = hashlib.sha256(encoded).hexdigest()
    if declared_sha256 and declared_sha256.lower() != digest:
        return None
    return encoded, digest


def legacy_messages(attributes: dict) -> tuple[list[dict], list[dict]]:
    """``gen_ai.prompt.N.*`` and ``gen_ai.completion.N.*`` as lists of message dicts."""
    return _flattened(attributes, names.GEN_AI_PROMPT_PREFIX), _flattened(attributes, names.GEN_AI_COMPLETION_PREFIX)


def _flattened(attributes: dict, prefix: str) -> list[dict]:
    by_index: dict[int, dict] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        index_text, _, field_name = key[len(prefix):].partition(".")
        if not index_text.isdigit() or not field_name or int(index_text) > MAX_LEGACY_MESSAGES:
            continue
        by_index.setdefault(int(index_text), {})[field_name] = value
    return [by_index[index] for index in sorted(by_index)]


def _structured(value: object) -> object:
    """A JSON string parsed; structured values as they are; plain text stays text."""
    if isinstance(value, str):
        stripped = value.lstrip()
        if stripped.startswith(("[", "{")):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value
    return value


def _parts_text(parts: object) -> str | None:
    if isinstance(parts, dict):
        parts = [parts]
    if not isinstance(parts, list):
        return None
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type", "text") == "text":
            text = part.get("content", part.get("text"))
            if isinstance(text, str):
                texts.append(text)
            elif isinstance(text, list):  # OpenLIT: an Anthropic block-form system as the part's content
                inner = _parts_text(text)
                if inner is not None:
                    texts.append(inner)
    return "".join(texts) if texts else None


def message_text(message: dict) -> str | None:
    if "parts" in message:
        return _parts_text(message["parts"])
    content = message.get("content")
    if isinstance(content, str):
        return content
    return _parts_text(content)
