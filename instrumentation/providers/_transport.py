"""Record every LLM request an instrumented client sends, at its HTTP transport.

The official ``openai`` and ``anthropic`` clients send every attempt through
one method, ``client._client.send(request, stream=…)`` on their httpx client.
Wrapping that method on the instance sees the exact bytes that go out, so the
manifest describes the body the provider receives (after the SDK's own
defaults, aliases and serialisation), and every retry is its own span.

The span starts when the request is sent (here); :mod:`._recording` watches
the response until it is over, and :mod:`._input_messages` turns the body into
captured input messages when content capture is on.

Nothing here raises into the application: every step of ours is guarded and
counted through ``record.report_failure``; the SDK's own exceptions pass
through unchanged. Requests made while OpenTelemetry instrumentation is
suppressed (an exporter's own traffic) are not recorded.
"""

from __future__ import annotations

import functools
import inspect
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

from opentelemetry import context as otel_context

# OpenTelemetry's suppression key, which the SDK's span processors set around
# export. opentelemetry-api has no public name for it; the public check,
# opentelemetry-instrumentation's is_instrumentation_enabled(), tests this key
# and the plain string below, and applications need not install that package.
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY as SUPPRESS_INSTRUMENTATION_KEY

from ...wire import names
from .._capture import span_content_enabled
from .._dialects import body_system_text, tool_definitions
from .._record import ToolSpec, report_failure, start_llm_request
from .._segments import lookup_rendered
from ..manifest import build_manifest
from ._input_messages import input_messages
from ._recording import Recording, observe_response

# Set and checked by opentelemetry-instrumentation for older instrumentations.
SUPPRESS_INSTRUMENTATION_PLAIN_KEY = "suppress_instrumentation"

# Marks an instrumented httpx client: its original ``send`` and our settings.
INSTRUMENTED_ATTRIBUTE = "_promptprism_original_send"

ContextWindow = Union[int, Mapping[str, int], Callable[[str], "int | None"], None]


@dataclass(frozen=True)
class ProviderSettings:
    """How one instrumented client records its requests."""

    provider: str  # gen_ai.provider.name
    routes: tuple[tuple[str, str], ...]  # (URL path suffix, dialect)
    context_window: ContextWindow = None
    tracer_provider: Any = None
    capture_content: str | bool | None = None
    clock: Callable[[], int] | None = None  # Unix ns a request starts at; None: now

    def start_time(self) -> int | None:
        if self.clock is None:
            return None
        try:
            return int(self.clock())
        except Exception as error:
            report_failure("the clock callable raised; the request is recorded at the current time", error)
            return None

    def dialect_for(self, request: Any) -> str | None:
        if str(getattr(request, "method", "")).upper() != "POST":
            return None
        path = str(request.url.path).rstrip("/")
        for suffix, dialect in self.routes:
            if path.endswith(suffix):
                return dialect
        return None

    def window_for(self, model: Any) -> int | None:
        setting = self.context_window
        if setting is None or isinstance(setting, bool):
            return None
        if isinstance(setting, int):
            return setting
        if isinstance(setting, Mapping):
            value = setting.get(model) if isinstance(model, str) else None
            return value if isinstance(value, int) else None
        try:
            value = setting(model)
        except Exception as error:
            report_failure("the context_window callable raised", error)
            return None
        return value if isinstance(value, int) else None


def _suppressed() -> bool:
    return bool(otel_context.get_value(SUPPRESS_INSTRUMENTATION_KEY)
                or otel_context.get_value(SUPPRESS_INSTRUMENTATION_PLAIN_KEY))


# --- request side ------------------------------------------------------------------------


def _prompt_for(body: Mapping[str, Any], dialect: str) -> Any:
    """The rendered prompt behind the whole system text, or that text (recorded not_rendered).

    Only the whole text counts: when just one part of a multi-part system
    prompt was rendered through promptprism, that part's map would understate
    the prompt (``promptprism.prompt.bytes`` is the whole system prompt) and
    hide the other parts, so the whole text is recorded unmapped instead.
    """
    whole = body_system_text(body, dialect)
    if whole is None:
        return None
    found = lookup_rendered(whole)
    return whole if found is None else found


def begin(request: Any, settings: ProviderSettings) -> Recording | None:
    """Start recording ``request`` when it is an LLM call; ``None`` to let it pass untouched."""
    try:
        if _suppressed():
            return None
        dialect = settings.dialect_for(request)
        if dialect is None:
            return None
        body = json.loads(request.content)
        if not isinstance(body, dict):
            report_failure(f"a {dialect} request body was not a JSON object")
            return None
        model = body.get("model")
        manifest = build_manifest(body, dialect, context_window=settings.window_for(model),
                                  endpoint=str(request.url))
        capture = span_content_enabled(settings.capture_content)
        # Started here, ended when the response is over: for a streamed response
        # that is later, in whatever context the app is in by then.
        call = start_llm_request(
            provider=settings.provider,
            operation=names.OPERATION_CHAT,
            model=model if isinstance(model, str) else "unknown",
            prompt=_prompt_for(body, dialect),
            dialect=dialect,
            request_attributes=manifest.attributes(),
            tools=[ToolSpec(name, text) for name, text in tool_definitions(body, dialect)],
            input_messages=input_messages(body, dialect) if capture else None,
            tracer_provider=settings.tracer_provider,
            capture_content=settings.capture_content,
            start_time=settings.start_time(),
        )
        return Recording(call, dialect)
    except Exception as error:
        report_failure("starting to record a provider request", error)
        return None


# --- wrapping a client's send --------------------------------------------------------------


def instrument_http_client(http_client: Any, settings: ProviderSettings) -> None:
    """Wrap ``http_client.send`` (an httpx/httpx2 Client or AsyncClient) on this instance."""
    if getattr(http_client, INSTRUMENTED_ATTRIBUTE, None) is not None:
        uninstrument_http_client(http_client)  # re-instrumenting replaces the settings
    original = http_client.send
    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def send(request: Any, *args: Any, **kwargs: Any) -> Any:
            recording = begin(request, settings)
            if recording is None:
                return await original(request, *args, **kwargs)
            try:
                with recording.current():
                    response = await original(request, *args, **kwargs)
            except BaseException as error:
                recording.finish(error)
                raise
            observe_response(recording, response, streamed=bool(kwargs.get("stream")), is_async=True)
            return response
    else:
        @functools.wraps(original)
        def send(request: Any, *args: Any, **kwargs: Any) -> Any:
            recording = begin(request, settings)
            if recording is None:
                return original(request, *args, **kwargs)
            try:
                with recording.current():
                    response = original(request, *args, **kwargs)
            except BaseException as error:
                recording.finish(error)
                raise
            observe_response(recording, response, streamed=bool(kwargs.get("stream")), is_async=False)
            return response
    http_client.send = send
    setattr(http_client, INSTRUMENTED_ATTRIBUTE, original)


def uninstrument_http_client(http_client: Any) -> bool:
    """Undo :func:`instrument_http_client`; False when it was not instrumented."""
    if getattr(http_client, INSTRUMENTED_ATTRIBUTE, None) is None:
        return False
    try:
        del http_client.send  # the instance attribute; the class method shows again
    except AttributeError:
        pass
    setattr(http_client, INSTRUMENTED_ATTRIBUTE, None)
    return True


def http_client_of(client: Any) -> Any:
    """The httpx client an official SDK client sends through."""
    http_client = getattr(client, "_client", None)
    if http_client is None or not callable(getattr(http_client, "send", None)):
        raise TypeError(f"expected an official openai/anthropic client, got {type(client).__name__}")
    return http_client
