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
spans. ``requests``, ``blocks``, ``tools`` and ``request_content`` rows of
the later spans are left out of the export; their spans stay in ``otel_traces``.

The memory is bounded: the identities of ``RECENT_CALLS`` records (oldest
traces forgotten first, at most ``CALLS_PER_TRACE`` per trace), and, to
rebuild a stored record when a later span of it comes, the payloads of the
exports that carried them, up to ``RECENT_PAYLOAD_BYTES`` (an export is decoded
again only then; a merged record is kept as it is). A call whose stored half
was forgotten is stored twice, as before this existed, and counted in
``unmerged``. The memory is lost when the collector restarts (README, "One
provider call, one request").

``merge`` decides and rewrites an export's tables before the sink accepts
them; the returned undo restores the memory when the sink does not (the
sender retries, and the retry decides again).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa
import pyarrow.compute as compute

from ..record import RequestRecord
from .convert import ConvertedExport, convert_traces
from .duplicates import RULES, CallIdentity, call_identity, merged_into, same_call
from .rows import TableSet, build_tables, merge_tables

# Request records remembered (~300 bytes each): minutes of traffic at hundreds of calls a second.
# Two spans of one call reach the collector milliseconds to seconds apart.
RECENT_CALLS = 100_000
# Per trace: an agent loop's recent calls; its older ones are long complete.
CALLS_PER_TRACE = 256
# Payloads of recent exports, decoded again to rebuild a stored record when a later span of it comes.
RECENT_PAYLOAD_BYTES = 64 * 1024 * 1024
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
            self.records = {record.request_id: record for record in
                            convert_traces(self.payload, self.encoding).records or ()}
        return self.records.get(request_id)

    def forget(self) -> None:
        self.payload = self.records = None


@dataclass(eq=False)
class _Remembered:
    identity: CallIdentity
    source: _Source
    root: "_Remembered | None" = None  # a later span already folded into root's record

    @property
    def target(self) -> "_Remembered":
        return self.root or self


@dataclass
class _Journal:
    """This export's changes to the memory, to undo when the sink does not accept it."""

    added: list[_Remembered] = field(default_factory=list)
    changed: list[tuple[_Remembered, CallIdentity, _Source]] = field(default_factory=list)


class CallMemory:
    def __init__(self, recent_calls: int = RECENT_CALLS, calls_per_trace: int = CALLS_PER_TRACE,
                 payload_bytes: int = RECENT_PAYLOAD_BYTES):
        self.recent_calls, self.calls_per_trace, self.payload_bytes = recent_calls, calls_per_trace, payload_bytes
        self._lock = threading.Lock()
        self._traces: OrderedDict[str, list[_Remembered]] = OrderedDict()
        self._calls = 0
        self._sources: OrderedDict[int, _Source] = OrderedDict()
        self._source_bytes = 0
        self.merged = 0  # later spans folded into a stored record
        self.unmerged = 0  # later spans of a call whose stored record was forgotten: stored apart

    def merge(self, converted: ConvertedExport, payload: bytes, encoding: str
              ) -> tuple[ConvertedExport, Callable[[], None]]:
        """``converted`` with the later spans of stored calls folded into those calls' records; and an undo."""
        if not converted.calls:
            return converted, _nothing
        journal = _Journal()
        with self._lock:
            source = _Source(payload, encoding, _by_id(converted.records))
            folded: dict[int, tuple[_Remembered, list[CallIdentity]]] = {}
            found = [self._find(identity) for identity in converted.calls]  # against earlier exports only
            for identity, target in zip(converted.calls, found):
                if target is None:
                    self._remember(_Remembered(identity, source), journal)
                else:
                    folded.setdefault(id(target), (target, []))[1].append(identity)
            if folded:
                converted = self._fold(converted, source, list(folded.values()), journal)
            self._keep_source(source)
        return converted, lambda: self._undo(journal)

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

    def _fold(self, converted: ConvertedExport, source: _Source,
              folds: list[tuple[_Remembered, list[CallIdentity]]], journal: _Journal) -> ConvertedExport:
        merged_records: list[RequestRecord] = []
        replaced: list[str] = []
        for target, identities in folds:
            stored = target.source.record(target.identity.request_id)
            later = [source.record(identity.request_id) for identity in identities]
            if stored is None or any(record is None for record in later):
                self.unmerged += len(identities)
                for identity in identities:
                    self._remember(_Remembered(identity, source), journal)
                continue
            merged = merged_into(stored, later)
            merged_records.append(merged)
            replaced += [identity.request_id for identity in identities]
            journal.changed.append((target, target.identity, target.source))
            kept = _Source(None, "", {merged.request_id: merged})
            kept.size = target.source.size + source.size  # about the record's size: its spans' exports
            self._keep_source(kept)
            target.identity, target.source = call_identity(merged), kept
            for identity in identities:
                if identity.request_id != target.identity.request_id:
                    self._remember(_Remembered(identity, source, root=target), journal)
            self.merged += sum(identity.request_id != target.identity.request_id for identity in identities)
        if not merged_records:
            return converted
        return _rewritten(converted, replaced, merged_records)

    def _undo(self, journal: _Journal) -> None:
        with self._lock:
            for target, identity, source in reversed(journal.changed):
                target.identity, target.source = identity, source
            for entry in journal.added:
                remembered = self._traces.get(entry.identity.trace_id)
                if remembered and entry in remembered:
                    remembered.remove(entry)
                    self._calls -= 1


def _nothing() -> None:
    return None


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
    converted.requests = max(0, converted.requests - len(set(replaced)))
    return converted
