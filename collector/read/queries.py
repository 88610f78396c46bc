"""Named SQL for the read side (API, inspector, CLI) and the calls that run it.

Every value is a bound parameter in ClickHouse's ``{name:Type}`` syntax, the
database included (``{db:Identifier}``). Lists travel as one JSON string
parameter decoded by ``JSONExtract``: the embedded store binds parameters as
text and cannot bind a Python list, and a JSON string binds the same way on
both stores. The same SQL runs on the embedded and the server store.

Tables are ReplacingMergeTree (a resent batch collapses into one row when
parts merge) and no read here uses ``FINAL``: FINAL reads every part of the
table it names and turns off the bloom filters, so a lookup would cost as
much as a scan. Each query instead reads by key (``request_ids`` gives where
a request is, ``trace_threads`` a trace's threads: the sorting key of their
documents, migration 048) or by bloom filter, and drops a not-yet-merged
copy itself: ``LIMIT 1 BY`` the row's identity, or in Python for the list
(``LIMIT 1 BY`` there would stop ClickHouse from reading in order and
stopping after a page). Of two copies of a request the one with more merged
spans is read: a record a later export folded another span of its call into
(write/calls.py) replaces the row stored first, and that is the row that
survives the merge (the last inserted).

The functions here only fetch rows; turning rows into request objects is
``request_view``'s job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from ..record import CONTENT_KEY_BYTES, REQUEST_COLUMNS, Column
from ..store.base import Store
from .lineage import COLUMNS as LINEAGE_COLUMNS
from .times import MAX_MOMENT_NS

# How many candidates an ambiguous prefix lists. One more than shown is
# fetched so that "more than ten" can be told from "exactly ten".
AMBIGUOUS_CANDIDATES_SHOWN = 10

# A list answer is for people and scripts paging through recent requests (the
# cap, one for every list route, is models.LIMIT_MAX).
LIST_LIMIT_DEFAULT = 50

# One trace of an agent loop rarely has more than a few hundred LLM requests;
# the cap keeps a runaway trace from building a page of unbounded size.
TRACE_REQUESTS_MAX = 2000

# Earlier requests of a conversation looked at when finding each request's
# predecessor. A conversation longer than this still works: the predecessor
# is the newest earlier request, and the query orders newest first.
CONVERSATION_MEMBERS_MAX = 5000



def _select_expression(column: Column) -> str:
    """A declared column read back under its record field's name: a time as Unix nanoseconds."""
    if column.type.startswith("DateTime64"):
        return f"toUnixTimestamp64Nano({column.name}) AS {column.key}"
    return column.name if column.name == column.key else f"{column.name} AS {column.key}"


def _select_list(columns: Iterable[Column]) -> str:
    return ",\n    ".join(_select_expression(column) for column in columns)


# Columns a summary needs (lists, trace overviews, predecessors), and
# everything a full request object shows; both from the declaration (record.py).
_SUMMARY_COLUMNS = _select_list(column for column in REQUEST_COLUMNS if column.summary)
# What a predecessor candidate needs: its lineage (lineage.COLUMNS), what
# ``request_view.previous_requests`` shows of it, and what ``events`` needs to
# give an unmapped one its prompt size. A third of the summary's columns: a
# query's cost grows with the columns it reads, even for a few rows.
PREDECESSOR_FIELDS = frozenset({*LINEAGE_COLUMNS, "request_id", "started_at_ns", "prompt_bytes", "prompt_sha256",
                                "bytes_total", "mapped", "block_count"})
_PREDECESSOR_COLUMNS = _select_list(column for column in REQUEST_COLUMNS if column.key in PREDECESSOR_FIELDS)

# Where a request is stored, by its full id: the sorting key of its rows.
REQUEST_LOCATION = """
SELECT request_id, toUnixTimestamp64Nano(started_at) AS started_at_ns, service, trace_id, conversation_id
FROM {db:Identifier}.request_ids
WHERE request_id = {request_id:String}
ORDER BY started_at, conversation_id = ''
LIMIT 1
"""

# startsWith with a bound argument: the prefix is literal text, so `%` or `_`
# can never act as a wildcard the way they would in LIKE. On the id table's
# sorting key it reads one granule per day partition. Each id comes with its
# location (as REQUEST_LOCATION gives it), so a prefix naming one request
# costs no second read of the id table.
REQUEST_IDS_BY_PREFIX = """
SELECT request_id, toUnixTimestamp64Nano(started_at) AS started_at_ns, service, trace_id, conversation_id
FROM {db:Identifier}.request_ids
WHERE startsWith(request_id, {prefix:String})
ORDER BY request_id, started_at, conversation_id = ''
LIMIT 1 BY request_id
LIMIT {limit:UInt32}
"""

# --- request documents (migration 048) ---------------------------------------
#
# A request object reads `request_docs`: one row per request, sorted by thread
# (conversation id, else trace id) and start, its keys and one JSON document
# holding its `requests` row, its tool and block arrays and its content
# references. A trace's requests and the earlier requests of their threads,
# among which each finds its predecessor, are one read of a key range per
# thread: a statement costs ClickHouse ~6 ms per table and ~0.25 ms per column
# it reads, whatever the rows, and this one reads one table and five columns.

# A trace's threads and the time range of its requests in each (a view fills
# the table from every insert: min and max over its not-yet-merged rows), to
# the second: the range given covers the whole seconds.
TRACE_THREADS = """
SELECT thread, toInt64(toUnixTimestamp(min(first_start))) * 1000000000 AS first_ns,
       (toInt64(toUnixTimestamp(max(last_start))) + 1) * 1000000000 - 1 AS last_ns
FROM {db:Identifier}.trace_threads
WHERE trace_id = {trace_id:String}
GROUP BY thread
ORDER BY thread
LIMIT {limit:UInt32}
"""
# How many threads a trace's read takes (an agent's sub-conversations); past it the others are left out.
TRACE_THREADS_MAX = 100

_DOCUMENT_COLUMNS = ("trace_id, request_id, toUnixTimestamp64Nano(started_at) AS started_at_ns, "
                     "toString(toDate(started_at)) AS day, doc")

# The documents of some threads in a time window, newest first, one per request
# (of two copies the one with more merged spans, as REQUEST_AT). The window of
# a trace runs from PREDECESSOR_WINDOW_NS (read.lookups) before its first
# request to its last: the trace's requests and their predecessor candidates.
THREAD_DOCUMENTS = f"""
SELECT {_DOCUMENT_COLUMNS}
FROM {{db:Identifier}}.request_docs
WHERE thread IN JSONExtract({{threads:String}}, 'Array(String)')
  AND started_at >= fromUnixTimestamp64Nano({{since_ns:Int64}}, 'UTC')
  AND started_at <= fromUnixTimestamp64Nano({{until_ns:Int64}}, 'UTC')
ORDER BY started_at DESC, request_id DESC, merged_spans DESC
LIMIT 1 BY request_id
LIMIT {{limit:UInt32}}
"""

# One request's document by its sorting key: a point read.
DOCUMENT_AT = f"""
SELECT {_DOCUMENT_COLUMNS}
FROM {{db:Identifier}}.request_docs
WHERE thread = {{thread:String}}
  AND started_at = fromUnixTimestamp64Nano({{started_at_ns:Int64}}, 'UTC')
  AND request_id = {{request_id:String}}
ORDER BY merged_spans DESC
LIMIT 1
"""

# Values a document may hold as JSON strings (toJSONString quotes 64-bit
# integers unless the session says otherwise): read back as the row's types.
_INTEGER_KEYS = frozenset(column.key for column in REQUEST_COLUMNS
                          if column.type.removeprefix("Nullable(").startswith(("Int", "UInt")))
_INTEGER_ARRAYS = ("tool_sizes", "block_index", "block_starts", "block_ends", "block_sizes")


def document_row(found: Mapping[str, Any]) -> dict[str, Any]:
    """A THREAD_DOCUMENTS or DOCUMENT_AT row → the request's row as REQUEST_AT gives it, plus its
    block arrays and ``content_refs`` (``references`` form, or None when nothing was captured)."""
    row = json.loads(found["doc"])
    for key in _INTEGER_KEYS:
        value = row.get(key)
        if isinstance(value, str):
            row[key] = int(value)
    for key in _INTEGER_ARRAYS:
        values = row.get(key)
        if values and isinstance(values[0], str):
            row[key] = [int(value) for value in values]
    row.update(trace_id=found["trace_id"], request_id=found["request_id"],
               started_at_ns=int(found["started_at_ns"]), day=found["day"])
    refs = row.get("content_refs")
    row["content_refs"] = {**refs, "request_id": row["request_id"], "content_day": row["day"]} if refs else None
    return row


def document_blocks(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The block rows (as BLOCKS_FOR_REQUESTS gives them) of a ``document_row``, in index order."""
    return [{"request_id": row["request_id"], "day": row["day"], "index": index, "name": name, "layer": layer,
             "stability": stability, "source": source, "start": start, "end": end, "size": size, "sha256": sha256,
             "content_sha256": content_sha256, "redacted": redacted}
            for index, name, layer, stability, source, start, end, size, sha256, content_sha256, redacted in zip(
                row["block_index"], row["block_names"], row["block_layers"], row["block_stabilities"],
                row["block_sources"], row["block_starts"], row["block_ends"], row["block_sizes"], row["block_sha256"],
                row["block_content_sha256"], row["block_redacted"])]


def trace_threads(store: Store, trace_id: str) -> list[dict[str, Any]]:
    """The threads of a trace with the first and last start of its requests in each (Unix ns)."""
    return _run(store, TRACE_THREADS, trace_id=trace_id, limit=TRACE_THREADS_MAX)


def thread_documents(store: Store, threads: Iterable[str], since_ns: int, until_ns: int,
                     limit: int) -> list[dict[str, Any]]:
    """``document_row``s of the threads' requests started in [since_ns, until_ns], newest first, up to ``limit``."""
    threads = sorted(set(threads))
    if not threads:
        return []
    found = _run(store, THREAD_DOCUMENTS, threads=json.dumps(threads), since_ns=max(EARLIEST_NS, since_ns),
                 until_ns=until_ns, limit=limit)
    return [document_row(row) for row in found]


def document_at(store: Store, location: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``document_row`` of the request at ``location`` (``request_location``: its thread is its
    conversation, else its trace)."""
    found = _run(store, DOCUMENT_AT, thread=location["conversation_id"] or location["trace_id"],
                 started_at_ns=int(location["started_at_ns"]),
                 request_id=location["request_id"])
    return document_row(found[0]) if found else None


# Content is stored once per (day, key of the text); a request on day D
# finds its text in partition D (see the schema), so both halves of the key
# are bound: a point read per key. A block's or tool's text is under its
# content_sha256, or its sha256 when that is '' (request_view.content_key);
# the key is the digest's first 16 bytes, raw (migration 040), bound as their
# 32 hex characters.
# The output aliases must not be `day` or `sha256`: ClickHouse lets an alias
# shadow the column inside WHERE, and the strings would then be compared.
CONTENTS_BY_KEY = """
SELECT toString(day) AS content_day, lower(hex(sha256)) AS key_hex, content
FROM {db:Identifier}.contents
WHERE day IN JSONExtract({days:String}, 'Array(Date)')
  AND sha256 IN (SELECT unhex(arrayJoin(JSONExtract({keys_hex:String}, 'Array(String)'))))
LIMIT 1 BY day, sha256
"""

# What the GenAI content events of some requests contribute to them, for the
# read-time join (``events``): instrumentations that send content as log records
# leave it off the span. Both id lists are bound; the caller keeps the
# (trace_id, span_id) pairs it asked for. The table is sorted by
# (trace_id, span_id, record_sha256): the look-up reads few granules, and a
# re-sent record is dropped by its identity.
GENAI_EVENTS_FOR_REQUESTS = """
SELECT trace_id, span_id, time_ns, sequence, contribution,
       system_instructions, input_messages, output_messages, message, message_index, message_has_parts,
       instructions_text, system_text
FROM (
    SELECT trace_id, span_id, toUnixTimestamp64Nano(timestamp) AS time_ns, sequence, contribution,
           system_instructions, input_messages, output_messages, message, message_index, message_has_parts,
           instructions_text, system_text
    FROM {db:Identifier}.genai_events
    WHERE trace_id IN JSONExtract({trace_ids:String}, 'Array(String)')
      AND span_id IN JSONExtract({span_ids:String}, 'Array(String)')
      AND contribution != ''
    ORDER BY received_at DESC
    LIMIT 1 BY trace_id, span_id, record_sha256
)
ORDER BY trace_id, span_id, time_ns, sequence
LIMIT {limit:UInt32} BY trace_id, span_id
"""

# The list's filters (its count's too). An empty filter parameter means
# "any": one statement serves every filter combination, with every value
# still bound.
_LIST_WHERE = """
({service:String} = '' OR service = {service:String})
  AND ({model:String} = '' OR model = {model:String} OR response_model = {model:String})
  AND ({conversation:String} = '' OR conversation_id = {conversation:String})
  AND ({message_id:String} = '' OR message_id = {message_id:String})
  AND ({process_kind:String} = '' OR process_kind = {process_kind:String}
       OR ({process_id:String} = '' AND process_id = {process_kind:String}))
  AND ({process_id:String} = '' OR process_id = {process_id:String})
  AND ({run_id:String} = '' OR run_id = {run_id:String})
  AND started_at >= fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
  AND started_at < fromUnixTimestamp64Nano({until_ns:Int64}, 'UTC')
  AND ({cursor_id:String} = ''
       OR (started_at, request_id) < (fromUnixTimestamp64Nano({cursor_ns:Int64}, 'UTC'), {cursor_id:String}))
"""

# Newest first, without FINAL (see above): a copy not merged yet is dropped
# by ``list_requests``.
LIST_REQUESTS = f"""
SELECT {_SUMMARY_COLUMNS}
FROM {{db:Identifier}}.requests
WHERE {_LIST_WHERE}ORDER BY started_at DESC, request_id DESC, length(merged_span_ids) DESC
LIMIT {{limit:UInt32}}
"""

# The list reads the newest day first (``list_requests``): on 1 M requests a
# page from one day cost ~25 ms of CPU against ~60 ms from all fourteen.
LIST_WINDOW_NS = 86_400 * 1_000_000_000
# When the newest and the oldest stored request started (0 when there is
# none): from the parts' min-max indexes, without reading rows.
STORED_REQUESTS_SPAN = """
SELECT toInt64(toUnixTimestamp64Nano(max(started_at))) AS newest_ns,
       toInt64(toUnixTimestamp64Nano(min(started_at))) AS oldest_ns
FROM {db:Identifier}.requests
"""

# How many requests match the filters, counted up to a cap: past it the list
# says "more than" (an exact count of millions is a dashboard's job).
LIST_COUNT_MAX = 10_000
# The list's filters without its columns and order: ordering every match to
# count the first 10,001 sorted all of them (1 M requests: ~120 ms of CPU,
# against ~6 ms for any 10,001).
LIST_REQUESTS_COUNT = f"""
SELECT count() AS total FROM (
SELECT 1
FROM {{db:Identifier}}.requests
WHERE {_LIST_WHERE}LIMIT {{limit:UInt32}}
)
"""

# The newest request of each lineage of some conversations before a moment:
# the predecessor of a request that has none in the window read above.
CONVERSATION_LINEAGES_BEFORE = f"""
SELECT {_PREDECESSOR_COLUMNS}
FROM {{db:Identifier}}.requests
WHERE conversation_id IN JSONExtract({{conversation_ids:String}}, 'Array(String)')
  AND started_at < fromUnixTimestamp64Nano({{before_ns:Int64}}, 'UTC')
ORDER BY started_at DESC, request_id DESC, length(merged_span_ids) DESC
LIMIT 1 BY conversation_id, service, provider, model, process_kind
"""

def inline_tools(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool rows (as TOOLS_FOR_REQUESTS gives them) of a request row that carries its tools (migration 046)."""
    return [{"request_id": row["request_id"], "day": row["day"], "index": index, "name": name, "size": size,
             "sha256": sha256, "content_sha256": content_sha256, "redacted": redacted}
            for index, (name, size, sha256, content_sha256, redacted) in enumerate(zip(
                row["tool_names"], row["tool_sizes"], row["tool_sha256"], row["tool_content_sha256"],
                row["tool_redacted"]))]


def has_inline_tools(row: Mapping[str, Any]) -> bool:
    """Whether the row holds its request's tools (else they are rows of `tools`, if any)."""
    return bool(row.get("tool_names"))


# One request's message history as events: an agent loop of a few thousand
# turns fits; past this the history shown is cut, the request still loads.
GENAI_EVENTS_PER_REQUEST_MAX = 10_000

# Far enough apart to cover any readable span: the keys' DateTime ends in 2106
# (times.MAX_MOMENT_NS; a later bound makes ClickHouse 24.8 prune every part).
EARLIEST_NS = 0
LATEST_NS = MAX_MOMENT_NS


@dataclass(frozen=True)
class RequestFilters:
    """``GET /api/requests`` filters; empty strings mean "any"."""

    service: str = ""
    model: str = ""
    conversation: str = ""
    message_id: str = ""
    process_kind: str = ""
    process_id: str = ""
    run_id: str = ""
    since_ns: int = EARLIEST_NS
    until_ns: int = LATEST_NS
    limit: int = LIST_LIMIT_DEFAULT
    # Keyset pagination: only requests before (started_at, request_id) of the cursor; "" for the newest.
    cursor_ns: int = 0
    cursor_id: str = ""


def _run(store: Store, sql: str, **params: Any) -> list[dict[str, Any]]:
    return store.query(sql, {"db": store.database, **params})


def request_location(store: Store, request_id: str) -> dict[str, Any] | None:
    """Where a request is stored (``request_ids``): its id, started_at_ns, service and trace_id; None when unknown."""
    found = _run(store, REQUEST_LOCATION, request_id=request_id)
    return found[0] if found else None


def request_ids_by_prefix(store: Store, prefix: str) -> list[dict[str, Any]]:
    """Up to AMBIGUOUS_CANDIDATES_SHOWN + 1 requests whose id starts with ``prefix``, each with its location."""
    return _run(store, REQUEST_IDS_BY_PREFIX, prefix=prefix, limit=AMBIGUOUS_CANDIDATES_SHOWN + 1)


# The rows of `tools` of some requests: tool definitions that came in log records (a request's own
# are on its row, migration 046), by the sorting key's leading columns (service, hour of the start)
# and the id: the caller knows all three from the requests' rows, so the read touches only the
# granules of those hours. content_sha256 and redacted: see migration 005.
TOOLS_FOR_REQUESTS = """
SELECT request_id, toString(toDate(started_at)) AS day, `index`, name, size, sha256, content_sha256, redacted
FROM {db:Identifier}.tools
WHERE service IN JSONExtract({services:String}, 'Array(String)')
  AND started_at >= fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
  AND started_at <= fromUnixTimestamp64Nano({until_ns:Int64}, 'UTC')
  AND request_id IN JSONExtract({request_ids:String}, 'Array(String)')
ORDER BY request_id, `index`
LIMIT 1 BY request_id, `index`
"""

# Each listed request's blocks for its prompt bar (index, name, layer, size), from its document:
# by the documents' sorting key (thread, start), one parse of each in ClickHouse, no text.
BLOCK_BARS = """
SELECT request_id,
       JSONExtract(doc, 'Tuple(block_index Array(UInt32), block_names Array(String), block_layers Array(String), block_sizes Array(UInt64))') AS bars
FROM {db:Identifier}.request_docs
WHERE thread IN JSONExtract({threads:String}, 'Array(String)')
  AND started_at >= fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
  AND started_at <= fromUnixTimestamp64Nano({until_ns:Int64}, 'UTC')
  AND request_id IN JSONExtract({request_ids:String}, 'Array(String)')
ORDER BY request_id, merged_spans DESC
LIMIT 1 BY request_id
"""


def block_bars(store: Store, rows: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The blocks (index, name, layer, size) of each of ``rows`` (with request_id, trace_id,
    conversation_id, started_at_ns), by request id, in index order; a request without any is left out."""
    rows = list(rows)
    if not rows:
        return {}
    starts = [int(row["started_at_ns"]) for row in rows]
    found = _run(store, BLOCK_BARS, threads=json.dumps(sorted({row["conversation_id"] or row["trace_id"] for row in rows})),
                 request_ids=json.dumps(sorted({row["request_id"] for row in rows})),
                 since_ns=min(starts), until_ns=max(starts))
    wanted = {row["request_id"] for row in rows}
    bars = {}
    for row in found:
        if row["request_id"] not in wanted or not row["bars"]["block_index"]:
            continue
        parts = row["bars"]
        bars[row["request_id"]] = [
            {"index": int(index), "name": name, "layer": layer, "size": int(size)}
            for index, name, layer, size in zip(parts["block_index"], parts["block_names"], parts["block_layers"],
                                                parts["block_sizes"])]
    return bars


def _by_request_key(store: Store, sql: str, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of ``tools`` for the requests of ``rows`` (each with request_id, service, started_at_ns)."""
    rows = list(rows)
    if not rows:
        return []
    starts = [int(row["started_at_ns"]) for row in rows]
    found = _run(store, sql, request_ids=json.dumps(sorted({row["request_id"] for row in rows})),
                 services=json.dumps(sorted({row["service"] for row in rows})),
                 since_ns=min(starts), until_ns=max(starts))
    # The IN lists select a cross product of services and ids: keep the requests asked for.
    wanted = {row["request_id"] for row in rows}
    return [row for row in found if row["request_id"] in wanted]


def tools_for(store: Store, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return _by_request_key(store, TOOLS_FOR_REQUESTS, rows)


def contents_for(store: Store, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Text by (day, sha256 of the text), the digest in hex: whole (a block's or tool's) or its first
    32 characters (a content item's key). A key with no row (content not captured) is absent."""
    wanted = {(day, sha256) for day, sha256 in keys if day and sha256}
    if not wanted:
        return {}
    rows = _run(
        store,
        CONTENTS_BY_KEY,
        days=json.dumps(sorted({day for day, _ in wanted})),
        keys_hex=json.dumps(sorted({_stored_key_hex(sha256) for _, sha256 in wanted})),
    )
    # The IN lists select the cross product of days and keys; keep the pairs asked for.
    found = {(row["content_day"], row["key_hex"]): row["content"] for row in rows}
    return {(day, sha256): found[(day, _stored_key_hex(sha256))]
            for day, sha256 in wanted if (day, _stored_key_hex(sha256)) in found}


def _stored_key_hex(sha256_hex: str) -> str:
    """The hex of the key `contents` holds a text under (record.stored_content_key)."""
    return sha256_hex[: 2 * CONTENT_KEY_BYTES].lower()


def _list_parameters(filters: RequestFilters) -> dict[str, Any]:
    return dict(service=filters.service, model=filters.model, conversation=filters.conversation,
                message_id=filters.message_id, process_kind=filters.process_kind, process_id=filters.process_id,
                run_id=filters.run_id, since_ns=filters.since_ns, until_ns=filters.until_ns,
                cursor_ns=filters.cursor_ns, cursor_id=filters.cursor_id, limit=filters.limit)


def _first_of_each(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` without a second copy of a request (a re-sent batch not merged yet)."""
    seen: set[str] = set()
    kept = []
    for row in rows:
        if row["request_id"] not in seen:
            seen.add(row["request_id"])
            kept.append(row)
    return kept


def list_requests(store: Store, filters: RequestFilters) -> list[dict[str, Any]]:
    """A page of summaries, newest first (``filters.limit`` rows fetched, a not-merged copy dropped).

    The newest LIST_WINDOW_NS before the page's upper bound is read first: when
    it holds a whole page, that page is the answer (every older row would come
    after it) and the other days are never read; otherwise the whole range is,
    unless the window held every stored request.
    A filter served by a bloom filter (conversation, message, run) reads the
    whole range at once: its few rows may be anywhere.
    """
    selective = filters.conversation or filters.message_id or filters.run_id
    if not selective:
        upper = min(filters.until_ns, filters.cursor_ns + 1 if filters.cursor_id else filters.until_ns)
        (stored,) = _run(store, STORED_REQUESTS_SPAN)
        window_since = min(upper, int(stored["newest_ns"]) + 1) - LIST_WINDOW_NS
        if window_since > filters.since_ns:
            rows = _run(store, LIST_REQUESTS, **_list_parameters(replace(filters, since_ns=window_since)))
            # a whole page, or every stored request was in the window (a small store)
            if len(rows) >= filters.limit or int(stored["oldest_ns"]) >= window_since:
                return _first_of_each(rows)
    return _first_of_each(_run(store, LIST_REQUESTS, **_list_parameters(filters)))


def count_requests(store: Store, filters: RequestFilters) -> int:
    """Requests matching ``filters`` (the cursor ignored), up to LIST_COUNT_MAX + 1."""
    parameters = {**_list_parameters(filters), "cursor_id": "", "cursor_ns": 0, "limit": LIST_COUNT_MAX + 1}
    return int(_run(store, LIST_REQUESTS_COUNT, **parameters)[0]["total"])


def conversation_lineages_before(store: Store, conversation_ids: Iterable[str], before_ns: int) -> list[dict[str, Any]]:
    """The newest request started before ``before_ns`` of each lineage of the conversations (PREDECESSOR_FIELDS)."""
    ids = sorted({conversation_id for conversation_id in conversation_ids if conversation_id})
    if not ids:
        return []
    return _run(store, CONVERSATION_LINEAGES_BEFORE, conversation_ids=json.dumps(ids), before_ns=before_ns)


def genai_events_for(store: Store, keys: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """The stored contributions of the GenAI content events of the (trace_id, span_id) pairs, in time order."""
    wanted = set(keys)
    if not wanted:
        return []
    rows = _run(
        store,
        GENAI_EVENTS_FOR_REQUESTS,
        trace_ids=json.dumps(sorted({trace_id for trace_id, _ in wanted})),
        span_ids=json.dumps(sorted({span_id for _, span_id in wanted})),
        limit=GENAI_EVENTS_PER_REQUEST_MAX,
    )
    return [row for row in rows if (row["trace_id"], row["span_id"]) in wanted]


# --- the filter forms' choices (inspector index and overview) --------------------

# Distinct values only, so no FINAL: a duplicate row until the next merge adds
# nothing. Bounded to the window the form looks at, and each list capped: a
# menu of more values than this is a search box's job.
FILTER_CHOICES_MAX = 200

FILTER_CHOICES = """
SELECT
    arraySort(groupUniqArray({limit:UInt32})(toString(service))) AS services,
    arraySort(groupUniqArray({limit:UInt32})(toString(model))) AS models,
    arraySort(groupUniqArray({limit:UInt32})(toString(process_kind))) AS processes
FROM {db:Identifier}.requests
WHERE started_at >= fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
  AND started_at < fromUnixTimestamp64Nano({until_ns:Int64}, 'UTC')
"""


def filter_choices(store: Store, since_ns: int, until_ns: int) -> dict[str, list[str]]:
    """Services, models and process kinds seen in ``[since_ns, until_ns)``, sorted, empty values left out."""
    (row,) = _run(store, FILTER_CHOICES, since_ns=since_ns, until_ns=until_ns, limit=FILTER_CHOICES_MAX)
    return {"service": [value for value in row["services"] if value],
            "model": [value for value in row["models"] if value],
            "process": [value for value in row["processes"] if value]}
