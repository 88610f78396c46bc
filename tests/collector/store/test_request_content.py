"""Captured content stored once (migration 021): a store written before it is
migrated and still answers with every message, variable and instruction, and
requests written after it read back the same way."""

from __future__ import annotations

import json

import pytest

from promptprism.collector.read import lookups
from promptprism.collector.store.migrations import migrate
from promptprism.collector.write.rows import build_tables

from .. import read_side_data as data
from .older_schema import CONTENT_FIELDS_BEFORE_021, store_before, stored_columns, write_as_of


def conversation(first: int, turns: int) -> list:
    history, records = [], []
    for turn in range(turns):
        history = history + [{"role": "user", "parts": [{"type": "text", "content": f"question {first + turn} ü"}]}]
        record = data.build_record(
            trace_id=f"{first + turn:032x}", request_id=f"{first + turn:016x}",
            parts=[data.Part("identity", "identity", "static", "config", "You are careful.\n")],
            started_offset_ms=turn * 1000, messages=history, conversation_id=f"conv-{first}",
            response=[{"role": "assistant", "parts": [{"type": "text", "content": "ok"}], "finish_reason": "stop"}])
        record.template_variables = json.dumps({"identity": "You are careful.\n", "n": turn})
        record.system_instructions = json.dumps([{"type": "text", "content": "You are careful.\n"}])
        records.append(record)
        history = history + [{"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}]
    return records


def served(store, record) -> dict:
    answer = lookups.request(store, record.request_id)
    return {"messages": answer["messages"], "response": answer["response"]["messages"],
            "template_variables": answer["template_variables"]}


def expected(record) -> dict:
    return {"messages": json.loads(record.input_messages), "response": json.loads(record.output_messages),
            "template_variables": json.loads(record.template_variables)}


@pytest.fixture
def store_before_021(schema_before):
    records = conversation(0x100, 4)
    with store_before(schema_before, 21, records) as store:  # content in the `requests` columns of then
        yield store, records


def test_the_migration_keeps_every_stored_content_field_readable(store_before_021):
    store, records = store_before_021
    assert set(CONTENT_FIELDS_BEFORE_021) <= stored_columns(store, "requests")
    assert "021_request_content.sql" in migrate(store)
    assert not set(CONTENT_FIELDS_BEFORE_021) & stored_columns(store, "requests")
    for record in records:
        assert served(store, record) == expected(record)
    [trace] = [lookups.trace(store, records[2].trace_id)]
    assert trace["requests"][0]["messages"] == json.loads(records[2].input_messages)


def test_requests_written_after_the_migration_share_their_messages(store_before_021):
    store, old = store_before_021
    migrate(store)
    records = conversation(0x200, 6)
    tables = build_tables([], records)
    for name, table in tables.non_empty():
        store.insert(name, table)
    for record in [*old, *records]:
        assert served(store, record) == expected(record)
    # the first question is in all six histories, stored once
    stored = store.query("SELECT count() AS n FROM {db:Identifier}.contents WHERE content LIKE '%question 512 %'",
                         {"db": store.database})
    assert stored == [{"n": 1}]
