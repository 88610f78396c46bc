"""columns: flat lists → Arrow arrays, the same values as row-wise pyarrow inference."""

from __future__ import annotations

import pyarrow as pa
import pytest

from promptprism.collector.otlp.attribute_text import otel_attribute_string
from promptprism.collector.write._columns import (
    STRING_MAP,
    MapColumn,
    arrow_type,
    integer_array,
    list_array,
    pluck,
    repeat,
    strings,
)


def test_integer_array_fast_path_and_lenient_fallback():
    assert integer_array([0, 5, 2**40], pa.uint64()).to_pylist() == [0, 5, 2**40]
    assert integer_array([], pa.uint32()).type == pa.uint32()
    # negative, missing or fractional values: max(0, int(value or 0)), as rows always stored them
    assert integer_array([-3, None, 2.7, 4], pa.uint64()).to_pylist() == [0, 0, 2, 4]
    assert integer_array([2**64 - 1], pa.uint64()).to_pylist() == [2**64 - 1]
    # beyond the range: at the bound; nullable columns keep their nulls
    assert integer_array([2**40, -(2**40)], pa.int32()).to_pylist() == [2**31 - 1, -(2**31)]
    assert integer_array([None, 2**70], pa.int64(), nullable=True).to_pylist() == [None, 2**63 - 1]
    assert integer_array([None, 3], pa.int64(), nullable=True).to_pylist() == [None, 3]


def test_arrow_types_of_the_declared_columns():
    assert arrow_type("Nullable(Int64)") == pa.int64()
    assert arrow_type("LowCardinality(String)") == pa.string()
    assert arrow_type("Array(LowCardinality(String))") == pa.list_(pa.string())
    assert arrow_type("Map(LowCardinality(String), String)") == STRING_MAP
    assert arrow_type("DateTime64(9, 'UTC')") == pa.timestamp("ns", tz="UTC")
    with pytest.raises(TypeError):
        arrow_type("Decimal(9, 2)")


def test_strings_stringifies_everything_but_str():
    column = strings(["a", 7, True, None, b"\x00", 0.5], otel_attribute_string)
    assert column.to_pylist() == ["a", "7", "true", "", "AA==", "0.5"]


def test_map_column_equals_row_wise_construction():
    shared = {"service.name": "app", "cores": 2}
    column = MapColumn(otel_attribute_string)
    column.add({"a": 1, "b": "x"})
    column.add_shared(shared)
    column.add({})
    column.add_without({"keep": "k", "drop": "d"}, "drop")
    column.add_shared(shared)
    expected = pa.array([[("a", "1"), ("b", "x")], [("service.name", "app"), ("cores", "2")], [],
                         [("keep", "k")], [("service.name", "app"), ("cores", "2")]], STRING_MAP)
    assert column.array().equals(expected)


def test_list_array_and_helpers():
    items = pa.array(["a", "b", "c"])
    assert list_array([0, 2, 2, 3], items).to_pylist() == [["a", "b"], [], ["c"]]
    assert list_array([0, 2, 2, 3], items).type == pa.list_(pa.string())
    assert repeat(["x", "y", "z"], [2, 0, 1]) == ["x", "x", "z"]
    assert pluck([pa.array([1]), pa.array([1, 2])], "null_count") == [0, 0]
