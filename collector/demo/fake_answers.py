"""What the fake provider answers, per API: replies, usage with a simulated prompt cache, payloads.

Pure apart from the clock and random ids: each builder takes a request body
and the provider's :class:`PrefixCache` and returns an :class:`Answer`, the
JSON of a plain response or the server-sent events of a streamed one, in the
shapes the official ``openai`` and ``anthropic`` clients parse. The HTTP
server in :mod:`.fake_provider` only writes answers out.

The prompt cache is simulated the way providers do it: a request's prefix
(tools, system, then messages) is hashed in fixed-size chunks, and the
longest prefix seen before counts as cached — so a block that moves to the
front breaks the cache, as it would for real. Standard library only.
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Optional, Tuple

from ...wire.canonical import canonical_bytes, tokens_in_bytes

MODEL_TRIGGER_ABORT_STREAM = "abort-stream"

# Prefix-cache granularity: providers cache in blocks (OpenAI 128 tokens,
# Anthropic at breakpoints); 256 bytes (~64 tokens) keeps small demo prompts
# visibly cacheable while still losing the cache on any early change.
CACHE_CHUNK_BYTES = 256
# Below this a prefix is never cached, like the providers' minimum prompt size.
CACHE_MINIMUM_BYTES = 1024
# Chunk hashes remembered; oldest forgotten first. Bounds memory for long demos.
CACHE_CAPACITY = 200_000
# Words per streamed delta: several events per answer, as real streams have.
STREAM_WORDS_PER_DELTA = 3

# One server-sent event: its data (JSON-able, or a literal string) and its event name.
Event = Tuple[Any, Optional[str]]


@dataclass(frozen=True)
class Answer:
    """A plain response's JSON ``payload``, or a streamed response's ``events``.

    ``events`` is produced lazily while the server writes it, so a stream can
    break off part-way (:class:`StreamAborted`) after the events before it went out.
    """

    payload: Any = None
    events: Optional[Iterator[Event]] = None


class StreamAborted(Exception):
    """Raised while streaming to cut a stream off mid-way (``abort-stream``)."""


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


def _abort_if_asked(body: Mapping[str, Any], events_sent: int) -> None:
    if MODEL_TRIGGER_ABORT_STREAM in str(body.get("model", "")) and events_sent >= 2:
        raise StreamAborted()


# --- the prompt cache and usage ------------------------------------------------------------


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


def _tokens(byte_count: int) -> int:
    return tokens_in_bytes(byte_count)  # the collector's estimate, without the manifest's margin


def usage_for(cache: PrefixCache, body: Mapping[str, Any], prefix_parts: list[Any], reply: Reply, *,
              writes_cache: bool) -> Usage:
    prefix = b"".join(canonical_bytes(part) for part in prefix_parts)
    cached = cache.lookup_and_store(prefix, store=writes_cache)
    input_tokens = _tokens(len(canonical_bytes(dict(body))))
    cached_tokens = min(_tokens(cached), input_tokens)
    creation = max(_tokens(len(prefix)) - cached_tokens, 0) if writes_cache else 0
    output = _tokens(len(reply.text) + len(reply.tool_arguments)) or 1
    return Usage(input_tokens, cached_tokens, min(creation, input_tokens - cached_tokens), output)


# --- OpenAI Chat Completions ----------------------------------------------------------


def chat_completions(body: dict[str, Any], cache: PrefixCache) -> Answer:
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    reply = _reply(body, messages)
    usage = usage_for(cache, body, [body.get("tools") or [], *messages], reply, writes_cache=True)
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
        return Answer(payload={
            "id": identifier, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage_json, "system_fingerprint": "fp_fake",
        })

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {"id": identifier, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}

    def events() -> Iterator[Event]:
        sent = 0
        yield chunk({"role": "assistant", "content": ""}), None
        sent += 1
        if reply.tool_name:
            yield chunk({"tool_calls": [{"index": 0, **tool_call}]}), None
            sent += 1
        for piece in _words(reply.text) if reply.text else ():
            _abort_if_asked(body, sent)
            yield chunk({"content": piece}), None
            sent += 1
        _abort_if_asked(body, sent)
        yield chunk({}, finish), None
        options = body.get("stream_options")
        if isinstance(options, Mapping) and options.get("include_usage"):
            yield {"id": identifier, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [], "usage": usage_json}, None
        yield "[DONE]", None

    return Answer(events=events())


# --- OpenAI Responses ---------------------------------------------------------------


def responses(body: dict[str, Any], cache: PrefixCache) -> Answer:
    items = body.get("input")
    history = items if isinstance(items, list) else ([items] if items is not None else [])
    reply = _reply(body, history)
    prefix = [body.get("tools") or [], body.get("instructions") or "", *history]
    usage = usage_for(cache, body, prefix, reply, writes_cache=True)
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
        return Answer(payload=response("completed", [item], True))

    def events() -> Iterator[Event]:
        sequence = iter(range(1_000_000))

        def event(kind: str, **fields: Any) -> Event:
            return {"type": kind, "sequence_number": next(sequence), **fields}, kind

        yield event("response.created", response=response("in_progress", [], False))
        yield event("response.in_progress", response=response("in_progress", [], False))
        if reply.tool_name:
            yield event("response.output_item.added", output_index=0,
                        item={**item, "arguments": "", "status": "in_progress"})
            yield event("response.function_call_arguments.delta", output_index=0, item_id=item["id"],
                        delta=reply.tool_arguments)
            _abort_if_asked(body, 4)
            yield event("response.function_call_arguments.done", output_index=0, item_id=item["id"],
                        arguments=reply.tool_arguments)
        else:
            yield event("response.output_item.added", output_index=0,
                        item={**item, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield event("response.content_part.added", output_index=0, item_id=item_id, content_index=0, part=part)
            sent = 4
            for piece in _words(reply.text):
                _abort_if_asked(body, sent)
                yield event("response.output_text.delta", output_index=0, item_id=item_id, content_index=0,
                            delta=piece, logprobs=[])
                sent += 1
            yield event("response.output_text.done", output_index=0, item_id=item_id, content_index=0,
                        text=reply.text, logprobs=[])
            yield event("response.content_part.done", output_index=0, item_id=item_id, content_index=0,
                        part={**part, "text": reply.text})
        yield event("response.output_item.done", output_index=0, item=item)
        yield event("response.completed", response=response("completed", [item], True))

    return Answer(events=events())


# --- Anthropic Messages --------------------------------------------------------------


def messages(body: dict[str, Any], cache: PrefixCache) -> Answer:
    history = body.get("messages") if isinstance(body.get("messages"), list) else []
    reply = _reply(body, history)
    system = body.get("system")
    prefix = [body.get("tools") or [], system if system is not None else "", *history]
    # Anthropic writes the cache only where the request asks for it.
    writes = b'"cache_control"' in canonical_bytes(body)
    usage = usage_for(cache, body, prefix, reply, writes_cache=writes)
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
        return Answer(payload=message)

    def events() -> Iterator[Event]:
        start_usage = {**usage_json, "output_tokens": 1}
        yield {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                    "usage": start_usage}}, "message_start"
        if reply.tool_name:
            yield {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}}, \
                "content_block_start"
            _abort_if_asked(body, 2)
            yield {"type": "content_block_delta", "index": 0,
                   "delta": {"type": "input_json_delta", "partial_json": reply.tool_arguments}}, "content_block_delta"
        else:
            yield {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, \
                "content_block_start"
            sent = 2
            for piece in _words(reply.text):
                _abort_if_asked(body, sent)
                yield {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}, \
                    "content_block_delta"
                sent += 1
        yield {"type": "content_block_stop", "index": 0}, "content_block_stop"
        yield {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
               "usage": {"output_tokens": usage.output_tokens}}, "message_delta"
        yield {"type": "message_stop"}, "message_stop"

    return Answer(events=events())


# The path each builder answers, as the official clients call it.
ROUTES: dict[str, Callable[[dict[str, Any], PrefixCache], Answer]] = {
    "/v1/chat/completions": chat_completions,
    "/v1/responses": responses,
    "/v1/messages": messages,
}
