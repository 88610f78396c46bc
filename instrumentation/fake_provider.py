"""A local fake LLM provider: OpenAI Chat Completions and Responses, Anthropic Messages.

Tests and ``promptprism demo`` point the real ``openai`` / ``anthropic``
clients at it (``base_url``), so no request ever leaves the machine. It speaks
enough of each API for the official clients to parse it: JSON answers and SSE
streams, usage with prompt-cache tokens, tool calls, provider-shaped errors.

Standard library only (it ships in the base package). Replies are
deterministic; the prompt cache is simulated the way providers do it: a
request's prefix (tools, system, then messages) is hashed in fixed-size
chunks, and the longest prefix seen before counts as cached — so a block that
moves to the front breaks the cache, as it would for real.

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
import hashlib
import http.server
import json
import math
import socket
import threading
import time
import uuid
import zlib
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

MODEL_TRIGGER_SERVER_ERROR = "fail-500"
MODEL_TRIGGER_CLIENT_ERROR = "fail-400"
MODEL_TRIGGER_ABORT_STREAM = "abort-stream"
GZIP_HEADER = "x-fake-gzip"

# Prefix-cache granularity: providers cache in blocks (OpenAI 128 tokens,
# Anthropic at breakpoints); 256 bytes (~64 tokens) keeps small demo prompts
# visibly cacheable while still losing the cache on any early change.
CACHE_CHUNK_BYTES = 256
# Below this a prefix is never cached, like the providers' minimum prompt size.
CACHE_MINIMUM_BYTES = 1024
# Chunk hashes remembered; oldest forgotten first. Bounds memory for long demos.
CACHE_CAPACITY = 200_000
# Requests kept for tests to inspect; a long demo must not grow without bound.
RECEIVED_CAPACITY = 1_000
# Bodies above this are refused (413), like a provider's request size limit.
MAX_BODY_BYTES = 32 * 1024 * 1024
# Same ~4 bytes per token as the manifest's estimate.
BYTES_PER_TOKEN = 4
# Words per streamed delta: several events per answer, as real streams have.
STREAM_WORDS_PER_DELTA = 3


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Usage:
    input_tokens: int  # whole prompt, cached part included
    cached_tokens: int
    cache_creation_tokens: int
    output_tokens: int


class PrefixCache:
    """Chained chunk hashes of request prefixes, bounded, thread-safe."""

    def __init__(self, capacity: int = CACHE_CAPACITY):
        self._capacity = capacity
        self._seen: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self._lock = threading.Lock()

    def lookup_and_store(self, prefix: bytes, store: bool = True) -> int:
        """Bytes of ``prefix`` already cached; then remember all of it."""
        digests = []
        digest = b""
        for start in range(0, len(prefix) - CACHE_CHUNK_BYTES + 1, CACHE_CHUNK_BYTES):
            digest = hashlib.sha256(digest + prefix[start:start + CACHE_CHUNK_BYTES]).digest()
            digests.append(digest)
        cached = 0
        with self._lock:
            for index, digest in enumerate(digests):
                if digest not in self._seen:
                    break
                self._seen.move_to_end(digest)
                cached = (index + 1) * CACHE_CHUNK_BYTES
            if store and len(prefix) >= CACHE_MINIMUM_BYTES:
                for digest in digests:
                    self._seen[digest] = None
                    self._seen.move_to_end(digest)
                while len(self._seen) > self._capacity:
                    self._seen.popitem(last=False)
        return cached if cached >= CACHE_MINIMUM_BYTES else 0


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def _tokens(byte_count: int) -> int:
    return math.ceil(byte_count / BYTES_PER_TOKEN) if byte_count > 0 else 0


# --- what the model "says" --------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    text: str
    tool_name: str | None  # a tool call instead of text
    tool_arguments: str


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_text_of(part) for part in content)
    if isinstance(content, Mapping):
        for key in ("text", "content", "output"):
            if key in content:
                return _text_of(content[key])
    return ""


def _tool_name(tool: Any) -> str | None:
    if not isinstance(tool, Mapping):
        return None
    inner = tool.get("function")
    if isinstance(inner, Mapping):
        return inner.get("name")
    return tool.get("name") or tool.get("type")


def _reply(body: Mapping[str, Any], history: list[Any]) -> Reply:
    """A tool call when the request forces one, else a short deterministic answer."""
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    choice = body.get("tool_choice")
    forced: str | None = None
    forces_any = choice in ("required", "any") or (isinstance(choice, Mapping) and choice.get("type") == "any")
    if forces_any:
        forced = _tool_name(tools[0]) if tools else None
    elif isinstance(choice, Mapping):
        inner = choice.get("function") if isinstance(choice.get("function"), Mapping) else choice
        forced = inner.get("name") if isinstance(inner.get("name"), str) else None
    last = _text_of(history[-1]) if history else ""
    if forced:
        arguments = json.dumps({"query": " ".join(last.split()[:6])})
        return Reply(text="", tool_name=forced, tool_arguments=arguments)
    words = len(last.split())
    text = (f"Understood. I read {len(history)} messages; the last one had {words} words. "
            "Here is a short, deterministic answer from the fake provider.")
    return Reply(text=text, tool_name=None, tool_arguments="")


def _words(text: str) -> Iterator[str]:
    words = text.split(" ")
    for start in range(0, len(words), STREAM_WORDS_PER_DELTA):
        piece = " ".join(words[start:start + STREAM_WORDS_PER_DELTA])
        yield piece if start == 0 else " " + piece


# --- the server ---------------------------------------------------------------------------


class StreamAborted(Exception):
    """Raised inside the handler to cut a stream off mid-way (``abort-stream``)."""


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

    # --- usage --------------------------------------------------------------------

    def usage_for(self, body: Mapping[str, Any], prefix_parts: list[Any], reply: Reply, *,
                  writes_cache: bool) -> Usage:
        prefix = b"".join(_canonical(part) for part in prefix_parts)
        cached = self.cache.lookup_and_store(prefix, store=writes_cache)
        input_tokens = _tokens(len(_canonical(dict(body))))
        cached_tokens = min(_tokens(cached), input_tokens)
        creation = max(_tokens(len(prefix)) - cached_tokens, 0) if writes_cache else 0
        output = _tokens(len(reply.text) + len(reply.tool_arguments)) or 1
        return Usage(input_tokens, cached_tokens, min(creation, input_tokens - cached_tokens), output)


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
        route = {
            "/v1/chat/completions": self._chat_completions,
            "/v1/responses": self._responses,
            "/v1/messages": self._messages,
        }.get(path)
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
            route(body)
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

    def _maybe_abort(self, body: Mapping[str, Any], events_sent: int) -> None:
        if MODEL_TRIGGER_ABORT_STREAM in str(body.get("model", "")) and events_sent >= 2:
            raise StreamAborted()

    # --- OpenAI Chat Completions ----------------------------------------------------------

    def _chat_completions(self, body: dict[str, Any]) -> None:
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        reply = _reply(body, messages)
        usage = self.provider.usage_for(body, [body.get("tools") or [], *messages], reply, writes_cache=True)
        usage_json = {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }
        identifier = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        model = body.get("model", "fake-model")
        finish = "tool_calls" if reply.tool_name else "stop"
        tool_call = {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                     "function": {"name": reply.tool_name, "arguments": reply.tool_arguments}}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
            if reply.tool_name:
                message["tool_calls"] = [tool_call]
            self._send_json(200, {
                "id": identifier, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": usage_json, "system_fingerprint": "fp_fake",
            })
            return

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {"id": identifier, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}

        self._start_stream()
        sent = 0
        self._event(chunk({"role": "assistant", "content": ""}))
        sent += 1
        if reply.tool_name:
            self._event(chunk({"tool_calls": [{"index": 0, **tool_call}]}))
            sent += 1
        for piece in _words(reply.text) if reply.text else ():
            self._maybe_abort(body, sent)
            self._event(chunk({"content": piece}))
            sent += 1
        self._maybe_abort(body, sent)
        self._event(chunk({}, finish))
        options = body.get("stream_options")
        if isinstance(options, Mapping) and options.get("include_usage"):
            self._event({"id": identifier, "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [], "usage": usage_json})
        self._event("[DONE]")
        self._end_stream()

    # --- OpenAI Responses ---------------------------------------------------------------

    def _responses(self, body: dict[str, Any]) -> None:
        items = body.get("input")
        history = items if isinstance(items, list) else ([items] if items is not None else [])
        reply = _reply(body, history)
        prefix = [body.get("tools") or [], body.get("instructions") or "", *history]
        usage = self.provider.usage_for(body, prefix, reply, writes_cache=True)
        usage_json = {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input_tokens + usage.output_tokens,
        }
        identifier = f"resp_{uuid.uuid4().hex[:24]}"
        item_id = f"msg_{uuid.uuid4().hex[:24]}"
        if reply.tool_name:
            item: dict[str, Any] = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:12]}",
                                    "call_id": f"call_{uuid.uuid4().hex[:12]}", "name": reply.tool_name,
                                    "arguments": reply.tool_arguments, "status": "completed"}
        else:
            item = {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}]}

        def response(status: str, output: list[Any], with_usage: bool) -> dict[str, Any]:
            return {
                "id": identifier, "object": "response", "created_at": time.time(), "status": status,
                "model": body.get("model", "fake-model"), "output": output, "parallel_tool_calls": True,
                "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
                "instructions": body.get("instructions"), "error": None, "incomplete_details": None,
                "metadata": {}, "temperature": body.get("temperature"), "top_p": None,
                "usage": usage_json if with_usage else None,
            }

        if not body.get("stream"):
            self._send_json(200, response("completed", [item], True))
            return
        self._start_stream()
        sequence = iter(range(1_000_000))

        def event(kind: str, **fields: Any) -> None:
            self._event({"type": kind, "sequence_number": next(sequence), **fields}, event=kind)

        event("response.created", response=response("in_progress", [], False))
        event("response.in_progress", response=response("in_progress", [], False))
        if reply.tool_name:
            event("response.output_item.added", output_index=0, item={**item, "arguments": "", "status": "in_progress"})
            event("response.function_call_arguments.delta", output_index=0, item_id=item["id"], delta=reply.tool_arguments)
            self._maybe_abort(body, 4)
            event("response.function_call_arguments.done", output_index=0, item_id=item["id"], arguments=reply.tool_arguments)
        else:
            event("response.output_item.added", output_index=0,
                  item={**item, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            event("response.content_part.added", output_index=0, item_id=item_id, content_index=0, part=part)
            sent = 4
            for piece in _words(reply.text):
                self._maybe_abort(body, sent)
                event("response.output_text.delta", output_index=0, item_id=item_id, content_index=0,
                      delta=piece, logprobs=[])
                sent += 1
            event("response.output_text.done", output_index=0, item_id=item_id, content_index=0,
                  text=reply.text, logprobs=[])
            event("response.content_part.done", output_index=0, item_id=item_id, content_index=0,
                  part={**part, "text": reply.text})
        event("response.output_item.done", output_index=0, item=item)
        event("response.completed", response=response("completed", [item], True))
        self._end_stream()

    # --- Anthropic Messages --------------------------------------------------------------

    def _messages(self, body: dict[str, Any]) -> None:
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        reply = _reply(body, messages)
        system = body.get("system")
        prefix = [body.get("tools") or [], system if system is not None else "", *messages]
        # Anthropic writes the cache only where the request asks for it.
        writes = b'"cache_control"' in _canonical(body)
        usage = self.provider.usage_for(body, prefix, reply, writes_cache=writes)
        uncached = max(usage.input_tokens - usage.cached_tokens - usage.cache_creation_tokens, 0)
        usage_json = {
            "input_tokens": uncached,
            "cache_read_input_tokens": usage.cached_tokens,
            "cache_creation_input_tokens": usage.cache_creation_tokens,
            "output_tokens": usage.output_tokens,
        }
        identifier = f"msg_{uuid.uuid4().hex[:24]}"
        model = body.get("model", "fake-model")
        stop = "tool_use" if reply.tool_name else "end_turn"
        if reply.tool_name:
            block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}",
                                     "name": reply.tool_name, "input": json.loads(reply.tool_arguments)}
        else:
            block = {"type": "text", "text": reply.text}
        message = {"id": identifier, "type": "message", "role": "assistant", "model": model,
                   "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage_json}
        if not body.get("stream"):
            self._send_json(200, message)
            return
        self._start_stream()
        start_usage = {**usage_json, "output_tokens": 1}
        self._event({"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                          "usage": start_usage}}, event="message_start")
        if reply.tool_name:
            self._event({"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}},
                        event="content_block_start")
            self._maybe_abort(body, 2)
            self._event({"type": "content_block_delta", "index": 0,
                         "delta": {"type": "input_json_delta", "partial_json": reply.tool_arguments}},
                        event="content_block_delta")
        else:
            self._event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                        event="content_block_start")
            sent = 2
            for piece in _words(reply.text):
                self._maybe_abort(body, sent)
                self._event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
                            event="content_block_delta")
                sent += 1
        self._event({"type": "content_block_stop", "index": 0}, event="content_block_stop")
        self._event({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                     "usage": {"output_tokens": usage.output_tokens}}, event="message_delta")
        self._event({"type": "message_stop"}, event="message_stop")
        self._end_stream()


def main() -> None:  # pragma: no cover - manual use: python -m promptprism.instrumentation.fake_provider
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
