"""A local fake LLM provider: OpenAI Chat Completions and Responses, Anthropic Messages.

Tests and ``promptprism demo`` point the real ``openai`` / ``anthropic``
clients at it (``base_url``), so no request ever leaves the machine. It speaks
enough of each API for the official clients to parse it: JSON answers and SSE
streams, usage with prompt-cache tokens, tool calls, provider-shaped errors.

Standard library only (it ships in the base package). Replies are
deterministic and the prompt cache is simulated the way providers do it
(see :mod:`.fake_answers`, which builds every answer); this module is the
HTTP server that routes requests and writes answers out.

Failures are asked for through the model name, because that is the one field
every client passes through untouched:

- ``…fail-500…``  HTTP 500 with a provider-shaped error
- ``…fail-400…``  HTTP 400 whose message echoes the model name (hostile-text tests)
- ``…abort-stream…``  a stream that breaks off after its first events

A request with the header ``x-fake-gzip: 1`` gets its answer gzip-compressed
(``Content-Encoding: gzip``), as real providers send it.
"""

from __future__ import annotations

import collections
import gzip
import http.server
import json
import socket
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any, Mapping

from .fake_answers import (
    MODEL_TRIGGER_ABORT_STREAM,
    ROUTES,
    Answer,
    PrefixCache,
    StreamAborted,
)

MODEL_TRIGGER_SERVER_ERROR = "fail-500"
MODEL_TRIGGER_CLIENT_ERROR = "fail-400"
GZIP_HEADER = "x-fake-gzip"

# Requests kept for tests to inspect; a long demo must not grow without bound.
RECEIVED_CAPACITY = 1_000
# Bodies above this are refused (413), like a provider's request size limit.
MAX_BODY_BYTES = 32 * 1024 * 1024

# Importable from here as before: the demo resets the cache, tests read the triggers.
__all__ = ["FakeProvider", "PrefixCache", "ReceivedRequest", "GZIP_HEADER", "MODEL_TRIGGER_ABORT_STREAM",
           "MODEL_TRIGGER_CLIENT_ERROR", "MODEL_TRIGGER_SERVER_ERROR", "StreamAborted"]


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


class FakeProvider:
    """The fake provider on a loopback port, served from a background thread.

    ``with FakeProvider() as provider:`` then ``OpenAI(base_url=provider.openai_base_url)``
    or ``Anthropic(base_url=provider.anthropic_base_url)``.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, stream_delay_seconds: float = 0.0):
        self.cache = PrefixCache()
        self.received: collections.deque[ReceivedRequest] = collections.deque(maxlen=RECEIVED_CAPACITY)
        self.stream_delay_seconds = stream_delay_seconds
        self._server = _QuietServer((host, port), _handler_class(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url  # the anthropic client appends /v1/messages itself

    def start(self) -> "FakeProvider":
        self._thread = threading.Thread(target=self._server.serve_forever, name="promptprism-fake-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeProvider":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients drop keep-alive connections whenever they like (and the
        # abort trigger cuts streams on purpose): not worth a traceback.
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def _handler_class(provider: FakeProvider) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.provider = provider
    return Handler


class _Handler(http.server.BaseHTTPRequestHandler):
    provider: FakeProvider
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as the clients expect

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass  # tests and the demo print their own progress

    def do_GET(self) -> None:
        self._send_json(404, {"error": {"message": "not found", "type": "not_found_error"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._send_json(413, {"error": {"message": "request too large", "type": "invalid_request_error"}})
            self.close_connection = True
            return
        raw = self.rfile.read(length)
        path = self.path.split("?", 1)[0].rstrip("/")
        self.provider.received.append(ReceivedRequest(path, raw, dict(self.headers.items())))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        if not isinstance(body, dict):
            self._send_json(400, {"error": {"message": "body is not an object", "type": "invalid_request_error"}})
            return
        route = ROUTES.get(path)
        if route is None:
            self._send_json(404, {"error": {"message": "unknown path", "type": "not_found_error"}})
            return
        model = str(body.get("model", ""))
        anthropic = path == "/v1/messages"
        if MODEL_TRIGGER_SERVER_ERROR in model:
            self._send_error(500, "api_error", "The server had an error while processing your request.", anthropic)
            return
        if MODEL_TRIGGER_CLIENT_ERROR in model:
            self._send_error(400, "invalid_request_error", f"The model `{model}` does not exist.", anthropic)
            return
        try:
            self._send_answer(route(body, self.provider.cache))
        except StreamAborted:
            # Leave the chunked body unterminated: the client sees a broken stream.
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # --- plumbing -------------------------------------------------------------------------

    @property
    def _gzip(self) -> bool:
        return self.headers.get(GZIP_HEADER) == "1"

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if self._gzip:
            data = gzip.compress(data)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, error_type: str, message: str, anthropic: bool) -> None:
        if anthropic:
            payload = {"type": "error", "error": {"type": error_type, "message": message}}
        else:
            payload = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
        self._send_json(status, payload, {"x-should-retry": "false"})

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        # One gzip member for the whole stream, flushed per event, so the
        # client can decode each event as it arrives.
        self._compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS) if self._gzip else None
        if self._compressor is not None:
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()

    def _event(self, data: Any, event: str | None = None) -> None:
        text = (f"event: {event}\n" if event else "") + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        self._write_chunk(text.encode(), zlib.Z_SYNC_FLUSH)
        if self.provider.stream_delay_seconds:
            time.sleep(self.provider.stream_delay_seconds)

    def _write_chunk(self, payload: bytes, flush_mode: int) -> None:
        if self._compressor is not None:
            payload = self._compressor.compress(payload) + self._compressor.flush(flush_mode)
        if not payload:
            return
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        self.wfile.flush()

    def _end_stream(self) -> None:
        self._write_chunk(b"", zlib.Z_FINISH)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send_answer(self, answer: Answer) -> None:
        if answer.events is None:
            self._send_json(200, answer.payload)
            return
        self._start_stream()
        for data, event in answer.events:
            self._event(data, event)
        self._end_stream()


def main() -> None:  # pragma: no cover - manual use: python -m promptprism.collector.demo.fake_provider
    import argparse

    parser = argparse.ArgumentParser(description="Run the fake LLM provider on loopback.")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    with FakeProvider(port=args.port) as provider:
        print(f"fake provider on {provider.url} (OpenAI base_url {provider.openai_base_url})", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":  # pragma: no cover
    main()
