"""Records of a declared table (``record.Column``) → the Arrow table the store inserts. Pure.

The store takes Arrow tables whose columns are named and typed like its
tables' columns. For a table whose columns are declared in ``record.py``
(``requests``, ``genai_events``) this lays records out from the declaration:
each column's Arrow type follows from its ClickHouse type, integers are
clamped to their column's range (runtime is lenient: a value a broken client
sent beyond it is stored at the bound rather than failing the batch), and a
derived column is computed from the record. The write path (``write.rows``)
and a migration step that rewrites rows use the same layout.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa

from ..record import Column

# ClickHouse column types → Arrow types.
_SCALAR_TYPES = {
    "String": pa.string(), "Bool": pa.bool_(), "Float32": pa.float32(), "Float64": pa.float64(),
    "UInt8": pa.uint8(), "UInt16": pa.uint16(), "UInt32": pa.uint32(), "UInt64": pa.uint64(),
    "Int8": pa.int8(), "Int16": pa.int16(), "Int32": pa.int32(), "Int64": pa.int64(),
    "DateTime64(9, 'UTC')": pa.timestamp("ns", tz="UTC"), "Date": pa.date32(),
}


def arrow_type(clickhouse_type: str) -> pa.DataType:
    """``Nullable(Int64)`` → int64, ``Map(LowCardinality(String), String)`` → map<string, string>, …"""
    for wrapper in ("Nullable(", "LowCardinality("):
        if clickhouse_type.startswith(wrapper):
            return arrow_type(clickhouse_type[len(wrapper):-1])
    if clickhouse_type.startswith("Array("):
        return pa.list_(arrow_type(clickhouse_type[len("Array("):-1]))
    if clickhouse_type.startswith("Map("):
        inner, depth = clickhouse_type[len("Map("):-1], 0
        for position, char in enumerate(inner):
            depth += (char == "(") - (char == ")")
            if char == "," and depth == 0:
                return pa.map_(arrow_type(inner[:position].strip()), arrow_type(inner[position + 1:].strip()))
    try:
        return _SCALAR_TYPES[clickhouse_type]
    except KeyError:
        raise TypeError(f"no Arrow type for the ClickHouse type {clickhouse_type!r}") from None


def integer_range(kind: pa.DataType) -> tuple[int, int]:
    bits = kind.bit_width
    if pa.types.is_unsigned_integer(kind):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def integer_array(values: Sequence[Any], kind: pa.DataType, *, nullable: bool = False) -> pa.Array:
    """An integer column from Python numbers: a value beyond the column's range
    is stored at the bound, a fractional one truncated, a missing one as 0 (as
    null when ``nullable``). One C call when every value already fits."""
    try:
        array = pa.array(values, kind)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        array = None
    if array is not None and (nullable or not array.null_count):
        return array
    low, high = integer_range(kind)
    return pa.array([None if value is None and nullable else max(low, min(high, int(value or 0)))
                     for value in values], kind)


def _pairs(mapping: Any) -> list[tuple[str, str]]:
    return [(str(key), str(value)) for key, value in mapping.items()]


def _column_layout(column: Column) -> Callable[[list[Any]], pa.Array]:
    """How one declared column is laid out from the records."""
    kind = arrow_type(column.type)
    get = column.derive or attrgetter(column.field)
    if pa.types.is_integer(kind):
        nullable = column.type.startswith("Nullable(")
        return lambda records: integer_array(list(map(get, records)), kind, nullable=nullable)
    if pa.types.is_timestamp(kind):
        return lambda records: pa.array([int(value) for value in map(get, records)], kind)
    if pa.types.is_map(kind):
        return lambda records: pa.array([_pairs(value) for value in map(get, records)], kind)
    if pa.types.is_list(kind):
        return lambda records: pa.array([[str(item) for item in value] for value in map(get, records)], kind)
    return lambda records: pa.array(list(map(get, records)), kind)


class DeclaredTable:
    """The Arrow layout of one declared table, derived once from its columns."""

    def __init__(self, columns: Sequence[Column]):
        self.columns = tuple(columns)
        self._layouts = tuple((column.name, _column_layout(column)) for column in self.columns)

    def table(self, records: Iterable[Any]) -> pa.Table:
        records = list(records)
        return pa.table({name: lay_out(records) for name, lay_out in self._layouts})
