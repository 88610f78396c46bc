"""A request's tools with the request itself (migration 046: on its `requests`
row; since migration 051 only in its document, `request_docs`).

A store written before the migration (tools as rows of `tools`) shows every
request's tools as before after it, alone and in a trace beside requests
written since; what is written now keeps a request's tools in its document and
none in `tools`, so a trace of such requests is answered without reading
`tools`; tools that came in log records for a request whose document has none
are still shown from `tools`, and a document's own tools win over such rows.
"""

from __future__ import annotations

import dataclasses

import pytest

from promptprism.collector.read import lookups, queries
from promptprism.collector.store.migrations import migrate
from promptprism.collector.write.rows import build_tables, tools_table

from .. import read_side_data as data
from ..read.test_lookups import Counting
from .older_schema import (
    current_store,
    documents_unfolded,
    inputs_of,
    requests_whole,
    stored_columns,
    store_before,
    tools_in_their_table,
    write_as_of,
)

pytestmark = pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)


def tools_reads(counting: Counting) -> int:
    """How many times the store was asked for rows of `tools`."""
    return counting.count(queries.TOOLS_FOR_REQUESTS)


def shown_tools(answer: dict) -> list[tuple]:
    return [(tool["index"], tool["name"], tool["size"], tool["sha256"], tool["content"], tool["redacted"])
            for tool in answer["tools"]]


def sent_tools(record) -> list[tuple]:
    return [(tool.index, tool.name, tool.size, tool.sha256, tool.content, tool.redacted) for tool in record.tools]


def stored_tool_rows(store) -> int:
    return int(store.query("SELECT count() AS n FROM {db:Identifier}.tools", {"db": store.database})[0]["n"])


@pytest.fixture
def store_before_046(schema_before):
    records = data.scenario()
    with store_before(schema_before, 46, records) as store:  # tools as rows of `tools`
        yield store, records


def test_a_store_written_before_the_migration_shows_every_tool_after_it(store_before_046, migrated_database):
    store, records = store_before_046
    assert "tool_names" not in stored_columns(store, "requests")
    assert stored_tool_rows(store) == sum(len(record.tools) for record in records) == 7
    assert "046_request_tools.sql" in migrate(store)
    with current_store(migrated_database, records) as reference:
        expected = [lookups.request(reference, record.request_id) for record in records]
        expected_trace = lookups.trace(reference, data.AGENT_TRACE)
    assert [lookups.request(store, record.request_id) for record in records] == expected
    counting = Counting(store)
    assert lookups.trace(counting, data.AGENT_TRACE) == expected_trace
    assert tools_reads(counting) == 1  # the old rows' arrays are empty: `tools` is read
    assert all(shown_tools(answer) == sent_tools(record) for answer, record in zip(expected, records))
    assert any(answer["tools"] for answer in expected)


def test_requests_written_after_it_keep_their_tools_in_their_document(store_before_046):
    store, records = store_before_046
    migrate(store)
    later = dataclasses.replace(records[2], request_id="a1b2c3d4e5f60009", started_at_ns=records[2].started_at_ns + 10**9)
    write_as_of(store, build_tables([], [later]))
    assert stored_tool_rows(store) == 7  # the old rows only
    (row,) = store.query("SELECT JSONExtract(doc, 'tool_names', 'Array(String)') AS tool_names, "
                         "JSONExtract(doc, 'tool_sizes', 'Array(UInt64)') AS tool_sizes "
                         "FROM {db:Identifier}.request_docs WHERE request_id = {id:String}",
                         {"db": store.database, "id": later.request_id})
    assert row == {"tool_names": [tool.name for tool in later.tools], "tool_sizes": [tool.size for tool in later.tools]}
    assert shown_tools(lookups.request(store, later.request_id)) == sent_tools(later)
    # a trace of old and new requests: each shows its own
    trace = lookups.trace(store, data.AGENT_TRACE)
    assert {answer["request_id"]: shown_tools(answer) for answer in trace["requests"]} == {
        record.request_id: sent_tools(record) for record in [*records[:3], later]}


def test_a_trace_whose_requests_hold_their_tools_does_not_read_the_tools_table(store):
    records = data.scenario()
    data.write(store, records)
    assert stored_tool_rows(store) == 0
    counting = Counting(store)
    trace = lookups.trace(counting, data.AGENT_TRACE)
    assert tools_reads(counting) == 0
    assert [shown_tools(answer) for answer in trace["requests"]] == [sent_tools(record) for record in records[:3]]
    assert all(answer["tools"] for answer in trace["requests"])


def test_tools_from_log_records_show_for_a_row_without_any_and_never_over_a_rows_own(store):
    records = data.scenario()
    bare = dataclasses.replace(records[0], tools=[], tools_count=0)
    with_own = records[1]
    data.write(store, [bare, with_own])
    # as the sink writes the tools of log records whose request was no longer in memory (write.calls)
    from_logs = [data.tool(0, "from_a_log", "Defined in a log record"), data.tool(1, "another", "Also")]
    store.insert("tools", tools_table([dataclasses.replace(bare, tools=from_logs),
                                       dataclasses.replace(with_own, tools=from_logs)]))
    counting = Counting(store)
    shown = {answer["request_id"]: shown_tools(answer) for answer in lookups.trace(counting, data.AGENT_TRACE)["requests"]}
    assert tools_reads(counting) == 1
    assert shown[bare.request_id] == [(t.index, t.name, t.size, t.sha256, None, False) for t in from_logs]
    assert shown[with_own.request_id] == sent_tools(with_own)
    assert shown_tools(lookups.request(store, bare.request_id)) == shown[bare.request_id]


def test_a_spool_file_written_before_the_migration_groups_with_todays_batches(store):
    """A collector upgraded with exports in its spool: the old file's `requests` has every column of
    the record but tool arrays, its tools are rows of `tools` and its blocks and content references
    rows of `blocks` and `request_content` (no `request_docs`); it loads in today's layout (documents
    with no tools of their own), groups with a batch written now, and every request shows its tools."""
    from promptprism.collector.write import spool
    from promptprism.collector.write.rows import TableSet, merge_tables

    records = data.scenario()
    old = tools_in_their_table(documents_unfolded(requests_whole(build_tables([], records[:3]))))
    old_requests = old.tables["requests"]
    old = TableSet({**{name: table for name, table in old.tables.items() if name != "request_docs"},
                    "requests": old_requests.drop_columns([name for name in old_requests.column_names
                                                           if name.startswith("tool_")])},
                   old.content_keys, old.spans, old.requests)
    loaded = spool.decode(spool.encode(spool.SpooledGroup(token="t", batch_tokens=["b"], tables=old))).tables
    assert inputs_of(loaded.tables["request_docs"]).column("tool_names").to_pylist() == [[], [], []]
    assert "tool_names" not in loaded.tables["requests"].column_names
    assert loaded.tables["tools"].num_rows == 6
    group = merge_tables([loaded, build_tables([], records[3:])])
    for name, table in group.non_empty():
        store.insert(name, table)
    for record in records:
        assert shown_tools(lookups.request(store, record.request_id)) == sent_tools(record)
