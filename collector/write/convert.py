"""One OTLP export payload → the tables it writes. Pure, no I/O.

Everything CPU-bound about an export happens here: parse, decode,
reassemble, and laying out rows. ``Ingest`` runs it in a worker process
(``workers``) or, with ``PROMPTPRISM_INGEST_WORKERS=0``, in the receiver's
thread; either way the sink gets a ``ConvertedExport``: tables ready to
insert plus the counts the metrics and the OTLP answer need.

Content text is laid out without the sink's "recently stored" set (a worker
cannot see it); the sink drops the rows it already holds
(``TableSet.without_contents``) before inserting.

The result crosses the process boundary as Arrow IPC bytes per table
(``to_wire`` / ``from_wire``): one contiguous copy each, no per-row pickling.
The worker also takes each one's CRC-32, and the collector keeps those bytes
(``ConvertedExport.serialized``): an export spooled under load is written
with them as they are, not serialized again in the collector's process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from blake3 import blake3

from ..otlp import logs as otlp_logs
from ..otlp import metrics as otlp_metrics
from ..otlp.traces import decode_json, decode_protobuf
from ._arrow_ipc import table_from_bytes, table_into, table_to_bytes
from ..record import RequestRecord
from .duplicates import CallIdentity, call_identity
from .genai_events import split_logs
from .metric_rows import metric_tables
from .reassemble import reassemble
from .rows import TableSet, build_tables
from .spool import checksum

ENCODING_PROTOBUF = "protobuf"
ENCODING_JSON = "json"
# What the sender is told when its payload decodes but a value in it breaks the
# conversion (a bug of ours, triggered by that payload alone): retrying cannot help.
UNCONVERTIBLE = "cannot convert the export: a value in it cannot be read"
KIND_TRACES = "traces"
KIND_LOGS = "logs"
KIND_METRICS = "metrics"

# Prefixed to a logs payload before hashing it into the dedup token: the
# sink remembers tokens of both signals in one set.
LOGS_TOKEN_PREFIX = b"otlp-logs\n"
METRICS_TOKEN_PREFIX = b"otlp-metrics\n"


def payload_token(payload: bytes | memoryview, prefix: bytes = b"") -> str:
    """An export's deduplication token: the hex BLAKE3 digest of ``prefix`` then its bytes.

    A token names a payload for the sink's "already stored" check and ClickHouse's
    insert deduplication, so it must not collide even for a client that tries (a
    collision would have one export dropped as a retry of another): a cryptographic
    hash. BLAKE3 rather than sha256 because it is ~2.4× cheaper here: 5.4 against
    12.9 ms of a worker's CPU for a 20 MB export (README "Ingest throughput")."""
    hasher = blake3(prefix)
    hasher.update(payload)
    return hasher.hexdigest()


@dataclass(slots=True)
class ConvertedExport:
    """What one export writes and what its answer and metrics report."""

    tables: TableSet
    dedup_token: str
    received: int = 0  # spans, or log records, accepted from the payload
    rejected: int = 0  # left out for invalid ids (OTLP partial success)
    error_message: str = ""
    requests: int = 0
    mapped_blocks: int = 0
    unmapped_reasons: dict[str, int] = field(default_factory=dict)
    genai_events: int = 0
    other_log_records: int = 0
    unjoinable_genai_events: int = 0
    metric_points: int = 0
    # The request records' identities, for matching across exports (calls.CallMemory)…
    calls: list[CallIdentity] = field(default_factory=list)
    # …and the records themselves when converted in this process; never sent from a worker
    # (pickling them costs ~60 % of a conversion): CallMemory decodes the payload again when needed.
    records: list[RequestRecord] | None = None
    # A logs export's tool definitions, each on a stub record (trace, span and response id; calls.CallMemory
    # joins them to their request).
    tool_owners: list[RequestRecord] = field(default_factory=list)
    # Tables that crossed from a worker: name → (table, its IPC bytes, their CRC-32), for the spool.
    serialized: dict[str, Any] = field(default_factory=dict)
    # The decoded spans, kept only when asked (``keep_spans``): a worker frees them with the records
    # after its answer is sent (``workers._FreedLater``). Never sent.
    spans: list | None = None

    @property
    def rows(self) -> int:
        """Spans plus log records plus metric points: what the sink's group bound counts."""
        return self.tables.spans + self.genai_events + self.other_log_records + self.metric_points

    @property
    def nbytes(self) -> int:
        return sum(table.nbytes for table in self.tables.tables.values())


def convert_traces(payload: bytes, encoding: str, keep_spans: bool = False) -> ConvertedExport:
    """A traces export's tables (and its decoded spans with ``keep_spans``). Raises MalformedPayload."""
    token = payload_token(payload)
    decoded = decode_json(payload) if encoding == ENCODING_JSON else decode_protobuf(payload)
    records, unmapped = reassemble(decoded.spans)
    tables = build_tables(decoded.spans, records)
    mapped_blocks = sum(len(record.blocks) for record in records if record.mapped)
    return ConvertedExport(tables, token, len(decoded.spans), decoded.rejections.count, decoded.rejections.message,
                           len(records), mapped_blocks, unmapped,
                           calls=[call_identity(record) for record in records], records=records,
                           spans=decoded.spans if keep_spans else None)


def convert_logs(payload: bytes, encoding: str) -> ConvertedExport:
    """A logs export's tables: GenAI content events and the other records. Raises MalformedPayload."""
    decode = otlp_logs.decode_json if encoding == ENCODING_JSON else otlp_logs.decode_protobuf
    decoded = decode(payload)
    split = split_logs(decoded.records)
    tables = build_tables([], [], genai_events=split.genai_events, log_records=split.log_records,
                          tool_owners=split.tool_owners)
    token = payload_token(payload, LOGS_TOKEN_PREFIX)
    return ConvertedExport(tables, token, len(decoded.records), decoded.rejections.count,
                           decoded.rejections.message, genai_events=len(split.genai_events),
                           other_log_records=len(split.log_records),
                           unjoinable_genai_events=split.unjoinable_genai_events, tool_owners=split.tool_owners)


def convert_metrics(payload: bytes, encoding: str) -> ConvertedExport:
    """A metrics export's tables, one per OTLP metric type. Raises MalformedPayload."""
    decode = otlp_metrics.decode_json if encoding == ENCODING_JSON else otlp_metrics.decode_protobuf
    decoded = decode(payload)
    token = payload_token(payload, METRICS_TOKEN_PREFIX)
    return ConvertedExport(TableSet(metric_tables(decoded.points)), token, len(decoded.points),
                           decoded.rejected_data_points, decoded.error_message, metric_points=len(decoded.points))


def convert(kind: str, payload: bytes, encoding: str, keep_spans: bool = False) -> ConvertedExport:
    if kind == KIND_METRICS:
        return convert_metrics(payload, encoding)
    if kind == KIND_LOGS:
        return convert_logs(payload, encoding)
    return convert_traces(payload, encoding, keep_spans)


# --- across the process boundary ---------------------------------------------

def to_wire(converted: ConvertedExport) -> tuple:
    """A picklable form whose tables are Arrow IPC streams (cheap to pickle: plain bytes), with their CRC-32s."""
    tables = converted.tables
    blobs = {name: table_to_bytes(table) for name, table in tables.tables.items()}
    checksums = {name: checksum(blob) for name, blob in blobs.items()}
    wire_tables = (blobs, checksums, tables.content_keys, tables.spans, tables.requests)
    return wire_tables, {name: getattr(converted, name) for name in _WIRE_FIELDS}


# What crosses as plain values: not the tables (bytes instead), not the records (see ``records``)
# or the spans, not the tables' bytes again.
_WIRE_FIELDS = tuple(name for name in ConvertedExport.__slots__
                     if name not in ("tables", "records", "serialized", "spans"))


def from_wire(wire: tuple) -> ConvertedExport:
    (blobs, checksums, content_keys, spans, requests), fields = wire
    tables = {name: table_from_bytes(blob) for name, blob in blobs.items()}
    converted = ConvertedExport(TableSet(tables, content_keys, spans, requests), **fields)
    converted.serialized = {name: (tables[name], blob, checksums[name]) for name, blob in blobs.items()}
    return converted


def to_slot(converted: ConvertedExport, buffer: memoryview) -> tuple | None:
    """``to_wire``, the tables' IPC streams written straight into ``buffer`` (a worker's
    shared-memory slot) instead of into bytes of their own: ``(name, offset, length)`` each
    in place of the bytes. None when they do not fit (nothing else changed)."""
    tables = converted.tables
    extents, checksums, offset = [], {}, 0
    try:
        for name, table in tables.tables.items():
            length = table_into(table, buffer[offset:])
            extents.append((name, offset, length))
            checksums[name] = checksum(buffer[offset:offset + length])
            offset += length
    except (pa.ArrowException, OSError, ValueError):  # past the end of the buffer
        return None
    wire_tables = (extents, checksums, tables.content_keys, tables.spans, tables.requests)
    return wire_tables, {name: getattr(converted, name) for name in _WIRE_FIELDS}


def from_slot(wire: tuple, buffer: memoryview) -> tuple:
    """``to_slot``'s form → ``to_wire``'s, each table's bytes copied out of ``buffer`` (which is reused)."""
    (extents, *rest), fields = wire
    blobs = {name: bytes(buffer[offset:offset + length]) for name, offset, length in extents}
    return (blobs, *rest), fields
