"""One LLM request → one span (README "The request span on the wire").

The API provider wrappers and applications call::

    with record_llm_request(
        provider="openai",                 # gen_ai.provider.name
        operation="chat",                  # gen_ai.operation.name; span name is "{operation} {model}"
        model="gpt-4o",                    # gen_ai.request.model
        prompt=segmented_or_text,          # SegmentedPrompt | str | None (the system prompt)
        dialect="chat-completions",        # promptprism.request.dialect
        request_attributes=manifest,       # extra span attributes (promptprism.request.* …)
        tools=[ToolSpec(name, canonical_json_text), ...],
        input_messages=messages,           # str (JSON) or JSON-able; sent only with content capture on
        tracer_provider=None,              # default: the global one
        capture_content=None,              # None: configure_content_capture / environment
        conversation_id=..., message_id=..., process_kind=..., process_id=...,
        run_id=..., run_mode=..., attempt=..., record_id=...,   # correlation (context.py supplies defaults)
    ) as call:
        response = client.chat.completions.create(...)
        call.set_response(model=..., response_id=..., finish_reasons=[...], input_tokens=...,
                          output_tokens=..., cache_read_tokens=..., cache_creation_tokens=...,
                          output_messages=...)

A ``str`` prompt is looked up among recently rendered prompts
(:func:`segments.lookup_rendered`); text promptprism did not render is recorded
**unmapped** with reason ``not_rendered`` — its bytes and sha256 are exact, but
a one-block "map" would claim a layer and stability nobody declared. Wrap such
text in ``build_prompt([...])`` to declare it.

Blocks are ``promptprism.prompt.block`` events, in order; with content capture
on they carry their (redacted) content, and an unmapped prompt's text goes to
``gen_ai.system_instructions`` instead (a mapped prompt's text is already in
its blocks; sending it twice would double the span).

When the request outlives a ``with`` block (a streamed response read later),
start and end it by hand, with the same arguments::

    call = start_llm_request(provider="openai", model="gpt-4o", prompt=prompt)
    with call.current():                   # optional: HTTP client spans nest under it
        stream = client.chat.completions.create(..., stream=True)
    ...                                    # later, in any context or thread
    call.set_response(output_tokens=...)
    call.end()                             # or call.end(error); only the first end counts

``start_time`` (Unix ns) backdates a request: the span and its block and tool
events start then, and the span ends as long after as the request really took.

Recording never raises into the application: failures are counted
(:func:`failure_count`) and logged at most once per interval. An exception
inside the ``with`` block marks the span as an error and propagates unchanged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Iterator, Mapping, Sequence
from weakref import WeakKeyDictionary

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ..wire import names
from ._capture import span_content_enabled
from ._context import correlation_attributes, current_correlation
from ._redact import redact
from ._segments import SegmentedPrompt, lookup_rendered, unmapped

_logger = logging.getLogger(__name__)

# --- span limits ---------------------------------------------------------------
# A prompt with 1,000+ blocks plus a large tool catalog must arrive whole; the
# SDK's default of 128 events keeps only the newest, i.e. drops the first blocks.
MAX_EVENTS_PER_SPAN = 10_000
# ~40 attributes per request today; headroom for manifests and other instrumentations.
MAX_SPAN_ATTRIBUTES = 256
# A block event has 11 attributes.
MAX_EVENT_ATTRIBUTES = 32
# Truncated content would no longer match its sha256, so content longer than
# this is not captured at all, and the SDK is told never to cut anything shorter.
# 1 Mi characters is far above a real prompt block or message history.
MAX_CONTENT_CHARACTERS = 1024 * 1024
# Status descriptions are for humans; the exception message may hold request text.
MAX_ERROR_DESCRIPTION_CHARACTERS = 256
# One line per minute is enough to notice a broken recorder without flooding the app's log.
FAILURE_LOG_INTERVAL_SECONDS = 60.0


def span_limits_for_prompts() -> SpanLimits:
    """Span limits big enough that no prompt block, tool or content attribute is dropped or cut.

    Explicit values, so ``OTEL_SPAN_EVENT_COUNT_LIMIT`` & co. cannot shrink them below what
    a prompt needs. The exporter's tracer provider must use these.
    """
    return SpanLimits(
        max_events=MAX_EVENTS_PER_SPAN,
        max_span_attributes=MAX_SPAN_ATTRIBUTES,
        max_event_attributes=MAX_EVENT_ATTRIBUTES,
        max_attribute_length=MAX_CONTENT_CHARACTERS,
        max_span_attribute_length=MAX_CONTENT_CHARACTERS,
    )


def prompt_tracer_provider(**options: Any) -> TracerProvider:
    """A ``TracerProvider`` with :func:`span_limits_for_prompts` (other options passed through)."""
    return TracerProvider(span_limits=span_limits_for_prompts(), **options)


# --- failures ------------------------------------------------------------------
_failure_lock = threading.Lock()
_failures = 0
_failures_at_last_log = 0
_last_log_time = float("-inf")


def failure_count() -> int:
    """How many recording problems happened in this process (each one logged at a bounded rate)."""
    return _failures


def report_failure(what: str, error: BaseException | None = None) -> None:
    """Count a recording problem and log it unless one was logged in the last interval."""
    global _failures, _failures_at_last_log, _last_log_time
    with _failure_lock:
        _failures += 1
        now = time.monotonic()
        if now - _last_log_time < FAILURE_LOG_INTERVAL_SECONDS:
            return
        suppressed = _failures - _failures_at_last_log - 1
        _failures_at_last_log = _failures
        _last_log_time = now
    _logger.warning("promptprism could not record an LLM request: %s%s", what,
                    f" ({suppressed} more since the last report)" if suppressed else "",
                    exc_info=error)


# --- what gets recorded ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool definition as sent: its name and canonical JSON text."""

    name: str
    definition: str


try:
    _VERSION = metadata.version("promptprism")
except metadata.PackageNotFoundError:  # running from a source tree
    _VERSION = "0"

_global_tracer: trace.Tracer | None = None
_tracers: WeakKeyDictionary[Any, trace.Tracer] = WeakKeyDictionary()


def _tracer(tracer_provider: Any) -> trace.Tracer:
    global _global_tracer
    if tracer_provider is None:
        # A ProxyTracer follows the global provider once it is set, so one is enough.
        if _global_tracer is None:
            _global_tracer = trace.get_tracer(names.TRACER_NAME, _VERSION)
        return _global_tracer
    found = _tracers.get(tracer_provider)
    if found is None:
        found = tracer_provider.get_tracer(names.TRACER_NAME, _VERSION)
        _tracers[tracer_provider] = found
    return found


def content_text(value: Any) -> str | None:
    """Content as a string attribute: strings as they are, anything else as JSON; ``None`` when it is not JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError) as error:
        # Keys json cannot write (a tuple, nested in template context), or a cycle:
        # that content is left out, not the request.
        report_failure("content that cannot be written as JSON was not captured", error)
        return None


# The OTLP encoder cannot encode a lone surrogate (e.g. a file name read with
# os.fsdecode) and drops the attribute, logging an error per span: such content
# goes out with U+FFFD instead, flagged as changed since it no longer matches its digest.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _captured(text: str | None, what: str, omitted: list[str] | None = None) -> tuple[str | None, bool]:
    """Redacted content fit to send, or ``None``; and whether redaction changed it.

    Content over the cap is left out and named in ``omitted`` (the caller
    records the list on the span and reports it once), or reported here.
    """
    if text is None:
        return None, False
    if len(text) > MAX_CONTENT_CHARACTERS:
        if omitted is None:
            _report_omitted([what])
        else:
            omitted.append(what)
        return None, False
    content, changed = redact(text)
    if content is None:
        report_failure(f"the redaction hook failed on {what}; its content was not captured")
    elif not content.isascii():
        content, replaced = _LONE_SURROGATE.subn("\ufffd", content)
        changed = changed or bool(replaced)
    return content, changed


def _report_omitted(omitted: list[str]) -> None:
    report_failure(f"content over {MAX_CONTENT_CHARACTERS} characters was not captured: {', '.join(omitted)}")


def _record_omitted(span: Span, omitted: list[str]) -> None:
    """Name on the span (and in one report) every piece of content the cap left out."""
    if not omitted:
        return
    before = tuple((getattr(span, "attributes", None) or {}).get(names.CONTENT_OMITTED, ()))
    span.set_attribute(names.CONTENT_OMITTED, before + tuple(omitted))
    _report_omitted(omitted)


def _add_content(attributes: dict[str, AttributeValue], text: str, what: str, content_key: str,
                 redacted_key: str, omitted: list[str] | None = None) -> None:
    """An event's captured content, flagged when the redactor changed it; nothing when not capturable."""
    content, changed = _captured(text, what, omitted)
    if content is not None:
        attributes[content_key] = content
        if changed:
            attributes[redacted_key] = True


def _resolve_prompt(prompt: SegmentedPrompt | str | None) -> SegmentedPrompt | None:
    if prompt is None or isinstance(prompt, SegmentedPrompt):
        return prompt
    text = str(prompt)
    return lookup_rendered(text) or unmapped(text, names.UNMAPPED_NOT_RENDERED, register=False)


def _prompt_attributes(prompt: SegmentedPrompt, capture: bool,
                       omitted: list[str] | None = None) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        names.PROMPT_BYTES: prompt.byte_length,
        names.PROMPT_SHA256: prompt.sha256,
        names.PROMPT_BLOCK_COUNT: len(prompt.blocks),
        names.PROMPT_MAPPED: prompt.mapped,
    }
    if prompt.unmapped_reason is not None:
        attributes[names.PROMPT_UNMAPPED_REASON] = prompt.unmapped_reason
    if prompt.template is not None:
        attributes[names.PROMPT_TEMPLATE_NAME] = prompt.template.name
        attributes[names.PROMPT_TEMPLATE_ORIGIN] = prompt.template.origin
    if capture:
        if prompt.variables:
            variables, _ = _captured(content_text(prompt.variables), "template variables", omitted)
            if variables is not None:
                attributes[names.PROMPT_TEMPLATE_VARIABLES] = variables
        if not prompt.mapped:
            instructions, _ = _captured(content_text([{"type": "text", "content": prompt.text}]), "system prompt",
                                        omitted)
            if instructions is not None:
                attributes[names.GEN_AI_SYSTEM_INSTRUCTIONS] = instructions
    return attributes


def _add_block_events(span: Span, prompt: SegmentedPrompt, capture: bool, timestamp: int,
                      omitted: list[str] | None = None) -> None:
    for block in prompt.blocks:
        attributes: dict[str, AttributeValue] = {
            names.BLOCK_INDEX: block.index,
            names.BLOCK_NAME: block.name,
            names.BLOCK_LAYER: block.layer,
            names.BLOCK_STABILITY: block.stability,
            names.BLOCK_SOURCE: block.source,
            names.BLOCK_START: block.start,
            names.BLOCK_END: block.end,
            names.BLOCK_SIZE: block.size,
            names.BLOCK_SHA256: block.sha256,
        }
        if capture:
            _add_content(attributes, block.content, f"block {block.name}", names.BLOCK_CONTENT,
                         names.BLOCK_REDACTED, omitted)
        span.add_event(names.EVENT_PROMPT_BLOCK, attributes, timestamp)


def _add_tool_events(span: Span, tools: Sequence[ToolSpec], capture: bool, timestamp: int,
                     omitted: list[str] | None = None) -> None:
    for tool in tools:
        encoded = tool.definition.encode("utf-8", "surrogatepass")  # as canonical.py and the manifest count it
        attributes: dict[str, AttributeValue] = {
            names.TOOL_NAME: tool.name,
            names.TOOL_SIZE: len(encoded),
            names.TOOL_SHA256: hashlib.sha256(encoded).hexdigest(),
        }
        if capture:
            _add_content(attributes, tool.definition, f"tool {tool.name}", names.TOOL_CONTENT, names.TOOL_REDACTED,
                         omitted)
        span.add_event(names.EVENT_TOOL_DEFINITION, attributes, timestamp)


class RecordedRequest:
    """One request's span, from :func:`start_llm_request` (or ``record_llm_request``) until :meth:`end`.

    Add the response with :meth:`set_response`, extra attributes with
    :meth:`set_attributes`; make the span current around the HTTP call with
    :meth:`current`. No method raises into the application.
    """

    __slots__ = ("span", "capture_content", "_start_time", "_started_at", "_ended", "_end_lock")

    def __init__(self, span: Span, capture_content: bool, start_time: int | None = None):
        self.span = span
        self.capture_content = capture_content
        # A backdated request ends as long after its start as it really took.
        self._start_time = start_time
        self._started_at = time.monotonic_ns()
        self._ended = False
        self._end_lock = threading.Lock()

    @property
    def ended(self) -> bool:
        return self._ended

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        try:
            self.span.set_attributes(attributes)
        except Exception as error:
            report_failure("setting attributes", error)

    def set_response(self, *, model: str | None = None, response_id: str | None = None,
                     finish_reasons: Sequence[str] | None = None, input_tokens: int | None = None,
                     output_tokens: int | None = None, cache_read_tokens: int | None = None,
                     cache_creation_tokens: int | None = None, output_messages: Any = None) -> None:
        """Record what came back; every argument is optional."""
        try:
            attributes: dict[str, AttributeValue] = {}
            for key, value in (
                (names.GEN_AI_RESPONSE_MODEL, model),
                (names.GEN_AI_RESPONSE_ID, response_id),
                (names.GEN_AI_USAGE_INPUT_TOKENS, input_tokens),
                (names.GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens),
                (names.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, cache_read_tokens),
                (names.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, cache_creation_tokens),
            ):
                if value is not None:
                    attributes[key] = value
            if finish_reasons is not None:
                attributes[names.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(str(reason) for reason in finish_reasons)
            omitted: list[str] = []
            if self.capture_content and output_messages is not None:
                content, _ = _captured(content_text(output_messages), "output messages", omitted)
                if content is not None:
                    attributes[names.GEN_AI_OUTPUT_MESSAGES] = content
            self.span.set_attributes(attributes)
            _record_omitted(self.span, omitted)
        except Exception as error:
            report_failure("recording the response", error)

    @contextmanager
    def current(self) -> Iterator[RecordedRequest]:
        """Make the span current inside the block, so HTTP client spans nest under it."""
        token = None
        try:
            token = otel_context.attach(trace.set_span_in_context(self.span))
        except Exception as error:
            report_failure("making the span current", error)
        try:
            yield self
        finally:
            if token is not None:
                try:
                    otel_context.detach(token)
                except Exception as error:
                    report_failure("restoring the context", error)

    def end(self, error: BaseException | None = None, *, end_time: int | None = None) -> None:
        """End the span; only the first call counts, later ones do nothing.

        ``error`` is what ended the request, if anything: an ``Exception``
        marks the span failed (``error.type`` and an ERROR status with a
        redacted, bounded description); other ``BaseException`` s
        (cancellation, ``GeneratorExit``) end it unmarked, as the app stopped
        waiting rather than the request failing. ``end_time`` (Unix ns)
        defaults to now, or for a request started with ``start_time`` to that
        time plus how long the request really took.
        """
        with self._end_lock:
            if self._ended:
                return
            self._ended = True
        if isinstance(error, Exception):
            self._fail(error)
        try:
            if end_time is None and self._start_time is not None:
                end_time = self._start_time + time.monotonic_ns() - self._started_at
            self.span.end(end_time)
        except Exception as failure:
            report_failure("ending the span", failure)

    def _fail(self, error: BaseException) -> None:
        try:
            self.span.set_attribute(names.ERROR_TYPE, type(error).__qualname__)
            description, _ = redact(f"{type(error).__name__}: {error}"[:MAX_ERROR_DESCRIPTION_CHARACTERS])
            self.span.set_status(Status(StatusCode.ERROR, description or type(error).__name__))
        except Exception as failure:
            report_failure("recording the application's error", failure)


def start_llm_request(*, provider: str, operation: str = names.OPERATION_CHAT, model: str,
                      prompt: SegmentedPrompt | str | None = None, dialect: str | None = None,
                      request_attributes: Mapping[str, AttributeValue] | None = None,
                      tools: Sequence[ToolSpec] | None = None, input_messages: Any = None,
                      tracer_provider: TracerProvider | None = None, capture_content: str | bool | None = None,
                      conversation_id: str | None = None, message_id: str | None = None,
                      process_kind: str | None = None, process_id: str | None = None,
                      run_id: str | None = None, run_mode: str | None = None, attempt: int | None = None,
                      record_id: str | None = None, start_time: int | None = None) -> RecordedRequest:
    """Start recording one LLM request; the caller must :meth:`~RecordedRequest.end` it.

    For requests that outlive a ``with`` block (a streamed response is read
    later). The span is not made current; use :meth:`RecordedRequest.current`
    around the HTTP call. ``start_time`` (Unix ns) backdates the span and its
    block and tool events; default now. See the module docstring for the rest.
    """
    try:
        capture = span_content_enabled(capture_content)
        segmented = _resolve_prompt(prompt)
        attributes: dict[str, AttributeValue] = {
            names.GEN_AI_OPERATION_NAME: operation,
            names.GEN_AI_PROVIDER_NAME: provider,
            names.GEN_AI_REQUEST_MODEL: model,
            names.SCHEMA_VERSION_ATTR: names.SCHEMA_VERSION,
        }
        if dialect is not None:
            attributes[names.REQUEST_DIALECT] = dialect
        if tools is not None:
            attributes[names.REQUEST_TOOLS_COUNT] = len(tools)
        if request_attributes:
            attributes.update(request_attributes)
        attributes.update(current_correlation())
        attributes.update(correlation_attributes(
            conversation_id=conversation_id, message_id=message_id, process_kind=process_kind,
            process_id=process_id, run_id=run_id, run_mode=run_mode, attempt=attempt, record_id=record_id))
        omitted: list[str] = []  # content left out for its size, recorded on the span
        if segmented is not None:
            attributes.update(_prompt_attributes(segmented, capture, omitted))
        if capture and input_messages is not None:
            content, _ = _captured(content_text(input_messages), "input messages", omitted)
            if content is not None:
                attributes[names.GEN_AI_INPUT_MESSAGES] = content
        # One timestamp for the span's start and its block and tool events.
        timestamp = time.time_ns() if start_time is None else start_time
        span = _tracer(tracer_provider).start_span(f"{operation} {model}", kind=SpanKind.CLIENT,
                                                   attributes=attributes, start_time=timestamp)
    except Exception as error:
        report_failure("starting the span", error)
        return RecordedRequest(INVALID_SPAN, False)
    try:
        if segmented is not None:
            _add_block_events(span, segmented, capture, timestamp, omitted)
        if tools:
            _add_tool_events(span, tools, capture, timestamp, omitted)
        _record_omitted(span, omitted)
        dropped = getattr(span, "dropped_events", 0)
        if dropped:
            report_failure(f"the tracer provider's span limits dropped {dropped} events; "
                           "build it with span_limits_for_prompts()")
    except Exception as error:
        report_failure("adding block and tool events", error)
    return RecordedRequest(span, capture, start_time)


@contextmanager
def record_llm_request(*, provider: str, operation: str = names.OPERATION_CHAT, model: str,
                       prompt: SegmentedPrompt | str | None = None, dialect: str | None = None,
                       request_attributes: Mapping[str, AttributeValue] | None = None,
                       tools: Sequence[ToolSpec] | None = None, input_messages: Any = None,
                       tracer_provider: TracerProvider | None = None, capture_content: str | bool | None = None,
                       conversation_id: str | None = None, message_id: str | None = None,
                       process_kind: str | None = None, process_id: str | None = None,
                       run_id: str | None = None, run_mode: str | None = None, attempt: int | None = None,
                       record_id: str | None = None, start_time: int | None = None) -> Iterator[RecordedRequest]:
    """Record one LLM request as one span, current inside the block; see the module docstring.

    :func:`start_llm_request` + :meth:`RecordedRequest.current` + :meth:`RecordedRequest.end`.
    """
    call = start_llm_request(
        provider=provider, operation=operation, model=model, prompt=prompt, dialect=dialect,
        request_attributes=request_attributes, tools=tools, input_messages=input_messages,
        tracer_provider=tracer_provider, capture_content=capture_content, conversation_id=conversation_id,
        message_id=message_id, process_kind=process_kind, process_id=process_id, run_id=run_id,
        run_mode=run_mode, attempt=attempt, record_id=record_id, start_time=start_time)
    error: BaseException | None = None
    try:
        with call.current():
            yield call
    except BaseException as raised:
        error = raised
        raise
    finally:
        call.end(error)
