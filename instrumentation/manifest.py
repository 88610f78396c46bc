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
from typing import Any, Mapping

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
from ._safe_text import endpoint_class, fingerprint, safe_error_text, safe_identifier

# The manifest's helpers live in wire.canonical, ._dialects and ._safe_text; they
# stay importable from here, where the provider wrappers, the preview command
# and applications have always found them.
__all__ = [
    "BYTES_PER_TOKEN", "ESTIMATE_MARGIN", "MANIFEST_SCHEMA_VERSION",
    "BodyShape", "ManifestError", "RequestManifest", "ToolEntry",
    "body_shape", "build_manifest", "canonical_bytes", "canonical_json", "canonical_size", "detect_dialect",
    "endpoint_class", "estimate_tokens", "fingerprint", "safe_error_text", "safe_identifier", "sha256_hex",
    "body_system_text", "tool_definitions",
]

# Bump when a field of the manifest changes meaning; stored on every span.
MANIFEST_SCHEMA_VERSION = 1

# Token estimates: wire.canonical's bytes per token, plus a margin so that
# "fits" errs on the side of not fitting.
ESTIMATE_MARGIN = 0.05


class ManifestError(ValueError):
    """The body cannot be described (not a JSON object, unknown dialect)."""


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
    )
