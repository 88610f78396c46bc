"""What flows from reassembly to the store: one ``RequestRecord`` per LLM request, declared once.

Pure data, no I/O, imported by every stage that handles a request record
(``conventions``, ``write``, ``store``, ``read``); it imports nothing of the
collector but the wire names. Each field of ``RequestRecord`` that is a
column of the ``requests`` table says so where it is declared
(``column(…)``): the column's ClickHouse type, the one span attribute that
fills it when there is one, whether it holds captured content, and where the
API's request object shows it. The other stages derive from that:

- ``conventions.declared`` copies each declared attribute into its field,
  converted by the column's type;
- ``write.rows`` lays out the ``requests`` columns (Arrow type, clamping,
  defaults), the same as inputs of the request's document in
  ``request_docs`` (migration 048), and a content field's items in
  ``contents`` and their keys in the document (``content_columns``);
- ``read.queries`` reads them back under each field's name (a list from
  ``requests``, a request object from its document);
- ``read.request_view`` shows each field at its ``api`` paths;
- a test compares ``REQUEST_COLUMNS`` with ``DESCRIBE TABLE requests``, and
  ``REQUEST_DOCUMENT_INPUT_COLUMNS`` with ``DESCRIBE TABLE request_docs``,
  after every migration.

So a new field is its declaration here, a migration that adds its column to
`requests` and its EPHEMERAL input to `request_docs` with a `doc` DEFAULT
that names it, and the template that shows it (README: "Adding a field to
the request record"). A content field (``content=True``) is not a column of
`requests`: its migration adds the inputs ``content_columns`` names to
`request_docs` (a test compares them), and the write and read paths handle
it from the declaration.

``Block`` is an element of its request's block arrays (``REQUEST_BLOCK_ARRAYS``, in its document; the
view ``blocks`` shows them as rows); a ``ToolDefinition`` is an element of its request row's tool
arrays (``REQUEST_TOOL_COLUMNS``, migration 046), or a row of ``tools`` when it came in a log record;
``GenAIEvent`` is the stored form of a GenAI content log event.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable

from ..wire import names


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


# --- how a field declares its column ------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Column:
    """One column of ``requests`` and the ``RequestRecord`` field it holds.

    ``content`` marks captured content (JSON text today): the one flag the
    stages look at to treat content apart from other values, e.g. to store
    a reference to content-addressed text instead of the text itself.
    """

    name: str  # the column of `requests`
    type: str  # its ClickHouse type, as DESCRIBE TABLE prints it
    field: str = ""  # the RequestRecord field it holds; "" for a column derived from other fields
    attribute: str = ""  # the one span attribute that fills the field, when there is exactly one
    content: bool = False  # captured content, held as JSON text
    summary: bool = False  # read for request summaries (lists, predecessors) too, not only full requests
    # Where the API's request object shows the value (dotted paths); a summary
    # shows a summary column at its first path. () when the read side shapes
    # the value itself (times, the prompt object).
    api: tuple[str, ...] = ()
    derive: Callable[[Any], Any] | None = None  # a derived column's value, from the record
    # Shown by a request object only: in its document (`request_docs`), not a column of `requests`
    # (migration 051), which keeps what lists, filters, panels and the rollup job read.
    document_only: bool = False

    @property
    def key(self) -> str:
        """The value's name in records and in the rows read back: the field's, else the column's."""
        return self.field or self.name


_COLUMN = "promptprism.column"  # the key of the field metadata ``column`` makes


def column(type: str, *, name: str = "", attribute: str = "", content: bool = False, summary: bool = False,
           api: str | tuple[str, ...] = (), document_only: bool = False) -> dict[str, Any]:
    """A field's metadata: the ``requests`` column it is stored in (named like the field unless ``name``)."""
    paths = (api,) if isinstance(api, str) else tuple(api)
    return {_COLUMN: dict(type=type, name=name, attribute=attribute, content=content, summary=summary, api=paths,
                          document_only=document_only)}


STRING = "String"
NAME = "LowCardinality(String)"  # one of few values: names, kinds, modes
STRING_MAP = "Map(LowCardinality(String), String)"


@dataclass(slots=True)
class RequestRecord:
    """One LLM request span, reassembled. ``request_id`` is the span id (16 hex)."""

    trace_id: str = field(metadata=column(STRING, summary=True, api="trace_id"))  # 32 lowercase hex
    request_id: str = field(metadata=column(STRING, summary=True, api="request_id"))  # 16 lowercase hex
    parent_span_id: str = field(default="", metadata=column(STRING, api="parent_span_id", document_only=True))
    # Span start, Unix nanoseconds (shown as RFC 3339, duration in ms: the read side shapes both).
    started_at_ns: int = field(default=0, metadata=column("DateTime64(9, 'UTC')", name="started_at", summary=True))
    duration_ns: int = field(default=0, metadata=column("UInt64", summary=True))
    span_name: str = field(default="", metadata=column(NAME, api="span_name", document_only=True))
    # "Unset" | "Ok" | "Error" (otel_traces spelling)
    status_code: str = field(default="", metadata=column(NAME, summary=True, api="status.code"))
    status_message: str = field(default="", metadata=column(STRING, summary=True, api="status.message"))

    service: str = field(default="", metadata=column(NAME, summary=True, api="service"))
    scope_name: str = field(default="", metadata=column(NAME, api="scope_name", document_only=True))
    operation: str = field(default="", metadata=column(
        NAME, attribute=names.GEN_AI_OPERATION_NAME, summary=True, api="operation"))
    provider: str = field(default="", metadata=column(NAME, summary=True, api="provider"))  # conventions.genai
    model: str = field(default="", metadata=column(
        NAME, attribute=names.GEN_AI_REQUEST_MODEL, summary=True, api="model"))
    response_model: str = field(default="", metadata=column(
        NAME, attribute=names.GEN_AI_RESPONSE_MODEL, summary=True, api=("response_model", "response.model")))
    response_id: str = field(default="", metadata=column(
        STRING, attribute=names.GEN_AI_RESPONSE_ID, api="response.id", document_only=True))
    finish_reasons: list[str] = field(default_factory=list, metadata=column(
        f"Array({NAME})", attribute=names.GEN_AI_RESPONSE_FINISH_REASONS, api="response.finish_reasons", document_only=True))

    conversation_id: str = field(default="", metadata=column(
        STRING, attribute=names.GEN_AI_CONVERSATION_ID, summary=True, api="conversation_id"))
    message_id: str = field(default="", metadata=column(
        STRING, attribute=names.MESSAGE_ID, summary=True, api="message_id"))
    process_kind: str = field(default="", metadata=column(
        NAME, attribute=names.PROCESS_KIND, summary=True, api="process.kind"))
    process_id: str = field(default="", metadata=column(
        STRING, attribute=names.PROCESS_ID, summary=True, api="process.id"))
    run_id: str = field(default="", metadata=column(STRING, attribute=names.RUN_ID, summary=True, api="run.id"))
    run_mode: str = field(default="", metadata=column(
        NAME, attribute=names.RUN_MODE, summary=True, api="run.mode"))
    attempt: int = field(default=0, metadata=column(
        "Int32", attribute=names.ATTEMPT, summary=True, api="run.attempt"))
    record_id: str = field(default="", metadata=column(
        STRING, attribute=names.RECORD_ID, summary=True, api="run.record_id"))

    # 0: not sent by promptprism instrumentation
    schema_version: int = field(default=0, metadata=column(
        "UInt16", attribute=names.SCHEMA_VERSION_ATTR, api="schema_version", document_only=True))
    # The prompt: reassembly fills these from the block map, the read side shapes the prompt object.
    prompt_bytes: int = field(default=0, metadata=column("UInt64", attribute=names.PROMPT_BYTES, summary=True))
    prompt_sha256: str = field(default="", metadata=column(STRING, attribute=names.PROMPT_SHA256, summary=True))
    mapped: bool = field(default=False, metadata=column("Bool", summary=True))
    unmapped_reason: str = field(default="", metadata=column(NAME, summary=True))
    template_name: str = field(default="", metadata=column(
        NAME, attribute=names.PROMPT_TEMPLATE_NAME, summary=True))
    template_origin: str = field(default="", metadata=column(
        NAME, attribute=names.PROMPT_TEMPLATE_ORIGIN, summary=True))
    declared_block_count: int = field(default=0, metadata=column(
        "UInt32", attribute=names.PROMPT_BLOCK_COUNT, summary=True))
    blocks: list[Block] = field(default_factory=list)  # the `blocks` table (the column block_count counts them)
    tools: list[ToolDefinition] = field(default_factory=list)  # the `tools` table

    # The request manifest (promptprism.request.*).
    dialect: str = field(default="", metadata=column(
        NAME, attribute=names.REQUEST_DIALECT, api="manifest.dialect", document_only=True))
    body_sha256: str = field(default="", metadata=column(
        STRING, attribute=names.REQUEST_BODY_SHA256, api="manifest.body_sha256", document_only=True))
    bytes_system: int = field(default=0, metadata=column(
        "UInt64", attribute=names.REQUEST_BYTES_SYSTEM, api="manifest.bytes.system", document_only=True))
    bytes_tools: int = field(default=0, metadata=column(
        "UInt64", attribute=names.REQUEST_BYTES_TOOLS, api="manifest.bytes.tools"))
    bytes_messages: int = field(default=0, metadata=column(
        "UInt64", attribute=names.REQUEST_BYTES_MESSAGES, api="manifest.bytes.messages", document_only=True))
    bytes_framing: int = field(default=0, metadata=column(
        "UInt64", attribute=names.REQUEST_BYTES_FRAMING, api="manifest.bytes.framing", document_only=True))
    bytes_total: int = field(default=0, metadata=column(
        "UInt64", attribute=names.REQUEST_BYTES_TOTAL, summary=True, api=("request_bytes", "manifest.bytes.total")))
    tools_count: int = field(default=0, metadata=column(
        "UInt32", attribute=names.REQUEST_TOOLS_COUNT, summary=True, api=("tools_count", "manifest.tools_count")))
    tools_catalog_sha256: str = field(default="", metadata=column(
        STRING, attribute=names.REQUEST_TOOLS_CATALOG_SHA256, api="manifest.tools_catalog_sha256"))
    messages_count: int = field(default=0, metadata=column(
        "UInt32", attribute=names.REQUEST_MESSAGES_COUNT, summary=True,
        api=("messages_count", "manifest.messages_count")))
    tokens_estimate: int = field(default=0, metadata=column(
        "UInt64", attribute=names.REQUEST_TOKENS_ESTIMATE, api="manifest.tokens_estimate"))
    context_window: int = field(default=0, metadata=column(
        "UInt64", attribute=names.REQUEST_CONTEXT_WINDOW, api="manifest.context_window"))
    headroom_tokens: int = field(default=0, metadata=column(
        "Int64", attribute=names.REQUEST_HEADROOM_TOKENS, api="manifest.headroom_tokens"))
    reasoning_effort: str = field(default="", metadata=column(
        NAME, attribute=names.REQUEST_REASONING_EFFORT, api="manifest.reasoning_effort", document_only=True))
    # The sampling temperature the request asked for; None when it set none.
    temperature: float | None = field(default=None, metadata=column(
        "Nullable(Float64)", attribute=names.GEN_AI_REQUEST_TEMPERATURE, api="parameters.temperature", document_only=True))

    # Usage as the provider reported it; None when it did not (conventions.genai: current and older names).
    input_tokens: int | None = field(default=None, metadata=column(
        "Nullable(Int64)", summary=True, api="usage.input_tokens"))
    output_tokens: int | None = field(default=None, metadata=column(
        "Nullable(Int64)", summary=True, api="usage.output_tokens"))
    cache_read_tokens: int | None = field(default=None, metadata=column(
        "Nullable(Int64)", attribute=names.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, summary=True,
        api="usage.cache_read_tokens"))
    cache_creation_tokens: int | None = field(default=None, metadata=column(
        "Nullable(Int64)", attribute=names.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, summary=True,
        api="usage.cache_creation_tokens"))

    # Captured content as JSON text (empty when not captured); never copied into `attributes`.
    system_instructions: str = field(default="", metadata=column(
        STRING, attribute=names.GEN_AI_SYSTEM_INSTRUCTIONS, content=True))
    input_messages: str = field(default="", metadata=column(
        STRING, attribute=names.GEN_AI_INPUT_MESSAGES, content=True, api="messages"))
    output_messages: str = field(default="", metadata=column(
        STRING, attribute=names.GEN_AI_OUTPUT_MESSAGES, content=True, api="response.messages"))
    template_variables: str = field(default="", metadata=column(
        STRING, attribute=names.PROMPT_TEMPLATE_VARIABLES, content=True, api="template_variables"))

    # Other spans of the same provider call (another instrumentation's, a provider SDK's own),
    # folded into this record so the call is counted once (write.duplicates); [] for most.
    merged_span_ids: list[str] = field(default_factory=list, metadata=column(
        "Array(String)", api="merged_span_ids"))
    # The thread its document is filed under (`request_docs`, migration 048) when it is not its own
    # (conversation id, else trace id): a record merged into a stored one keeps the stored one's,
    # so that it replaces the stored document even when a later span supplied its conversation id.
    thread: str = ""

    # Every other span attribute and the resource's, as text (otlp.attribute_text: the otel_traces spelling).
    attributes: dict[str, str] = field(default_factory=dict, metadata=column(STRING_MAP, api="attributes", document_only=True))
    resource_attributes: dict[str, str] = field(default_factory=dict, metadata=column(
        STRING_MAP, api="resource_attributes", document_only=True))


def declared_columns(record_type: type) -> tuple[Column, ...]:
    """The columns the fields of ``record_type`` declare, in field order."""
    columns = []
    for record_field in fields(record_type):
        declared = record_field.metadata.get(_COLUMN)
        if declared is None:
            continue
        columns.append(Column(declared["name"] or record_field.name, declared["type"], record_field.name,
                              declared["attribute"], declared["content"], declared["summary"], declared["api"],
                              document_only=declared["document_only"]))
    return tuple(columns)


# Columns computed from other fields.
DERIVED_COLUMNS = (
    Column("block_count", "UInt32", summary=True, derive=lambda record: len(record.blocks)),  # blocks stored
)
# Every value a record declares, wherever it is stored.
RECORD_COLUMNS: tuple[Column, ...] = declared_columns(RequestRecord) + DERIVED_COLUMNS
# Captured content is not a column of `requests`: each content field is
# stored content-addressed (migration 021) — its text split into items (the
# messages of a JSON array, the values of a JSON object, else the whole text),
# each item's text once per day in `contents`, and the item keys in the
# request's document, from the inputs ``content_columns`` names.
CONTENT_COLUMNS: tuple[Column, ...] = tuple(column for column in RECORD_COLUMNS if column.content)
# Every column a record fills but captured content: the inputs of its document (`request_docs`).
REQUEST_COLUMNS: tuple[Column, ...] = tuple(column for column in RECORD_COLUMNS if not column.content)
# Those `requests` stores too (since migration 051 not the ``document_only`` ones).
REQUESTS_TABLE_COLUMNS: tuple[Column, ...] = tuple(column for column in REQUEST_COLUMNS if not column.document_only)

# `contents` is keyed by the first CONTENT_KEY_BYTES bytes of the sha256 of
# the text it holds, raw (migration 040; before it, the 64-character hex
# digest). 16 bytes take a quarter of the hex digest's bytes on disk, in
# `contents` and in the documents' key lists, and keep collisions out of
# reach: two of 10 million texts of a day share a key with a chance of ~10^-25. The API shows the full hex
# digests of blocks and tools as before (`blocks.sha256`, `tools.sha256`).
CONTENT_KEY_BYTES = 16


def stored_content_key(sha256_hex: str) -> bytes:
    """The key under which `contents` holds the text whose sha256 is ``sha256_hex``."""
    return bytes.fromhex(sha256_hex[: 2 * CONTENT_KEY_BYTES])


# How a content field's text was split into items (<name>_form of its references).
CONTENT_ABSENT, CONTENT_ARRAY, CONTENT_OBJECT, CONTENT_WHOLE = 0, 1, 2, 3


def content_columns(column: Column) -> tuple[Column, ...]:
    """The content-reference columns of one content field: how its text was
    split (``_form``), the object member names (``_names``), the key of each
    item's stored text in `contents` (``_keys``: ``stored_content_key``, 16
    raw bytes in a String) and whether an
    item is a JSON string stored as its plain text (``_raw``, so a template
    variable equal to a block's text is the block's `contents` row), and the
    ``finish_reason`` taken out of a message object (``_finish_reasons``, ''
    when none: an answer is then the same item as in the next request's
    history, which repeats it without one)."""
    return (Column(f"{column.name}_form", "UInt8"), Column(f"{column.name}_names", "Array(String)"),
            Column(f"{column.name}_keys", "Array(String)"), Column(f"{column.name}_raw", "Array(UInt8)"),
            Column(f"{column.name}_finish_reasons", "Array(LowCardinality(String))"))


# The content-reference columns of every content field (``content_columns``):
# inputs of a request's document (migration 048; before it, columns of
# `request_content`, migration 021), EPHEMERAL: the store packs them into the
# document's ``content_refs`` object and keeps nothing else of them.
REQUEST_CONTENT_COLUMNS: tuple[Column, ...] = tuple(part for column in CONTENT_COLUMNS for part in content_columns(column))
# Columns the store fills itself (their DEFAULT): in the table, never laid out from a record.
REQUEST_STORE_FILLED_COLUMNS = (
    Column("received_at", "DateTime64(3, 'UTC')"),  # when the collector wrote the row (ingest lag, replays)
    Column("lineage_key", "UInt64"),  # read.lineage.LINEAGE_KEY_SQL, MATERIALIZED (migration 024)
)
# A request's tool definitions, in its document (on its `requests` row from
# migration 046 to 051), one array element per ``ToolDefinition`` in index
# order: the read side finds them with the request instead of in a table of
# their own. ``write.rows`` lays
# them out (``tool_content_sha256`` is ``content_sha256_column``: the text's
# key when it is not ``tool_sha256``). Empty on rows written before 046, and
# on a request whose tools came in log records after its row was written:
# those are rows of ``tools``, where the read side then looks.
REQUEST_TOOL_COLUMNS = (
    Column("tool_names", "Array(String)"),
    Column("tool_sizes", "Array(UInt64)"),
    Column("tool_sha256", "Array(String)"),
    Column("tool_content_sha256", "Array(String)"),
    Column("tool_redacted", "Array(Bool)"),
)


# A request's blocks in its document (migration 048), one array element per
# ``Block`` in index order: each array and the Block field it holds.
REQUEST_BLOCK_ARRAYS = {
    "block_index": ("index", "Array(UInt32)"), "block_names": ("name", "Array(LowCardinality(String))"),
    "block_layers": ("layer", "Array(LowCardinality(String))"),
    "block_stabilities": ("stability", "Array(LowCardinality(String))"),
    "block_sources": ("source", "Array(LowCardinality(String))"), "block_starts": ("start", "Array(UInt64)"),
    "block_ends": ("end", "Array(UInt64)"), "block_sizes": ("size", "Array(UInt64)"),
    "block_sha256": ("sha256", "Array(String)"), "block_content_sha256": ("content_sha256", "Array(String)"),
    "block_redacted": ("redacted", "Array(Bool)"),
}
REQUEST_BLOCK_COLUMNS = tuple(Column(name, kind) for name, (_, kind) in REQUEST_BLOCK_ARRAYS.items())
# `request_docs` (migration 048): a request as its keys and one JSON document. An
# INSERT names the `requests` columns, the tool and block arrays and the content
# references, all EPHEMERAL but the keys (started_at, request_id, trace_id); the
# store fills the rest: the thread (conversation id, else trace id: the sorting
# key), the content references as one object, the merged-span count (which copy
# of a request wins) and the document.
REQUEST_DOCUMENT_INPUT_COLUMNS = REQUEST_COLUMNS + REQUEST_TOOL_COLUMNS + REQUEST_BLOCK_COLUMNS + REQUEST_CONTENT_COLUMNS
REQUEST_DOCUMENT_STORE_FILLED_COLUMNS = (
    Column("thread", "String"), Column("content_refs", "String"), Column("merged_spans", "UInt32"),
    Column("doc", "String"),
)


@dataclass(slots=True)
class GenAIEvent:
    """A GenAI content event (``gen_ai.*.message``, ``gen_ai.choice``,
    ``gen_ai.client.inference.operation.details``): a ``genai_events`` row,
    joined to its request by (trace_id, span_id). Body and attributes are
    kept as JSON text, typed; what the event contributes to its request is
    computed once, when it is received (``conventions.events``), and stored
    beside them, so the read side and the SQL views only join."""

    time_ns: int = field(metadata=column("DateTime64(9, 'UTC')", name="timestamp"))
    trace_id: str = field(metadata=column(STRING))
    span_id: str = field(metadata=column(STRING))
    sequence: int = field(metadata=column("UInt32"))  # position in its export: orders equal timestamps
    event_name: str = field(metadata=column(NAME))
    service: str = field(metadata=column(NAME))
    scope_name: str = field(metadata=column(NAME))
    body_json: str = field(metadata=column(STRING, name="body"))
    attributes_json: str = field(metadata=column(STRING, name="attributes"))
    record_sha256: str = field(metadata=column(STRING))  # identity of the record: a re-sent copy collapses onto it

    # Its contribution (conventions.events): how it combines with the other events of its request, …
    contribution: str = field(default="", metadata=column(NAME))  # "details" | "input" | "output"
    # … the content attributes an operation-details event carries, as JSON text (None: not carried), …
    system_instructions: str | None = field(default=None, metadata=column("Nullable(String)"))
    input_messages: str | None = field(default=None, metadata=column("Nullable(String)"))
    output_messages: str | None = field(default=None, metadata=column("Nullable(String)"))
    # … the one message of an input or output event, as JSON text, its place and whether it has content, …
    message: str | None = field(default=None, metadata=column("Nullable(String)"))
    message_index: int = field(default=0, metadata=column("Int64"))
    message_has_parts: bool = field(default=False, metadata=column("Bool"))
    # … and the system-prompt text it carries: of its system instructions, of its system messages.
    instructions_text: str | None = field(default=None, metadata=column("Nullable(String)"))
    system_text: str | None = field(default=None, metadata=column("Nullable(String)"))
    # The rule that computed the above (conventions.events.CONTRIBUTION_VERSION); 0: not computed yet.
    contribution_version: int = field(default=0, metadata=column("UInt8"))


# Every column of `genai_events` that an event fills, and those the store fills itself.
GENAI_EVENT_COLUMNS: tuple[Column, ...] = declared_columns(GenAIEvent)
GENAI_EVENT_STORE_FILLED_COLUMNS = (
    Column("received_at", "DateTime64(3, 'UTC')"),  # when the collector wrote the row
)
