"""One provider request's recording, from ``send`` until its response is over.

The transport starts a :class:`Recording` when the request goes out; this
module watches the response. A read response is parsed at once; a streamed
one (SSE, or a body the app reads later) is observed as its bytes pass
through to the SDK, and the span ends with the usage once the stream is
exhausted, closed, or fails — keeping what arrived before a failure.
Nothing here raises into the application.
"""

from __future__ import annotations

import json
import threading
import weakref
import zlib
from typing import Any, ContextManager, Iterator

from opentelemetry.trace import Status, StatusCode

from ...wire import names
from .._record import RecordedRequest, report_failure
from .._safe_text import safe_error_text, safe_identifier
from ._responses import MAX_JSON_BYTES, ResponseParser, ServerSentEvents


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


# The async twin of the class above: the same steps, but `async for` and
# `aclose` cannot share one body with their sync forms.
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
