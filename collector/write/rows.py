"""Records → columns: one pyarrow table per store table. Pure, no I/O.

``reassemble`` hands over ``RequestRecord``s and ``DecodedSpan``s; this
module lays them out as the columns of ``requests``, ``request_docs`` (a
request with its blocks and content references, packed by the store into one
document: migration 048), ``tools``, ``contents`` and ``otel_traces``
(store/schema), and a logs export's ``GenAIEvent``s and other
``DecodedLogRecord``s as ``genai_events`` and ``otel_logs``. The sink writes
the tables.

``otel_traces`` follows the OpenTelemetry Collector ClickHouse exporter
column for column, and stringifies attribute values the way it does
(pdata ``Value.AsString``), so tools that read that exporter's tables read
ours unchanged. One difference: block and tool text that ``contents``
already holds (``promptprism.block.content`` / ``promptprism.tool.content``)
is left out of ``Events.Attributes`` (and a mapped request's block events
keep only their index and name of what its document holds: ``BLOCK_HELD``);
the request's document and its ``tools`` point to it. Text is stored once
per distinct hash and day, not once per request.

``contents`` is keyed by the sha256 of the text it holds
(``content_sha256``), not by the block's or tool's ``sha256``: that one
describes the original bytes, and text the sender's redaction hook changed
is not those bytes (see migration 005). On disk the key is the digest's
first 16 bytes, raw (``record.stored_content_key``, migration 040); in
Python (``ContentKey``, the sink's recent set, a spool file's header) it
stays the hex digest.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable

import pyarrow as pa

from ...wire import names
from ..otlp.attribute_text import otel_attribute_string
from ..otlp.model import DecodedLogRecord, DecodedSpan
from ..record import (
    CONTENT_ABSENT,
    CONTENT_ARRAY,
    CONTENT_COLUMNS,
    CONTENT_OBJECT,
    CONTENT_WHOLE,
    GENAI_EVENT_COLUMNS,
    REQUEST_BLOCK_ARRAYS,
    REQUEST_COLUMNS,
    REQUEST_TOOL_COLUMNS,
    REQUESTS_TABLE_COLUMNS,
    Block,
    GenAIEvent,
    RequestRecord,
    ToolDefinition,
    content_columns,
    stored_content_key,
)
from ..store.declared import DeclaredTable, integer_array
from .documents import in_stored_layout, stored_rows
from ._columns import (
    DICTIONARY_KEYED_MAP,
    OFFSET_TYPE,
    STRING_DICTIONARY,
    STRING_MAP,
    MapColumn,
    dictionary_keyed,
    dictionary_strings,
    list_array,
    pluck,
)

NANOSECONDS_PER_DAY = 86_400 * 1_000_000_000

TIMESTAMP = pa.timestamp("ns", tz="UTC")

# Tables in the order the sink inserts them: text first, so a request row
# never points at content that is not there yet; `request_docs` before
# `requests`, so a request the lists (and `request_ids`) show has its document.
TABLES = ("contents", "tools", "request_docs", "requests", "otel_traces")
# Tables of spool files written before migration 050, which no longer exist: a file written before 048
# has no `request_docs` and they are folded into it; one written since holds their rows there too
# (``in_todays_layout``).
FOLDED_TABLES = ("blocks", "request_content")
# What a logs export writes, after the above when a group holds both.
LOG_TABLES = ("genai_events", "otel_logs")
# What a metrics export writes (metric_rows): one table per OTLP metric type.
METRIC_TABLES = ("otel_metrics_sum", "otel_metrics_gauge", "otel_metrics_histogram",
                 "otel_metrics_exponential_histogram", "otel_metrics_summary")
ALL_TABLES = TABLES + LOG_TABLES + METRIC_TABLES


def _unsigned(value: Any) -> int:
    # Unsigned columns: a negative duration or size from a broken client is
    # stored as 0 rather than failing the whole batch (runtime is lenient).
    return max(0, int(value or 0))


# ClickHouse's Date counts days since 1970 in a UInt16 (to 2149-06-06), and
# its toDate(started_at), which the read side looks text up by, wraps a later
# time around that range rather than failing. A broken client's span dated
# past it files its text under the day ClickHouse gives it, so it is found;
# the ArrowStream input would refuse the out-of-range day (error 321) and
# Python() would store it saturated, where no read looks.
_DATE_DAYS = 1 << 16


def _day(started_at_ns: int) -> int:
    return int(started_at_ns) // NANOSECONDS_PER_DAY % _DATE_DAYS


# --- requests ---------------------------------------------------------------

# Every column of a request but its captured content, laid out as the record declares it (record.py):
# the inputs of its document; `requests` stores REQUESTS_TABLE_COLUMNS of them.
_REQUESTS = DeclaredTable(REQUEST_COLUMNS)
_REQUESTS_TABLE = [column.name for column in REQUESTS_TABLE_COLUMNS]


_TOOL_ARROW_TYPES = {"tool_names": pa.string(), "tool_sizes": pa.uint64(), "tool_sha256": pa.string(),
                     "tool_content_sha256": pa.string(), "tool_redacted": pa.bool_()}
assert set(_TOOL_ARROW_TYPES) == {column.name for column in REQUEST_TOOL_COLUMNS}
_UINT64_MAX = 2**64 - 1


def requests_table(records: Iterable[RequestRecord]) -> pa.Table:
    """Every declared column, then each request's tool definitions as arrays (record.REQUEST_TOOL_COLUMNS):
    the request's document inputs (``request_docs_table``; ``requests`` takes ``stored_requests`` of them)."""
    records = list(records)
    table = _REQUESTS.table(records)
    for name, (offsets, values) in _tool_arrays(records).items():
        table = table.append_column(name, list_array(offsets, pa.array(values, _TOOL_ARROW_TYPES[name])))
    return table


def stored_requests(table: pa.Table) -> pa.Table:
    """The columns of a ``requests_table`` that `requests` stores (migration 051)."""
    return table.select([name for name in _REQUESTS_TABLE if name in table.column_names])


def _tool_arrays(records: list[RequestRecord]) -> dict[str, tuple[list[int], list]]:
    """Offsets and flat values of each tool column: the definitions of each record in index order."""
    offsets, names, sizes, sha256, content_keys, redacted = [0], [], [], [], [], []
    for record in records:
        for tool in record.tools:
            names.append(tool.name)
            sizes.append(min(_UINT64_MAX, _unsigned(tool.size)))
            sha256.append(tool.sha256)
            content_keys.append(content_sha256_column(tool))
            redacted.append(bool(tool.redacted))
        offsets.append(len(names))
    return {"tool_names": (offsets, names), "tool_sizes": (offsets, sizes), "tool_sha256": (offsets, sha256),
            "tool_content_sha256": (offsets, content_keys), "tool_redacted": (offsets, redacted)}


# --- blocks, tools, contents ----------------------------------------------

def content_sha256(item: Block | ToolDefinition) -> str:
    """The key of ``item``'s text in ``contents``: the sha256 of the text
    stored, '' when none is stored.

    A block's text that was not redacted is the very bytes its ``sha256``
    describes (reassemble checked them), so no block is hashed twice. Redacted
    text is not; nor is a tool's text checked against its digest (another
    instrumentation may hash another serialization), so those are hashed.
    """
    content = item.content
    if content is None or not item.sha256:
        return ""
    if type(item) is Block and not item.redacted:
        return item.sha256
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def content_sha256_column(item: Block | ToolDefinition) -> str:
    """``content_sha256`` as a document's block arrays and the tools store it: ''
    when the text is stored under the item's own ``sha256`` (the text as sent,
    the usual case) or not at all, so the column holds only what ``sha256``
    does not say (migration 040); readers then look under ``sha256``."""
    key = content_sha256(item)
    return "" if key == item.sha256 else key


def block_columns(blocks: list[Block]) -> dict[str, pa.Array]:
    """The columns of each block itself (the block arrays of ``request_docs``). In one C pass when built
    (~20k blocks per 512 × 40 export: ~14 → ~4 ms); it hands anything unusual back to
    ``block_columns_python``, the definition."""
    if _compiled_block_columns is not None:
        columns = _compiled_block_columns(blocks, Block, content_sha256_column)
        if columns is not None:
            return columns
    return block_columns_python(blocks)


def block_columns_python(blocks: list[Block]) -> dict[str, pa.Array]:
    """``block_columns``, the pure-Python definition."""
    return {
        "index": integer_array(pluck(blocks, "index"), pa.uint32()),
        **{name: pa.array(pluck(blocks, name), pa.string()) for name in ("name", "layer", "stability", "source")},
        **{name: integer_array(pluck(blocks, name), pa.uint64()) for name in ("start", "end", "size")},
        "sha256": pa.array(pluck(blocks, "sha256"), pa.string()),
        # '' for a block stored under its own sha256, i.e. every one not redacted (content_sha256):
        # the function only for the others.
        "content_sha256": pa.array([content_sha256_column(block) if block.redacted or type(block) is not Block
                                    else "" for block in blocks], pa.string()),
        "redacted": pa.array(pluck(blocks, "redacted"), pa.bool_()),
    }


try:  # block_columns in one C pass (_strings.pyx; README "Ingest throughput")
    from ._strings import block_columns as _compiled_block_columns
except ImportError:  # not built: the definition, slower
    _compiled_block_columns = None


def tools_table(records: Iterable[RequestRecord]) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in (
        "started_at", "trace_id", "request_id", "service", "index", "name", "size", "sha256",
        "content_sha256", "redacted")}
    for record in records:
        for tool in record.tools:
            for name, value in (
                ("started_at", int(record.started_at_ns)), ("trace_id", record.trace_id),
                ("request_id", record.request_id), ("service", record.service),
                ("index", _unsigned(tool.index)), ("name", tool.name), ("size", _unsigned(tool.size)),
                ("sha256", tool.sha256), ("content_sha256", content_sha256_column(tool)), ("redacted", tool.redacted),
            ):
                columns[name].append(value)
    types = {"started_at": TIMESTAMP, "index": pa.uint32(), "size": pa.uint64(), "redacted": pa.bool_()}
    return pa.table({name: pa.array(values, types.get(name, pa.string())) for name, values in columns.items()})


ContentKey = tuple[int, str]  # (day number since 1970-01-01, sha256 of the stored text)


# --- captured content fields: items in `contents`, keys in the document ----------

@dataclass(slots=True)
class ContentItems:
    """A content field's text as stored: how it was split, and each item's text."""

    form: int
    names: list[str]  # object member names (CONTENT_OBJECT), else empty
    texts: list[str]  # each item's stored text
    raw: list[int]  # 1: the item is a JSON string stored as its plain text
    finish_reasons: list[str] = field(default_factory=list)  # taken out of each message ('' none)

    @property
    def keys(self) -> list[str]:
        return [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in self.texts]


def _item_text(value: Any) -> tuple[str, int]:
    # A string is stored as itself (a template variable then shares the
    # `contents` row of the block it fills); anything else as compact JSON.
    # Text with a lone surrogate (a JSON escape of half a character) is no
    # UTF-8: it stays JSON-escaped, as the sender spelled it.
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value, 1
        except UnicodeEncodeError:
            return json.dumps(value, separators=(",", ":")), 0
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, separators=(",", ":"))
    return text, 0


_FINISH_REASON = "finish_reason"  # GenAI semconv: on an output message, absent from the same message in a history


def _take_finish_reason(item: Any) -> str:
    if isinstance(item, dict) and isinstance(item.get(_FINISH_REASON), str) and item[_FINISH_REASON]:
        return item.pop(_FINISH_REASON)
    return ""


def split_content(text: str) -> ContentItems:
    """A content field's JSON text → its items: each message of a history is
    stored once however many later requests repeat it (read.content joins
    them back into the same JSON value)."""
    if not text:
        return ContentItems(CONTENT_ABSENT, [], [], [])
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, list):
        finish_reasons = [_take_finish_reason(item) for item in value]
        items = [_item_text(item) for item in value]
        return ContentItems(CONTENT_ARRAY, [], [text for text, _ in items], [raw for _, raw in items],
                            finish_reasons if any(finish_reasons) else [])
    if isinstance(value, dict):
        items = [_item_text(item) for item in value.values()]
        return ContentItems(CONTENT_OBJECT, [str(name) for name in value],
                            [text for text, _ in items], [raw for _, raw in items])
    return ContentItems(CONTENT_WHOLE, [], [text], [0])


def content_items(record: RequestRecord) -> dict[str, ContentItems]:
    """Each captured content field of ``record`` (by column name), split into items; absent ones left out."""
    found = {}
    for column in CONTENT_COLUMNS:
        text = getattr(record, column.field)
        if text:
            found[column.name] = split_content(text)
    return found


def content_reference_columns(records: list[RequestRecord],
                              items: dict[str, dict[str, ContentItems]]) -> dict[str, pa.Array]:
    """The content-reference columns (record.content_columns) of each of ``records``; a field
    not captured is CONTENT_ABSENT with empty lists."""
    columns: dict[str, pa.Array] = {}
    empty = ContentItems(CONTENT_ABSENT, [], [], [])
    for column in CONTENT_COLUMNS:
        fields = [items.get(r.request_id, {}).get(column.name, empty) for r in records]
        columns[f"{column.name}_form"] = pa.array([f.form for f in fields], pa.uint8())
        columns[f"{column.name}_names"] = pa.array([f.names for f in fields], pa.list_(pa.string()))
        columns[f"{column.name}_keys"] = pa.array([[stored_content_key(key) for key in f.keys] for f in fields],
                                                  pa.list_(pa.binary()))
        columns[f"{column.name}_raw"] = pa.array([f.raw for f in fields], pa.list_(pa.uint8()))
        columns[f"{column.name}_finish_reasons"] = pa.array([f.finish_reasons for f in fields],
                                                            pa.list_(pa.string()))
    return columns


# --- request_docs: a request as one document (migration 048) --------------------

# The block arrays of a `request_docs` row ← the Block field each holds, in index order.
BLOCK_ARRAYS = {name: field for name, (field, _) in REQUEST_BLOCK_ARRAYS.items()}


def request_docs_table(records: list[RequestRecord], requests: pa.Table,
                       items: dict[str, dict[str, ContentItems]]) -> pa.Table:
    """One row per request: its thread (``RequestRecord.thread``, else its conversation or trace), the
    columns of its ``requests`` row (``requests``, laid out from ``records``), its blocks as arrays
    in index order and its content references: every one but the keys an input the store packs into
    the row's document (migration 048)."""
    offsets = [0]
    for record in records:
        offsets.append(offsets[-1] + len(record.blocks))
    blocks = block_columns([block for record in records for block in record.blocks])
    columns = {"thread": pa.array([r.thread or r.conversation_id or r.trace_id for r in records], pa.string()),
               **{name: requests.column(name) for name in requests.column_names}}
    columns.update({array: list_array(offsets, blocks[column]) for array, column in BLOCK_ARRAYS.items()})
    columns.update(content_reference_columns(records, items))
    return pa.table(columns)


def request_docs_from_tables(tables: dict[str, pa.Table]) -> pa.Table:
    """``request_docs`` of a spool file written before migration 048 (which has none): its
    ``requests`` rows with their rows of ``blocks`` (one copy per index, the last) and of
    ``request_content``."""
    requests = tables["requests"]
    ids = requests.column("request_id").to_pylist()
    blocks = tables.get("blocks")
    if blocks is None:
        blocks = pa.table({"request_id": pa.array([], pa.string()), **block_columns([])})
    positions: dict[str, dict[int, int]] = {}
    for position, (request_id, index) in enumerate(zip(blocks.column("request_id").to_pylist(),
                                                       blocks.column("index").to_pylist())):
        positions.setdefault(request_id, {})[int(index)] = position
    offsets, take = [0], []
    for request_id in ids:
        found = positions.get(request_id, {})
        take.extend(found[index] for index in sorted(found))
        offsets.append(len(take))
    chosen = blocks.take(pa.array(take, pa.int64()))
    conversations = requests.column("conversation_id").to_pylist()
    columns = {"thread": pa.array([conversation or trace for conversation, trace in
                                   zip(conversations, requests.column("trace_id").to_pylist())], pa.string()),
               **{name: requests.column(name) for name in requests.column_names}}
    for array, column in BLOCK_ARRAYS.items():
        columns[array] = list_array(offsets, chosen.column(column).combine_chunks())
    references = tables.get("request_content")
    row_of = ({request_id: row for row, request_id in enumerate(references.column("request_id").to_pylist())}
              if references is not None else {})
    for column in CONTENT_COLUMNS:
        for part in content_columns(column):
            if references is not None and part.name in references.column_names:
                source = references.column(part.name)
                values = [source[row_of[request_id]].as_py() if request_id in row_of else None for request_id in ids]
                kind = source.type
            else:
                values, kind = [None] * len(ids), None
            if part.name.endswith("_form"):
                columns[part.name] = pa.array([value or 0 for value in values], pa.uint8())
            else:
                columns[part.name] = pa.array([value or [] for value in values], kind or _EMPTY_LIST_TYPES[part.type])
    return pa.table(columns)


_EMPTY_LIST_TYPES = {"Array(String)": pa.list_(pa.string()), "Array(UInt8)": pa.list_(pa.uint8()),
                     "Array(LowCardinality(String))": pa.list_(pa.string())}


def _utf8_size(item: Block | ToolDefinition) -> int:
    """The UTF-8 size of ``item``'s text. A block's text stored under its own sha256
    was checked to be ``size`` bytes long (reassemble), so it is not encoded again."""
    if type(item) is Block and not item.redacted:
        return item.size
    return len(item.content.encode("utf-8"))


def contents_table(
    records: Iterable[RequestRecord], already_stored: Collection[ContentKey] = (),
    items: dict[str, dict[str, ContentItems]] | None = None,
) -> tuple[pa.Table, list[ContentKey]]:
    """Captured text, once per distinct (day, sha256 of the text): block and
    tool text, and each item of the content fields (``items``, by request id).

    ``already_stored`` holds keys known to be durable already (the sink's
    recent set); they are skipped. Returns the table and the keys it holds.
    """
    seen: dict[ContentKey, tuple[int, str]] = {}
    for record in records:
        day = _day(record.started_at_ns)
        for block in record.blocks:  # ~20k per 512 × 40 export, half of them without text
            if block.content is None or not block.sha256:
                continue
            # content_sha256 inlined: a block's text not redacted is stored under its own sha256
            key = (day, content_sha256(block) if block.redacted else block.sha256)
            if key in seen or key in already_stored:
                continue
            seen[key] = (_utf8_size(block), block.content)
        for tool in record.tools:
            key_hash = content_sha256(tool)
            if not key_hash:
                continue
            key = (day, key_hash)
            if key in seen or key in already_stored:
                continue
            seen[key] = (_utf8_size(tool), tool.content)
        for field_items in (items or {}).get(record.request_id, {}).values():
            for text, key_hash in zip(field_items.texts, field_items.keys):
                key = (day, key_hash)
                if key in seen or key in already_stored:
                    continue
                seen[key] = (len(text.encode("utf-8")), text)
    keys = list(seen)
    table = pa.table({
        "day": pa.array([day for day, _ in keys], pa.date32()),
        "sha256": pa.array([stored_content_key(sha) for _, sha in keys], pa.binary()),
        "size": pa.array([seen[key][0] for key in keys], pa.uint64()),
        "content": pa.array([seen[key][1] for key in keys], pa.string()),
    })
    return table, keys


def in_todays_layout(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """A spool file's tables as this version lays them out (``with_stored_content_keys``,
    ``with_tool_columns``; ``blocks`` and ``request_content`` folded into ``request_docs``), so that
    they group with batches written now (``merge_tables``)."""
    tables = with_dictionary_keys(with_tool_columns(with_stored_content_keys(tables)))
    if "requests" in tables and "request_docs" not in tables:
        tables = {**tables, "request_docs": request_docs_from_tables(tables)}
    if "request_docs" in tables:  # documents or their inputs, as this collector inserts them (documents.py)
        tables = {**tables, "request_docs": in_stored_layout(tables["request_docs"])}
    if "requests" in tables:  # a file written before migration 051: the columns only documents keep now
        tables = {**tables, "requests": stored_requests(tables["requests"])}
    return {name: table for name, table in tables.items() if name not in FOLDED_TABLES}


# otel_traces columns that otel_traces_table dictionary-encodes: their types, and how to encode a column written plain.
_TRACES_TYPES = {"SpanAttributes": DICTIONARY_KEYED_MAP, "Events.Name": pa.list_(STRING_DICTIONARY),
                 "Events.Attributes": pa.list_(DICTIONARY_KEYED_MAP)}
_DICTIONARY_COLUMNS = {
    "SpanAttributes": dictionary_keyed,
    "Events.Name": lambda lists: pa.ListArray.from_arrays(lists.offsets, dictionary_strings(lists.values)),
    "Events.Attributes": lambda lists: pa.ListArray.from_arrays(lists.offsets, dictionary_keyed(lists.values)),
}


def with_dictionary_keys(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """An ``otel_traces`` table written before its keys and event names were dictionary-encoded
    (a spool file of an earlier version), encoded as ``otel_traces_table`` encodes them now, so that
    it groups with today's (``merge_tables`` needs one layout)."""
    traces = tables.get("otel_traces")
    if traces is None:
        return tables
    for name, encode in _DICTIONARY_COLUMNS.items():
        if name not in traces.column_names or traces.schema.field(name).type == _TRACES_TYPES[name]:
            continue
        chunks = [encode(pa.concat_arrays([chunk])) for chunk in traces.column(name).chunks]
        column = pa.chunked_array(chunks, _TRACES_TYPES[name])
        traces = traces.set_column(traces.column_names.index(name), name, column)
    return {**tables, "otel_traces": traces}


def with_tool_columns(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """A `requests` table written before migration 046 gets the tool arrays, empty (its tools are
    rows of `tools` in the same file, which the read side finds for a row without any)."""
    requests = tables.get("requests")
    if requests is None or "tool_names" in requests.column_names:
        return tables
    offsets = [0] * (requests.num_rows + 1)
    for column in REQUEST_TOOL_COLUMNS:
        requests = requests.append_column(column.name, list_array(offsets, pa.array([], _TOOL_ARROW_TYPES[column.name])))
    return {**tables, "requests": requests}


def with_stored_content_keys(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """``tables`` as this version lays them out: a spool file written before
    migration 040 holds content keys as hex digests (``contents.sha256``, the
    ``request_content`` key lists), which are converted to the stored keys;
    tables in today's layout come back as they are."""
    converted = dict(tables)
    contents = tables.get("contents")
    if contents is not None and "sha256" in contents.column_names and _is_text(contents.schema.field("sha256").type):
        keys = pa.array([stored_content_key(sha) for sha in contents.column("sha256").to_pylist()], pa.binary())
        converted["contents"] = contents.set_column(contents.column_names.index("sha256"), "sha256", keys)
    references = tables.get("request_content")
    if references is not None:
        for index, name in enumerate(references.column_names):
            field_type = references.schema.field(name).type
            if name.endswith("_keys") and pa.types.is_list(field_type) and _is_text(field_type.value_type):
                keys = pa.array([[stored_content_key(sha) for sha in row] for row in
                                 references.column(name).to_pylist()], pa.list_(pa.binary()))
                references = references.set_column(index, name, keys)
        converted["request_content"] = references
    return converted


def _is_text(data_type: pa.DataType) -> bool:
    return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


# --- otel_traces: the OpenTelemetry Collector ClickHouse exporter's layout ---

def _attribute_map(attributes: dict[str, Any]) -> list[tuple[str, str]]:
    return [(str(key), otel_attribute_string(value)) for key, value in attributes.items()]


SpanKey = tuple[str, str]  # (trace_id, span_id)


def stored_content_spans(records: Iterable[RequestRecord]) -> tuple[set[SpanKey], set[SpanKey]]:
    """Spans whose block text, and spans whose tool text, ``contents`` holds.

    A mapped record keeps every block event's content (all were validated
    into its blocks); any request record keeps its tools' content. An
    unmapped map's block text is nowhere else, so its events keep it.
    """
    records = list(records)
    return ({(r.trace_id, r.request_id) for r in records if r.mapped},
            {(r.trace_id, r.request_id) for r in records if r.tools})


def _tool_content_stored(attributes: dict) -> bool:
    # The condition under which reassemble's ToolDefinition keeps the text and
    # content_sha256 gives it a key in contents_table.
    sha256 = attributes.get(names.TOOL_SHA256)
    return isinstance(attributes[names.TOOL_CONTENT], str) and isinstance(sha256, str) and sha256 != ""


# Replaces, on a request span in otel_traces, the content attributes the
# request record stores content-addressed (gen_ai.input.messages, …): its
# value names them, space-separated, so the trace view still says they were
# sent and where to read them (the request, GET /api/requests/{span id}).
CONTENT_MOVED = "promptprism.content.moved"


def moved_content_attributes(records: Iterable[RequestRecord]) -> dict[SpanKey, frozenset[str]]:
    """Per request span, the content attributes its record stores (captured, non-empty)."""
    moved = {}
    for record in records:
        found = frozenset(column.attribute for column in CONTENT_COLUMNS
                          if column.attribute and getattr(record, column.field))
        if found:
            moved[(record.trace_id, record.request_id)] = found
    return moved


# Digests a request's document holds (migration 048): random hex that no codec shrinks, ~150 B
# per request in otel_traces on benchmarks/storage.py's traffic with the block events' digests.
# A request span's row leaves them out where its value is the document's, as a mapped request
# span's block events leave out their digest (``event_columns``): the request
# (GET /api/requests/{span id}, the inspector by trace id) shows them.
DOCUMENT_DIGESTS = {names.PROMPT_SHA256: "prompt_sha256", names.REQUEST_BODY_SHA256: "body_sha256",
                    names.REQUEST_TOOLS_CATALOG_SHA256: "tools_catalog_sha256"}


def document_digests(records: Iterable[RequestRecord]) -> dict[SpanKey, dict[str, str]]:
    """Per request span, the digest attributes its record holds (non-empty), with their values."""
    held = {}
    for record in records:
        found = {attribute: value.lower() for attribute, field_name in DOCUMENT_DIGESTS.items()
                 if (value := getattr(record, field_name))}
        if found:
            held[(record.trace_id, record.request_id)] = found
    return held


def _without_held(attributes: dict[str, Any], held: dict[str, str]) -> dict[str, Any]:
    """``attributes`` without the digests whose value (in any case) is the one the record holds."""
    if not any(type(attributes.get(key)) is str and attributes[key].lower() == value for key, value in held.items()):
        return attributes
    return {key: value for key, value in attributes.items()
            if not (key in held and type(value) is str and value.lower() == held[key])}


def _without_moved(attributes: dict[str, Any], moved: frozenset[str]) -> dict[str, Any]:
    kept = {key: value for key, value in attributes.items() if key not in moved}
    present = sorted(key for key in moved if key in attributes)
    if present:
        kept[CONTENT_MOVED] = " ".join(present)
    return kept


def otel_traces_table(spans: Iterable[DecodedSpan], records: Iterable[RequestRecord] = ()) -> pa.Table:
    """One row per span. Text that ``records`` store in ``contents`` is not
    stored again here: block and tool text is left out of
    ``Events.Attributes`` (the request's document and tools point there), and
    a request's captured content attributes (messages, template variables,
    system instructions) are replaced by ``CONTENT_MOVED`` naming them — the
    exporter itself would copy every attribute. Nor are the digests the
    request's document holds: a mapped request span's block events leave out
    their ``sha256`` and all else the document holds of them (``BLOCK_HELD``:
    each keeps its index and name), its attributes the prompt's, the body's
    and the tool catalog's digests (``DOCUMENT_DIGESTS``). Attribute keys and
    event names are dictionary-encoded (``_columns.dictionary_keyed``)."""
    spans, records = list(spans), list(records)
    block_text_stored, tool_text_stored = stored_content_spans(records)
    moved_content = moved_content_attributes(records)
    digests = document_digests(records)
    resource, span_attributes = MapColumn(otel_attribute_string), MapColumn(otel_attribute_string)
    link_attributes = MapColumn(otel_attribute_string)
    link_offsets = [0]
    links = []
    drops = []
    for span in spans:
        resource.add_shared(span.resource_attributes)  # one dict per resource, shared by its spans
        key = (span.trace_id, span.span_id)
        moved, held = moved_content.get(key), digests.get(key)
        attributes = _without_moved(span.attributes, moved) if moved else span.attributes
        span_attributes.add(_without_held(attributes, held) if held else attributes)
        drops.append((DROP_BLOCK_MAP if key in block_text_stored else 0)
                     | (DROP_TOOL_TEXT if key in tool_text_stored else 0))
        for link in span.links:
            links.append(link)
            link_attributes.add(link.attributes)
        link_offsets.append(len(links))
    event_offsets, event_times, event_names, event_attributes = event_columns(spans, drops)
    return pa.table({
        "Timestamp": pa.array([int(span.start_time_ns) for span in spans], TIMESTAMP),
        **{column: pa.array(pluck(spans, field), pa.string()) for column, field in (
            ("TraceId", "trace_id"), ("SpanId", "span_id"), ("ParentSpanId", "parent_span_id"),
            ("TraceState", "trace_state"), ("SpanName", "name"), ("SpanKind", "kind"), ("ServiceName", "service"))},
        "ResourceAttributes": resource.array(),
        "ScopeName": pa.array(pluck(spans, "scope_name"), pa.string()),
        "ScopeVersion": pa.array(pluck(spans, "scope_version"), pa.string()),
        "SpanAttributes": dictionary_keyed(span_attributes.array()),
        # The exporter subtracts unsigned nanoseconds; a span ending before
        # it starts is stored as 0 instead of wrapping around.
        "Duration": pa.array([_unsigned(span.end_time_ns - span.start_time_ns) for span in spans], pa.uint64()),
        "StatusCode": pa.array(pluck(spans, "status_code"), pa.string()),
        "StatusMessage": pa.array(pluck(spans, "status_message"), pa.string()),
        "Events.Timestamp": pa.ListArray.from_arrays(event_offsets, event_times),
        "Events.Name": pa.ListArray.from_arrays(event_offsets, dictionary_strings(event_names)),
        "Events.Attributes": pa.ListArray.from_arrays(event_offsets, dictionary_keyed(event_attributes)),
        "Links.TraceId": list_array(link_offsets, pa.array(pluck(links, "trace_id"), pa.string())),
        "Links.SpanId": list_array(link_offsets, pa.array(pluck(links, "span_id"), pa.string())),
        "Links.TraceState": list_array(link_offsets, pa.array(pluck(links, "trace_state"), pa.string())),
        "Links.Attributes": list_array(link_offsets, link_attributes.array()),
    })


_EVENT_PROMPT_BLOCK = names.EVENT_PROMPT_BLOCK
# What a mapped request span's block events leave out: what its request's document holds as sent —
# the text (in ``contents``), the digest, the layer, the source and the byte range (the blocks'
# arrays), and the stability when it is one of ``names.STABILITIES`` (reassembly files any other as
# ``unknown``, so that one stays). Each event keeps its index, which is where the document lists
# the block, its name, which the trace view shows, and any attribute of its own (``redacted`` too).
# Every block event of a mapped span was validated into its record (``reassemble.validate_blocks``:
# these keys present, integers and strings as the document stores them). Session 26: the
# benchmark's 2-export group's event maps 4.9 → 1.2 MB of Arrow, its INSERT 44.5 → 29.2 ms;
# storage.py's traffic 194 → 168 B per request on disk.
BLOCK_HELD = frozenset({names.BLOCK_CONTENT, names.BLOCK_SHA256, names.BLOCK_LAYER, names.BLOCK_SOURCE,
                        names.BLOCK_START, names.BLOCK_END, names.BLOCK_SIZE})
_BLOCK_STABILITY, _STABILITIES = names.BLOCK_STABILITY, frozenset(names.STABILITIES)
_EVENT_TOOL_DEFINITION, _TOOL_CONTENT = names.EVENT_TOOL_DEFINITION, names.TOOL_CONTENT

# Which captured text a span's events leave out (``event_columns``' ``drops``, bits).
DROP_BLOCK_MAP = 1  # its block events' BLOCK_HELD: the span's record is mapped (stored_content_spans)
DROP_TOOL_TEXT = 2  # its tool events' content, where contents holds it (_tool_content_stored)

try:  # the same columns in one C pass (_strings.pyx; README "Ingest throughput")
    from ._strings import DROP_BLOCK_MAP as _COMPILED_DROP_BLOCK_MAP
    from ._strings import DROP_TOOL_TEXT as _COMPILED_DROP_TOOL_TEXT
    from ._strings import event_columns as _compiled_event_columns
    if (_COMPILED_DROP_BLOCK_MAP, _COMPILED_DROP_TOOL_TEXT) != (DROP_BLOCK_MAP, DROP_TOOL_TEXT):
        _compiled_event_columns = None  # an extension built from other sources: not ours to trust
except ImportError:  # not built: the definition below, slower
    _compiled_event_columns = None


def event_columns(spans: list[DecodedSpan], drops: list[int]) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """The events of ``spans`` as ``otel_traces`` columns: each span's offsets into the events, and
    the events' times, names and attribute maps; span n's events leave out the text ``drops[n]``
    says. Compiled when built (~20k block events per 512-span export, each a map of ~10); it hands
    anything unusual back to ``event_columns_python``, the definition."""
    if _compiled_event_columns is not None:
        columns = _compiled_event_columns(spans, drops, _EVENT_PROMPT_BLOCK, BLOCK_HELD, _BLOCK_STABILITY,
                                          _STABILITIES, _EVENT_TOOL_DEFINITION, _TOOL_CONTENT, names.TOOL_SHA256,
                                          otel_attribute_string)
        if columns is not None:
            return columns
    return event_columns_python(spans, drops)


def _held_by_document(attributes: dict) -> list[str]:
    """The keys of a mapped request span's block event that its request's document holds."""
    held = [key for key in attributes if key in BLOCK_HELD]
    stability = attributes.get(_BLOCK_STABILITY)
    if type(stability) is str and stability in _STABILITIES:
        held.append(_BLOCK_STABILITY)
    return held


def event_columns_python(spans: list[DecodedSpan],
                         drops: list[int]) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """``event_columns``, the pure-Python definition."""
    event_attributes = MapColumn(otel_attribute_string)
    event_times: list[int] = []
    event_names: list[str] = []
    event_offsets = [0]
    for span, drop in zip(spans, drops):
        for event in span.events:
            event_times.append(event.time_ns)
            event_names.append(event.name)
            attributes = event.attributes
            if drop & DROP_BLOCK_MAP and event.name == _EVENT_PROMPT_BLOCK:
                event_attributes.add_without(attributes, *_held_by_document(attributes))
            elif (drop & DROP_TOOL_TEXT and _TOOL_CONTENT in attributes and event.name == _EVENT_TOOL_DEFINITION
                  and _tool_content_stored(attributes)):
                event_attributes.add_without(attributes, _TOOL_CONTENT)
            else:
                event_attributes.add(attributes)
        event_offsets.append(len(event_times))
    return (pa.array(event_offsets, OFFSET_TYPE), pa.array(event_times, TIMESTAMP),
            pa.array(event_names, pa.string()), event_attributes.array())


# --- logs: GenAI content events, and otel_logs for the rest -------------------

_GENAI_EVENTS = DeclaredTable(GENAI_EVENT_COLUMNS)


def genai_events_table(events: Iterable[GenAIEvent]) -> pa.Table:
    """GenAI content events with their contributions, laid out as record.py declares them."""
    return _GENAI_EVENTS.table(events)


# The exporter's TraceFlags and SeverityNumber columns are UInt8: the W3C
# trace flags are the low byte of OTLP's flags, and severities run 0–24.
_UINT8_MASK = 0xFF


def otel_logs_table(records: Iterable[DecodedLogRecord]) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in (
        "Timestamp", "TraceId", "SpanId", "TraceFlags", "SeverityText", "SeverityNumber", "ServiceName",
        "Body", "ResourceSchemaUrl", "ResourceAttributes", "ScopeSchemaUrl", "ScopeName", "ScopeVersion",
        "ScopeAttributes", "LogAttributes", "EventName")}
    for record in records:
        for name, value in (
            # The exporter, too, takes the observed time when the record's own is 0.
            ("Timestamp", int(record.time_ns)), ("TraceId", record.trace_id), ("SpanId", record.span_id),
            ("TraceFlags", int(record.flags) & _UINT8_MASK),
            ("SeverityText", record.severity_text),
            ("SeverityNumber", min(_unsigned(record.severity_number), _UINT8_MASK)),
            ("ServiceName", record.service), ("Body", otel_attribute_string(record.body)),
            ("ResourceSchemaUrl", record.resource_schema_url),
            ("ResourceAttributes", _attribute_map(record.resource_attributes)),
            ("ScopeSchemaUrl", record.scope_schema_url), ("ScopeName", record.scope_name),
            ("ScopeVersion", record.scope_version), ("ScopeAttributes", _attribute_map(record.scope_attributes)),
            ("LogAttributes", _attribute_map(record.attributes)), ("EventName", record.event_name),
        ):
            columns[name].append(value)
    types = {"Timestamp": TIMESTAMP, "TraceFlags": pa.uint8(), "SeverityNumber": pa.uint8(),
             "ResourceAttributes": STRING_MAP, "ScopeAttributes": STRING_MAP, "LogAttributes": STRING_MAP}
    return pa.table({name: pa.array(values, types.get(name, pa.string())) for name, values in columns.items()})


# --- everything one batch writes ---------------------------------------------

@dataclass
class TableSet:
    """The rows of one or more batches, per table, ready to insert."""

    tables: dict[str, pa.Table]
    content_keys: list[ContentKey] = field(default_factory=list)
    spans: int = 0
    requests: int = 0

    def without_contents(self, already_stored: Collection[ContentKey]) -> "TableSet":
        """The same rows minus ``contents`` rows whose key is durable already
        (``contents_table`` lays out row n for ``content_keys[n]``)."""
        keep = [key not in already_stored for key in self.content_keys]
        if all(keep):
            return self
        tables = dict(self.tables)
        tables["contents"] = tables["contents"].filter(pa.array(keep, pa.bool_()))
        keys = [key for key, kept in zip(self.content_keys, keep) if kept]
        return TableSet(tables, keys, self.spans, self.requests)

    def non_empty(self) -> list[tuple[str, pa.Table]]:
        return [(name, self.tables[name]) for name in ALL_TABLES if name in self.tables and self.tables[name].num_rows]

    # Log counts come from the tables themselves, so a spool file written
    # before logs existed (no such tables) reads back as zero.
    @property
    def genai_events(self) -> int:
        table = self.tables.get("genai_events")
        return table.num_rows if table is not None else 0

    @property
    def log_records(self) -> int:
        table = self.tables.get("otel_logs")
        return table.num_rows if table is not None else 0

    @property
    def metric_points(self) -> int:
        return sum(self.tables[name].num_rows for name in METRIC_TABLES if name in self.tables)


def build_tables(
    spans: Iterable[DecodedSpan], records: Iterable[RequestRecord], already_stored: Collection[ContentKey] = (),
    *, genai_events: Iterable[GenAIEvent] = (), log_records: Iterable[DecodedLogRecord] = (),
    tool_owners: Iterable[RequestRecord] = (),
) -> TableSet:
    """``tool_owners``: tool definitions that came in log events (genai_events.SplitLogs):
    rows of ``tools`` (and their text of ``contents``) only."""
    spans, records = list(spans), list(records)
    genai_events, log_records, tool_owners = list(genai_events), list(log_records), list(tool_owners)
    items = {record.request_id: found for record in records if (found := content_items(record))}
    contents, keys = contents_table(records + tool_owners, already_stored, items)
    requests = requests_table(records)
    tables = {
        "contents": contents,
        # A request's own tools are on its row (requests_table); `tools` takes those of log records.
        "tools": tools_table(tool_owners),
        # Its blocks and content references are in its document, built here (documents.py).
        "request_docs": stored_rows(request_docs_table(records, requests, items)),
        "requests": stored_requests(requests),
        "otel_traces": otel_traces_table(spans, records),
    }
    # Only a logs export has these: a traces batch (and its spool file) holds no such table.
    if genai_events:
        tables["genai_events"] = genai_events_table(genai_events)
    if log_records:
        tables["otel_logs"] = otel_logs_table(log_records)
    return TableSet(
        tables=tables,
        content_keys=keys,
        spans=len(spans),
        requests=len(records),
    )


def merge_tables(parts: Iterable[TableSet]) -> TableSet:
    """Several batches' tables as one insert per table (each INSERT costs ~7 ms)."""
    parts = list(parts)
    merged: dict[str, pa.Table] = {}
    for name in ALL_TABLES:
        pieces = [part.tables[name] for part in parts if name in part.tables]
        if pieces:
            merged[name] = pa.concat_tables(pieces)
    keys: dict[ContentKey, None] = {}
    for part in parts:
        keys.update(dict.fromkeys(part.content_keys))
    # Two batches in one group may carry the same new text: keep it once.
    if "contents" in merged and merged["contents"].num_rows > len(keys):
        contents = merged["contents"]
        first: dict[ContentKey, int] = {}
        for row, (day, sha) in enumerate(zip(contents.column("day").cast(pa.int32()).to_pylist(),
                                             contents.column("sha256").to_pylist())):
            first.setdefault((day, sha), row)
        merged["contents"] = contents.take(pa.array(sorted(first.values()), pa.int64()))
    return TableSet(merged, list(keys), sum(part.spans for part in parts), sum(part.requests for part in parts))

