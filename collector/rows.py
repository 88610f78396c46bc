"""Records → columns: one pyarrow table per store table. Pure, no I/O.

``reassemble`` hands over ``RequestRecord``s and ``DecodedSpan``s; this
module lays them out as the columns of ``requests``, ``blocks``, ``tools``,
``contents`` and ``otel_traces`` (store/schema), and a logs export's
``GenAIEvent``s and other ``DecodedLogRecord``s as ``genai_events`` and
``otel_logs``. The sink writes the tables.

``otel_traces`` follows the OpenTelemetry Collector ClickHouse exporter
column for column, and stringifies attribute values the way it does
(pdata ``Value.AsString``), so tools that read that exporter's tables read
ours unchanged.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Collection, Iterable

import pyarrow as pa

from .records import DecodedLogRecord, DecodedSpan, GenAIEvent, RequestRecord

NANOSECONDS_PER_DAY = 86_400 * 1_000_000_000

TIMESTAMP = pa.timestamp("ns", tz="UTC")
STRING_MAP = pa.map_(pa.string(), pa.string())

# Tables in the order the sink inserts them: text first, so a request row
# never points at content that is not there yet.
TABLES = ("contents", "blocks", "tools", "requests", "otel_traces")
# What a logs export writes, after the above when a group holds both.
LOG_TABLES = ("genai_events", "otel_logs")
ALL_TABLES = TABLES + LOG_TABLES


def _unsigned(value: Any) -> int:
    # Unsigned columns: a negative duration or size from a broken client is
    # stored as 0 rather than failing the whole batch (runtime is lenient).
    return max(0, int(value or 0))


def _day(started_at_ns: int) -> int:
    return int(started_at_ns) // NANOSECONDS_PER_DAY


def _map(pairs: dict[str, str]) -> list[tuple[str, str]]:
    return [(str(key), str(value)) for key, value in pairs.items()]


# --- requests ---------------------------------------------------------------

# (column, arrow type, value of one record). The column names are those of
# the `requests` table; a column missing here takes its DEFAULT.
_REQUEST_COLUMNS: tuple[tuple[str, pa.DataType, Callable[[RequestRecord], Any]], ...] = (
    ("started_at", TIMESTAMP, lambda r: int(r.started_at_ns)),
    ("trace_id", pa.string(), lambda r: r.trace_id),
    ("request_id", pa.string(), lambda r: r.request_id),
    ("parent_span_id", pa.string(), lambda r: r.parent_span_id),
    ("duration_ns", pa.uint64(), lambda r: _unsigned(r.duration_ns)),
    ("span_name", pa.string(), lambda r: r.span_name),
    ("status_code", pa.string(), lambda r: r.status_code),
    ("status_message", pa.string(), lambda r: r.status_message),
    ("service", pa.string(), lambda r: r.service),
    ("scope_name", pa.string(), lambda r: r.scope_name),
    ("operation", pa.string(), lambda r: r.operation),
    ("provider", pa.string(), lambda r: r.provider),
    ("model", pa.string(), lambda r: r.model),
    ("response_model", pa.string(), lambda r: r.response_model),
    ("response_id", pa.string(), lambda r: r.response_id),
    ("finish_reasons", pa.list_(pa.string()), lambda r: [str(reason) for reason in r.finish_reasons]),
    ("conversation_id", pa.string(), lambda r: r.conversation_id),
    ("message_id", pa.string(), lambda r: r.message_id),
    ("process_kind", pa.string(), lambda r: r.process_kind),
    ("process_id", pa.string(), lambda r: r.process_id),
    ("run_id", pa.string(), lambda r: r.run_id),
    ("run_mode", pa.string(), lambda r: r.run_mode),
    ("attempt", pa.int32(), lambda r: int(r.attempt)),
    ("record_id", pa.string(), lambda r: r.record_id),
    ("schema_version", pa.uint16(), lambda r: _unsigned(r.schema_version)),
    ("prompt_bytes", pa.uint64(), lambda r: _unsigned(r.prompt_bytes)),
    ("prompt_sha256", pa.string(), lambda r: r.prompt_sha256),
    ("mapped", pa.bool_(), lambda r: bool(r.mapped)),
    ("unmapped_reason", pa.string(), lambda r: r.unmapped_reason),
    ("template_name", pa.string(), lambda r: r.template_name),
    ("template_origin", pa.string(), lambda r: r.template_origin),
    ("declared_block_count", pa.uint32(), lambda r: _unsigned(r.declared_block_count)),
    ("block_count", pa.uint32(), lambda r: len(r.blocks)),
    ("dialect", pa.string(), lambda r: r.dialect),
    ("body_sha256", pa.string(), lambda r: r.body_sha256),
    ("bytes_system", pa.uint64(), lambda r: _unsigned(r.bytes_system)),
    ("bytes_tools", pa.uint64(), lambda r: _unsigned(r.bytes_tools)),
    ("bytes_messages", pa.uint64(), lambda r: _unsigned(r.bytes_messages)),
    ("bytes_framing", pa.uint64(), lambda r: _unsigned(r.bytes_framing)),
    ("bytes_total", pa.uint64(), lambda r: _unsigned(r.bytes_total)),
    ("tools_count", pa.uint32(), lambda r: _unsigned(r.tools_count)),
    ("tools_catalog_sha256", pa.string(), lambda r: r.tools_catalog_sha256),
    ("messages_count", pa.uint32(), lambda r: _unsigned(r.messages_count)),
    ("tokens_estimate", pa.uint64(), lambda r: _unsigned(r.tokens_estimate)),
    ("context_window", pa.uint64(), lambda r: _unsigned(r.context_window)),
    ("headroom_tokens", pa.int64(), lambda r: int(r.headroom_tokens)),
    ("reasoning_effort", pa.string(), lambda r: r.reasoning_effort),
    ("input_tokens", pa.int64(), lambda r: r.input_tokens),
    ("output_tokens", pa.int64(), lambda r: r.output_tokens),
    ("cache_read_tokens", pa.int64(), lambda r: r.cache_read_tokens),
    ("cache_creation_tokens", pa.int64(), lambda r: r.cache_creation_tokens),
    ("system_instructions", pa.string(), lambda r: r.system_instructions),
    ("input_messages", pa.string(), lambda r: r.input_messages),
    ("output_messages", pa.string(), lambda r: r.output_messages),
    ("template_variables", pa.string(), lambda r: r.template_variables),
    ("attributes", STRING_MAP, lambda r: _map(r.attributes)),
    ("resource_attributes", STRING_MAP, lambda r: _map(r.resource_attributes)),
)


def requests_table(records: Iterable[RequestRecord]) -> pa.Table:
    records = list(records)
    return pa.table(
        {name: pa.array([get(record) for record in records], kind) for name, kind, get in _REQUEST_COLUMNS}
    )


# --- blocks, tools, contents ------------------------------------------------

def blocks_table(records: Iterable[RequestRecord]) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in (
        "started_at", "trace_id", "request_id", "service", "model", "process_kind", "conversation_id",
        "index", "name", "layer", "stability", "source", "start", "end", "size", "sha256")}
    for record in records:
        for block in record.blocks:
            for name, value in (
                ("started_at", int(record.started_at_ns)), ("trace_id", record.trace_id),
                ("request_id", record.request_id), ("service", record.service), ("model", record.model),
                ("process_kind", record.process_kind), ("conversation_id", record.conversation_id),
                ("index", _unsigned(block.index)), ("name", block.name), ("layer", block.layer),
                ("stability", block.stability), ("source", block.source), ("start", _unsigned(block.start)),
                ("end", _unsigned(block.end)), ("size", _unsigned(block.size)), ("sha256", block.sha256),
            ):
                columns[name].append(value)
    types = {"started_at": TIMESTAMP, "index": pa.uint32(), "start": pa.uint64(), "end": pa.uint64(),
             "size": pa.uint64()}
    return pa.table({name: pa.array(values, types.get(name, pa.string())) for name, values in columns.items()})


def tools_table(records: Iterable[RequestRecord]) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in (
        "started_at", "trace_id", "request_id", "service", "index", "name", "size", "sha256")}
    for record in records:
        for tool in record.tools:
            for name, value in (
                ("started_at", int(record.started_at_ns)), ("trace_id", record.trace_id),
                ("request_id", record.request_id), ("service", record.service),
                ("index", _unsigned(tool.index)), ("name", tool.name), ("size", _unsigned(tool.size)),
                ("sha256", tool.sha256),
            ):
                columns[name].append(value)
    types = {"started_at": TIMESTAMP, "index": pa.uint32(), "size": pa.uint64()}
    return pa.table({name: pa.array(values, types.get(name, pa.string())) for name, values in columns.items()})


ContentKey = tuple[int, str]  # (day number since 1970-01-01, sha256)


def contents_table(
    records: Iterable[RequestRecord], already_stored: Collection[ContentKey] = ()
) -> tuple[pa.Table, list[ContentKey]]:
    """Captured block and tool text, once per distinct (day, sha256).

    ``already_stored`` holds keys known to be durable already (the sink's
    recent set); they are skipped. Returns the table and the keys it holds.
    """
    seen: dict[ContentKey, tuple[int, str]] = {}
    for record in records:
        day = _day(record.started_at_ns)
        for item in (*record.blocks, *record.tools):
            if item.content is None or not item.sha256:
                continue
            key = (day, item.sha256)
            if key in seen or key in already_stored:
                continue
            seen[key] = (len(item.content.encode("utf-8")), item.content)
    keys = list(seen)
    table = pa.table({
        "day": pa.array([day for day, _ in keys], pa.date32()),
        "sha256": pa.array([sha for _, sha in keys], pa.string()),
        "size": pa.array([seen[key][0] for key in keys], pa.uint64()),
        "content": pa.array([seen[key][1] for key in keys], pa.string()),
    })
    return table, keys


# --- otel_traces: the OpenTelemetry Collector ClickHouse exporter's layout ---

_GO_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f",
                    "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _go_json_string(text: str) -> str:
    # Go's encoding/json: HTML-safe escapes, other control characters as \u00XX.
    out = []
    for char in text:
        escaped = _GO_JSON_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _go_float(value: float) -> str:
    """A float64 as Go's JSON encoder (and pdata AsString) writes it: ES6 style."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    digits_text = "".join(map(str, digits)).rstrip("0") or "0"
    magnitude = abs(value)
    prefix = "-" if sign else ""
    if magnitude < 1e-6 or magnitude >= 1e21:
        power = exponent + len(digits) - 1  # exponent of the first digit
        mantissa = digits_text[0] + ("." + digits_text[1:] if len(digits_text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}".replace("e-0", "e-")
    return prefix + format(abs(Decimal(repr(value))).normalize(), "f")


def _go_json(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError("unsupported value")  # Go's json.Marshal fails the same way
        return _go_float(value)
    if isinstance(value, (bytes, bytearray)):
        return _go_json_string(base64.b64encode(bytes(value)).decode("ascii"))
    if isinstance(value, dict):
        items = sorted((str(key), item) for key, item in value.items())
        return "{" + ",".join(f"{_go_json_string(key)}:{_go_json(item)}" for key, item in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_go_json(item) for item in value) + "]"
    return _go_json_string(str(value))


def otel_attribute_string(value: Any) -> str:
    """One attribute value as the ClickHouse exporter stores it (pdata ``AsString``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"json: unsupported value: {'NaN' if math.isnan(value) else ('+Inf' if value > 0 else '-Inf')}"
        return _go_float(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    try:
        return _go_json(value)
    except ValueError:
        return ""  # AsString ignores json.Marshal's error and returns the empty result


def _attribute_map(attributes: dict[str, Any]) -> list[tuple[str, str]]:
    return [(str(key), otel_attribute_string(value)) for key, value in attributes.items()]


def otel_traces_table(spans: Iterable[DecodedSpan]) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in (
        "Timestamp", "TraceId", "SpanId", "ParentSpanId", "TraceState", "SpanName", "SpanKind",
        "ServiceName", "ResourceAttributes", "ScopeName", "ScopeVersion", "SpanAttributes", "Duration",
        "StatusCode", "StatusMessage", "Events.Timestamp", "Events.Name", "Events.Attributes",
        "Links.TraceId", "Links.SpanId", "Links.TraceState", "Links.Attributes")}
    for span in spans:
        for name, value in (
            ("Timestamp", int(span.start_time_ns)), ("TraceId", span.trace_id), ("SpanId", span.span_id),
            ("ParentSpanId", span.parent_span_id), ("TraceState", span.trace_state), ("SpanName", span.name),
            ("SpanKind", span.kind), ("ServiceName", span.service),
            ("ResourceAttributes", _attribute_map(span.resource_attributes)),
            ("ScopeName", span.scope_name), ("ScopeVersion", span.scope_version),
            ("SpanAttributes", _attribute_map(span.attributes)),
            # The exporter subtracts unsigned nanoseconds; a span ending before
            # it starts is stored as 0 instead of wrapping around.
            ("Duration", _unsigned(span.end_time_ns - span.start_time_ns)),
            ("StatusCode", span.status_code), ("StatusMessage", span.status_message),
            ("Events.Timestamp", [int(event.time_ns) for event in span.events]),
            ("Events.Name", [event.name for event in span.events]),
            ("Events.Attributes", [_attribute_map(event.attributes) for event in span.events]),
            ("Links.TraceId", [link.trace_id for link in span.links]),
            ("Links.SpanId", [link.span_id for link in span.links]),
            ("Links.TraceState", [link.trace_state for link in span.links]),
            ("Links.Attributes", [_attribute_map(link.attributes) for link in span.links]),
        ):
            columns[name].append(value)
    types = {
        "Timestamp": TIMESTAMP, "ResourceAttributes": STRING_MAP, "SpanAttributes": STRING_MAP,
        "Duration": pa.uint64(), "Events.Timestamp": pa.list_(TIMESTAMP), "Events.Name": pa.list_(pa.string()),
        "Events.Attributes": pa.list_(STRING_MAP), "Links.TraceId": pa.list_(pa.string()),
        "Links.SpanId": pa.list_(pa.string()), "Links.TraceState": pa.list_(pa.string()),
        "Links.Attributes": pa.list_(STRING_MAP),
    }
    return pa.table({name: pa.array(values, types.get(name, pa.string())) for name, values in columns.items()})


# --- logs: GenAI content events, and otel_logs for the rest -------------------

def genai_events_table(events: Iterable[GenAIEvent]) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in (
        "timestamp", "trace_id", "span_id", "sequence", "event_name", "service", "scope_name",
        "body", "attributes", "record_sha256")}
    for event in events:
        for name, value in (
            ("timestamp", int(event.time_ns)), ("trace_id", event.trace_id), ("span_id", event.span_id),
            ("sequence", _unsigned(event.sequence)), ("event_name", event.event_name),
            ("service", event.service), ("scope_name", event.scope_name), ("body", event.body_json),
            ("attributes", event.attributes_json), ("record_sha256", event.record_sha256),
        ):
            columns[name].append(value)
    types = {"timestamp": TIMESTAMP, "sequence": pa.uint32()}
    return pa.table({name: pa.array(values, types.get(name, pa.string())) for name, values in columns.items()})


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


def build_tables(
    spans: Iterable[DecodedSpan], records: Iterable[RequestRecord], already_stored: Collection[ContentKey] = (),
    *, genai_events: Iterable[GenAIEvent] = (), log_records: Iterable[DecodedLogRecord] = (),
) -> TableSet:
    spans, records = list(spans), list(records)
    genai_events, log_records = list(genai_events), list(log_records)
    contents, keys = contents_table(records, already_stored)
    tables = {
        "contents": contents,
        "blocks": blocks_table(records),
        "tools": tools_table(records),
        "requests": requests_table(records),
        "otel_traces": otel_traces_table(spans),
    }
    # Only a logs export has these; a traces batch (and its spool file) stays as it was.
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

