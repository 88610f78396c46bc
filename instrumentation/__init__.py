"""promptprism instrumentation: render prompts with exact block maps and record every LLM request as a span.

Render: :class:`TemplateCatalog` (Jinja2 templates with scope/global overrides),
:func:`render_string`, :class:`PromptBuilder` / :func:`build_prompt`; declare
injected values with :func:`block` and :func:`inline`.
Record: :func:`record_llm_request` (a ``with`` block), :func:`start_llm_request` (start now,
``RecordedRequest.end`` later: streaming), ambient :func:`correlation`.
Configure: :func:`configure_content_capture`, :func:`set_redactor`,
:func:`span_limits_for_prompts` / :func:`prompt_tracer_provider`.
"""

from ._capture import configure_content_capture
from ._context import correlation
from ._record import (
    RecordedRequest,
    ToolSpec,
    failure_count,
    prompt_tracer_provider,
    record_llm_request,
    span_limits_for_prompts,
    start_llm_request,
)
from ._redact import keep_everything, mask_secrets, set_redactor
from ._segments import (
    Block,
    PromptBuilder,
    SegmentedPrompt,
    Template,
    Value,
    block,
    build_prompt,
    inline,
    lookup_rendered,
)
from ._templates import (
    ENV_TEMPLATE_OVERRIDES,
    ENV_TEMPLATES,
    ResolvedTemplate,
    TemplateCatalog,
    TemplateError,
    prompt_environment,
    render_string,
)

__all__ = [
    "ENV_TEMPLATES",
    "ENV_TEMPLATE_OVERRIDES",
    "Block",
    "PromptBuilder",
    "RecordedRequest",
    "ResolvedTemplate",
    "SegmentedPrompt",
    "Template",
    "TemplateCatalog",
    "TemplateError",
    "ToolSpec",
    "Value",
    "block",
    "build_prompt",
    "configure_content_capture",
    "correlation",
    "failure_count",
    "inline",
    "keep_everything",
    "lookup_rendered",
    "mask_secrets",
    "prompt_environment",
    "prompt_tracer_provider",
    "record_llm_request",
    "render_string",
    "set_redactor",
    "span_limits_for_prompts",
    "start_llm_request",
]
