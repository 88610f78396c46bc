"""The declarations of record.py against the tables every migration leaves behind.

Each column a record declares (`requests`: RequestRecord, `request_docs`: its
inputs, `genai_events`: GenAIEvent) must exist with exactly the declared ClickHouse type, and the
table must have no column that is not declared: otherwise rows would be
laid out, read back or shown under a type the store does not hold.
"""

from __future__ import annotations

import pytest

from promptprism.collector.record import (
    GENAI_EVENT_COLUMNS,
    GENAI_EVENT_STORE_FILLED_COLUMNS,
    RECORD_COLUMNS,
    REQUEST_COLUMNS,
    REQUEST_CONTENT_COLUMNS,
    REQUEST_DOCUMENT_INPUT_COLUMNS,
    REQUEST_DOCUMENT_STORE_FILLED_COLUMNS,
    REQUEST_STORE_FILLED_COLUMNS,
    REQUESTS_TABLE_COLUMNS,
)

DECLARED = {
    # what lists, filters, panels and the rollup job read (migration 051: the rest is in the documents)
    "requests": REQUESTS_TABLE_COLUMNS + REQUEST_STORE_FILLED_COLUMNS,
    "genai_events": GENAI_EVENT_COLUMNS + GENAI_EVENT_STORE_FILLED_COLUMNS,
    # every request column, the tool and block arrays and a content field's items (record.content_columns)
    "request_docs": REQUEST_DOCUMENT_INPUT_COLUMNS + REQUEST_DOCUMENT_STORE_FILLED_COLUMNS,
}


def declared(table: str) -> dict[str, str]:
    return {column.name: column.type for column in DECLARED[table]}


def mismatches(declared_types: dict[str, str], described: list[dict]) -> list[str]:
    stored = {row["name"]: row["type"] for row in described}
    problems = [f"{name}: declared {kind}, stored {stored[name]}" for name, kind in declared_types.items()
                if name in stored and stored[name] != kind]
    problems += [f"{name}: declared, not in the table" for name in declared_types if name not in stored]
    problems += [f"{name}: in the table, not declared" for name in stored if name not in declared_types]
    return sorted(problems)


@pytest.mark.parametrize("table", sorted(DECLARED))
def test_declared_columns_are_the_stored_columns(store, table):
    described = store.query("DESCRIBE TABLE {db:Identifier}.{table:Identifier}", {"db": store.database, "table": table})
    assert mismatches(declared(table), described) == []


def test_a_request_document_stores_its_keys_and_the_document_only(store):
    """Migration 048: every input is written, not stored — the document holds them."""
    described = {row["name"]: row["default_type"] for row in store.query(
        "DESCRIBE TABLE {db:Identifier}.request_docs", {"db": store.database})}
    keys = {"started_at", "request_id", "trace_id"}
    inputs = [column.name for column in REQUEST_DOCUMENT_INPUT_COLUMNS if column.name not in keys]
    assert len([column for column in REQUEST_CONTENT_COLUMNS if column.name in inputs]) == 20
    assert {name: described[name] for name in inputs} == {name: "EPHEMERAL" for name in inputs}
    assert described["content_refs"] == "EPHEMERAL"
    assert {name for name, kind in described.items() if kind != "EPHEMERAL"} == {
        *keys, "thread", "merged_spans", "doc"}


def test_the_check_names_each_kind_of_drift():
    described = [{"name": "trace_id", "type": "String"}, {"name": "mapped", "type": "UInt8"},
                 {"name": "legacy", "type": "String"}]
    assert mismatches({"trace_id": "String", "mapped": "Bool", "temperature": "Nullable(Float64)"}, described) == [
        "legacy: in the table, not declared", "mapped: declared Bool, stored UInt8",
        "temperature: declared, not in the table"]


def test_every_column_is_declared_once_and_keys_are_unique():
    assert len({column.name for column in REQUEST_COLUMNS}) == len(REQUEST_COLUMNS)
    assert len({column.key for column in REQUEST_COLUMNS}) == len(REQUEST_COLUMNS)
    paths = [path for column in RECORD_COLUMNS for path in column.api]
    assert len(set(paths)) == len(paths)
