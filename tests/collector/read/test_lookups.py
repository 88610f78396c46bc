"""The read side's lookups read little: content once per store, predecessors from a window, a list page from the newest day.

Each test holds the answer of the lean read against what the rows say, on a
real chdb store, and counts the queries that reach it through a wrapper of
that store (no mock of ClickHouse).
"""

from __future__ import annotations

import copy
import uuid

import pytest

from promptprism.collector.read import content_cache, lookups, queries

from .. import read_side_data as data

pytestmark = pytest.mark.clickhouse

DAY_MS = 86_400_000


class Counting:
    """A store that records the SQL of every query it passes on."""

    def __init__(self, store):
        self._store = store
        self.statements: list[str] = []

    def query(self, sql, params=None, **settings):
        self.statements.append(sql)
        return self._store.query(sql, params, **settings)

    def __getattr__(self, name):
        return getattr(self._store, name)

    def count(self, sql: str) -> int:
        return sum(statement == sql for statement in self.statements)


def test_content_is_read_once_per_store_and_never_shown_from_another(store, second_store):
    data.write(store, data.scenario())
    counting = Counting(store)
    first = lookups.request(counting, data.SECOND)
    assert counting.count(queries.CONTENTS_BY_KEY) == 1
    assert first["prompt"]["content_captured"] and first["tools"][0]["content"]
    again = lookups.request(counting, data.SECOND)
    assert again == first
    assert counting.count(queries.CONTENTS_BY_KEY) == 1  # every text came from the cache
    assert len(content_cache.cache_of(counting)) > 0

    # The same requests in another database, content not captured: the first store's text never shows there.
    uncaptured = [data.build_record(trace_id=data.AGENT_TRACE, request_id=data.SECOND,
                                    parts=data.agent_parts("User prefers short answers. 🎯\n",
                                                           "Doc: the calendar has two meetings.\n"),
                                    capture=False)]
    data.write(second_store, uncaptured)
    answer = lookups.request(Counting(second_store), data.SECOND)
    assert answer["prompt"]["content_captured"] is False
    assert all(block["content"] is None for block in answer["prompt"]["blocks"])


def test_cache_keeps_only_what_fits_and_drops_the_least_recently_used():
    cache = content_cache.ContentCache(limit=10)
    cache.put_many({("2026-01-01", "a"): "12345", ("2026-01-01", "b"): "6789"})
    assert cache.get_many([("2026-01-01", "a")]) == {("2026-01-01", "a"): "12345"}  # a is now the newest
    cache.put_many({("2026-01-01", "c"): "xyz"})
    assert set(cache.get_many([("2026-01-01", key) for key in "abc"])) == {("2026-01-01", "a"), ("2026-01-01", "c")}
    assert cache.size == 8
    cache.put_many({("2026-01-01", "d"): "far too long"})
    assert cache.get_many([("2026-01-01", "d")]) == {}


def _conversation_record(request_id: str, offset_ms: int, model: str = "gpt-test", trace: str | None = None):
    return data.build_record(
        trace_id=trace or uuid.uuid4().hex, request_id=request_id, started_offset_ms=offset_ms, model=model,
        conversation_id="conversation-far", parts=data.agent_parts(f"memory {request_id}\n", "knowledge\n"))


def test_a_predecessor_days_back_is_found_past_another_lineage_in_the_window(store):
    old = _conversation_record("d0000000000000a1", -3 * DAY_MS)
    other_model = _conversation_record("d0000000000000b2", -60_000, model="gpt-other")
    latest = _conversation_record("d0000000000000a3", 0)
    data.write(store, [old, other_model, latest])
    counting = Counting(store)
    answer = lookups.request(counting, latest.request_id)
    assert answer["previous"]["request_id"] == old.request_id
    assert answer["previous"]["prompt_bytes_delta"] == latest.prompt_bytes - old.prompt_bytes
    # the window held another lineage only, so the request before the window was read too
    assert counting.count(queries.CONVERSATION_LINEAGES_BEFORE) == 1
    assert lookups.request(store, other_model.request_id)["previous"] is None
    trace = lookups.trace(store, latest.trace_id)
    assert trace["requests"][0]["previous"]["request_id"] == old.request_id


def test_a_predecessor_within_the_window_needs_no_second_read(store):
    records = [_conversation_record("e0000000000000a1", -3 * DAY_MS), _conversation_record("e0000000000000a2", -3_600_000),
               _conversation_record("e0000000000000a3", 0)]
    data.write(store, records)
    counting = Counting(store)
    assert lookups.request(counting, records[2].request_id)["previous"]["request_id"] == records[1].request_id
    assert counting.count(queries.CONVERSATION_LINEAGES_BEFORE) == 0
    assert lookups.request(counting, records[1].request_id)["previous"]["request_id"] == records[0].request_id


def test_a_list_page_comes_from_the_newest_day_or_from_every_day(store):
    recent = [_conversation_record(f"f00000000000000{index}", -index * 60_000) for index in range(3)]
    older = [_conversation_record(f"f00000000000001{index}", -3 * DAY_MS - index * 60_000) for index in range(4)]
    data.write(store, [*recent, *older])
    newest_first = [record.request_id for record in [*recent, *older]]

    def pages(limit: int) -> list[str]:
        seen, cursor = [], None
        while True:
            params = {"limit": str(limit), **({"cursor": cursor} if cursor else {})}
            answer = lookups.list_summaries(store, params)
            assert answer["total"] == 7 and answer["total_exact"]
            seen += [item["request_id"] for item in answer["requests"]]
            cursor = answer["next_cursor"]
            if cursor is None:
                return seen

    assert pages(2) == newest_first  # the first page from the newest day, the rest from every day
    assert pages(5) == newest_first
    assert pages(50) == newest_first
    service = lookups.list_summaries(store, {"limit": "3", "service": "assistant"})
    assert [item["request_id"] for item in service["requests"]] == newest_first[:3]
    until = lookups.list_summaries(store, {"limit": "2", "until": str((data.BASE_NS // 1_000_000_000) - 86_400)})
    assert [item["request_id"] for item in until["requests"]] == newest_first[3:5]


def test_a_list_page_drops_a_copy_not_merged_yet(store):
    record = _conversation_record("f0000000000000c1", 0)
    data.write(store, [record])
    replacement = copy.deepcopy(record)
    replacement.merged_span_ids = ["f0000000000000c2"]  # the same call's second span, folded in by a later export
    data.write(store, [replacement])
    assert len(store.query(f"SELECT 1 FROM {store.database}.requests")) == 2  # not merged yet
    answer = lookups.list_summaries(store, {"limit": "5"})
    assert [item["request_id"] for item in answer["requests"]] == [record.request_id]


def test_a_prefix_is_one_read_of_the_id_table(store):
    data.write(store, data.scenario())
    counting = Counting(store)
    assert lookups.request(counting, data.UNMAPPED[:6])["request_id"] == data.UNMAPPED
    assert counting.count(queries.REQUEST_IDS_BY_PREFIX) == 1 and counting.count(queries.REQUEST_LOCATION) == 0
    with pytest.raises(lookups.Ambiguous) as raised:
        lookups.request(counting, data.FIRST[:8])
    assert set(raised.value.candidates) >= {data.FIRST, data.SECOND, data.THIRD}


def test_a_diff_with_one_id_reads_the_previous_request_where_b_says_it_is(store):
    data.write(store, data.scenario())
    counting = Counting(store)
    answer = lookups.diff(counting, "", data.SECOND)
    assert answer["a_chosen_as"] == "previous" and answer["a"]["request_id"] == data.FIRST
    # b from the id table, then its thread's documents up to it: b and, among them, a (not read again);
    # both requests' text in one read
    assert counting.count(queries.REQUEST_LOCATION) == counting.count(queries.THREAD_DOCUMENTS) == 1
    assert counting.count(queries.DOCUMENT_AT) == 0 and counting.count(queries.CONTENTS_BY_KEY) == 1
    assert len(counting.statements) == 3
    counting = Counting(store)  # a store of its own: its content cache starts empty
    given = lookups.diff(counting, data.FIRST, data.SECOND)
    assert {**answer, "a_chosen_as": "given"} == given
    assert counting.count(queries.REQUEST_LOCATION) == counting.count(queries.DOCUMENT_AT) == 2
    assert counting.count(queries.CONTENTS_BY_KEY) == 1
    # no predecessor is looked for when a is given
    assert len(counting.statements) == 5


class MissingRowOnce(Counting):
    """The store, with the first point read of ``request_id`` answered with no row (a row gone between reads)."""

    def __init__(self, store, request_id: str):
        super().__init__(store)
        self.missing = request_id

    def query(self, sql, params=None, **settings):
        if sql == queries.DOCUMENT_AT and params["request_id"] == self.missing:
            self.missing = ""
            self.statements.append(sql)
            return []
        return super().query(sql, params, **settings)


def test_a_previous_request_before_the_window_is_read_where_its_candidate_row_says(store):
    old, latest = _conversation_record("c0000000000000a1", -3 * DAY_MS), _conversation_record("c0000000000000a2", 0)
    data.write(store, [old, latest])
    counting = Counting(store)
    answer = lookups.diff(counting, "", latest.request_id)
    assert answer["a"]["request_id"] == old.request_id
    assert answer == {**lookups.diff(store, old.request_id, latest.request_id), "a_chosen_as": "previous"}
    # a is the newest of its lineage before the window (14 columns): then one point read, no id lookup
    assert counting.count(queries.CONVERSATION_LINEAGES_BEFORE) == 1
    assert counting.count(queries.REQUEST_LOCATION) == 1 and counting.count(queries.DOCUMENT_AT) == 1

    # should the row not be where its candidate says, a is looked up by id as any request is
    withheld = MissingRowOnce(store, old.request_id)
    assert lookups.diff(withheld, "", latest.request_id) == answer
    assert withheld.count(queries.REQUEST_LOCATION) == 2  # b's, then a's after the point read found nothing


def test_a_trace_is_read_as_its_threads_documents_in_one_statement(store):
    records = data.scenario()
    data.write(store, records)
    for record in records:
        document = queries.document_at(store, {
            "conversation_id": record.conversation_id, "trace_id": record.trace_id,
            "started_at_ns": record.started_at_ns, "request_id": record.request_id})
        # a document holds its request's row, its blocks and its tools
        assert (document["service"], document["prompt_bytes"], document["conversation_id"]) == (
            record.service, record.prompt_bytes, record.conversation_id)
        assert [(block["index"], block["name"], block["start"], block["end"], block["sha256"])
                for block in queries.document_blocks(document)] == [
            (block.index, block.name, block.start, block.end, block.sha256) for block in record.blocks]
        assert [(tool["name"], tool["sha256"]) for tool in queries.inline_tools(document)] == [
            (tool.name, tool.sha256) for tool in record.tools]
    counting = Counting(store)
    answer = lookups.trace(counting, data.AGENT_TRACE)
    assert [item["request_id"] for item in answer["requests"]] == [
        record.request_id for record in sorted(records, key=lambda record: (record.started_at_ns, record.request_id))
        if record.trace_id == data.AGENT_TRACE]
    # the trace's threads, their documents (the requests and their predecessors), the text; and, as the
    # conversation's first request has no earlier one in the window, the newest before it of its lineage.
    # Every request of the trace holds its tools, so `tools` is not read.
    assert counting.statements == [queries.TRACE_THREADS, queries.THREAD_DOCUMENTS,
                                   queries.CONVERSATION_LINEAGES_BEFORE, queries.CONTENTS_BY_KEY]


def test_a_list_of_a_store_younger_than_a_day_is_one_read(store):
    records = [_conversation_record(f"f00000000000002{index}", -index * 60_000) for index in range(3)]
    data.write(store, records)
    counting = Counting(store)
    answer = lookups.list_summaries(counting, {"limit": "50"})
    assert [item["request_id"] for item in answer["requests"]] == [record.request_id for record in records]
    assert counting.count(queries.LIST_REQUESTS) == 1
    data.write(store, [_conversation_record("f0000000000000d1", -2 * DAY_MS)])  # now the window is not everything
    counting.statements.clear()
    assert len(lookups.list_summaries(counting, {"limit": "50"})["requests"]) == 4
    assert counting.count(queries.LIST_REQUESTS) == 2
