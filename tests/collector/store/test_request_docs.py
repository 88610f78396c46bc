"""Requests as documents in conversation order (migrations 048 and 049).

The write path and the backfill of a store written before 048 must give
every request the same document: the one packs it from the columns an
INSERT names, the other from `requests`, `blocks` and `request_content`.
A spool file written before 048 (no `request_docs` table) replays into the
same documents too. `trace_threads` names a trace's threads and the time
range of its requests in each; `request_ids` knows each request's
conversation (its thread, else the trace is).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from promptprism.collector.record import REQUEST_COLUMNS, REQUEST_TOOL_COLUMNS
from promptprism.collector.store.migrations import load_migrations, migrate
from promptprism.collector.write.documents import document_inputs
from promptprism.collector.write.rows import BLOCK_ARRAYS, build_tables, in_todays_layout

from .. import read_side_data as data
from .older_schema import current_store, documents_unfolded, requests_whole, store_before, write_as_of
from .test_request_content import conversation

pytestmark = pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)

DOCUMENTS = """
SELECT thread, toUnixTimestamp64Nano(started_at) AS started_at_ns, request_id, trace_id, merged_spans, doc
FROM {db:Identifier}.request_docs
ORDER BY request_id, merged_spans DESC
LIMIT 1 BY request_id
"""


def documents(store) -> list[dict]:
    return [{**row, "doc": json.loads(row["doc"])} for row in store.query(DOCUMENTS, {"db": store.database})]


def traffic() -> list:
    """A conversation with captured content, and a trace of requests without one: blocks, tools, none."""
    records = conversation(0x480, 3)
    for turn in range(3):
        record = data.build_record(
            trace_id=f"{0x4810:032x}", request_id=f"{0x4810 + turn:016x}", started_offset_ms=5000 + turn * 10,
            parts=[data.Part("identity", "identity", "static", "config", "You are brief.\n"),
                   data.Part("task", "task", "volatile", "request", f"Task {turn}: ünïcode\n")],
            tools=[data.tool(0, "search", "Search."), data.tool(1, "fetch", "Fetch.")] if turn == 1 else None,
            capture=turn < 2, mapped=turn < 2, unmapped_reason="" if turn < 2 else "no block map")
        if turn == 1:
            record.merged_span_ids = ["00000000000000aa"]
            record.attributes = {"custom.key": "value"}
        records.append(record)
    return records


@pytest.fixture
def store_before_048(schema_before):
    records = traffic()
    with store_before(schema_before, 48, records) as store:
        yield store, records


def test_the_backfill_gives_every_request_the_document_the_write_path_gives_it(store_before_048, migrated_database):
    store, records = store_before_048
    applied = migrate(store)
    assert applied[:2] == ["048_request_docs.sql", "049_request_docs_backfill.py"]
    with current_store(migrated_database, records) as reference:
        assert documents(store) == documents(reference)
    stored = {row["request_id"]: row for row in documents(store)}
    assert set(stored) == {record.request_id for record in records}
    for record in records:
        row = stored[record.request_id]
        assert row["thread"] == (record.conversation_id or record.trace_id)
        assert row["merged_spans"] == len(record.merged_span_ids)
        doc = row["doc"]
        assert doc["block_names"] == [block.name for block in record.blocks]
        assert doc["block_starts"] == [block.start for block in record.blocks]
        assert doc["block_sha256"] == [block.sha256 for block in record.blocks]
        assert doc["tool_names"] == [tool.name for tool in record.tools]
        assert doc["attributes"] == record.attributes
        assert (doc["content_refs"] is None) == (not record.input_messages)
        assert {column.key for column in REQUEST_COLUMNS} - set(doc) == {"trace_id", "request_id", "started_at_ns"}


def test_a_second_run_of_the_backfill_changes_no_answer(store_before_048):
    store, records = store_before_048
    migrate(store, up_to=49)  # the tables it copies from are dropped by migration 050
    first = documents(store)
    (backfill,) = [known for known in load_migrations(database=store.database, retention_days=store.retention_days)
                   if known.version == 49]
    backfill.apply(store)  # an interrupted start-up runs it again
    # the copies (ClickHouse 24.8 drops the repeated insert itself) collapse: readers take one
    assert documents(store) == first and len(first) == len(records)


def test_trace_threads_and_request_ids_know_each_request_thread(store_before_048):
    store, records = store_before_048
    migrate(store)
    later = conversation(0x490, 2)
    write_as_of(store, build_tables([], later))  # written after the migration: the views fill both
    threads = store.query(
        "SELECT trace_id, thread, toInt64(toUnixTimestamp(min(first_start))) AS first_s, "
        "toInt64(toUnixTimestamp(max(last_start))) AS last_s FROM {db:Identifier}.trace_threads "
        "GROUP BY trace_id, thread ORDER BY trace_id, thread", {"db": store.database})
    expected = {}
    for record in [*records, *later]:
        key = (record.trace_id, record.conversation_id or record.trace_id)
        first, last = expected.get(key, (record.started_at_ns, record.started_at_ns))
        expected[key] = (min(first, record.started_at_ns), max(last, record.started_at_ns))
    # to the second
    assert {(row["trace_id"], row["thread"]): (row["first_s"], row["last_s"]) for row in threads} == {
        key: (first // 10**9, last // 10**9) for key, (first, last) in expected.items()}
    ids = store.query("SELECT request_id, conversation_id FROM {db:Identifier}.request_ids "
                      "ORDER BY request_id, conversation_id = '' LIMIT 1 BY request_id", {"db": store.database})
    assert {row["request_id"]: row["conversation_id"] for row in ids} == {
        record.request_id: record.conversation_id for record in [*records, *later]}
    assert any(record.conversation_id for record in records) and not all(record.conversation_id for record in records)


def test_a_spool_file_written_before_the_migration_replays_into_the_same_documents(migrated_database):
    records = traffic()
    tables = build_tables([], records).tables
    older = {name: table for name, table in documents_unfolded(requests_whole(build_tables([], records))).tables.items()
             if name != "request_docs"}
    # an older collector's request_content rows: only requests with content, in another order
    references = older["request_content"]
    older["request_content"] = references.take(pa.array(list(reversed(range(references.num_rows)))))
    assert {"blocks", "request_content"} <= set(older)
    replayed = in_todays_layout(older)
    assert set(replayed["request_docs"].column_names) == set(tables["request_docs"].column_names)
    assert not {"blocks", "request_content"} & set(replayed)  # folded: the tables are gone
    with migrated_database() as store, migrated_database() as reference:
        store.insert("request_docs", replayed["request_docs"])
        reference.insert("request_docs", tables["request_docs"])
        assert documents(store) == documents(reference)


def test_the_document_inputs_are_the_request_columns_blocks_and_references(migrated_database):
    with migrated_database() as store:
        columns = store.query("SELECT name, default_kind FROM system.columns WHERE database = {db:String} "
                              "AND table = 'request_docs'", {"db": store.database})
    ephemeral = {row["name"] for row in columns if row["default_kind"] == "EPHEMERAL"}
    stored = {row["name"] for row in columns} - ephemeral
    assert stored == {"thread", "started_at", "request_id", "trace_id", "merged_spans", "doc"}
    laid_out = build_tables([], traffic()).tables["request_docs"]
    assert set(laid_out.column_names) == stored  # the document is built by the write path (write/documents.py)
    inputs = set(document_inputs(laid_out).column_names)  # what it was built from: what the DEFAULT packs
    assert inputs - stored == ephemeral - {"content_refs"}
    assert {column.name for column in REQUEST_COLUMNS + REQUEST_TOOL_COLUMNS} <= inputs
    assert set(BLOCK_ARRAYS) <= ephemeral


def test_a_call_merged_after_a_later_span_gave_it_a_conversation_keeps_one_document(migrated_database):
    """The stored call had no conversation id (its document is in its trace's thread); a later span of
    the same call, with one, is folded into it (write.duplicates.merged_into): the merged record's
    document replaces the stored one under the stored thread — no second document under the
    conversation's — and every read finds it, with the conversation id the later span gave."""
    import dataclasses

    from promptprism.collector.read import lookups
    from promptprism.collector.write.duplicates import merged_into

    stored = traffic()[3]
    assert not stored.conversation_id
    later = dataclasses.replace(stored, request_id="00000000000048ff", conversation_id="conv-late",
                                scope_name="opentelemetry.instrumentation.openai", merged_span_ids=[])
    merged = merged_into(stored, [later])
    assert merged.request_id == stored.request_id and merged.conversation_id == "conv-late"
    with migrated_database() as store:
        write_as_of(store, build_tables([], [stored]))
        write_as_of(store, build_tables([], [merged]))
        store.execute(f"OPTIMIZE TABLE {store.database}.request_docs FINAL")
        (row,) = documents(store)
        assert (row["thread"], row["merged_spans"], row["doc"]["conversation_id"]) == (
            stored.trace_id, 1, "conv-late")
        copies = store.query("SELECT count() AS n FROM {db:Identifier}.request_docs", {"db": store.database})
        assert copies == [{"n": 1}]
        shown = lookups.request(store, stored.request_id)
        assert shown["conversation_id"] == "conv-late" and shown["merged_span_ids"] == [later.request_id]
        assert [item["request_id"] for item in lookups.trace(store, stored.trace_id)["requests"]] == [
            stored.request_id]
        blocks = store.query("SELECT count() AS n FROM {db:Identifier}.blocks WHERE request_id = {id:String}",
                             {"db": store.database, "id": stored.request_id})
        assert blocks == [{"n": len(stored.blocks)}]
