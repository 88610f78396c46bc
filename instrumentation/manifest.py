"""Request body → request manifest: what a request is made of, in bytes.

Pure and standard library only: the provider wrappers call it on the exact
JSON body a client is about to send, ``promptprism preview`` on a body read
from a file. Both get the same manifest, whose span attributes are SPEC §3's
``promptprism.request.*``.

Bytes are counted in the canonical JSON of the body (SPEC §3:
``json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
encoded as UTF-8). That serialisation is compositional: a value inside the body
serialises to exactly the bytes it occupies in the whole. So each class is the
sum of the canonical sizes of the values it owns, and ``framing`` (keys,
brackets, commas, every other parameter) is the remainder:

    system + tools + messages + framing == canonical body bytes, exactly.

A class owns whole values: each message element, each tool element, the
``system`` / ``instructions`` value. Tool results and attachments are subsets
of ``messages``, counted separately to show where history weight comes from.

The manifest holds no free text. Identifiers (model, tool names, effort words)
appear only when they pass ``IDENTIFIER_PATTERN``; anything else becomes a
``sha256:<12 hex>`` fingerprint, so a preview can be pasted into an issue and
a hostile name can never reach a terminal or a log.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import re
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from . import names

# Bump when a field of the manifest changes meaning; stored on every span.
MANIFEST_SCHEMA_VERSION = 1

# Token estimates: about 4 bytes of English/JSON per token for current
# tokenizers, plus a margin so that "fits" errs on the side of not fitting.
BYTES_PER_TOKEN = 4
ESTIMATE_MARGIN = 0.05

# Model and tool names are short machine identifiers; anything longer or with
# other characters may be user text (or an attack on a terminal) and is
# fingerprinted instead of printed.
IDENTIFIER_PATTERN = re.compile(r"[A-Za-z0-9._:/-]{1,64}")
# Allowlisted characters can still spell a credential pasted into the wrong
# field: well-known key prefixes, or a long run mixing cases and digits.
SECRET_PATTERN = re.compile(
    r"(?:^|[._:/-])(?:sk|pk|rk|ghp|gho|ghs|xox[abpr])[-_][A-Za-z0-9]|(?:AKIA|AIza)[A-Za-z0-9]{8}"
    r"|(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*[A-Z])(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{20,}"
)
# Hex digits shown of a fingerprint: enough to tell values apart in one
# deployment, too few to be worth brute-forcing back to short secrets.
FINGERPRINT_HEX_DIGITS = 12
# Error words kept as they are: plain lowercase or Capitalised words, short
# upper-case acronyms and small numbers, with light punctuation. Mixed-case or
# long runs look like keys or tokens and are fingerprinted.
ERROR_WORD_PATTERN = re.compile(r"\(?(?:[A-Za-z][a-z]{0,19}|[A-Z]{1,8}|[0-9]{1,9})\)?[.,:;]?")
# An error message longer than this is cut: a preview line, not a log dump.
MAX_ERROR_WORDS = 40

# Content parts that carry files, images or audio rather than text.
ATTACHMENT_PART_TYPES = frozenset({
    "image_url", "input_audio", "file",  # chat-completions
    "input_image", "input_file",  # openai-responses
    "image", "document",  # anthropic-messages
})
# Roles whose leading messages form the system prompt in message-list dialects.
SYSTEM_ROLES = frozenset({"system", "developer"})
# Chat Completions roles that carry a tool's output back to the model.
CHAT_TOOL_RESULT_ROLES = frozenset({"tool", "function"})
# Output-token caps, in the order a dialect prefers them.
MAX_OUTPUT_KEYS = ("max_completion_tokens", "max_output_tokens", "max_tokens")


class ManifestError(ValueError):
    """The body cannot be described (not a JSON object, unknown dialect)."""


# --- canonical JSON ------------------------------------------------------------


def canonical_json(value: Any) -> str:
    """SPEC §3's canonical serialisation of a JSON value, as text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_bytes(value: Any) -> bytes:
    # "surrogatepass" only matters for lone surrogates (a JSON "\ud800"
    # escape), which plain .encode() cannot encode at all: the manifest still
    # exists for such a body instead of failing.
    return canonical_json(value).encode("utf-8", "surrogatepass")


def canonical_size(value: Any) -> int:
    return len(canonical_bytes(value))


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- identifiers, endpoints and errors without free text --------------------------


def fingerprint(text: str) -> str:
    digest = sha256_hex(text.encode("utf-8", "surrogatepass"))
    return f"sha256:{digest[:FINGERPRINT_HEX_DIGITS]}"


def safe_identifier(value: Any) -> str | None:
    """The identifier itself when it passes the allowlist, else its fingerprint."""
    if value is None:
        return None
    text = value if isinstance(value, str) else canonical_json(value)
    if IDENTIFIER_PATTERN.fullmatch(text) and not SECRET_PATTERN.search(text):
        return text
    return fingerprint(text)


def safe_error_text(text: str) -> str:
    """An error message reduced to allowlisted words; other words fingerprinted.

    Provider and parser errors often echo input (a model name, a body
    fragment, a key); this keeps the sentence readable without printing any
    of it.
    """
    words = str(text).split()
    kept = [word if ERROR_WORD_PATTERN.fullmatch(word) else fingerprint(word) for word in words[:MAX_ERROR_WORDS]]
    if len(words) > MAX_ERROR_WORDS:
        kept.append("…")
    return " ".join(kept)


HOST_LOOPBACK = "loopback"
HOST_PRIVATE = "private"
HOST_PUBLIC = "public"
# Host names that only resolve inside a network.
PRIVATE_NAME_SUFFIXES = (".local", ".internal", ".lan", ".home.arpa", ".intranet", ".corp")


def endpoint_class(url: str) -> tuple[str, str]:
    """(host class, fingerprint of scheme://host:port) — never the URL itself."""
    parts = urllib.parse.urlsplit(str(url))
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: still classify the host
        port = None
    origin = f"{parts.scheme}://{host}:{port or ''}"
    return _host_class(host), fingerprint(origin)


def _host_class(host: str) -> str:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host == "localhost" or host.endswith(".localhost"):
            return HOST_LOOPBACK
        if "." not in host or host.endswith(PRIVATE_NAME_SUFFIXES):
            return HOST_PRIVATE
        return HOST_PUBLIC
    if address.is_loopback:
        return HOST_LOOPBACK
    if address.is_private or address.is_link_local:
        return HOST_PRIVATE
    return HOST_PUBLIC


# --- the manifest -----------------------------------------------------------------


@dataclass(frozen=True)
class ToolEntry:
    """One tool definition: safe name, canonical size and hash of its JSON."""

    name: str | None
    size: int
    sha256: str


@dataclass(frozen=True)
class RequestManifest:
    schema_version: int
    dialect: str
    body_sha256: str
    bytes_total: int
    bytes_system: int
    bytes_tools: int
    bytes_messages: int
    bytes_framing: int
    bytes_tool_results: int
    bytes_attachments: int
    messages_count: int
    tools_count: int
    tools_catalog_sha256: str | None
    tools: tuple[ToolEntry, ...]
    model: str | None
    stream: bool
    max_output_tokens: int | None
    reasoning_effort: str | None
    reasoning_budget_tokens: int | None
    tokens_estimate: int
    context_window: int | None
    headroom_tokens: int | None
    endpoint_host_class: str | None = None
    endpoint_fingerprint: str | None = None
    # Estimated tokens per byte class, for the preview table.
    tokens_by_class: Mapping[str, int] = field(default_factory=dict)

    def attributes(self) -> dict[str, Any]:
        """SPEC §3 ``promptprism.request.*`` span attributes (None values left out)."""
        attributes = {
            names.REQUEST_MANIFEST_SCHEMA_VERSION: self.schema_version,
            names.REQUEST_DIALECT: self.dialect,
            names.REQUEST_BODY_SHA256: self.body_sha256,
            names.REQUEST_BYTES_TOTAL: self.bytes_total,
            names.REQUEST_BYTES_SYSTEM: self.bytes_system,
            names.REQUEST_BYTES_TOOLS: self.bytes_tools,
            names.REQUEST_BYTES_MESSAGES: self.bytes_messages,
            names.REQUEST_BYTES_FRAMING: self.bytes_framing,
            names.REQUEST_BYTES_TOOL_RESULTS: self.bytes_tool_results,
            names.REQUEST_BYTES_ATTACHMENTS: self.bytes_attachments,
            names.REQUEST_MESSAGES_COUNT: self.messages_count,
            names.REQUEST_TOOLS_COUNT: self.tools_count,
            names.REQUEST_TOOLS_CATALOG_SHA256: self.tools_catalog_sha256,
            names.REQUEST_TOKENS_ESTIMATE: self.tokens_estimate,
            names.REQUEST_CONTEXT_WINDOW: self.context_window,
            names.REQUEST_HEADROOM_TOKENS: self.headroom_tokens,
            names.REQUEST_REASONING_EFFORT: self.reasoning_effort,
            names.REQUEST_REASONING_BUDGET_TOKENS: self.reasoning_budget_tokens,
            names.REQUEST_ENDPOINT_HOST_CLASS: self.endpoint_host_class,
            names.REQUEST_ENDPOINT_FINGERPRINT: self.endpoint_fingerprint,
            names.GEN_AI_REQUEST_MAX_TOKENS: self.max_output_tokens,
            names.GEN_AI_REQUEST_STREAM: self.stream,
        }
        return {key: value for key, value in attributes.items() if value is not None}

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tools"] = [asdict(tool) for tool in self.tools]
        data["tokens_by_class"] = dict(self.tokens_by_class)
        data["tokens_are_estimates"] = True
        return data


def estimate_tokens(byte_count: int) -> int:
    """~4 bytes per token plus a 5 % margin, rounded up: an estimate, labelled so."""
    if byte_count <= 0:
        return 0
    return math.ceil(byte_count / BYTES_PER_TOKEN * (1 + ESTIMATE_MARGIN))


def build_manifest(
    body: Mapping[str, Any],
    dialect: str | None = None,
    *,
    context_window: int | None = None,
    endpoint: str | None = None,
) -> RequestManifest:
    """Describe one request body. ``dialect`` is detected when None."""
    if not isinstance(body, Mapping):
        raise ManifestError("the request body must be a JSON object")
    dialect = dialect or detect_dialect(body)
    if dialect not in names.DIALECTS:
        raise ManifestError(f"unknown dialect {safe_identifier(dialect)}; expected one of {', '.join(names.DIALECTS)}")
    shape = _SHAPES[dialect](body)

    body_bytes = canonical_bytes(dict(body))
    total = len(body_bytes)
    system = sum(canonical_size(value) for value in shape.system)
    tools = sum(canonical_size(value) for value in shape.tools)
    messages = sum(canonical_size(value) for value in shape.messages)
    tool_results = sum(canonical_size(value) for value in shape.tool_results)
    attachments = sum(canonical_size(value) for value in shape.attachments)
    framing = total - system - tools - messages

    tool_entries = tuple(
        ToolEntry(name=safe_identifier(_tool_name(tool, dialect)), size=canonical_size(tool),
                  sha256=sha256_hex(canonical_bytes(tool)))
        for tool in shape.tools
    )
    catalog = sha256_hex(canonical_bytes(list(shape.tools))) if shape.tools else None

    max_output = _first_int(body, MAX_OUTPUT_KEYS)
    effort, budget = _reasoning(body, dialect)
    tokens_estimate = estimate_tokens(total)
    headroom = None
    if context_window is not None:
        # The input budget is what the window leaves after the output the
        # request reserves; providers reject prompt + max tokens beyond it.
        headroom = int(context_window) - (max_output or 0) - tokens_estimate
    host_class, endpoint_fingerprint = endpoint_class(endpoint) if endpoint else (None, None)

    return RequestManifest(
        schema_version=MANIFEST_SCHEMA_VERSION,
        dialect=dialect,
        body_sha256=sha256_hex(body_bytes),
        bytes_total=total,
        bytes_system=system,
        bytes_tools=tools,
        bytes_messages=messages,
        bytes_framing=framing,
        bytes_tool_results=tool_results,
        bytes_attachments=attachments,
        messages_count=len(shape.messages),
        tools_count=len(shape.tools),
        tools_catalog_sha256=catalog,
        tools=tool_entries,
        model=safe_identifier(body.get("model")),
        stream=body.get("stream") is True,
        max_output_tokens=max_output,
        reasoning_effort=safe_identifier(effort),
        reasoning_budget_tokens=budget,
        tokens_estimate=tokens_estimate,
        context_window=None if context_window is None else int(context_window),
        headroom_tokens=headroom,
        endpoint_host_class=host_class,
        endpoint_fingerprint=endpoint_fingerprint,
        tokens_by_class={
            "system": estimate_tokens(system),
            "tools": estimate_tokens(tools),
            "messages": estimate_tokens(messages),
            "framing": estimate_tokens(framing),
        },
    )


# --- dialects: where each dialect keeps system, tools and messages -------------------


@dataclass
class BodyShape:
    """The values each byte class owns, in body order (disjoint subtrees)."""

    system: list[Any] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)
    messages: list[Any] = field(default_factory=list)
    tool_results: list[Any] = field(default_factory=list)
    attachments: list[Any] = field(default_factory=list)
    # The system prompt as text: what the app rendered, for the block map.
    system_texts: list[str] = field(default_factory=list)


def body_shape(body: Mapping[str, Any], dialect: str) -> BodyShape:
    return _SHAPES[dialect](body)


def _chat_completions(body: Mapping[str, Any]) -> BodyShape:
    shape = BodyShape()
    for key in ("tools", "functions"):  # `functions` is the legacy spelling
        shape.tools.extend(_list(body.get(key)))
    leading = True
    for message in _list(body.get("messages")):
        role = message.get("role") if isinstance(message, Mapping) else None
        # Only the leading run is the system prompt: it is what the app
        # rendered and what the provider caches as the prefix. A system
        # message later in the history is part of the conversation.
        if leading and role in SYSTEM_ROLES:
            shape.system.append(message)
            shape.system_texts.append(_text_of(message.get("content")))
            continue
        leading = False
        shape.messages.append(message)
        if role in CHAT_TOOL_RESULT_ROLES:
            shape.tool_results.append(message)
        if isinstance(message, Mapping):
            shape.attachments.extend(_attachments(message.get("content")))
    return shape


def _anthropic_messages(body: Mapping[str, Any]) -> BodyShape:
    shape = BodyShape()
    system = body.get("system")
    if isinstance(system, list):
        shape.system.extend(system)
    elif system is not None:
        shape.system.append(system)
    if system is not None:
        shape.system_texts.append(_text_of(system))
    shape.tools.extend(_list(body.get("tools")))
    for message in _list(body.get("messages")):
        shape.messages.append(message)
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in _list(content):
            block_type = block.get("type") if isinstance(block, Mapping) else None
            # tool_result, and server tools' *_tool_result blocks
            if isinstance(block_type, str) and block_type.endswith("tool_result"):
                shape.tool_results.append(block)
        shape.attachments.extend(_attachments(content))
    return shape


def _openai_responses(body: Mapping[str, Any]) -> BodyShape:
    shape = BodyShape()
    instructions = body.get("instructions")
    if instructions is not None:
        shape.system.append(instructions)
        shape.system_texts.append(_text_of(instructions))
    shape.tools.extend(_list(body.get("tools")))
    items = body.get("input")
    if not isinstance(items, list):
        # A bare string input is one user message.
        if items is not None:
            shape.messages.append(items)
        return shape
    leading = True
    for item in items:
        role = item.get("role") if isinstance(item, Mapping) else None
        if leading and role in SYSTEM_ROLES:
            shape.system.append(item)
            shape.system_texts.append(_text_of(item.get("content")))
            continue
        leading = False
        shape.messages.append(item)
        item_type = item.get("type") if isinstance(item, Mapping) else None
        if isinstance(item_type, str) and item_type.endswith("_output") and item_type != "output_text":
            # function_call_output, custom_tool_call_output, computer_call_output …
            shape.tool_results.append(item)
        if isinstance(item, Mapping):
            shape.attachments.extend(_attachments(item.get("content")))
    return shape


_SHAPES = {
    names.DIALECT_CHAT_COMPLETIONS: _chat_completions,
    names.DIALECT_ANTHROPIC_MESSAGES: _anthropic_messages,
    names.DIALECT_OPENAI_RESPONSES: _openai_responses,
}


def detect_dialect(body: Mapping[str, Any]) -> str:
    """Best guess from the body alone; the provider wrappers know it from the URL.

    Ambiguous bodies (a model, user messages and ``max_tokens``) are read as
    Anthropic, which requires ``max_tokens``; Chat Completions has moved to
    ``max_completion_tokens``. ``--dialect`` overrides the guess.
    """
    if "messages" not in body and ("input" in body or "instructions" in body):
        return names.DIALECT_OPENAI_RESPONSES
    if "system" in body or "thinking" in body or "anthropic_version" in body:
        return names.DIALECT_ANTHROPIC_MESSAGES
    chat_keys = ("max_completion_tokens", "reasoning_effort", "stream_options", "response_format",
                 "functions", "n", "logprobs", "frequency_penalty", "presence_penalty")
    if any(key in body for key in chat_keys):
        return names.DIALECT_CHAT_COMPLETIONS
    for message in _list(body.get("messages")):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") in SYSTEM_ROLES | CHAT_TOOL_RESULT_ROLES or "tool_calls" in message:
            return names.DIALECT_CHAT_COMPLETIONS
        for block in _list(message.get("content")):
            if isinstance(block, Mapping) and block.get("type") in ("tool_use", "tool_result", "thinking", "image", "document"):
                return names.DIALECT_ANTHROPIC_MESSAGES
    for tool in _list(body.get("tools")):
        if isinstance(tool, Mapping) and "input_schema" in tool:
            return names.DIALECT_ANTHROPIC_MESSAGES
        if isinstance(tool, Mapping) and "function" in tool:
            return names.DIALECT_CHAT_COMPLETIONS
    if "max_tokens" in body:
        return names.DIALECT_ANTHROPIC_MESSAGES
    return names.DIALECT_CHAT_COMPLETIONS


# --- text for the block map and tool definitions for the span ---------------------


def system_prompt_candidates(body: Mapping[str, Any], dialect: str) -> list[str]:
    """Texts that may be the prompt the app rendered, most likely first.

    The whole system prompt first; when it arrived in several parts (two
    system messages, an Anthropic block list split for cache_control), each
    part too, so a prompt rendered through promptprism is found either way.
    """
    texts = [text for text in _SHAPES[dialect](body).system_texts if text]
    if not texts:
        return []
    candidates = ["".join(texts)]
    for text in texts:
        if text not in candidates:
            candidates.append(text)
    parts = _system_parts(body, dialect)
    for text in parts:
        if text and text not in candidates:
            candidates.append(text)
    return candidates


def system_prompt_text(body: Mapping[str, Any], dialect: str) -> str | None:
    texts = [text for text in _SHAPES[dialect](body).system_texts if text]
    return "".join(texts) if texts else None


def tool_definitions(body: Mapping[str, Any], dialect: str) -> list[tuple[str, str]]:
    """(name, canonical JSON text) per tool, in request order, for the span's tool events."""
    tools = _SHAPES[dialect](body).tools
    return [(str(_tool_name(tool, dialect) or ""), canonical_json(tool)) for tool in tools]


def _system_parts(body: Mapping[str, Any], dialect: str) -> list[str]:
    """Individual text blocks of a system prompt given as a list of parts."""
    if dialect == names.DIALECT_ANTHROPIC_MESSAGES:
        sources = [body.get("system")]
    else:
        sources = [message.get("content") for message in _SHAPES[dialect](body).system if isinstance(message, Mapping)]
    parts: list[str] = []
    for source in sources:
        if isinstance(source, list):
            parts.extend(_text_of(part) for part in source)
    return parts


def _tool_name(tool: Any, dialect: str) -> Any:
    if not isinstance(tool, Mapping):
        return None
    if dialect == names.DIALECT_CHAT_COMPLETIONS:
        for nested in ("function", "custom"):
            inner = tool.get(nested)
            if isinstance(inner, Mapping) and "name" in inner:
                return inner["name"]
    # Built-in tools (web_search, code_interpreter …) have a type, not a name.
    return tool.get("name", tool.get("type"))


def _reasoning(body: Mapping[str, Any], dialect: str) -> tuple[Any, int | None]:
    effort: Any = None
    budget: int | None = None
    reasoning = body.get("reasoning")
    if isinstance(reasoning, Mapping):
        effort = reasoning.get("effort")
    if body.get("reasoning_effort") is not None:
        effort = body.get("reasoning_effort")
    if dialect == names.DIALECT_ANTHROPIC_MESSAGES:
        thinking = body.get("thinking")
        if isinstance(thinking, Mapping):
            budget = _as_int(thinking.get("budget_tokens"))
            effort = thinking.get("type")  # enabled / adaptive / disabled
        output_config = body.get("output_config")
        if isinstance(output_config, Mapping) and output_config.get("effort") is not None:
            effort = output_config["effort"]
    return effort, budget


def _text_of(content: Any) -> str:
    """The text of a content value: a string, a text part, or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        text = content.get("text")
        return text if isinstance(text, str) else ""
    if isinstance(content, list):
        return "".join(_text_of(part) for part in content)
    return ""


def _attachments(content: Any) -> Iterable[Any]:
    """Attachment parts anywhere in a content value (tool results nest them)."""
    for part in _list(content):
        if not isinstance(part, Mapping):
            continue
        if part.get("type") in ATTACHMENT_PART_TYPES:
            yield part
        elif isinstance(part.get("content"), list):
            yield from _attachments(part["content"])


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _first_int(body: Mapping[str, Any], keys: Iterable[str]) -> int | None:
    for key in keys:
        value = _as_int(body.get(key))
        if value is not None:
            return value
    return None
