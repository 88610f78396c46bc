"""OpenInference (Arize Phoenix's ``llm.*`` conventions) → the request record. Pure.

Only spans with ``openinference.span.kind`` = ``LLM`` (or ``EMBEDDING``) are
requests (``detection``); AGENT, CHAIN, TOOL, RETRIEVER spans carry
``input.value`` / ``output.value`` too and are not. On an LLM span:

- model: ``llm.request.model_name``, else ``llm.model_name``, else the
  ``model`` of ``llm.invocation_parameters`` (a failed OpenAI call has no other);
  response model ``llm.response.model_name``, else ``llm.model_name``;
- provider ``llm.provider``, else ``llm.system`` (normalised, ``providers``);
  operation ``chat`` (``embeddings`` for an EMBEDDING span);
- usage ``llm.token_count.prompt`` / ``.completion`` /
  ``.prompt_details.cache_read`` / ``.prompt_details.cache_write``;
- messages ``llm.input_messages.N.message.*`` and ``llm.output_messages.N.…``
  (``role``, ``content`` or ``contents.N.message_content.{type,text}``,
  ``tool_calls.N.tool_call.{id,function.name,function.arguments}``,
  ``tool_call_id``) in the current conventions' shape (``{"role", "parts"}``);
  the system prompt is the input message whose role is ``system``;
- tools ``llm.tools.N.tool.json_schema``; finish reason ``llm.finish_reason``;
  conversation ``session.id``; response id the ``id`` in ``output.value``.

Fields the span's own ``gen_ai.*`` attributes filled (OpenInference can add
them, ``OPENINFERENCE_ENABLE_GENAI_SEMCONV``) are kept.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..record import RequestRecord
from ._convention import Convention, integer, json_text, parsed
from .providers import operation_name, provider_name
from .tools import tool_definitions

SPAN_KIND = "openinference.span.kind"
KIND_LLM, KIND_EMBEDDING = "LLM", "EMBEDDING"
MODEL_NAME = "llm.model_name"
REQUEST_MODEL_NAME = "llm.request.model_name"
RESPONSE_MODEL_NAME = "llm.response.model_name"
INVOCATION_PARAMETERS = "llm.invocation_parameters"
PROVIDER = "llm.provider"
SYSTEM = "llm.system"
FINISH_REASON = "llm.finish_reason"
SESSION_ID = "session.id"
INPUT_VALUE, OUTPUT_VALUE = "input.value", "output.value"
USAGE = (
    ("input_tokens", "llm.token_count.prompt"),
    ("output_tokens", "llm.token_count.completion"),
    ("cache_read_tokens", "llm.token_count.prompt_details.cache_read"),
    ("cache_creation_tokens", "llm.token_count.prompt_details.cache_write"),
)
INPUT_MESSAGES_PREFIX = "llm.input_messages."
OUTPUT_MESSAGES_PREFIX = "llm.output_messages."
TOOLS_PREFIX = "llm.tools."
TOOL_SCHEMA_SUFFIX = ".tool.json_schema"
# Indexes beyond this are not real messages or parts (and would make the scan unbounded).
MAX_INDEX = 10_000


def is_llm_span(attributes: Mapping[str, object]) -> bool:
    return attributes.get(SPAN_KIND) in (KIND_LLM, KIND_EMBEDDING)


def fill(attributes: Mapping[str, object], record: RequestRecord) -> None:
    if not is_llm_span(attributes):
        return
    get = attributes.get
    if not record.operation:
        record.operation = operation_name("embeddings" if get(SPAN_KIND) == KIND_EMBEDDING else "chat")
    if not record.provider:
        record.provider = provider_name(get(PROVIDER)) or provider_name(get(SYSTEM))
    if not record.model:
        record.model = _text(get(REQUEST_MODEL_NAME)) or _text(get(MODEL_NAME)) or _invocation_model(attributes)
    if not record.response_model:
        record.response_model = _text(get(RESPONSE_MODEL_NAME)) or _text(get(MODEL_NAME))
    for field_name, key in USAGE:
        if getattr(record, field_name) is None:
            whole = integer(get(key))
            if whole is not None and whole >= 0:
                setattr(record, field_name, whole)
    if not record.finish_reasons and isinstance(get(FINISH_REASON), str) and get(FINISH_REASON):
        record.finish_reasons = [get(FINISH_REASON)]
    if not record.conversation_id and isinstance(get(SESSION_ID), str):
        record.conversation_id = get(SESSION_ID)
    if not record.response_id:
        output = parsed(get(OUTPUT_VALUE))
        if isinstance(output, dict) and isinstance(output.get("id"), str):
            record.response_id = output["id"]
    if not record.input_messages:
        inputs = [_message(message) for message in _indexed(attributes, INPUT_MESSAGES_PREFIX)]
        record.input_messages = json_text(inputs) if inputs else ""
    if not record.output_messages:
        outputs = [_message(message) for message in _indexed(attributes, OUTPUT_MESSAGES_PREFIX)]
        if outputs and record.finish_reasons:
            outputs[0]["finish_reason"] = record.finish_reasons[0]
        record.output_messages = json_text(outputs) if outputs else ""
    if not record.tools:
        schemas = [tool.get("tool", {}).get("json_schema") if isinstance(tool.get("tool"), dict) else None
                   for tool in _indexed(attributes, TOOLS_PREFIX)]
        record.tools = tool_definitions(parsed(schema) for schema in schemas if schema)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _invocation_model(attributes: Mapping[str, object]) -> str:
    parameters = parsed(attributes.get(INVOCATION_PARAMETERS))
    return _text(parameters.get("model")) if isinstance(parameters, dict) else ""


# --- flattened, indexed keys → nested values ------------------------------------------------

def _indexed(attributes: Mapping[str, object], prefix: str) -> list[dict]:
    """``<prefix>N.a.b.M.c`` keys → a list (by N, numerically) of nested dicts; lists where a key is an index."""
    root: dict[int, dict] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        index_text, _, rest = key[len(prefix):].partition(".")
        if not index_text.isdigit() or not rest or int(index_text) > MAX_INDEX:
            continue
        node: dict = root.setdefault(int(index_text), {})
        segments = rest.split(".")
        # "function.name" and "function.arguments" are one level each; numeric segments index lists.
        for segment in segments[:-1]:
            node = node.setdefault(int(segment) if segment.isdigit() else segment, {})
            if not isinstance(node, dict):
                break
        else:
            node[segments[-1]] = value
    return [_lists(root[index]) for index in sorted(root)]


def _lists(node: Any) -> Any:
    """Dicts keyed by ints → lists in index order (recursively)."""
    if not isinstance(node, dict):
        return node
    if node and all(isinstance(key, int) for key in node):
        return [_lists(node[key]) for key in sorted(node) if key <= MAX_INDEX]
    return {key: _lists(value) for key, value in node.items()}




def _tool_call_part(call: Any) -> dict | None:
    call = call.get("tool_call") if isinstance(call, dict) else None
    if not isinstance(call, dict):
        return None
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    return {"type": "tool_call", "id": call.get("id"), "name": function.get("name") or "",
            "arguments": parsed(function.get("arguments"))}


def _message(entry: dict) -> dict:
    """One ``llm.*_messages.N`` entry → ``{"role", "parts"}``."""
    message = entry.get("message") if isinstance(entry.get("message"), dict) else {}
    role = message.get("role") if isinstance(message.get("role"), str) else "user"
    parts: list[dict] = []
    tool_calls = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else []
    for call in tool_calls:
        part = _tool_call_part(call)
        if part is not None:
            parts.append(part)
    content = message.get("content")
    contents = message.get("contents") if isinstance(message.get("contents"), list) else []
    if role == "tool":
        response = content if content is not None else "".join(
            item["message_content"].get("text", "") for item in contents
            if isinstance(item, dict) and isinstance(item.get("message_content"), dict))
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": message.get("tool_call_id"),
                                           "response": response}]}
    if isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    for item in contents:
        if not isinstance(item, dict):
            continue
        block = item.get("message_content")
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append({"type": "text", "content": block["text"]})
        elif "tool_call" in item and not tool_calls:  # the same call as message.tool_calls, when that is absent
            part = _tool_call_part(item)
            if part is not None:
                parts.append(part)
    return {"role": role, "parts": parts}


CONVENTION = Convention(
    name="openinference", fill=fill,
    attributes=frozenset({SPAN_KIND, MODEL_NAME, REQUEST_MODEL_NAME, RESPONSE_MODEL_NAME, PROVIDER, SYSTEM,
                          FINISH_REASON, INPUT_VALUE, OUTPUT_VALUE, *(key for _, key in USAGE)}),
    prefixes=(INPUT_MESSAGES_PREFIX, OUTPUT_MESSAGES_PREFIX, TOOLS_PREFIX))
