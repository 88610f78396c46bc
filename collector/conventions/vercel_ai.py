"""The Vercel AI SDK's telemetry (``ai.*``) → the request record. Pure.

Only the inner ``ai.<call>.doGenerate`` / ``ai.<call>.doStream`` span of a
call is a provider request (``ai.operationId``); the outer ``ai.generateText``
/ ``ai.streamText`` span sums usage over every step and ``ai.toolCall`` is a
tool run (``detection``). On a request span, besides the ``gen_ai.*`` it
carries (``gen_ai.system`` = ``openai.chat`` is normalised by ``genai``):

- operation ``chat``; model ``ai.model.id`` and response model
  ``ai.response.model`` when ``gen_ai.*`` has none;
- usage ``ai.usage.inputTokens`` / ``outputTokens``, cache reads
  ``ai.usage.cachedInputTokens`` or ``ai.usage.inputTokenDetails.cacheReadTokens``,
  cache writes ``ai.usage.inputTokenDetails.cacheWriteTokens``;
- messages ``ai.prompt.messages`` (JSON; string or part-list content, parts
  ``text``, ``tool-call``, ``tool-result``) in the current conventions' shape,
  the system prompt being its ``system`` message; the response
  ``ai.response.text`` and ``ai.response.toolCalls``;
- tools ``ai.prompt.tools`` (an array of JSON strings); finish reason
  ``ai.response.finishReason``; response id ``ai.response.id``;
- conversation: ``ai.telemetry.metadata.<key>`` for the usual keys
  (``genai.CONVERSATION_KEYS``).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..record import RequestRecord
from ._convention import Convention, integer, json_text, parsed
from .providers import provider_name
from .tools import definition_list, tool_definitions

OPERATION_ID = "ai.operationId"
REQUEST_SUFFIXES = (".doGenerate", ".doStream")
MODEL_ID, MODEL_PROVIDER = "ai.model.id", "ai.model.provider"
RESPONSE_MODEL, RESPONSE_ID, FINISH_REASON = "ai.response.model", "ai.response.id", "ai.response.finishReason"
PROMPT, PROMPT_MESSAGES, PROMPT_TOOLS = "ai.prompt", "ai.prompt.messages", "ai.prompt.tools"
RESPONSE_TEXT, RESPONSE_TOOL_CALLS = "ai.response.text", "ai.response.toolCalls"
METADATA_PREFIX = "ai.telemetry.metadata."
USAGE = (
    ("input_tokens", ("ai.usage.inputTokens", "ai.usage.promptTokens")),
    ("output_tokens", ("ai.usage.outputTokens", "ai.usage.completionTokens")),
    ("cache_read_tokens", ("ai.usage.cachedInputTokens", "ai.usage.inputTokenDetails.cacheReadTokens")),
    ("cache_creation_tokens", ("ai.usage.inputTokenDetails.cacheWriteTokens",)),
)


def is_request_span(attributes: Mapping[str, object]) -> bool:
    operation = attributes.get(OPERATION_ID)
    return isinstance(operation, str) and operation.endswith(REQUEST_SUFFIXES)


def fill(attributes: Mapping[str, object], record: RequestRecord) -> None:
    if not is_request_span(attributes):
        return
    get = attributes.get
    record.operation = record.operation or "chat"
    record.provider = record.provider or provider_name(get(MODEL_PROVIDER))
    record.model = record.model or _text(get(MODEL_ID))
    record.response_model = record.response_model or _text(get(RESPONSE_MODEL))
    record.response_id = record.response_id or _text(get(RESPONSE_ID))
    if not record.finish_reasons and _text(get(FINISH_REASON)):
        record.finish_reasons = [get(FINISH_REASON)]
    for field_name, keys in USAGE:
        if getattr(record, field_name) is not None:
            continue
        for key in keys:
            whole = integer(get(key))
            if whole is not None and whole >= 0:
                setattr(record, field_name, whole)
                break
    if not record.input_messages:
        messages = parsed(get(PROMPT_MESSAGES))
        if isinstance(messages, list):
            record.input_messages = json_text([_message(message) for message in messages
                                               if isinstance(message, dict)])
    if not record.output_messages:
        output = _output(get(RESPONSE_TEXT), parsed(get(RESPONSE_TOOL_CALLS)), record.finish_reasons)
        record.output_messages = json_text([output]) if output else ""
    if not record.tools:
        record.tools = tool_definitions(definition_list(get(PROMPT_TOOLS)))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _part(part: Any) -> dict | None:
    if isinstance(part, str):
        return {"type": "text", "content": part}
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "content": _text(part.get("text"))}
    if kind == "tool-call":
        return {"type": "tool_call", "id": part.get("toolCallId"), "name": _text(part.get("toolName")),
                "arguments": parsed(part.get("input", part.get("args")))}
    if kind == "tool-result":
        output = part.get("output", part.get("result"))
        if isinstance(output, dict) and "value" in output and output.get("type") in ("text", "json"):
            output = output["value"]
        return {"type": "tool_call_response", "id": part.get("toolCallId"), "response": output}
    return dict(part)  # files, images, reasoning: as they came


def _message(message: dict) -> dict:
    content = message.get("content")
    items = content if isinstance(content, list) else [content] if isinstance(content, str) and content else []
    parts = [part for part in (_part(item) for item in items) if part is not None]
    return {"role": _text(message.get("role")) or "user", "parts": parts}


def _output(text: object, tool_calls: object, finish_reasons: list[str]) -> dict | None:
    parts: list[dict] = []
    if isinstance(tool_calls, list):
        for call in tool_calls:
            if isinstance(call, dict):
                parts.append({"type": "tool_call", "id": call.get("toolCallId"), "name": _text(call.get("toolName")),
                              "arguments": parsed(call.get("input", call.get("args")))})
    if isinstance(text, str) and text:
        parts.append({"type": "text", "content": text})
    if not parts:
        return None
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reasons[0] if finish_reasons else ""}


CONVENTION = Convention(
    name="vercel_ai", fill=fill,
    attributes=frozenset({MODEL_ID, MODEL_PROVIDER, RESPONSE_MODEL, RESPONSE_ID, FINISH_REASON, PROMPT,
                          PROMPT_MESSAGES, PROMPT_TOOLS, RESPONSE_TEXT, RESPONSE_TOOL_CALLS,
                          *(key for _, keys in USAGE for key in keys)}))
