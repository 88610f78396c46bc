"""Request body → request manifest: what a request is made of, in bytes.

Pure and standard library only: the provider wrappers call it on the exact
JSON body a client is about to send, ``promptprism preview`` on a body read
from a file. Both get the same manifest, whose span attributes are the
``promptprism.request.*`` of README "The request manifest".

Bytes are counted in the canonical JSON of the body (README "The request span on the wire":
``json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
encoded as UTF-8). That serialisation is compositional: a value inside the body
serialises to exactly the bytes it occupies in the whole. So each class is the
sum of the canonical sizes of the values it owns, and ``framing`` (keys,
brackets, commas, every other parameter) is the remainder:

    system + tools + messages + framing == canonical body bytes, exactly.

A class owns whole values: each message element, each tool element, the
``system`` / ``instructions`` value. Tool results and attachments are subsets
of ``messages``, counted separately to show where history weight comes from.
:mod:`._dialects` knows where each dialect keeps them.

The manifest holds no free text. Identifiers (model, tool names, effort words)
appear only when they pass ``safe_text.IDENTIFIER_PATTERN``; anything else becomes a
``sha256:<12 hex>`` fingerprint, so a preview can be pasted into an issue and
a hostile name can never reach a terminal or a log.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping

from ..wire import names
from ..wire.canonical import BYTES_PER_TOKEN, canonical_bytes, canonical_json, canonical_size, sha256_hex
from ._dialects import (
    BodyShape,
    body_shape,
    detect_dialect,
    max_output_tokens,
    reasoning_settings,
    body_system_text,
    tool_definitions,
    tool_name,
)
from ._safe_text import (
    HOST_LOOPBACK,
    HOST_PRIVATE,
    HOST_PUBLIC,
    endpoint_class,
    fingerprint,
    safe_error_text,
    safe_identifier,
)

# The manifest's helpers live in wire.canonical, ._dialects and ._safe_text; they
# stay importable from here, where the provider wrappers, the preview command
# and applications have always found them.
__all__ = [
    "BYTES_PER_TOKEN", "ESTIMATE_MARGIN", "MANIFEST_SCHEMA_VERSION",
    "BodyShape", "ManifestError", "RequestManifest", "ToolEntry",
    "body_shape", "build_manifest", "canonical_bytes", "canonical_json", "canonical_size", "detect_dialect",
    "endpoint_class", "estimate_tokens", "fingerprint", "json_schema", "safe_error_text", "safe_identifier",
    "sha256_hex", "body_system_text", "tool_definitions",
]

# Bump when a field of the manifest changes meaning; stored on every span.
MANIFEST_SCHEMA_VERSION = 1

# Token estimates: wire.canonical's bytes per token, plus a margin so that
# "fits" errs on the side of not fitting.
ESTIMATE_MARGIN = 0.05


class ManifestError(ValueError):
    """The body cannot be described (not a JSON object, unknown dialect)."""


# How pydantic reads the declarations below when json_schema() derives the
# JSON Schema from them (a plain dict: building a manifest never imports pydantic).
# Every field is always present in the JSON, and nothing else is.
_SCHEMA_CONFIG = {"use_attribute_docstrings": True, "json_schema_serialization_defaults_required": True,
                  "extra": "forbid"}
# A digest in the manifest: lowercase hex sha256.
SHA256_PATTERN = "^[0-9a-f]{64}$"
# An identifier in the manifest: as sent when it passes safe_identifier's allowlist, else its fingerprint.
IDENTIFIER_DESCRIPTION = ("as sent when it matches [A-Za-z0-9._:/-]{1,64} and does not look like a credential, "
                          "else sha256:<12 hex> of it")


@dataclass(frozen=True)
class ToolEntry:
    """One tool definition: safe name, canonical size and hash of its JSON."""

    __pydantic_config__ = {**_SCHEMA_CONFIG, "title": "ToolEntry"}

    name: str | None
    """The tool's name (identifier rule), null when the definition has none."""
    size: int
    """Bytes of the definition's canonical JSON."""
    sha256: str
    """sha256 of the definition's canonical JSON."""


@dataclass(frozen=True)
class RequestManifest:
    """What one LLM request body is made of, in bytes of its canonical JSON (README "The request manifest")."""

    __pydantic_config__ = {**_SCHEMA_CONFIG, "title": "RequestManifest"}

    schema_version: int
    """Version of this layout (MANIFEST_SCHEMA_VERSION); bumped when a field changes meaning."""
    dialect: Literal[names.DIALECT_CHAT_COMPLETIONS, names.DIALECT_ANTHROPIC_MESSAGES, names.DIALECT_OPENAI_RESPONSES]
    """The body's API shape."""
    body_sha256: str
    """sha256 of the canonical JSON body: key order does not matter, any value change does."""
    bytes_total: int
    """Bytes of the canonical JSON body; system + tools + messages + framing, exactly."""
    bytes_system: int
    """Bytes of the system prompt values (system / instructions, leading system and developer messages)."""
    bytes_tools: int
    """Bytes of the tool definitions."""
    bytes_messages: int
    """Bytes of the messages after the leading system ones."""
    bytes_framing: int
    """Bytes of everything else: keys, brackets and every other parameter."""
    bytes_tool_results: int
    """Part of bytes_messages: tool outputs."""
    bytes_attachments: int
    """Part of bytes_messages: images, files, audio, documents."""
    messages_count: int
    """Messages after the leading system ones."""
    tools_count: int
    """Tool definitions on the request."""
    tools_catalog_sha256: str | None
    """sha256 of the whole tool catalog in order; null without tools."""
    tools: tuple[ToolEntry, ...]
    """Each tool definition, in order."""
    model: str | None
    """The requested model (identifier rule); null when the body names none."""
    stream: bool
    """Whether the body asks for a streamed answer."""
    max_output_tokens: int | None
    """The output tokens the request reserves, when it sets a limit."""
    reasoning_effort: str | None
    """reasoning_effort, reasoning.effort, output_config.effort or thinking.type (identifier rule)."""
    reasoning_budget_tokens: int | None
    """thinking.budget_tokens, when set."""
    tokens_estimate: int
    """Estimated input tokens: ~4 bytes per token + 5 % margin, not a tokenizer."""
    context_window: int | None
    """The model's context window in tokens, when configured."""
    headroom_tokens: int | None
    """What the window leaves after the estimate and the reserved output; negative when it does not fit."""
    endpoint_host_class: Literal[HOST_LOOPBACK, HOST_PRIVATE, HOST_PUBLIC] | None = None
    """Where the request goes, when known: never the URL."""
    endpoint_fingerprint: str | None = None
    """sha256:<12 hex> of scheme://host:port, when known."""
    tokens_by_class: Mapping[str, int] = field(default_factory=dict)
    """Estimated tokens of the system, tools, messages and framing classes."""
    dialect_detected: bool = False
    """True when the dialect was detected from the body rather than given."""
    tokens_are_estimates: Literal[True] = True
    """Always true: every token count here is an estimate."""

    def attributes(self) -> dict[str, Any]:
        """The ``promptprism.request.*`` span attributes (None values left out)."""
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
        """The manifest as a JSON object, the shape ``json_schema()`` describes."""
        data = asdict(self)
        data["tools"] = [asdict(tool) for tool in self.tools]
        data["tokens_by_class"] = dict(self.tokens_by_class)
        return data


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``RequestManifest.to_json()``, derived from the declarations above.

    pydantic reads the dataclasses' fields, types and attribute docstrings
    (imported here only: building a manifest needs the standard library alone).
    """
    from pydantic import TypeAdapter

    schema = TypeAdapter(RequestManifest).json_schema(mode="serialization")
    definitions = [schema, *schema.get("$defs", {}).values()]
    for definition in definitions:
        for name, prop in definition.get("properties", {}).items():
            if name == "sha256" or name.endswith("_sha256"):
                _restrict_strings(prop, SHA256_PATTERN)
            if name in ("name", "model", "reasoning_effort"):
                prop["description"] = f"{prop['description']} Identifier rule: {IDENTIFIER_DESCRIPTION}."
    properties = schema["properties"]
    properties["schema_version"]["const"] = MANIFEST_SCHEMA_VERSION
    properties["tokens_by_class"]["propertyNames"] = {"enum": ["system", "tools", "messages", "framing"]}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def _restrict_strings(prop: dict[str, Any], pattern: str) -> None:
    """Put ``pattern`` on the string branch of a property (a plain string, or string-or-null)."""
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") == "string":
            branch["pattern"] = pattern


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
    detected = not dialect
    dialect = dialect or detect_dialect(body)
    if dialect not in names.DIALECTS:
        raise ManifestError(f"unknown dialect {safe_identifier(dialect)}; expected one of {', '.join(names.DIALECTS)}")
    shape = body_shape(body, dialect)

    body_bytes = canonical_bytes(dict(body))
    total = len(body_bytes)
    system = sum(canonical_size(value) for value in shape.system)
    tools = sum(canonical_size(value) for value in shape.tools)
    messages = sum(canonical_size(value) for value in shape.messages)
    tool_results = sum(canonical_size(value) for value in shape.tool_results)
    attachments = sum(canonical_size(value) for value in shape.attachments)
    framing = total - system - tools - messages

    tool_entries = tuple(
        ToolEntry(name=safe_identifier(tool_name(tool, dialect)), size=canonical_size(tool),
                  sha256=sha256_hex(canonical_bytes(tool)))
        for tool in shape.tools
    )
    catalog = sha256_hex(canonical_bytes(list(shape.tools))) if shape.tools else None

    max_output = max_output_tokens(body)
    effort, budget = reasoning_settings(body, dialect)
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
        dialect_detected=detected,
    )
