"""Provider responses → what the span records: model, id, finish reasons, usage, output.

Pure and standard library only. The transport wrapper feeds it either one
JSON document (a plain response) or the events of an SSE stream as they pass
by; either way :class:`ResponseSummary` holds what arrived so far, so a stream
that breaks off still records its usage and partial text.

Usage follows the GenAI conventions: ``input_tokens`` counts the whole prompt,
cached part included. OpenAI reports it that way; Anthropic reports uncached,
cache-read and cache-creation tokens separately, so they are added up here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from ...wire import names

# Output text kept for content capture. The recorder does not capture content
# over 1 Mi characters at all, so collecting more would be wasted memory.
MAX_OUTPUT_CHARACTERS = 1024 * 1024
# A single SSE event larger than this is not parsed (usage events are tiny;
# this only bounds memory when a stream is not what we expect).
MAX_EVENT_BYTES = 16 * 1024 * 1024
# A plain JSON response larger than this is not parsed for usage.
MAX_JSON_BYTES = 64 * 1024 * 1024


@dataclass
class ToolCall:
    identifier: str | None
    name: str | None
    arguments: str = ""


@dataclass
class ResponseSummary:
    model: str | None = None
    response_id: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    text: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    # An error the provider reported in the body (an SSE error event, an error JSON).
    error_type: str | None = None
    error_message: str | None = None
    _text_characters: int = 0

    def add_text(self, piece: Any) -> None:
        if not isinstance(piece, str) or not piece or self._text_characters > MAX_OUTPUT_CHARACTERS:
            return
        self.text.append(piece)
        self._text_characters += len(piece)

    def output_messages(self) -> list[dict[str, Any]]:
        """The answer as GenAI-convention output messages (role, parts, finish_reason)."""
        parts: list[dict[str, Any]] = []
        if self.text:
            parts.append({"type": "text", "content": "".join(self.text)})
        for call in self.tool_calls:
            parts.append({"type": "tool_call", "id": call.identifier, "name": call.name, "arguments": call.arguments})
        message: dict[str, Any] = {"role": "assistant", "parts": parts}
        if self.finish_reasons:
            message["finish_reason"] = self.finish_reasons[0]
        return [message]

    def response_arguments(self, *, with_output: bool) -> dict[str, Any]:
        """Keyword arguments for ``RecordedRequest.set_response``."""
        arguments: dict[str, Any] = {
            "model": self.model, "response_id": self.response_id,
            "finish_reasons": self.finish_reasons or None,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens, "cache_creation_tokens": self.cache_creation_tokens,
        }
        if with_output and (self.text or self.tool_calls):
            arguments["output_messages"] = self.output_messages()
        return arguments


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


class ResponseParser:
    """Accumulates one response of one dialect from JSON or SSE events."""

    def __init__(self, dialect: str):
        self.dialect = dialect
        self.summary = ResponseSummary()
        self._event = {
            names.DIALECT_CHAT_COMPLETIONS: self._chat_chunk,
            names.DIALECT_OPENAI_RESPONSES: self._responses_event,
            names.DIALECT_ANTHROPIC_MESSAGES: self._anthropic_event,
        }[dialect]

    # --- entry points --------------------------------------------------------------

    def feed_json(self, document: Any) -> None:
        """A whole (non-streamed) response body, success or error."""
        if not isinstance(document, Mapping):
            return
        if self._error(document):
            return
        if self.dialect == names.DIALECT_CHAT_COMPLETIONS:
            self._chat_completion(document)
        elif self.dialect == names.DIALECT_OPENAI_RESPONSES:
            self._response_object(document, with_output=True)
        else:
            self._anthropic_message(document)

    def feed_event(self, data: str, event: str | None = None) -> None:
        """One SSE event's data (and its ``event:`` name, when the stream names them)."""
        if data == "[DONE]":
            return
        try:
            document = json.loads(data)
        except ValueError:
            return
        if isinstance(document, Mapping) and not self._error(document):
            self._event(document)

    # --- errors --------------------------------------------------------------------

    def _error(self, document: Mapping[str, Any]) -> bool:
        error = document.get("error")
        if document.get("type") == "error" or (isinstance(error, Mapping) and "message" in error):
            details = _mapping(error)
            self.summary.error_type = _string(details.get("type")) or _string(details.get("code")) or "error"
            self.summary.error_message = _string(details.get("message"))
            return True
        return False

    # --- OpenAI Chat Completions ---------------------------------------------------

    def _chat_usage(self, usage: Any) -> None:
        usage = _mapping(usage)
        if not usage:
            return
        self.summary.input_tokens = _int(usage.get("prompt_tokens"))
        self.summary.output_tokens = _int(usage.get("completion_tokens"))
        self.summary.cache_read_tokens = _int(_mapping(usage.get("prompt_tokens_details")).get("cached_tokens"))

    def _chat_completion(self, document: Mapping[str, Any]) -> None:
        self.summary.model = _string(document.get("model")) or self.summary.model
        self.summary.response_id = _string(document.get("id")) or self.summary.response_id
        for choice in document.get("choices") or []:
            choice = _mapping(choice)
            if _string(choice.get("finish_reason")):
                self.summary.finish_reasons.append(choice["finish_reason"])
            message = _mapping(choice.get("message"))
            self.summary.add_text(message.get("content"))
            for call in message.get("tool_calls") or []:
                function = _mapping(_mapping(call).get("function"))
                self.summary.tool_calls.append(ToolCall(_string(_mapping(call).get("id")),
                                                        _string(function.get("name")),
                                                        _string(function.get("arguments")) or ""))
        self._chat_usage(document.get("usage"))

    def _chat_chunk(self, chunk: Mapping[str, Any]) -> None:
        self.summary.model = _string(chunk.get("model")) or self.summary.model
        self.summary.response_id = _string(chunk.get("id")) or self.summary.response_id
        for choice in chunk.get("choices") or []:
            choice = _mapping(choice)
            if _string(choice.get("finish_reason")):
                self.summary.finish_reasons.append(choice["finish_reason"])
            delta = _mapping(choice.get("delta"))
            self.summary.add_text(delta.get("content"))
            for call in delta.get("tool_calls") or []:
                call = _mapping(call)
                function = _mapping(call.get("function"))
                index = _int(call.get("index")) or 0
                while len(self.summary.tool_calls) <= index:
                    self.summary.tool_calls.append(ToolCall(None, None))
                target = self.summary.tool_calls[index]
                target.identifier = _string(call.get("id")) or target.identifier
                target.name = _string(function.get("name")) or target.name
                target.arguments += _string(function.get("arguments")) or ""
        self._chat_usage(chunk.get("usage"))

    # --- OpenAI Responses ----------------------------------------------------------

    def _response_object(self, response: Mapping[str, Any], *, with_output: bool) -> None:
        self.summary.model = _string(response.get("model")) or self.summary.model
        self.summary.response_id = _string(response.get("id")) or self.summary.response_id
        status = _string(response.get("status"))
        if status in ("completed", "incomplete", "failed", "cancelled"):
            reason = _string(_mapping(response.get("incomplete_details")).get("reason"))
            self.summary.finish_reasons = [reason or status]
        usage = _mapping(response.get("usage"))
        if usage:
            self.summary.input_tokens = _int(usage.get("input_tokens"))
            self.summary.output_tokens = _int(usage.get("output_tokens"))
            self.summary.cache_read_tokens = _int(_mapping(usage.get("input_tokens_details")).get("cached_tokens"))
        error = _mapping(response.get("error"))
        if error:
            self.summary.error_type = _string(error.get("code")) or "error"
            self.summary.error_message = _string(error.get("message"))
        if not with_output:
            return
        for item in response.get("output") or []:
            item = _mapping(item)
            if item.get("type") == "message":
                for part in item.get("content") or []:
                    self.summary.add_text(_mapping(part).get("text"))
            elif item.get("type") == "function_call":
                self.summary.tool_calls.append(ToolCall(_string(item.get("call_id")), _string(item.get("name")),
                                                        _string(item.get("arguments")) or ""))

    def _responses_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind in ("response.created", "response.in_progress"):
            self._response_object(_mapping(event.get("response")), with_output=False)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            # Text already arrived as deltas; the final object only adds tool calls.
            response = _mapping(event.get("response"))
            self._response_object(response, with_output=False)
            if not self.summary.tool_calls:
                for item in response.get("output") or []:
                    item = _mapping(item)
                    if item.get("type") == "function_call":
                        self.summary.tool_calls.append(ToolCall(_string(item.get("call_id")),
                                                                _string(item.get("name")),
                                                                _string(item.get("arguments")) or ""))
        elif kind == "response.output_text.delta":
            self.summary.add_text(event.get("delta"))

    # --- Anthropic Messages --------------------------------------------------------

    def _anthropic_usage(self, usage: Any) -> None:
        usage = _mapping(usage)
        if not usage:
            return
        uncached = _int(usage.get("input_tokens"))
        read = _int(usage.get("cache_read_input_tokens"))
        creation = _int(usage.get("cache_creation_input_tokens"))
        if read is not None:
            self.summary.cache_read_tokens = read
        if creation is not None:
            self.summary.cache_creation_tokens = creation
        if uncached is not None:
            self.summary.input_tokens = uncached + (self.summary.cache_read_tokens or 0) + (
                self.summary.cache_creation_tokens or 0)
        if _int(usage.get("output_tokens")) is not None:
            self.summary.output_tokens = usage["output_tokens"]  # cumulative in message_delta

    def _anthropic_message(self, message: Mapping[str, Any]) -> None:
        self.summary.model = _string(message.get("model")) or self.summary.model
        self.summary.response_id = _string(message.get("id")) or self.summary.response_id
        if _string(message.get("stop_reason")):
            self.summary.finish_reasons = [message["stop_reason"]]
        for block in message.get("content") or []:
            block = _mapping(block)
            if block.get("type") == "text":
                self.summary.add_text(block.get("text"))
            elif block.get("type") == "tool_use":
                self.summary.tool_calls.append(ToolCall(_string(block.get("id")), _string(block.get("name")),
                                                        json.dumps(block.get("input", {}))))
        self._anthropic_usage(message.get("usage"))

    def _anthropic_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            message = _mapping(event.get("message"))
            self.summary.model = _string(message.get("model")) or self.summary.model
            self.summary.response_id = _string(message.get("id")) or self.summary.response_id
            self._anthropic_usage(message.get("usage"))
        elif kind == "content_block_start":
            block = _mapping(event.get("content_block"))
            if block.get("type") == "tool_use":
                self.summary.tool_calls.append(ToolCall(_string(block.get("id")), _string(block.get("name"))))
            elif block.get("type") == "text":
                self.summary.add_text(block.get("text"))
        elif kind == "content_block_delta":
            delta = _mapping(event.get("delta"))
            if delta.get("type") == "text_delta":
                self.summary.add_text(delta.get("text"))
            elif delta.get("type") == "input_json_delta" and self.summary.tool_calls:
                self.summary.tool_calls[-1].arguments += _string(delta.get("partial_json")) or ""
        elif kind == "message_delta":
            stop = _string(_mapping(event.get("delta")).get("stop_reason"))
            if stop:
                self.summary.finish_reasons = [stop]
            self._anthropic_usage(event.get("usage"))


class ServerSentEvents:
    """Incremental SSE framing: bytes in, (event name, data) out."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.overflowed = False

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        if self.overflowed:
            return []
        self._buffer += chunk
        events: list[tuple[str | None, str]] = []
        while True:
            end, separator_length = self._next_boundary()
            if end < 0:
                break
            raw = bytes(self._buffer[:end])
            del self._buffer[:end + separator_length]
            parsed = self._parse(raw)
            if parsed is not None:
                events.append(parsed)
        if len(self._buffer) > MAX_EVENT_BYTES:
            self.overflowed = True
            self._buffer.clear()
        return events

    def flush(self) -> list[tuple[str | None, str]]:
        """A last event the stream ended without a blank line after."""
        raw, self._buffer = bytes(self._buffer), bytearray()
        parsed = self._parse(raw) if raw.strip() and not self.overflowed else None
        return [parsed] if parsed is not None else []

    def _next_boundary(self) -> tuple[int, int]:
        candidates = [(self._buffer.find(separator), len(separator)) for separator in (b"\n\n", b"\r\n\r\n", b"\r\r")]
        found = [candidate for candidate in candidates if candidate[0] >= 0]
        return min(found) if found else (-1, 0)

    @staticmethod
    def _parse(raw: bytes) -> tuple[str | None, str] | None:
        event: str | None = None
        data: list[str] = []
        # bytes.splitlines ends lines only at CR, LF and CRLF, as SSE does; str's
        # would also cut at U+2028, U+0085 … that JSON text may hold unescaped.
        for raw_line in raw.splitlines():
            line = raw_line.decode("utf-8", "replace")
            if line.startswith(":"):
                continue  # comment / keep-alive
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "event":
                event = value
            elif key == "data":
                data.append(value)
        return (event, "\n".join(data)) if data else None
