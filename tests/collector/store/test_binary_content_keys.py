"""Content keys as 16 raw bytes (migration 040): a store written with hex
digests is migrated and still serves every block, tool and content field;
text written after the migration shares the rows of the text written before
it; a spool file of a collector before 040 loads in today's layout."""

from __future__ import annotations

import json
import time

import pytest

from promptprism.collector.read import lookups
from promptprism.collector.store.migrations import migrate
from promptprism.collector.write import spool
from promptprism.collector.write.rows import TableSet, build_tables

from .older_schema import documents_unfolded, hex_content_keys, inputs_of, requests_whole, store_before
from .test_request_content import conversation, expected, served

pytestmark = pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)

DIGEST_HEX = 64


def _key_lengths(store) -> set[int]:
    rows = store.query(
        "SELECT DISTINCT length(sha256) AS n FROM {db:Identifier}.contents "
        "UNION DISTINCT SELECT DISTINCT length(arrayJoin(arrayConcat(input_messages_keys, output_messages_keys, "
        "template_variables_keys, system_instructions_keys))) AS n FROM {db:Identifier}.request_content",
        {"db": store.database})
    return {int(row["n"]) for row in rows}


def _served_blocks(store, record) -> list:
    answer = lookups.request(store, record.request_id)
    return [(block["sha256"], block["content"]) for block in answer["prompt"]["blocks"]]


def _sent_blocks(record) -> list:
    return [(block.sha256, block.content) for block in record.blocks]


@pytest.fixture
def store_before_040(schema_before):
    records = conversation(0x300, 4)
    with store_before(schema_before, 40, records) as store:  # hex digests, as a collector before 040 wrote them
        yield store, records


def test_the_migration_keeps_every_block_and_content_field_readable(store_before_040):
    store, records = store_before_040
    assert _key_lengths(store) == {DIGEST_HEX}
    assert "040_binary_content_keys.sql" in migrate(store, up_to=46)
    assert _key_lengths(store) == {16}
    migrate(store)  # on to today's schema, where the key lists are packed (047)
    for record in records:
        assert served(store, record) == expected(record)
        assert _served_blocks(store, record) == _sent_blocks(record)
    trace = lookups.trace(store, records[2].trace_id)
    assert trace["requests"][0]["messages"] == json.loads(records[2].input_messages)


def test_block_pointers_equal_to_the_block_digest_are_cleared(store_before_040):
    store, records = store_before_040
    count = "SELECT countIf(content_sha256 != '') AS n FROM {db:Identifier}.blocks"
    assert store.query(count, {"db": store.database}) == [{"n": sum(len(r.blocks) for r in records)}]
    migrate(store)
    deadline = time.monotonic() + 60  # the mutation runs in the background
    while store.query(count, {"db": store.database}) != [{"n": 0}] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert store.query(count, {"db": store.database}) == [{"n": 0}]
    for record in records:
        assert _served_blocks(store, record) == _sent_blocks(record)


def test_text_written_after_the_migration_shares_the_rows_written_before(store_before_040):
    store, old = store_before_040
    migrate(store)
    records = conversation(0x300, 6)[4:]  # the same conversation goes on, the same day
    tables = build_tables([], records)
    for name, table in tables.non_empty():
        store.insert(name, table)
    store.execute(f"OPTIMIZE TABLE {store.database}.contents FINAL")
    for record in [*old, *records]:
        assert served(store, record) == expected(record)
        assert _served_blocks(store, record) == _sent_blocks(record)
    # the first question and the static block: in every request, one row each
    for text in ("%question 768 %", "You are careful.%"):
        rows = store.query("SELECT count() AS n FROM {db:Identifier}.contents WHERE content LIKE {text:String}",
                           {"db": store.database, "text": text})
        assert rows == [{"n": 1}], text


def test_a_spool_file_written_before_the_migration_loads_in_todays_layout(store):
    records = conversation(0x400, 3)
    today = build_tables([], records)
    # every column in `requests` (before 051), blocks and request_content (before 048), no request_docs
    older = documents_unfolded(requests_whole(today))
    older = TableSet({name: table for name, table in older.tables.items() if name != "request_docs"},
                     older.content_keys, older.spans, older.requests)
    group = spool.SpooledGroup(token="t", batch_tokens=["b"], tables=hex_content_keys(older))
    assert group.tables.tables["contents"].schema.field("sha256").type == "string"
    loaded = spool.decode(spool.encode(group))
    assert loaded.tables.tables["contents"].equals(today.tables["contents"])
    # the content keys converted; a block's content_sha256 was its sha256 then, wherever its text was stored
    loaded_inputs, today_inputs = inputs_of(loaded.tables.tables["request_docs"]), inputs_of(today.tables["request_docs"])
    same = [name for name in today_inputs.column_names if name != "block_content_sha256"]
    assert loaded_inputs.select(same).equals(today_inputs.select(same))
    for name, table in loaded.tables.non_empty():
        store.insert(name, table)
    for record in records:
        assert served(store, record) == expected(record)
