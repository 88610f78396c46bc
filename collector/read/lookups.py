"""The read side's lookups: ids and filters in, request objects out.

Shared by the JSON API and the HTML inspector so both answer the same
question the same way: ``queries`` fetches rows, ``request_view`` shapes
them, and this module validates what the caller asked for and says plainly
when nothing (``NotFound``) or too much (``Ambiguous``) matched. Store
failures pass through as ``StoreError`` for the caller to report.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from typing import Any, Mapping

from ..store.base import Store
from . import content, content_cache, events, models, queries, request_view, times
from .diff import diff_requests
from .errors import Ambiguous, BadArgument, NotFound
from .lineage import lineage_key

# A span id is 16 hex digits; 4 is the shortest prefix accepted because
# shorter ones match too much to be useful in a table of thousands.
REQUEST_ID_LENGTH = 16
REQUEST_ID_PREFIX_MIN = 4
TRACE_ID_LENGTH = 32
# How far back a request's predecessor is first looked for: an agent's
# conversation mostly goes on within a day, so one read of a day or two of
# `requests` finds it; a lineage with nothing in that window costs a second read.
PREDECESSOR_WINDOW_NS = 86_400 * 1_000_000_000

_HEX = re.compile(r"[0-9a-f]+")

# Query parameters ``GET /api/requests`` accepts (models.ListParameters); anything
# else is a typo worth a 400 rather than a silently unfiltered list.
LIST_PARAMETERS = tuple(models.ListParameters.model_fields)


def normalize_request_id(text: str) -> str:
    """A span id or prefix as typed → lowercase hex, or BadArgument."""
    value = (text or "").strip().lower()
    if not _HEX.fullmatch(value):
        raise BadArgument(f"request id {text!r} must be hexadecimal (a span id or a prefix of one)")
    if len(value) < REQUEST_ID_PREFIX_MIN:
        raise BadArgument(f"request id prefix {text!r} is too short: give at least {REQUEST_ID_PREFIX_MIN} characters")
    if len(value) > REQUEST_ID_LENGTH:
        raise BadArgument(f"request id {text!r} is longer than a span id ({REQUEST_ID_LENGTH} hex characters)")
    return value


def normalize_trace_id(text: str) -> str:
    value = (text or "").strip().lower()
    if len(value) != TRACE_ID_LENGTH or not _HEX.fullmatch(value):
        raise BadArgument(f"trace id {text!r} must be {TRACE_ID_LENGTH} hexadecimal characters")
    return value


def locate_request(store: Store, text: str) -> dict[str, Any]:
    """Where the request that ``text`` (an id or prefix) names is stored — ``request_id``,
    ``started_at_ns``, ``service``, ``trace_id`` — or NotFound / Ambiguous / BadArgument.
    One read of ``request_ids`` either way: a prefix's candidates come with their location."""
    value = normalize_request_id(text)
    if len(value) == REQUEST_ID_LENGTH:
        location = queries.request_location(store, value)
        if location is None:
            raise NotFound(f"no request with id {value!r}")
        return location
    candidates = queries.request_ids_by_prefix(store, value)
    if not candidates:
        raise NotFound(f"no request id starts with {value!r}")
    if len(candidates) > 1:
        shown = [candidate["request_id"] for candidate in candidates[: queries.AMBIGUOUS_CANDIDATES_SHOWN]]
        raise Ambiguous(value, shown, more=len(candidates) > len(shown))
    return candidates[0]


def _join_logged_content(store: Store, rows: list[dict[str, Any]]) -> events.JoinedContent:
    """Complete ``rows`` (in place) with content that travelled as OTLP log
    records; the one place the read side joins them (see ``events``)."""
    return events.join_events(rows, queries.genai_events_for(store, events.event_keys(rows)))


def _assemble(store: Store, rows: list[dict[str, Any]], candidates: list[dict[str, Any]] = (), *,
              since_ns: int = queries.EARLIEST_NS, predecessors: bool = True) -> list[dict[str, Any]]:
    """Full request objects for ``rows`` (``queries.document_row``s): their blocks, tools and content
    references come with them; the text is one read of ``contents``. Each object's ``previous`` is found
    among ``candidates`` (documents of the rows' threads, read from ``since_ns``: see
    ``_predecessor_candidates``); without ``predecessors`` it is None and nothing is read to find it
    (a diff shows none)."""
    blocks_by_request = {row["request_id"]: queries.document_blocks(row) for row in rows}
    tools_by_request = {row["request_id"]: queries.inline_tools(row) for row in rows}
    references = {row["request_id"]: row["content_refs"] for row in rows if row["content_refs"]}
    # A request without tools on its row (written before migration 046, or whose tools came in a log
    # record after it) may have rows of `tools`.
    elsewhere = [row for row in rows if not queries.has_inline_tools(row)]
    for tool in queries.tools_for(store, elsewhere):
        tools_by_request[tool["request_id"]].append(tool)
    candidates = _predecessor_candidates(store, rows, candidates, since_ns) if predecessors else []
    # One read of `contents` for the blocks', the tools' and the content fields' text.
    contents = content_cache.read_through(
        store, [*(request_view.content_key(part) for parts in [*blocks_by_request.values(), *tools_by_request.values()]
                  for part in parts), *content.keys(references.values())],
        queries.contents_for)
    content.fill(rows, references, contents)
    joined = _join_logged_content(store, list({id(row): row for row in [*rows, *candidates]}.values()))
    contents.update(joined.contents)
    for request_id, blocks in joined.blocks.items():
        blocks_by_request[request_id] = [*blocks, *blocks_by_request.get(request_id, [])]
    previous = request_view.previous_requests(rows, candidates) if predecessors else {}
    return [
        request_view.request_object(
            row,
            blocks_by_request.get(row["request_id"], []),
            tools_by_request.get(row["request_id"], []),
            contents,
            previous.get(row["request_id"]),
        )
        for row in rows
    ]


def _thread(row: Mapping[str, Any]) -> str:
    """The thread a request's document is filed under: its conversation, else its trace."""
    return row["conversation_id"] or row["trace_id"]


def _predecessor_candidates(store: Store, rows: list[dict[str, Any]], documents: list[dict[str, Any]],
                            since_ns: int) -> list[dict[str, Any]]:
    """Rows among which each of ``rows`` finds its predecessor (see request_view.previous_requests).

    ``documents`` are the requests of the rows' threads read from ``since_ns`` (PREDECESSOR_WINDOW_NS
    before the earliest of them; a trace's thread whole). A request of a conversation with no earlier
    one of its lineage there gets the newest one before the window from a second read of `requests`.
    """
    candidates: list[dict[str, Any]] = list(documents)
    conversation_rows = [row for row in rows if row["conversation_id"]]
    if conversation_rows and since_ns > queries.EARLIEST_NS:
        first_seen: dict[tuple, tuple[int, str]] = {}
        for row in [*candidates, *rows]:
            order = (int(row["started_at_ns"]), row["request_id"])
            key = lineage_key(row)
            first_seen[key] = min(first_seen.get(key, order), order)
        unresolved = [row for row in conversation_rows
                      if first_seen[lineage_key(row)] >= (int(row["started_at_ns"]), row["request_id"])]
        if unresolved:
            candidates.extend(queries.conversation_lineages_before(
                store, [row["conversation_id"] for row in unresolved], since_ns))
    return candidates


def _located_document(store: Store, location: Mapping[str, Any]) -> dict[str, Any]:
    """The document of the request at ``location`` (``locate_request``): a point read in its thread."""
    row = queries.document_at(store, location)
    if row is None:
        # not in its own thread: a call merged into one stored before a later span gave it its
        # conversation id (write.duplicates.merged_into), or an id row that does not name the
        # conversation: it is in one of its trace's threads
        for found in queries.trace_threads(store, location["trace_id"]):
            if found["thread"] == _thread(location):
                continue
            row = queries.document_at(store, {**location, "conversation_id": found["thread"]})
            if row is not None:
                break
    if row is None:
        raise NotFound(f"no request with id {location['request_id']!r}")
    return row


def _thread_up_to(store: Store, row: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The documents of ``row``'s thread up to its start, and where they begin: PREDECESSOR_WINDOW_NS
    before it for a conversation, the beginning for a trace's thread (a thread of one trace)."""
    start = int(row["started_at_ns"])
    since_ns = max(queries.EARLIEST_NS, start - PREDECESSOR_WINDOW_NS) if row["conversation_id"] else queries.EARLIEST_NS
    return queries.thread_documents(store, [_thread(row)], since_ns, start, queries.CONVERSATION_MEMBERS_MAX), since_ns


def _with_candidates(store: Store, text: str) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """The document of the request ``text`` (an id or prefix) names, and its thread's documents up to it
    (``_thread_up_to``: its predecessor candidates, itself among them) with where they begin."""
    location = locate_request(store, text)
    documents, since_ns = _thread_up_to(store, location)
    row = next((found for found in documents if found["request_id"] == location["request_id"]), None)
    if row is None:  # past the cap, or not in the thread its id row names
        row = _located_document(store, location)
        if _thread(row) != _thread(location):
            documents, since_ns = _thread_up_to(store, row)
    return row, documents, since_ns


def request(store: Store, text: str) -> dict[str, Any]:
    """``GET /api/requests/{id}``: one full request object."""
    row, documents, since_ns = _with_candidates(store, text)
    return _assemble(store, [row], documents, since_ns=since_ns)[0]


def trace(store: Store, text: str) -> dict[str, Any]:
    """``GET /api/traces/{trace_id}``: every LLM request of the trace, in start order."""
    trace_id = normalize_trace_id(text)
    threads = queries.trace_threads(store, trace_id)
    if not threads:
        raise NotFound(f"no LLM requests recorded for trace {trace_id!r}")
    first_ns = min(int(found["first_ns"]) for found in threads)
    # The trace's requests and, before them, the earlier requests of their conversations (a trace's
    # own thread holds nothing before its first request).
    since_ns = max(queries.EARLIEST_NS, first_ns - PREDECESSOR_WINDOW_NS)
    documents = queries.thread_documents(store, [found["thread"] for found in threads], since_ns,
                                         max(int(found["last_ns"]) for found in threads),
                                         queries.CONVERSATION_MEMBERS_MAX + queries.TRACE_REQUESTS_MAX)
    rows = sorted((row for row in documents if row["trace_id"] == trace_id),
                  key=lambda row: (int(row["started_at_ns"]), row["request_id"]))[:queries.TRACE_REQUESTS_MAX]
    if not rows:
        raise NotFound(f"no LLM requests recorded for trace {trace_id!r}")
    return {"trace_id": trace_id, "requests": _assemble(store, rows, documents, since_ns=since_ns)}


def diff(store: Store, text_a: str, text_b: str) -> dict[str, Any]:
    """``GET /api/diff?a=&b=``: block-level diff from request a to request b.

    Without ``a``, b is compared with the request before it in its lineage
    (its ``previous``), never with a request of another lineage.
    """
    if not text_b:
        raise BadArgument("give the request to compare: ?b=ID (and ?a=ID, else b's previous request)")
    if text_a:
        row_b = _located_document(store, locate_request(store, text_b))
        row_a, chosen_as = _located_document(store, locate_request(store, text_a)), "given"
    else:
        row_b, documents, since_ns = _with_candidates(store, text_b)
        row_a, chosen_as = _previous_row(store, row_b, documents, since_ns), "previous"
        if row_a is None:
            raise NotFound(f"request {row_b['request_id']} is the first of its lineage "
                           "(conversation, service, provider, model, process): there is no previous request to compare with")
    # Both objects from one read of their text; a diff shows no predecessor.
    request_a, request_b = _assemble(store, [row_a, row_b], predecessors=False)
    return {**diff_requests(request_a, request_b), "a_chosen_as": chosen_as}


def _previous_row(store: Store, row: dict[str, Any], documents: list[dict[str, Any]],
                  since_ns: int) -> dict[str, Any] | None:
    """The document of the request before ``row`` in its lineage (its object's ``previous``), or None:
    most often one of ``documents`` (its thread's, read with it); else the newest of its lineage before
    them, a point read in its thread (a conversation's: only a conversation's lineage reaches back past
    the documents)."""
    candidates = _predecessor_candidates(store, [row], documents, since_ns)
    before = request_view.previous_requests([row], candidates).get(row["request_id"])
    if before is None:
        return None
    for found in documents:
        if found["request_id"] == before["request_id"]:
            return found
    location = {"request_id": before["request_id"], "trace_id": before["trace_id"],
                "conversation_id": row["conversation_id"], "started_at_ns": _rfc3339_ns(before["started_at"])}
    found = queries.document_at(store, location)
    # should it not be there (gone between the reads), it is looked up by id as any request is
    return found if found is not None else _located_document(store, locate_request(store, before["request_id"]))


# --- list filters --------------------------------------------------------------

def parse_filters(params: Mapping[str, str], now: int | None = None) -> queries.RequestFilters:
    """``GET /api/requests`` query parameters (``models.ListParameters``) → RequestFilters, or BadArgument."""
    given = models.parameters(models.ListParameters, {name: value.strip() for name, value in params.items()})
    # process=KIND matches a process kind or id; process=KIND:ID needs both.
    process_kind, _, process_id = given.process.partition(":")
    since_ns = times.parse_moment("since", given.since, now=now) if given.since else queries.EARLIEST_NS
    until_ns = times.parse_moment("until", given.until, now=now) if given.until else queries.LATEST_NS
    if since_ns >= until_ns:
        raise BadArgument("since must be earlier than until")
    cursor_ns, cursor_id = parse_cursor(given.cursor) if given.cursor else (0, "")
    return queries.RequestFilters(
        service=given.service,
        model=given.model,
        conversation=given.conversation,
        message_id=given.message_id,
        process_kind=process_kind,
        process_id=process_id,
        run_id=given.run_id,
        since_ns=since_ns,
        until_ns=until_ns,
        limit=given.limit,
        cursor_ns=cursor_ns,
        cursor_id=cursor_id,
    )


_CURSOR = re.compile(r"(\d{1,19})-([0-9a-f]{1,32})")


def cursor_of(row: Mapping[str, Any]) -> str:
    """The cursor that continues a list after ``row``: its start (Unix ns) and request id."""
    return f"{int(row['started_at_ns'])}-{row['request_id']}"


def parse_cursor(text: str) -> tuple[int, str]:
    match = _CURSOR.fullmatch(text.strip().lower())
    if not match:
        raise BadArgument(f"cursor={text!r}: pass back the next_cursor of the previous page")
    return int(match.group(1)), match.group(2)


def list_summaries(store: Store, params: Mapping[str, str]) -> dict[str, Any]:
    """``GET /api/requests``: summaries, newest first, a page at a time (keyset on started_at, request_id).

    ``next_cursor`` continues the list (None on the last page); ``total`` counts
    every match, exactly up to queries.LIST_COUNT_MAX (``total_exact`` false past it).
    """
    filters = parse_filters(params)
    rows = queries.list_requests(store, dataclasses.replace(filters, limit=filters.limit + 1))
    page, more = rows[:filters.limit], len(rows) > filters.limit
    _join_logged_content(store, page)
    total = queries.count_requests(store, filters)
    return {
        "requests": [request_view.summary(row) for row in page],
        "next_cursor": cursor_of(page[-1]) if more else None,
        "total": min(total, queries.LIST_COUNT_MAX),
        "total_exact": total <= queries.LIST_COUNT_MAX,
    }


def filter_choices(store: Store, since_ns: int, until_ns: int) -> dict[str, list[str]]:
    """The values a filter form offers: services, models and process kinds seen in the window."""
    return queries.filter_choices(store, since_ns, until_ns)


def layer_bars(store: Store, summaries: list[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each listed request's blocks (index, name, layer, size) for its prompt bar, by request id; no text is read."""
    keys = [{"request_id": item["request_id"], "trace_id": item["trace_id"],
             "conversation_id": item["conversation_id"], "started_at_ns": _rfc3339_ns(item["started_at"])}
            for item in summaries if item["prompt"]["mapped"]]
    return queries.block_bars(store, keys)


def _rfc3339_ns(text: str) -> int:
    """``request_view.rfc3339`` read back: '2026-03-02T10:00:00.123456789Z' → Unix ns."""
    seconds, _, fraction = text.rstrip("Z").partition(".")
    moment = datetime.datetime.fromisoformat(seconds).replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp()) * 1_000_000_000 + int((fraction + "000000000")[:9])
