"""The request record's declaration (record.py) against the `requests` table every migration leaves behind.

Each column the record declares must exist with exactly the declared
ClickHouse type, and the table must have no column the record does not
declare: otherwise rows would be laid out, read back or shown under a type
the store does not hold.
"""

from __future__ import annotations

from promptprism.collector.record import REQUEST_COLUMNS, STORE_FILLED_COLUMNS


def declared() -> dict[str, str]:
    return {column.name: column.type for column in REQUEST_COLUMNS + STORE_FILLED_COLUMNS}


def mismatches(declared_types: dict[str, str], described: list[dict]) -> list[str]:
    stored = {row["name"]: row["type"] for row in described}
    problems = [f"{name}: declared {kind}, stored {stored[name]}" for name, kind in declared_types.items()
                if name in stored and stored[name] != kind]
    problems += [f"{name}: declared, not in the table" for name in declared_types if name not in stored]
    problems += [f"{name}: in the table, not declared" for name in stored if name not in declared_types]
    return sorted(problems)


def test_declared_columns_are_the_stored_columns(store):
    described = store.query("DESCRIBE TABLE {db:Identifier}.requests", {"db": store.database})
    assert mismatches(declared(), described) == []


def test_the_check_names_each_kind_of_drift():
    described = [{"name": "trace_id", "type": "String"}, {"name": "mapped", "type": "UInt8"},
                 {"name": "legacy", "type": "String"}]
    assert mismatches({"trace_id": "String", "mapped": "Bool", "temperature": "Nullable(Float64)"}, described) == [
        "legacy: in the table, not declared", "mapped: declared Bool, stored UInt8",
        "temperature: declared, not in the table"]


def test_every_column_is_declared_once_and_keys_are_unique():
    assert len({column.name for column in REQUEST_COLUMNS}) == len(REQUEST_COLUMNS)
    assert len({column.key for column in REQUEST_COLUMNS}) == len(REQUEST_COLUMNS)
    paths = [path for column in REQUEST_COLUMNS for path in column.api]
    assert len(set(paths)) == len(paths)
