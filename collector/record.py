"""What flows from reassembly to the store: one ``RequestRecord`` per LLM request.

Pure data, no I/O, imported by every stage that handles a request record
(``write``, ``read``, ``store``); it imports nothing of the collector.
``write.reassemble`` builds these from decoded OTLP spans, ``write.rows``
turns them into table columns, and the store writes the columns. Field names
follow the ``requests`` table columns (``store/schema``) so the mapping stays
obvious. ``GenAIEvent`` is the stored form of a GenAI content log event.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Block:
    index: int
    name: str
    layer: str
    stability: str
    source: str
    start: int
    end: int
    size: int
    sha256: str  # of the original bytes, as sent, even when the content is redacted
    content: str | None = None  # only when content capture was on
    # The sender's redaction hook changed ``content``: it is not the bytes
    # ``size`` and ``sha256`` describe.
    redacted: bool = False


@dataclass(slots=True)
class ToolDefinition:
    index: int
    name: str
    size: int
    sha256: str  # of the original definition, as Block.sha256
    content: str | None = None
    redacted: bool = False  # as Block.redacted


@dataclass(slots=True)
class RequestRecord:
    """One LLM request span, reassembled. ``request_id`` is the span id (16 hex)."""

    trace_id: str  # 32 lowercase hex
    request_id: str  # 16 lowercase hex (span id)
    parent_span_id: str = ""
    started_at_ns: int = 0  # span start, Unix nanoseconds
    duration_ns: int = 0
    span_name: str = ""
    status_code: str = ""  # "Unset" | "Ok" | "Error" (otel_traces spelling)
    status_message: str = ""

    service: str = ""
    scope_name: str = ""
    operation: str = ""
    provider: str = ""
    model: str = ""  # gen_ai.request.model
    response_model: str = ""
    response_id: str = ""
    finish_reasons: list[str] = field(default_factory=list)

    conversation_id: str = ""
    message_id: str = ""
    process_kind: str = ""
    process_id: str = ""
    run_id: str = ""
    run_mode: str = ""
    attempt: int = 0
    record_id: str = ""

    schema_version: int = 0  # 0: not sent by promptprism instrumentation
    prompt_bytes: int = 0
    prompt_sha256: str = ""
    mapped: bool = False
    unmapped_reason: str = ""
    template_name: str = ""
    template_origin: str = ""
    declared_block_count: int = 0
    blocks: list[Block] = field(default_factory=list)
    tools: list[ToolDefinition] = field(default_factory=list)

    dialect: str = ""
    body_sha256: str = ""
    bytes_system: int = 0
    bytes_tools: int = 0
    bytes_messages: int = 0
    bytes_framing: int = 0
    bytes_total: int = 0
    tools_count: int = 0
    tools_catalog_sha256: str = ""
    messages_count: int = 0
    tokens_estimate: int = 0
    context_window: int = 0
    headroom_tokens: int = 0
    reasoning_effort: str = ""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None

    # Captured content as JSON text (empty when not captured).
    system_instructions: str = ""
    input_messages: str = ""
    output_messages: str = ""
    template_variables: str = ""

    # Every other span attribute, stringified (the otel_traces convention).
    attributes: dict[str, str] = field(default_factory=dict)
    resource_attributes: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class GenAIEvent:
    """A GenAI content event (``gen_ai.*.message``, ``gen_ai.choice``,
    ``gen_ai.client.inference.operation.details``), kept for the read side to
    join to its request by (trace_id, span_id). Body and attributes are
    stored as JSON text, typed, so the join sees what the span would have."""

    time_ns: int
    trace_id: str
    span_id: str
    sequence: int
    event_name: str
    service: str
    scope_name: str
    body_json: str
    attributes_json: str
    record_sha256: str  # identity of the record: a re-sent copy collapses onto it
