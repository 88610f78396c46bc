"""Which spans are LLM requests, whichever instrumentation sent them. Pure.

A span is a request when any of these holds, checked in this order:

1. it carries promptprism's own attributes or block / tool events;
2. OpenInference marks it ``openinference.span.kind`` = ``LLM`` (or
   ``EMBEDDING``); any other OpenInference kind (AGENT, CHAIN, TOOL,
   RETRIEVER …) is not one, although it carries ``input.value`` and
   ``output.value`` too;
3. the Vercel AI SDK's ``ai.operationId`` ends with ``.doGenerate`` or
   ``.doStream``; its other spans (``ai.generateText``, which sums usage
   over steps, ``ai.toolCall``) are not;
4. OpenLLMetry's workflow, task, agent and tool spans
   (``traceloop.span.kind``) are not;
5. a GenAI operation that is a tool or agent run (``execute_tool``,
   ``invoke_agent``, ``create_agent``) is not;
6. it names a model or reports usage: ``gen_ai.request.model``,
   ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` /
   ``output_tokens`` (older: ``prompt_tokens``), ``llm.request.type``, or the
   messages / instructions the call sent (``gen_ai.input.messages``,
   ``gen_ai.system_instructions``, ``gen_ai.prompt.N.*``) — an output alone is
   not enough (OpenLIT's ``@trace`` spans carry only
   ``gen_ai.output.messages``);
7. OpenLIT's failed calls carry no attribute at all: a span of an
   ``openlit.instrumentation.*`` scope named ``"<operation> <model>"``.

HTTP client spans (even OpenLIT's httpx ``POST`` to the provider, a child of
the request span) and application spans match none of these.
"""

from __future__ import annotations

from ...wire import names
from ..otlp.model import DecodedSpan
from . import openinference, vercel_ai
from .providers import operation_name

TRACELOOP_SPAN_KIND = "traceloop.span.kind"
NOT_REQUESTS = frozenset({names.OPERATION_EXECUTE_TOOL, names.OPERATION_INVOKE_AGENT, names.OPERATION_CREATE_AGENT})
REQUEST_KEYS = (
    names.GEN_AI_REQUEST_MODEL, names.GEN_AI_RESPONSE_MODEL, names.GEN_AI_USAGE_INPUT_TOKENS,
    names.GEN_AI_USAGE_OUTPUT_TOKENS, names.GEN_AI_USAGE_PROMPT_TOKENS, "llm.request.type",
    names.GEN_AI_INPUT_MESSAGES, names.GEN_AI_SYSTEM_INSTRUCTIONS,
)
OPENLIT_SCOPE_PREFIX = "openlit.instrumentation."
_PROMPTPRISM_EVENTS = (names.EVENT_PROMPT_BLOCK, names.EVENT_TOOL_DEFINITION)
_LLM_OPERATIONS = ("chat", "text_completion", "generate_content", "embeddings")


def is_request(span: DecodedSpan) -> bool:
    attributes = span.attributes
    for key in attributes:
        if key.startswith("promptprism."):
            return True
    if any(event.name in _PROMPTPRISM_EVENTS for event in span.events):
        return True
    if openinference.SPAN_KIND in attributes:
        return openinference.is_llm_span(attributes)
    if vercel_ai.OPERATION_ID in attributes:
        return vercel_ai.is_request_span(attributes)
    if TRACELOOP_SPAN_KIND in attributes:
        return False
    operation = attributes.get(names.GEN_AI_OPERATION_NAME)
    if isinstance(operation, str) and operation in NOT_REQUESTS:  # a list or map value is not hashable
        return False
    if any(key in attributes for key in REQUEST_KEYS):
        return True
    if any(key.startswith(names.GEN_AI_PROMPT_PREFIX) for key in attributes):
        return True
    if span.scope_name.startswith(OPENLIT_SCOPE_PREFIX):
        operation, _, model = span.name.partition(" ")
        return operation_name(operation) in _LLM_OPERATIONS and bool(model)
    return False
