"""One provider call, one request: records of one export that describe the same call are merged. Pure.

Two instrumentations can each trace the same call: the anthropic SDK traces
its own calls by default, so with OpenInference or OpenLLMetry active every
Anthropic call arrives as two spans. Stored as two requests, every total
(tokens, requests, bytes) would count the call twice. Two records of one
trace are the same call when, in this order:

1. they carry the same response id (``gen_ai.response.id`` and the other
   conventions' forms: OpenLLMetry's and the SDK's sibling spans);
2. one is an ancestor of the other, from another instrumentation (another
   scope), with the same provider (OpenInference wraps ``create()`` with its
   span current, so the SDK's span is its child; SDKs make one span per call,
   not per retry);
3. without response ids that differ: the same parent, provider and model
   (when both name one), another scope, and one's [start, end] inside the
   other's (OpenLLMetry's events mode, whose span has no response id).

Requiring another scope keeps two real calls of one instrumentation apart,
even when they run concurrently under one parent.

The merged record keeps the richest fields of both: the request id, times
and names of the preferred span — promptprism's own (a block map) first,
then any instrumentation's over a provider SDK's, then the outermost — and
every field that span left empty from the other (the SDK's cache writes,
stop reason and response id, the instrumentation's messages and tools).
The other span ids are listed in ``merged_span_ids``; their spans stay in
``otel_traces``. This module matches the records of one export; spans of one
call that travel in different exports (``SimpleSpanProcessor``, a batch
boundary between them) are matched by ``calls.CallMemory`` in the collector
process with the same rules (``CallIdentity``, ``same_call``) and merged with
``merged_into``, under the identity of the record stored first.
"""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Iterable, NamedTuple

from ..conventions.providers import is_provider_sdk_scope
from ..otlp.model import DecodedSpan
from ..record import RequestRecord

# Parent links followed when looking for an enclosing request span: deeper than any real
# agent stack, and bounded against a cycle of broken parent ids.
MAX_ANCESTRY_DEPTH = 64
# Sibling records of one parent compared pairwise: more than this under one parent are
# an agent loop of separate calls, compared only with their near neighbours in time.
MAX_SIBLING_WINDOW = 16

# Fields that belong to the span a record is: never taken from the merged span.
_OWN = frozenset({"trace_id", "request_id", "parent_span_id", "started_at_ns", "duration_ns", "span_name",
                  "scope_name", "merged_span_ids", "attributes", "resource_attributes", "thread"})
# The prompt: taken as a whole or not at all.
_PROMPT = ("blocks", "prompt_bytes", "prompt_sha256", "mapped", "unmapped_reason")


def merge_duplicates(records: list[RequestRecord], spans: Iterable[DecodedSpan]) -> list[RequestRecord]:
    """``records`` with each group of records of one provider call merged into one, in the original order."""
    if len(records) < 2:
        return records
    groups = _DisjointSets(len(records))
    by_trace: dict[str, list[int]] = {}
    for position, record in enumerate(records):
        by_trace.setdefault(record.trace_id, []).append(position)
    parents = None
    for positions in by_trace.values():
        if len(positions) < 2:
            continue
        if parents is None:
            parents = {(span.trace_id, span.span_id): span.parent_span_id for span in spans}
        _same_response(records, positions, groups)
        _nested(records, positions, parents, groups)
        _overlapping_siblings(records, positions, groups)
    members: dict[int, list[int]] = {}
    for position in range(len(records)):
        members.setdefault(groups.find(position), []).append(position)
    if len(members) == len(records):
        return records
    kept = []
    for position, record in enumerate(records):
        group = members[groups.find(position)]
        if len(group) == 1:
            kept.append(record)
        elif position == group[0]:
            kept.append(_merged([records[member] for member in group]))
    return kept


def _same_response(records: list[RequestRecord], positions: list[int], groups: "_DisjointSets") -> None:
    first: dict[str, int] = {}
    for position in positions:
        response_id = records[position].response_id
        if response_id:
            groups.union(first.setdefault(response_id, position), position)


def _nested(records: list[RequestRecord], positions: list[int], parents: dict, groups: "_DisjointSets") -> None:
    by_span = {records[position].request_id: position for position in positions}
    for position in positions:
        record = records[position]
        ancestor = record.parent_span_id
        for _ in range(MAX_ANCESTRY_DEPTH):
            if not ancestor:
                break
            if ancestor in by_span:
                outer = records[by_span[ancestor]]
                if _may_be_one_call(outer, record):
                    groups.union(by_span[ancestor], position)
                break  # the nearest enclosing request decides
            ancestor = parents.get((record.trace_id, ancestor), "")


def _overlapping_siblings(records: list[RequestRecord], positions: list[int], groups: "_DisjointSets") -> None:
    siblings: dict[tuple[str, str], list[int]] = {}
    for position in positions:
        record = records[position]
        siblings.setdefault((record.parent_span_id, record.provider), []).append(position)
    for group in siblings.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda position: records[position].started_at_ns)
        for index, position in enumerate(group):
            for other in group[index + 1:index + 1 + MAX_SIBLING_WINDOW]:
                first, second = records[position], records[other]
                if _may_be_one_call(first, second) and _inside(first, second) and _models_agree(first, second):
                    groups.union(position, other)


def _may_be_one_call(first: RequestRecord, second: RequestRecord) -> bool:
    if first.scope_name == second.scope_name:
        return False
    if first.provider and second.provider and first.provider != second.provider:
        return False
    return not (first.response_id and second.response_id and first.response_id != second.response_id)


def _models_agree(first: RequestRecord, second: RequestRecord) -> bool:
    return not (first.model and second.model and first.model != second.model)


def _inside(first: RequestRecord, second: RequestRecord) -> bool:
    """One's [start, end] within the other's."""
    first_end, second_end = first.started_at_ns + first.duration_ns, second.started_at_ns + second.duration_ns
    return ((first.started_at_ns <= second.started_at_ns and second_end <= first_end)
            or (second.started_at_ns <= first.started_at_ns and first_end <= second_end))


def _preference(record: RequestRecord) -> tuple:
    """Lower sorts first: promptprism's map, any instrumentation over a provider SDK, the outermost."""
    return (not record.mapped, record.schema_version == 0, is_provider_sdk_scope(record.scope_name),
            record.started_at_ns, -record.duration_ns)


def _empty(value: object, default: object) -> bool:
    """Not filled: None, empty text or list, or the field's default 0 (a reported 0 of a
    field that defaults to None is a value)."""
    return value is None or value == "" or value == [] or value == {} or (value == 0 and default == 0)


_FIELDS = tuple((field.name, field.default) for field in fields(RequestRecord))


def _merged(group: list[RequestRecord]) -> RequestRecord:
    ordered = sorted(group, key=_preference)
    kept, others = ordered[0], ordered[1:]
    for other in others:
        if not kept.blocks and other.blocks:
            for name in _PROMPT:
                setattr(kept, name, getattr(other, name))
        for name, default in _FIELDS:
            if name in _OWN or name in _PROMPT:
                continue
            if _empty(getattr(kept, name), default) and not _empty(getattr(other, name), default):
                setattr(kept, name, getattr(other, name))
        if kept.status_code != "Error" and other.status_code == "Error":
            kept.status_code, kept.status_message = other.status_code, other.status_message
        kept.attributes = {**other.attributes, **kept.attributes}
    kept.merged_span_ids = sorted({*kept.merged_span_ids, *(other.request_id for other in others),
                                   *(span_id for other in others for span_id in other.merged_span_ids)})
    return kept


class _DisjointSets:
    def __init__(self, size: int):
        self.parent = list(range(size))

    def find(self, item: int) -> int:
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def union(self, first: int, second: int) -> None:
        first, second = self.find(first), self.find(second)
        if first != second:
            self.parent[max(first, second)] = min(first, second)


# --- across exports (calls.CallMemory) ------------------------------------------------


class CallIdentity(NamedTuple):
    """What matching a request record with another needs: small, so every stored record's is remembered."""

    trace_id: str
    request_id: str
    parent_span_id: str
    response_id: str
    provider: str
    model: str
    scope_name: str
    started_at_ns: int
    duration_ns: int


def call_identity(record: RequestRecord) -> CallIdentity:
    return CallIdentity(record.trace_id, record.request_id, record.parent_span_id, record.response_id,
                        record.provider, record.model, record.scope_name, record.started_at_ns, record.duration_ns)


# The rules of merge_duplicates, in its order, for a record of a later export against one stored before.
SAME_SPAN, SAME_RESPONSE, NESTED, OVERLAPPING = "same_span", "same_response", "nested", "overlapping"
RULES = (SAME_SPAN, SAME_RESPONSE, NESTED, OVERLAPPING)


def same_call(rule: str, stored: CallIdentity, later: CallIdentity) -> bool:
    """Whether ``later`` (a record of a later export) is the provider call ``stored`` describes, by ``rule``.

    ``SAME_SPAN`` is the span itself sent again (a retry in another batch): it
    must update the stored record, not replace a merged one with its half.
    Unlike within one export, a shared response id counts only between
    different scopes (two instrumentations), as the other rules do.
    ``NESTED`` looks one level up or down only: a span's ancestors beyond its
    parent are in its own export's parent links, not remembered.
    """
    if stored.trace_id != later.trace_id:
        return False
    if rule == SAME_SPAN:
        return stored.request_id == later.request_id
    if rule == SAME_RESPONSE:  # from another scope too: a mock provider's constant id never joins two calls
        return bool(later.response_id) and stored.response_id == later.response_id and _may_be_one_call(stored, later)
    if rule == NESTED:
        nested = ((later.parent_span_id and later.parent_span_id == stored.request_id)
                  or (stored.parent_span_id and stored.parent_span_id == later.request_id))
        return bool(nested) and _may_be_one_call(stored, later)
    return (stored.parent_span_id == later.parent_span_id and stored.provider == later.provider
            and _may_be_one_call(stored, later) and _inside(stored, later) and _models_agree(stored, later))


# Where a stored row is: the sorting keys of requests, tools and request_ids (service, start, trace,
# id) and the span it is; its document's thread is kept apart (``merged_into``). A row can only be
# replaced under the same key.
_STORED_IDENTITY = ("trace_id", "request_id", "parent_span_id", "started_at_ns", "duration_ns", "span_name",
                    "scope_name", "service", "resource_attributes")


def merged_into(stored: RequestRecord, later: list[RequestRecord]) -> RequestRecord:
    """One record for a stored call and later spans of it: the fields as ``_merged`` chooses
    them (promptprism's map first, …), under the stored record's identity so that
    its rows are replaced (ReplacingMergeTree keeps the row inserted last).

    Never fewer blocks or tools than the stored row has (a merge never takes a
    prompt or tools away from a call).
    """
    group = [copy.copy(stored), *(copy.copy(record) for record in later)]
    merged = _merged(group)
    for name in _STORED_IDENTITY:
        setattr(merged, name, getattr(stored, name))
    if len(stored.blocks) > len(merged.blocks):
        for name in _PROMPT:
            setattr(merged, name, getattr(stored, name))
    if len(stored.tools) > len(merged.tools):
        merged.tools, merged.tools_count = stored.tools, max(merged.tools_count, stored.tools_count)
    spans = {*stored.merged_span_ids, *(span for record in later for span in (record.request_id, *record.merged_span_ids))}
    merged.merged_span_ids = sorted(spans - {stored.request_id})
    # its document replaces the stored one under the stored one's thread, conversation id or not
    merged.thread = stored.thread or stored.conversation_id or stored.trace_id
    return merged
