"""Tool definitions in every convention's form → rows of the ``tools`` table. Pure.

Forms seen on the wire: ``gen_ai.tool.definitions`` as a JSON string or a
structured array (OpenLLMetry's flattened ``{"type": "function", "name", …}``,
the nested chat-completions ``{"type": "function", "function": {…}}``,
Anthropic's ``{"name", "input_schema"}``; OpenLIT's log record as
``array<kvlist>``), OpenInference's ``llm.tools.N.tool.json_schema`` (one JSON
string each), the Vercel AI SDK's ``ai.prompt.tools`` (an array of JSON
strings) and the older ``llm.request.functions.N.{name,description,parameters}``.

Each definition is measured in the canonical JSON (``wire.canonical``; instrumentations
serialise the same definition with other key orders and spacing), so the
same tool has the same size and sha256 whichever instrumentation sent it; its
text is that canonical JSON, kept only because it arrived (content capture
was on for it).
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from ...wire import names
from ...wire.canonical import canonical_json
from ..record import ToolDefinition
from ._convention import parsed

# More definitions than this on one request is not a real tool list (and would make the scan unbounded).
MAX_TOOLS = 1_000


def definition_list(value: Any) -> list[Any]:
    """A tool-definitions value (JSON text, array, array of JSON texts) → a list of definitions."""
    value = parsed(value)
    if isinstance(value, dict):
        tools = value.get("tools")
        value = tools if isinstance(tools, list) else [value]
    if not isinstance(value, list):
        return []
    return [parsed(item) for item in value[:MAX_TOOLS]]


def tool_name(definition: Any) -> str:
    if not isinstance(definition, dict):
        return ""
    function = definition.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return function["name"]
    name = definition.get("name")
    return name if isinstance(name, str) else ""


def tool_definitions(definitions: Iterable[Any]) -> list[ToolDefinition]:
    """One ``ToolDefinition`` per definition, in order, measured in canonical JSON."""
    tools = []
    for index, definition in enumerate(definitions):
        if definition is None or definition == "":
            continue
        text = canonical_json(definition) if not isinstance(definition, str) else definition
        encoded = text.encode("utf-8", "surrogatepass")
        tools.append(ToolDefinition(len(tools), tool_name(definition), len(encoded),
                                    hashlib.sha256(encoded).hexdigest(), text))
        if index + 1 >= MAX_TOOLS:
            break
    return tools


def flattened_functions(attributes: dict, prefix: str) -> list[dict]:
    """``<prefix>N.name`` / ``.description`` / ``.parameters`` (older OpenLLMetry) as definitions."""
    by_index: dict[int, dict] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        index_text, _, field_name = key[len(prefix):].partition(".")
        if not index_text.isdigit() or not field_name or int(index_text) >= MAX_TOOLS:
            continue
        by_index.setdefault(int(index_text), {})[field_name] = parsed(value) if field_name == "parameters" else value
    return [by_index[index] for index in sorted(by_index)]


def event_tool_definitions(event_name: str, body: Any, attributes: dict) -> list[ToolDefinition]:
    """Tool definitions a GenAI log event carries: ``gen_ai.tool.definitions`` among the
    attributes of an operation-details record (OpenLIT: structured, even with content capture
    off), or a ``tools`` list as the content of a user-message event (OpenLLMetry's Anthropic
    events mode)."""
    if names.GEN_AI_TOOL_DEFINITIONS in attributes:
        return tool_definitions(definition_list(attributes[names.GEN_AI_TOOL_DEFINITIONS]))
    if event_name == names.EVENT_USER_MESSAGE and isinstance(body, dict):
        content = parsed(body.get("content"))
        if isinstance(content, dict) and isinstance(content.get("tools"), list):
            return tool_definitions(definition_list(content["tools"]))
    return []
