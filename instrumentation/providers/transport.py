"""Record every LLM request an instrumented client sends, at its HTTP transport.

The official ``openai`` and ``anthropic`` clients send every attempt through
one method, ``client._client.send(request, stream=…)`` on their httpx client.
Wrapping that method on the instance sees the exact bytes that go out, so the
manifest describes the body the provider receives (after the SDK's own
defaults, aliases and serialisation), and every retry is its own span.

The span starts when the request is sent. A plain response is parsed right
away; a streamed one (SSE, or a body the app reads later) is observed as its
bytes pass through to the SDK, and the span ends with the usage once the
stream is exhausted, closed, or fails — keeping what arrived before a failure.

Nothing here raises into the application: every step of ours is guarded and
counted through ``record.report_failure``; the SDK's own exceptions pass
through unchanged. Requests made while OpenTelemetry instrumentation is
suppressed (an exporter's own traffic) are not recorded.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
import weakref
import zlib
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator, Mapping, Union

from opentelemetry import context as otel_context
from opentelemetry.trace import Status, StatusCode

from .. import names
from ..capture import span_content_enabled
from ..dialects import body_shape, system_prompt_candidates, tool_definitions
from ..manifest import build_manifest
from ..record import RecordedRequest, ToolSpec, report_failure, start_llm_request
from ..safe_text import safe_error_text, safe_identifier
from ..segments import lookup_rendered
from .responses import MAX_JSON_BYTES, ResponseParser, ServerSentEvents

# The context keys OpenTelemetry exporters set around their own requests. They
# live in a private spot of opentelemetry.context; the string fallback is what
# older instrumentations check.
try:
    from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
except ImportError:  # a future SDK moved it
    _SUPPRESS_INSTRUMENTATION_KEY = otel_context.create_key("suppress_instrumentation")
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
    return bool(otel_context.get_value(_SUPPRESS_INSTRUMENTATION_KEY)
                or otel_context.get_value(SUPPRESS_INSTRUMENTATION_PLAIN_KEY))


# --- request side ------------------------------------------------------------------------


def _prompt_for(body: Mapping[str, Any], dialect: str) -> Any:
    """The rendered prompt behind the system text, or the text itself (recorded not_rendered)."""
    candidates = system_prompt_candidates(body, dialect)
    for text in candidates:
        found = lookup_rendered(text)
        if found is not None:
            return found
    return candidates[0] if candidates else None


def _parts(content: Any) -> list[dict[str, Any]]:
    """Provider content → GenAI-convention message parts."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            parts.append({"type": "text", "content": part["text"]})
        elif kind == "tool_use":
            parts.append({"type": "tool_call", "id": part.get("id"), "name": part.get("name"),
                          "arguments": part.get("input")})
        elif kind == "tool_result":
            parts.append({"type": "tool_call_response", "id": part.get("tool_use_id"),
                          "response": part.get("content")})
        else:
            parts.append({"type": str(kind)})  # images, documents …: the kind, not the bytes
    return parts


def input_messages(body: Mapping[str, Any], dialect: str) -> list[dict[str, Any]]:
    """The request's non-system messages as GenAI-convention input messages."""
    messages: list[dict[str, Any]] = []
    for message in body_shape(body, dialect).messages:
        if isinstance(message, str):  # Responses API: a bare string input
            messages.append({"role": "user", "parts": _parts(message)})
            continue
        if not isinstance(message, Mapping):
            continue
        kind = message.get("type")
        if kind == "function_call":
            messages.append({"role": "assistant", "parts": [{"type": "tool_call", "id": message.get("call_id"),
                                                             "name": message.get("name"),
                                                             "arguments": message.get("arguments")}]})
        elif isinstance(kind, str) and kind.endswith("_output"):
            messages.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": message.get("call_id"),
                                                        "response": message.get("output")}]})
        else:
            role = str(message.get("role", "user"))
            parts = _parts(message.get("content"))
            for call in message.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
                    parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                                  "arguments": function.get("arguments")})
            if role == "tool":
                parts = [{"type": "tool_call_response", "id": message.get("tool_call_id"),
                          "response": message.get("content")}]
            messages.append({"role": role, "parts": parts})
    return messages


class Recording:
    """One request's span, from ``send`` until its response is over."""

    def __init__(self, call: RecordedRequest, dialect: str):
        self.call = call
        self.parser = ResponseParser(dialect)
        self.status_code: int | None = None
        self._lock = threading.Lock()
        self._finished = False

    def current(self) -> ContextManager[RecordedRequest]:
        """Our span is current while the request is on the wire (HTTP client spans nest under it)."""
        return self.call.current()

    def finish(self, error: BaseException | None = None) -> None:
        """Record the response (or what arrived of it) and end the span; only the first call counts."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
        try:
            summary = self.parser.summary
            self.call.set_response(**summary.response_arguments(with_output=self.call.capture_content))
            failed_status = self.status_code is not None and self.status_code >= 400
            if error is None and (failed_status or summary.error_type):
                error_type = str(self.status_code) if failed_status else summary.error_type
                # Provider error messages echo request text (model names, body
                # fragments): only allowlisted words reach the span.
                message = safe_error_text(summary.error_message or "")
                description = " ".join(part for part in (f"HTTP {self.status_code}" if failed_status else "",
                                                         safe_identifier(summary.error_type) or "", message) if part)
                self.call.span.set_attribute(names.ERROR_TYPE, error_type or "error")
                self.call.span.set_status(Status(StatusCode.ERROR, description))
        except Exception as failure:
            report_failure("recording the response", failure)
        self.call.end(error)


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


# --- response side -------------------------------------------------------------------------


class _Decoder:
    """Undo Content-Encoding on raw stream bytes (the SDK decodes its own copy)."""

    def __init__(self, encoding: str):
        encoding = encoding.strip().lower()
        self.supported = encoding in ("", "identity", "gzip", "x-gzip", "deflate")
        self._inflater = None
        if encoding in ("gzip", "x-gzip"):
            self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)

    def decode(self, chunk: bytes) -> bytes:
        return self._inflater.decompress(chunk) if self._inflater is not None else chunk


class ResponseObserver:
    """Feeds response bytes to the parser as they pass; finishes the recording at the end."""

    def __init__(self, recording: Recording, response: Any, *, decoded: bool = False):
        """``decoded``: the bytes fed are a body httpx already decompressed (a read response)."""
        self.recording = recording
        headers = response.headers
        self._sse = "text/event-stream" in str(headers.get("content-type", "")).lower()
        self._events = ServerSentEvents() if self._sse else None
        self._json = bytearray()
        self._decoder = _Decoder("identity" if decoded else str(headers.get("content-encoding", "")))
        self._broken = not self._decoder.supported

    def feed(self, chunk: bytes) -> None:
        if self._broken:
            return
        try:
            data = self._decoder.decode(chunk)
            if self._events is not None:
                for event, payload in self._events.feed(data):
                    self.recording.parser.feed_event(payload, event)
            elif len(self._json) + len(data) <= MAX_JSON_BYTES:
                self._json += data
            else:
                self._broken = True
                self._json.clear()
        except Exception as error:
            self._broken = True
            report_failure("reading a provider response", error)

    def finish(self, error: BaseException | None = None) -> None:
        if not self._broken:
            try:
                if self._events is not None:
                    for event, payload in self._events.flush():
                        self.recording.parser.feed_event(payload, event)
                elif self._json:
                    self.recording.parser.feed_json(json.loads(bytes(self._json)))
            except ValueError:
                pass  # a truncated body: keep what the stream already told us
            except Exception as failure:
                report_failure("parsing a provider response", failure)
        self.recording.finish(error)


_stream_classes: dict[type, type] = {}
_stream_classes_lock = threading.Lock()


def _base_stream_class(stream: Any, name: str) -> type:
    # httpx checks isinstance(response.stream, SyncByteStream / AsyncByteStream);
    # take the class from the stream's own library (httpx or httpx2) rather
    # than importing either here.
    for base in type(stream).__mro__:
        if base.__name__ == name:
            return base
    return object


def _observed_sync_class(base: type) -> type:
    class ObservedSyncStream(base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, observer: ResponseObserver):
            self._inner = inner
            self._observer = observer

        def __iter__(self) -> Iterator[bytes]:
            try:
                for chunk in self._inner:
                    self._observer.feed(chunk)
                    yield chunk
            except GeneratorExit:
                self._observer.finish()
                raise
            except BaseException as error:
                self._observer.finish(error)
                raise
            self._observer.finish()

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._observer.finish()

    return ObservedSyncStream


def _observed_async_class(base: type) -> type:
    class ObservedAsyncStream(base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, observer: ResponseObserver):
            self._inner = inner
            self._observer = observer

        async def __aiter__(self):
            try:
                async for chunk in self._inner:
                    self._observer.feed(chunk)
                    yield chunk
            except GeneratorExit:
                self._observer.finish()
                raise
            except BaseException as error:
                self._observer.finish(error)
                raise
            self._observer.finish()

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._observer.finish()

    return ObservedAsyncStream


def _observed_stream(stream: Any, observer: ResponseObserver, *, is_async: bool) -> Any:
    base = _base_stream_class(stream, "AsyncByteStream" if is_async else "SyncByteStream")
    key = (base, is_async)
    with _stream_classes_lock:
        wrapper_class = _stream_classes.get(key)
        if wrapper_class is None:
            wrapper_class = (_observed_async_class if is_async else _observed_sync_class)(base)
            _stream_classes[key] = wrapper_class
    wrapped = wrapper_class(stream, observer)
    # A stream the app never reads nor closes would leave its span open for
    # ever; end it when the stream object is collected.
    weakref.finalize(wrapped, observer.finish)
    return wrapped


def observe_response(recording: Recording, response: Any, *, streamed: bool, is_async: bool) -> None:
    """Parse a read response now, or watch a streamed one until it ends."""
    try:
        recording.status_code = int(response.status_code)
        observer = ResponseObserver(recording, response, decoded=not streamed)
        if not streamed:
            observer.feed(response.content)
            observer.finish()
            return
        response.stream = _observed_stream(response.stream, observer, is_async=is_async)
    except Exception as error:
        report_failure("observing a provider response", error)
        recording.finish()


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
