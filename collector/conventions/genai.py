"""The GenAI semantic conventions (current and older spellings) → the request record. Pure.

A field that one GenAI attribute fills declares that attribute in
``record.py`` (``declared`` copies it). This module holds the rest of the
conventions, where a field has more than one source:

- the provider: ``gen_ai.provider.name``, else the older ``gen_ai.system``,
  normalised (``providers``: ``openai.chat`` → ``openai``, ``az.ai.openai`` →
  ``azure.ai.openai``); the operation likewise, else the older
  ``llm.request.type``;
- the model: else the response model (OpenLLMetry's Anthropic events mode
  sends only that), else the span name ``"<operation> <model>"`` of a failed
  call that carries nothing else (OpenLIT);
- usage: the current token names first, the older ones (``gen_ai.usage.prompt_tokens``,
  ``llm.usage.*``) as a fallback; cache reads and writes under every
  spelling seen (``cache_read.input_tokens``, ``cache_read_input_tokens``;
  ``cache_creation.input_tokens``, ``cache_write.input_tokens``,
  ``cache_creation_input_tokens``). Input tokens are the whole prompt, cache
  included: OpenLIT's Anthropic spans report the provider's uncached count,
  so the cached parts are added back there;
- finish reasons: ``gen_ai.response.finish_reasons``, else the anthropic
  SDK's ``anthropic.message.stop_reason``;
- tool definitions: ``gen_ai.tool.definitions``, else the older
  ``llm.request.functions.N.*`` (``tools``);
- the conversation: ``gen_ai.conversation.id``, else an app-chosen key of
  OpenLLMetry's association properties or the AI SDK's telemetry metadata
  (``CONVERSATION_KEYS``);
- content flattened the older way (``gen_ai.prompt.N.role`` /
  ``.content``, ``gen_ai.completion.N.*``) when the span carries no
  ``gen_ai.input.messages`` / ``gen_ai.output.messages``.
"""

from __future__ import annotations

import json
from typing import Mapping

from ...wire import names
from ..record import RequestRecord
from ._convention import Convention, integer, json_text
from .providers import operation_name, provider_name
from .system_prompt import legacy_messages
from .tools import definition_list, flattened_functions, tool_definitions

# The current name first, the older spellings after it.
PROVIDER = (names.GEN_AI_PROVIDER_NAME, names.GEN_AI_SYSTEM)
LLM_REQUEST_TYPE = "llm.request.type"  # OpenLLMetry before the operation name existed
USAGE = (
    ("input_tokens", (names.GEN_AI_USAGE_INPUT_TOKENS, names.GEN_AI_USAGE_PROMPT_TOKENS, "llm.usage.prompt_tokens")),
    ("output_tokens", (names.GEN_AI_USAGE_OUTPUT_TOKENS, names.GEN_AI_USAGE_COMPLETION_TOKENS,
                       "llm.usage.completion_tokens")),
    ("cache_read_tokens", (names.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, "gen_ai.usage.cache_read_input_tokens",
                           "llm.usage.cache_read_input_tokens")),
    ("cache_creation_tokens", (names.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, "gen_ai.usage.cache_write.input_tokens",
                               "gen_ai.usage.cache_creation_input_tokens", "llm.usage.cache_creation_input_tokens")),
)
STOP_REASON = "anthropic.message.stop_reason"  # the anthropic SDK's own spans: no finish_reasons
FUNCTIONS_PREFIX = "llm.request.functions."
FLATTENED_CONTENT_PREFIXES = (names.GEN_AI_PROMPT_PREFIX, names.GEN_AI_COMPLETION_PREFIX, FUNCTIONS_PREFIX)
# App-chosen correlation keys that hold a conversation id (OpenLLMetry association
# properties, the AI SDK's telemetry metadata), tried in this order.
CONVERSATION_PREFIXES = ("traceloop.association.properties.", "ai.telemetry.metadata.")
CONVERSATION_KEYS = ("conversation_id", "conversationId", "session_id", "sessionId", "thread_id", "threadId")
# OpenLIT reports Anthropic's own input_tokens, which leave cached and cache-written tokens out.
UNCACHED_INPUT_SCOPES = ("openlit.instrumentation.anthropic",)
# Instrumentation scopes named after the provider they trace ("openlit.instrumentation.anthropic").
INSTRUMENTATION_SCOPE_PREFIXES = ("openlit.instrumentation.",)
# Operations whose span name is "<operation> <model>" (GenAI span naming).
_NAMED_OPERATIONS = ("chat", "text_completion", "generate_content", "embeddings")


def fill(attributes: Mapping[str, object], record: RequestRecord) -> None:
    get = attributes.get
    current, older = PROVIDER
    record.provider = provider_name(get(current)) or provider_name(get(older))
    record.operation = operation_name(record.operation) or operation_name(get(LLM_REQUEST_TYPE))
    for field_name, keys in USAGE:
        for key in keys:
            whole = integer(get(key))
            if whole is not None and whole >= 0:
                setattr(record, field_name, whole)
                break
    if not record.finish_reasons and isinstance(get(STOP_REASON), str) and get(STOP_REASON):
        record.finish_reasons = [get(STOP_REASON)]
    if not record.conversation_id:
        record.conversation_id = _conversation(attributes)
    # The flattened forms, read from the attributes that have their prefixes: one pass over the
    # span's attributes instead of one per form (most spans have none).
    flattened = {key: attributes[key] for key in attributes if key.startswith(FLATTENED_CONTENT_PREFIXES)}
    if names.GEN_AI_TOOL_DEFINITIONS in attributes:
        record.tools = tool_definitions(definition_list(get(names.GEN_AI_TOOL_DEFINITIONS)))
    else:
        record.tools = tool_definitions(flattened_functions(flattened, FUNCTIONS_PREFIX)) if flattened else []
    if flattened and (not record.input_messages or not record.output_messages):
        inputs, outputs = legacy_messages(flattened)
        record.input_messages = record.input_messages or (json_text(inputs) if inputs else "")
        record.output_messages = record.output_messages or (json_text(outputs) if outputs else "")
        if not record.finish_reasons:
            record.finish_reasons = [output["finish_reason"] for output in outputs
                                     if isinstance(output.get("finish_reason"), str)]


def complete(record: RequestRecord) -> None:
    """What is decided once every convention has filled the record: the model's
    fallbacks, whole-prompt input tokens, the tool count."""
    if not record.model:
        record.model = record.response_model or _model_from_span_name(record)
        if record.model and not record.operation and not record.response_model:
            record.operation = operation_name(record.span_name.partition(" ")[0])
    if not record.provider and record.scope_name.startswith(INSTRUMENTATION_SCOPE_PREFIXES):
        # A failed call OpenLIT traced carries no attribute at all: its scope names the provider.
        record.provider = provider_name(record.scope_name.rpartition(".")[2])
    if not record.finish_reasons and record.output_messages:
        record.finish_reasons = _output_finish_reasons(record.output_messages)
    if record.scope_name.startswith(UNCACHED_INPUT_SCOPES) and record.input_tokens is not None:
        record.input_tokens += (record.cache_read_tokens or 0) + (record.cache_creation_tokens or 0)
    if record.tools and not record.tools_count:
        record.tools_count = len(record.tools)


def _model_from_span_name(record: RequestRecord) -> str:
    operation, _, model = record.span_name.partition(" ")
    return model if operation_name(operation) in _NAMED_OPERATIONS and model and " " not in model else ""


def _output_finish_reasons(output_messages: str) -> list[str]:
    """The ``finish_reason`` of each output message (the official instrumentations put it only there)."""
    try:
        outputs = json.loads(output_messages)
    except ValueError:
        return []
    if not isinstance(outputs, list):
        return []
    return [output["finish_reason"] for output in outputs
            if isinstance(output, dict) and isinstance(output.get("finish_reason"), str) and output["finish_reason"]]


def _conversation(attributes: Mapping[str, object]) -> str:
    for prefix in CONVERSATION_PREFIXES:
        for key in CONVERSATION_KEYS:
            value = attributes.get(prefix + key)
            if isinstance(value, str) and value:
                return value
    return ""


CONVENTION = Convention(
    name="genai", fill=fill,
    attributes=frozenset([*PROVIDER, LLM_REQUEST_TYPE, STOP_REASON, names.GEN_AI_TOOL_DEFINITIONS,
                          *(key for _, keys in USAGE for key in keys)]),
    prefixes=FLATTENED_CONTENT_PREFIXES)
