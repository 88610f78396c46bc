"""One provider call, one record — across exports.

``duplicates.merge_duplicates`` merges the spans of one call that arrive in
one export. An application exporting span by span (``SimpleSpanProcessor``,
``traceloop-sdk``'s ``disable_batch=True``), or a batch boundary falling
between the two spans, sends them in different exports; the anthropic SDK's
own span ends, and is exported, before the wrapping instrumentation's.

``CallMemory`` lives in the collector process, where every export passes
(conversion runs in worker processes, each seeing one export): it remembers
the identity (``duplicates.CallIdentity``) of every request record stored
recently, and when a later export brings another span of a stored call (the
rules of ``duplicates.same_call``: the same span again, the same response
id, parent and child, overlapping siblings), that export writes one merged
record instead — under the stored record's identity (service, start, trace,
span id: the sorting keys of its rows), so ReplacingMergeTree replaces the
stored rows with it (the row inserted last survives, within one insert too)
and every total counts the call once. Its ``merged_span_ids`` lists the other
spans. ``requests``, ``request_docs`` and ``tools`` rows of the later spans
are left out of the export; their spans stay in ``otel_traces``.

The memory is bounded: the identities of ``RECENT_CALLS`` records (oldest
traces forgotten first, at most ``CALLS_PER_TRACE`` per trace), and, to
rebuild a stored record when a later span of it comes, the payloads of the
exports that carried them, up to ``RECENT_PAYLOAD_BYTES`` (an export is decoded
again only then; a merged record is kept as it is). A call whose stored half
was forgotten is stored twice, as before this existed, and counted in
``unmerged``. The memory is lost when the collector restarts (README, "One
provider call, one request").

Tool definitions that travel in a log record (OpenLIT's
``gen_ai.client.inference.operation.details``; on a stream it carries the
parent span's id, so it is matched by its ``gen_ai.response.id`` first) join
their request the same way: a logs export brings them to the stored record
(rewritten with its ``tools`` rows and ``tools_count``), or, when the span has
not come yet, they wait here (``PENDING_TOOLS``) for the traces export that
brings it, which writes its record with them.

``merge`` / ``merge_logs`` decide and rewrite an export's tables before the
sink accepts them and return a ``Passage``: its ``wait`` holds the export
until the exports whose rows it replaces are durable (so its rows are
inserted after theirs and survive, even when two exports race), and its
``finish`` undoes what the export taught the memory when the sink did not take
it (the sender retries, and the retry decides again).
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
import pyarrow as pa
import pyarrow.compute as compute

from ..record import RequestRecord
from ..otlp.traces import decode_json, decode_protobuf
from .convert import ENCODING_JSON, ConvertedExport
from .duplicates import RULES, CallIdentity, call_identity, merged_into, same_call
from .reassemble import reassemble
from .rows import TableSet, build_tables, merge_tables

# Request records remembered (~300 bytes each): minutes of traffic at hundreds of calls a second.
# Two spans of one call reach the collector milliseconds to seconds apart.
RECENT_CALLS = 100_000
# Per trace: an agent loop's recent calls; its older ones are long complete.
CALLS_PER_TRACE = 256
# Payloads of recent exports, decoded again to rebuild a stored record when a later span of it comes.
RECENT_PAYLOAD_BYTES = 64 * 1024 * 1024
# Tool definitions of log records whose request span has not come yet (a few hundred bytes each).
PENDING_TOOLS = 10_000
# How long an export waits for the one whose rows it replaces to be durable: the sink's accept timeout.
WAIT_FOR_EARLIER_SECONDS = 120.0
# Tables whose rows are a request's (keyed by request_id); otel_traces keeps every span.
_SPAN_TABLES = frozenset({"otel_traces"})


class _Source:
    """Where a remembered record's full form comes from: the export that carried it, decoded again."""

    __slots__ = ("payload", "encoding", "records", "size")

    def __init__(self, payload: bytes | None, encoding: str, records: dict[str, RequestRecord] | None = None):
        self.payload, self.encoding, self.records = payload, encoding, records
        self.size = len(payload) if payload is not None else 0

    def record(self, request_id: str) -> RequestRecord | None:
        if self.records is None:
            if self.payload is None:
                return None  # forgotten
            decode = decode_json if self.encoding == ENCODING_JSON else decode_protobuf
            records, _ = reassemble(decode(self.payload).spans)  # as the export's conversion made them
            self.records = {record.request_id: record for record in records}
        return self.records.get(request_id)

    def forget(self) -> None:
        self.payload = self.records = None


@dataclass(eq=False)
class _Remembered:
    identity: CallIdentity
    source: _Source
    written_by: threading.Event  # set once the export that wrote this record's current rows is settled
    root: "_Remembered | None" = None  # a later span already folded into root's record

    @property
    def target(self) -> "_Remembered":
        return self.root or self


@dataclass
class _Journal:
    """This export's changes to the memory, to undo when the sink does not accept it."""

    added: list[_Remembered] = field(default_factory=list)
    changed: list[tuple[_Remembered, CallIdentity, _Source, threading.Event]] = field(default_factory=list)


class Passage:
    """One export on its way to the sink: ``converted`` (rewritten), what to wait for, and the undo."""

    def __init__(self, memory: "CallMemory | None", converted: ConvertedExport, journal: _Journal | None = None,
                 earlier: set[threading.Event] | None = None, settled: threading.Event | None = None):
        self.converted = converted
        self._memory, self._journal, self._earlier, self._settled = memory, journal, earlier or set(), settled
        self.merged = self.unmerged = self.log_tools = 0  # what this export did, for /metrics once it is stored

    def wait(self, timeout: float = WAIT_FOR_EARLIER_SECONDS) -> None:
        """Until the exports whose rows this one replaces are settled (durable, or refused)."""
        for event in self._earlier:
            event.wait(timeout)

    def finish(self, accepted: bool) -> None:
        if not accepted and self._memory is not None and self._journal is not None:
            self._memory._undo(self._journal)
        if self._settled is not None:
            self._settled.set()


class CallMemory:
    def __init__(self, recent_calls: int = RECENT_CALLS, calls_per_trace: int = CALLS_PER_TRACE,
                 payload_bytes: int = RECENT_PAYLOAD_BYTES):
        self.recent_calls, self.calls_per_trace, self.payload_bytes = recent_calls, calls_per_trace, payload_bytes
        self._lock = threading.Lock()
        self._traces: OrderedDict[str, list[_Remembered]] = OrderedDict()
        self._calls = 0
        self._sources: OrderedDict[int, _Source] = OrderedDict()
        self._source_bytes = 0
        self._pending_tools: OrderedDict[tuple[str, str, str], list] = OrderedDict()
        self.merged = 0  # later spans folded into a stored record
        self.unmerged = 0  # later spans of a call whose stored record was forgotten: stored apart

    def merge(self, converted: ConvertedExport, payload: bytes, encoding: str) -> Passage:
        """A traces export with the later spans of stored calls folded into those calls' records,
        and tool definitions that came earlier in log records added to theirs."""
        if not converted.calls:
            return Passage(None, converted)
        journal, settled, earlier = _Journal(), threading.Event(), set()
        with self._lock:
            source = _Source(payload, encoding, _by_id(converted.records))
            folded: dict[int, tuple[_Remembered, list[CallIdentity]]] = {}
            found = [self._find(identity) for identity in converted.calls]  # against earlier exports only
            fresh = []
            for identity, target in zip(converted.calls, found):
                if target is None:
                    entry = _Remembered(identity, source, settled)
                    self._remember(entry, journal)
                    fresh.append(entry)
                else:
                    folded.setdefault(id(target), (target, []))[1].append(identity)
            rewritten: list[RequestRecord] = []
            replaced: list[str] = []
            merged, unmerged = self.merged, self.unmerged
            if folded:
                self._fold(source, list(folded.values()), journal, settled, earlier, rewritten, replaced)
            log_tools = self._add_pending_tools(fresh, rewritten, replaced, journal, settled)
            self._keep_source(source)
            merged, unmerged = self.merged - merged, self.unmerged - unmerged
        if rewritten:
            converted = _rewritten(converted, replaced, rewritten)
        passage = Passage(self, converted, journal, earlier - {settled}, settled)
        passage.merged, passage.unmerged, passage.log_tools = merged, unmerged, log_tools
        return passage

    def merge_logs(self, converted: ConvertedExport) -> Passage:
        """A logs export with the tool definitions its records carry added to their stored requests
        (or kept for the traces export that will bring the request)."""
        if not converted.tool_owners:
            return Passage(None, converted)
        journal, settled, earlier = _Journal(), threading.Event(), set()
        rewritten: list[RequestRecord] = []
        with self._lock:
            for owner in converted.tool_owners:
                target = self._owner_of(owner)
                if target is None:
                    self._pending_tools[_tools_key(owner)] = owner.tools
                    while len(self._pending_tools) > PENDING_TOOLS:
                        self._pending_tools.popitem(last=False)
                    continue
                stored = target.source.record(target.identity.request_id)
                if stored is None or stored.tools:
                    continue  # forgotten (the log's own tools rows stay), or its span sent definitions itself
                merged = _with_tools(stored, owner.tools)
                earlier.add(target.written_by)
                self._replace(target, merged, target.source.size, journal, settled)
                rewritten.append(merged)
        if rewritten:
            converted = _rewritten(converted, [], rewritten)
        passage = Passage(self, converted, journal, earlier - {settled}, settled)
        passage.log_tools = len(rewritten)
        return passage

    def __len__(self) -> int:
        return self._calls

    # --- matching ------------------------------------------------------------

    def _find(self, identity: CallIdentity) -> _Remembered | None:
        remembered = self._traces.get(identity.trace_id)
        if not remembered:
            return None
        self._traces.move_to_end(identity.trace_id)
        for rule in RULES:
            for entry in reversed(remembered):  # the most recent first
                if same_call(rule, entry.identity, identity):
                    return entry.target
        return None

    def _remember(self, entry: _Remembered, journal: _Journal) -> None:
        trace_id = entry.identity.trace_id
        remembered = self._traces.get(trace_id)
        if remembered is None:
            remembered = self._traces[trace_id] = []
        remembered.append(entry)
        self._calls += 1
        journal.added.append(entry)
        if len(remembered) > self.calls_per_trace:
            del remembered[0]
            self._calls -= 1
        while self._calls > self.recent_calls and self._traces:
            _, dropped = self._traces.popitem(last=False)
            self._calls -= len(dropped)

    def _keep_source(self, source: _Source) -> None:
        if source.size > self.payload_bytes:
            source.forget()
            return
        self._sources[id(source)] = source
        self._source_bytes += source.size
        while self._source_bytes > self.payload_bytes:
            _, oldest = self._sources.popitem(last=False)
            self._source_bytes -= oldest.size
            oldest.forget()

    # --- merging -------------------------------------------------------------

    def _fold(self, source: _Source, folds: list[tuple[_Remembered, list[CallIdentity]]], journal: _Journal,
              settled: threading.Event, earlier: set, rewritten: list[RequestRecord], replaced: list[str]) -> None:
        for target, identities in folds:
            stored = target.source.record(target.identity.request_id)
            later = [source.record(identity.request_id) for identity in identities]
            if stored is None or any(record is None for record in later):
                self.unmerged += len(identities)
                for identity in identities:
                    self._remember(_Remembered(identity, source, settled), journal)
                continue
            merged = merged_into(stored, later)
            earlier.add(target.written_by)
            self._replace(target, merged, target.source.size + source.size, journal, settled)
            rewritten.append(merged)
            replaced += [identity.request_id for identity in identities]
            for identity in identities:
                if identity.request_id != target.identity.request_id:
                    self._remember(_Remembered(identity, source, settled, root=target), journal)
            self.merged += sum(identity.request_id != target.identity.request_id for identity in identities)

    def _replace(self, target: _Remembered, merged: RequestRecord, size: int, journal: _Journal,
                 settled: threading.Event) -> None:
        """``target`` is ``merged`` from now on, written by the export of ``settled``."""
        journal.changed.append((target, target.identity, target.source, target.written_by))
        kept = _Source(None, "", {merged.request_id: merged})
        kept.size = size  # about the record's size: its spans' exports
        self._keep_source(kept)
        target.identity, target.source, target.written_by = call_identity(merged), kept, settled

    # --- tool definitions from log records -----------------------------------------

    def _owner_of(self, owner: RequestRecord) -> _Remembered | None:
        """The stored request a log record's tool definitions belong to: by response id, else by span id."""
        remembered = self._traces.get(owner.trace_id) or ()
        for entry in reversed(remembered):
            if owner.response_id and entry.identity.response_id == owner.response_id:
                return entry.target
        for entry in reversed(remembered):
            if entry.identity.request_id == owner.request_id:
                return entry.target
        return None

    def _add_pending_tools(self, fresh: list[_Remembered], rewritten: list[RequestRecord], replaced: list[str],
                           journal: _Journal, settled: threading.Event) -> int:
        """Tool definitions that came in log records before their request's span, added to its record;
        how many records got them."""
        if not self._pending_tools:
            return 0
        joined = 0
        for entry in fresh:
            identity = entry.identity
            tools = None
            if identity.response_id:
                tools = self._pending_tools.pop((identity.trace_id, "response", identity.response_id), None)
            tools = self._pending_tools.pop((identity.trace_id, "span", identity.request_id), None) or tools
            if not tools:
                continue
            record = entry.source.record(identity.request_id)
            if record is None or record.tools:
                continue
            merged = _with_tools(record, tools)
            self._replace(entry, merged, entry.source.size, journal, settled)
            rewritten.append(merged)
            replaced.append(identity.request_id)
            joined += 1
        return joined

    def _undo(self, journal: _Journal) -> None:
        with self._lock:
            for target, identity, source, written_by in reversed(journal.changed):
                target.identity, target.source, target.written_by = identity, source, written_by
            for entry in journal.added:
                remembered = self._traces.get(entry.identity.trace_id)
                if remembered and entry in remembered:
                    remembered.remove(entry)
                    self._calls -= 1


def _tools_key(owner: RequestRecord) -> tuple[str, str, str]:
    if owner.response_id:
        return owner.trace_id, "response", owner.response_id
    return owner.trace_id, "span", owner.request_id


def _with_tools(record: RequestRecord, tools: list) -> RequestRecord:
    merged = copy.copy(record)
    merged.tools = list(tools)
    merged.tools_count = record.tools_count or len(tools)
    return merged


def _by_id(records: list[RequestRecord] | None) -> dict[str, RequestRecord] | None:
    return None if records is None else {record.request_id: record for record in records}


def _rewritten(converted: ConvertedExport, replaced: list[str], merged: list[RequestRecord]) -> ConvertedExport:
    """The export's tables without the request rows of ``replaced`` and with those of ``merged``."""
    tables = converted.tables
    drop = pa.array(sorted(set(replaced)), pa.string())
    kept: dict[str, pa.Table] = {}
    for name, table in tables.tables.items():
        if name not in _SPAN_TABLES and "request_id" in table.column_names and table.num_rows:
            table = table.filter(compute.invert(compute.is_in(table.column("request_id"), value_set=drop)))
        kept[name] = table
    requests = kept["requests"].num_rows if "requests" in kept else 0
    rebuilt = build_tables([], merged)
    rebuilt.tables = {name: table for name, table in rebuilt.tables.items() if name not in _SPAN_TABLES}
    result = merge_tables([TableSet(kept, tables.content_keys, tables.spans, requests), rebuilt])
    converted.tables = result
    if getattr(converted, "serialized", None):  # a worker's IPC bytes of the tables, if kept: not these any more
        converted.serialized = {}
    converted.requests = max(0, converted.requests - len(set(replaced)))
    return converted
