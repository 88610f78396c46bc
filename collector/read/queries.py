"""Named SQL for the read side (API, inspector, CLI) and the calls that run it.

Every value is a bound parameter in ClickHouse's ``{name:Type}`` syntax, the
database included (``{db:Identifier}``). Lists travel as one JSON string
parameter decoded by ``JSONExtract``: the embedded store binds parameters as
text and cannot bind a Python list, and a JSON string binds the same way on
both stores. The same SQL runs on the embedded and the server store.

Tables are ReplacingMergeTree (a resent batch collapses into one row when
parts merge) and no read here uses ``FINAL``: FINAL reads every part of the
table it names and turns off the bloom filters, so a lookup would cost as
much as a scan. Each query instead reads by key (``request_ids`` gives a
request's sorting key, see migration 020) or by bloom filter, and drops a
not-yet-merged copy itself: ``LIMIT 1 BY`` the row's identity, or in Python
for the list (``LIMIT 1 BY`` there would stop ClickHouse from reading in
order and stopping after a page). Of two copies of a request the one with
more ``merged_span_ids`` is read: a record a later export folded another
span of its call into (write/calls.py) replaces the row stored first, and
that is the row that survives the merge (the last inserted).

The functions here only fetch rows; turning rows into request objects is
``request_view``'s job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from ..record import CONTENT_KEY_BYTES, REQUEST_COLUMNS, REQUEST_TOOL_COLUMNS, Column
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
# (a full request's row carries its tool definitions too: REQUEST_TOOL_COLUMNS, ``request_parts``)
_REQUEST_COLUMNS = _select_list(REQUEST_COLUMNS + REQUEST_TOOL_COLUMNS) + ",\n    toString(toDate(started_at)) AS day"
# What a predecessor candidate needs: its lineage (lineage.COLUMNS), what
# ``request_view.previous_requests`` shows of it, and what ``events`` needs to
# give an unmapped one its prompt size. A third of the summary's columns: a
# query's cost grows with the columns it reads, even for a few rows.
PREDECESSOR_FIELDS = frozenset({*LINEAGE_COLUMNS, "request_id", "started_at_ns", "prompt_bytes", "prompt_sha256",
                                "bytes_total", "mapped", "block_count"})
_PREDECESSOR_COLUMNS = _select_list(column for column in REQUEST_COLUMNS if column.key in PREDECESSOR_FIELDS)

# Where a request is stored, by its full id: the sorting key of its rows.
REQUEST_LOCATION = """
SELECT request_id, toUnixTimestamp64Nano(started_at) AS started_at_ns, service, trace_id
FROM {db:Identifier}.request_ids
WHERE request_id = {request_id:String}
ORDER BY started_at
LIMIT 1
"""

# One request by its sorting key (service, hour, trace, id): a point read.
REQUEST_AT = f"""
SELECT {_REQUEST_COLUMNS}
FROM {{db:Identifier}}.requests
WHERE service = {{service:String}}
  AND toStartOfHour(started_at) = toStartOfHour(fromUnixTimestamp64Nano({{started_at_ns:Int64}}, 'UTC'))
  AND trace_id = {{trace_id:String}}
  AND request_id = {{request_id:String}}
  AND started_at = fromUnixTimestamp64Nano({{started_at_ns:Int64}}, 'UTC')
ORDER BY length(merged_span_ids) DESC
LIMIT 1
"""

# startsWith with a bound argument: the prefix is literal text, so `%` or `_`
# can never act as a wildcard the way they would in LIKE. On the id table's
# sorting key it reads one granule per day partition. Each id comes with its
# location (as REQUEST_LOCATION gives it), so a prefix naming one request
# costs no second read of the id table.
REQUEST_IDS_BY_PREFIX = """
SELECT request_id, toUnixTimestamp64Nano(started_at) AS started_at_ns, service, trace_id
FROM {db:Identifier}.request_ids
WHERE startsWith(request_id, {prefix:String})
ORDER BY request_id, started_at
LIMIT 1 BY request_id
LIMIT {limit:UInt32}
"""

# When a trace's spans started: the exporter's trace-id lookup table (filled
# by a view on otel_traces). Whole seconds; no row when no span of the trace
# is stored there.
TRACE_TIME_RANGE = """
SELECT toInt64(toUnixTimestamp(min(Start))) AS first_second, toInt64(toUnixTimestamp(max(End))) AS last_second
FROM {db:Identifier}.otel_traces_trace_id_ts
WHERE TraceId = {trace_id:String}
GROUP BY TraceId
"""

# A trace's requests: the time range prunes partitions and, through the hour
# in the sorting key, granules; the bloom filter on trace_id skips the rest.
REQUESTS_BY_TRACE = f"""
SELECT {_REQUEST_COLUMNS}
FROM {{db:Identifier}}.requests
WHERE trace_id = {{trace_id:String}}
  AND started_at >= fromUnixTimestamp64Nano({{since_ns:Int64}}, 'UTC')
  AND started_at <= fromUnixTimestamp64Nano({{until_ns:Int64}}, 'UTC')
ORDER BY started_at, request_id, length(merged_span_ids) DESC
LIMIT 1 BY request_id
LIMIT {{limit:UInt32}}
"""

# A trace's requests as predecessor candidates (requests without a conversation).
TRACE_MEMBERS = f"""
SELECT {_PREDECESSOR_COLUMNS}
FROM {{db:Identifier}}.requests
WHERE trace_id = {{trace_id:String}}
ORDER BY started_at, request_id, length(merged_span_ids) DESC
LIMIT 1 BY request_id
LIMIT {{limit:UInt32}}
"""

# Blocks and tools of some requests, by the sorting key's leading columns
# (service, hour of the start) and the id: the caller knows all three from
# the requests' rows, so the read touches only the granules of those hours.
# content_sha256 and redacted: see migration 005 (request_view.content_key
# falls back to sha256 for rows written before it).
BLOCKS_FOR_REQUESTS = """
SELECT request_id, toString(toDate(started_at)) AS day,
       `index`, name, layer, stability, source, start, `end`, size, sha256, content_sha256, redacted
FROM {db:Identifier}.blocks
WHERE service IN JSONExtract({services:String}, 'Array(String)')
  AND started_at >= fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
  AND started_at <= fromUnixTimestamp64Nano({until_ns:Int64}, 'UTC')
  AND request_id IN JSONExtract({request_ids:String}, 'Array(String)')
ORDER BY request_id, `index`
LIMIT 1 BY request_id, `index`
"""

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

# Both in one statement for a request's full object: a query costs ClickHouse
# several milliseconds of CPU before it reads a row, so one read of two
# tables is cheaper than two (1 M requests: ~21 against ~26 ms). A tool row
# carries empty block columns, dropped by ``blocks_and_tools_for``.
_KEYED_BY_REQUEST = """
WHERE service IN JSONExtract({services:String}, 'Array(String)')
  AND started_at >= fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
  AND started_at <= fromUnixTimestamp64Nano({until_ns:Int64}, 'UTC')
  AND request_id IN JSONExtract({request_ids:String}, 'Array(String)')
ORDER BY request_id, `index`
LIMIT 1 BY request_id, `index`"""
_BLOCK_ONLY_COLUMNS = ("layer", "stability", "source", "start", "end")
# The block rows alone in that layout: a request's tools are on its row
# (migration 046), and `tools` is read only when one of the requests has
# none there (a row written before 046, tools that came in log records).
BLOCKS_AS_PARTS = f"""
SELECT 'block' AS part, request_id, toString(toDate(started_at)) AS day, `index`, toString(name) AS name,
       toString(layer) AS layer, toString(stability) AS stability, toString(source) AS source,
       toUInt64(start) AS start, toUInt64(`end`) AS `end`, size, sha256, content_sha256, redacted
FROM {{db:Identifier}}.blocks{_KEYED_BY_REQUEST}
"""
BLOCKS_AND_TOOLS_FOR_REQUESTS = f"""
SELECT * FROM ({BLOCKS_AS_PARTS})
UNION ALL
SELECT * FROM (
    SELECT 'tool' AS part, request_id, toString(toDate(started_at)) AS day, `index`, toString(name) AS name,
           '' AS layer, '' AS stability, '' AS source, toUInt64(0) AS start, toUInt64(0) AS `end`,
           size, sha256, content_sha256, redacted
    FROM {{db:Identifier}}.tools{_KEYED_BY_REQUEST}
)
"""

# The content item keys of some requests (read.content joins the texts back),
# by request_content's sorting key: thread (conversation id, else trace id) and start.
# A row's references are one JSON object, `content_refs` (migration 047: one
# column read instead of twenty), each key as the 32 hex characters of the
# digest's first 16 bytes; ``references`` unpacks it.
CONTENT_REFERENCES = """
SELECT request_id, toString(toDate(started_at)) AS content_day, content_refs
FROM {db:Identifier}.request_content
WHERE thread IN JSONExtract({threads:String}, 'Array(String)')
  AND started_at >= fromUnixTimestamp64Nano({since_ns:Int64}, 'UTC')
  AND started_at <= fromUnixTimestamp64Nano({until_ns:Int64}, 'UTC')
  AND request_id IN JSONExtract({request_ids:String}, 'Array(String)')
LIMIT 1 BY request_id
"""


def references(row: Mapping[str, Any]) -> dict[str, Any]:
    """A CONTENT_REFERENCES row as ``read.content`` takes it: request_id, content_day and each
    content field's columns (``record.content_columns``) from its ``content_refs``."""
    return {**json.loads(row["content_refs"]), "request_id": row["request_id"], "content_day": row["content_day"]}


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

# The requests of some conversations in a time window, newest first: each
# request's predecessor (for growth) is found among them. The bloom filter
# on conversation_id skips every other granule, the window the other days.
def _conversation_members(since: str, until: str, columns: str = _PREDECESSOR_COLUMNS) -> str:
    return f"""
SELECT {columns}
FROM {{db:Identifier}}.requests
WHERE conversation_id IN JSONExtract({{conversation_ids:String}}, 'Array(String)')
  AND started_at >= fromUnixTimestamp64Nano({{{since}:Int64}}, 'UTC')
  AND started_at <= fromUnixTimestamp64Nano({{{until}:Int64}}, 'UTC')
ORDER BY started_at DESC, request_id DESC, length(merged_span_ids) DESC
LIMIT 1 BY request_id
LIMIT {{limit:UInt32}}
"""


CONVERSATION_MEMBERS = _conversation_members("since_ns", "until_ns")
# The same requests as whole rows (REQUEST_AT's columns): for a diff, whose a is usually one of them, so
# that a is not read again (one read of 61 columns costs less than 14 columns and then a point read).
CONVERSATION_MEMBER_ROWS = _conversation_members("since_ns", "until_ns", _REQUEST_COLUMNS)

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

# Everything a request object needs besides its own row and the text, in one
# statement: its blocks and tools, its content references and, for a request
# of a conversation, the conversation's earlier requests among which its
# predecessor is (``request_parts``). They are independent of each other once
# the request rows are known, and a statement costs ClickHouse milliseconds of
# CPU before it reads a row (1 M requests: ~56 against ~69 ms as three). Each
# branch keeps its own columns: a row comes back as its JSONEachRow text
# (formatRowNoNewline, the same values as a query of that branch alone) under
# the branch's kind.
def _branch(kind: str, sql: str) -> str:
    return f"SELECT '{kind}' AS kind, formatRowNoNewline('JSONEachRow', *) AS row FROM ({sql})"


def _request_parts(tools: bool, members: bool) -> str:
    branches = [_branch("part", BLOCKS_AND_TOOLS_FOR_REQUESTS if tools else BLOCKS_AS_PARTS),
                _branch("content", CONTENT_REFERENCES)]
    if members:
        branches.append(_branch("member", _conversation_members("members_since_ns", "members_until_ns")))
    return "\nUNION ALL\n".join(branches)


# By (tools from `tools`, conversation members): the four forms of the statement.
REQUEST_PARTS_SQL = {(tools, members): _request_parts(tools, members) for tools in (False, True) for members in (False, True)}


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


@dataclass(frozen=True)
class RequestParts:
    """What ``request_parts`` read: as ``blocks_and_tools_for``, ``content_references`` and ``conversation_members`` give it."""

    blocks: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    references: dict[str, dict[str, Any]]
    members: list[dict[str, Any]]


def request_parts(store: Store, rows: Iterable[dict[str, Any]], conversation_ids: Iterable[str] = (),
                  members_since_ns: int = 0, members_until_ns: int = MAX_MOMENT_NS) -> RequestParts:
    """``blocks_and_tools_for(rows)``, ``content_references(rows)`` and, when ``conversation_ids`` are given,
    ``conversation_members(conversation_ids, members_until_ns, members_since_ns)``, from one query.

    A row read with REQUEST_COLUMNS' tool arrays (migration 046) that holds its tools gives them itself
    (``inline_tools``); `tools` is read only when some row does not."""
    rows = list(rows)
    if not rows:
        return RequestParts([], [], {}, conversation_members(store, conversation_ids, members_until_ns, members_since_ns))
    ids = sorted({conversation_id for conversation_id in conversation_ids if conversation_id})
    starts = [int(row["started_at_ns"]) for row in rows]
    parameters = dict(request_ids=json.dumps(sorted({row["request_id"] for row in rows})),
                      services=json.dumps(sorted({row["service"] for row in rows})),
                      threads=json.dumps(sorted({row["conversation_id"] or row["trace_id"] for row in rows})),
                      since_ns=min(starts), until_ns=max(starts))
    if ids:
        parameters.update(conversation_ids=json.dumps(ids), members_since_ns=members_since_ns,
                          members_until_ns=members_until_ns, limit=CONVERSATION_MEMBERS_MAX)
    inline = {row["request_id"]: inline_tools(row) for row in rows if has_inline_tools(row)}
    found: dict[str, list[dict[str, Any]]] = {"part": [], "content": [], "member": []}
    sql = REQUEST_PARTS_SQL[len(inline) < len({row["request_id"] for row in rows}), bool(ids)]
    for row in _run(store, sql, **parameters):
        found[row["kind"]].append(json.loads(row["row"]))
    blocks, tools = _split_parts(found["part"], {row["request_id"] for row in rows})
    # A row's own tools win over rows of `tools` for the same request (those came from log records).
    tools = sorted([*(tool for tool in tools if tool["request_id"] not in inline),
                    *(tool for request_tools in inline.values() for tool in request_tools)],
                   key=lambda tool: (tool["request_id"], int(tool["index"])))
    # UNION ALL keeps no order: the members newest first, as CONVERSATION_MEMBERS gives them
    members = sorted(found["member"], key=lambda row: (int(row["started_at_ns"]), row["request_id"]), reverse=True)
    return RequestParts(blocks, tools, {row["request_id"]: references(row) for row in found["content"]}, members)


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


def request_at(store: Store, location: Mapping[str, Any]) -> dict[str, Any] | None:
    """The full row of the request at ``location`` (``request_location``, ``request_ids_by_prefix``): a point read."""
    rows = _run(store, REQUEST_AT, service=location["service"], started_at_ns=int(location["started_at_ns"]),
                trace_id=location["trace_id"], request_id=location["request_id"])
    return rows[0] if rows else None


def request_by_id(store: Store, request_id: str) -> dict[str, Any] | None:
    """The full row of one request: where it is (``request_ids``), then a point read there."""
    location = request_location(store, request_id)
    return request_at(store, location) if location else None


def request_ids_by_prefix(store: Store, prefix: str) -> list[dict[str, Any]]:
    """Up to AMBIGUOUS_CANDIDATES_SHOWN + 1 requests whose id starts with ``prefix``, each with its location."""
    return _run(store, REQUEST_IDS_BY_PREFIX, prefix=prefix, limit=AMBIGUOUS_CANDIDATES_SHOWN + 1)


def _trace_window(store: Store, trace_id: str) -> tuple[int, int]:
    """Unix ns bounds of a trace's span starts; everything when the lookup table does not know it."""
    found = _run(store, TRACE_TIME_RANGE, trace_id=trace_id)
    if not found:
        return EARLIEST_NS, LATEST_NS
    return int(found[0]["first_second"]) * 1_000_000_000, (int(found[0]["last_second"]) + 1) * 1_000_000_000


def requests_by_trace(store: Store, trace_id: str) -> list[dict[str, Any]]:
    since_ns, until_ns = _trace_window(store, trace_id)
    rows = _run(store, REQUESTS_BY_TRACE, trace_id=trace_id, since_ns=since_ns, until_ns=until_ns,
                limit=TRACE_REQUESTS_MAX)
    if not rows and (since_ns, until_ns) != (EARLIEST_NS, LATEST_NS):
        # the request rows and the spans' lookup rows disagree (written apart): look everywhere
        rows = _run(store, REQUESTS_BY_TRACE, trace_id=trace_id, since_ns=EARLIEST_NS, until_ns=LATEST_NS,
                    limit=TRACE_REQUESTS_MAX)
    return rows


def trace_members(store: Store, trace_id: str) -> list[dict[str, Any]]:
    """A trace's requests, with the columns of a predecessor candidate (PREDECESSOR_FIELDS)."""
    return _run(store, TRACE_MEMBERS, trace_id=trace_id, limit=TRACE_REQUESTS_MAX)


def _by_request_key(store: Store, sql: str, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of ``blocks`` or ``tools`` for the requests of ``rows`` (each with request_id, service, started_at_ns)."""
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


def blocks_for(store: Store, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return _by_request_key(store, BLOCKS_FOR_REQUESTS, rows)


def tools_for(store: Store, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return _by_request_key(store, TOOLS_FOR_REQUESTS, rows)


def blocks_and_tools_for(store: Store, rows: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``blocks_for`` and ``tools_for`` of ``rows`` from one query, each in (request_id, index) order."""
    rows = list(rows)
    return _split_parts(_by_request_key(store, BLOCKS_AND_TOOLS_FOR_REQUESTS, rows), {row["request_id"] for row in rows})


def _split_parts(found: list[dict[str, Any]], wanted: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """BLOCKS_AND_TOOLS_FOR_REQUESTS rows of the requests ``wanted`` → blocks and tools, each in (request_id, index) order."""
    blocks, tools = [], []
    # The IN lists select a cross product of services and ids: keep the requests asked for.
    for row in (row for row in found if row["request_id"] in wanted):
        if row.pop("part") == "block":
            blocks.append(row)
        else:
            for name in _BLOCK_ONLY_COLUMNS:
                del row[name]
            tools.append(row)
    order = lambda row: (row["request_id"], int(row["index"]))  # noqa: E731
    return sorted(blocks, key=order), sorted(tools, key=order)


def content_references(store: Store, rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ``request_content`` row of each of ``rows`` that has captured content, by request id."""
    rows = list(rows)
    if not rows:
        return {}
    starts = [int(row["started_at_ns"]) for row in rows]
    found = _run(store, CONTENT_REFERENCES,
                 threads=json.dumps(sorted({row["conversation_id"] or row["trace_id"] for row in rows})),
                 request_ids=json.dumps(sorted({row["request_id"] for row in rows})),
                 since_ns=min(starts), until_ns=max(starts))
    return {row["request_id"]: references(row) for row in found}


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


def conversation_members(store: Store, conversation_ids: Iterable[str], until_ns: int,
                         since_ns: int = EARLIEST_NS, *, whole_rows: bool = False) -> list[dict[str, Any]]:
    """Requests of the conversations started in [since_ns, until_ns], newest first (PREDECESSOR_FIELDS;
    ``whole_rows``: every column, as ``request_at`` gives a row)."""
    ids = sorted({conversation_id for conversation_id in conversation_ids if conversation_id})
    if not ids:
        return []
    return _run(
        store,
        CONVERSATION_MEMBER_ROWS if whole_rows else CONVERSATION_MEMBERS,
        conversation_ids=json.dumps(ids),
        since_ns=since_ns,
        until_ns=until_ns,
        limit=CONVERSATION_MEMBERS_MAX,
    )


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
