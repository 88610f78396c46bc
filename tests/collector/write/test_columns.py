"""columns: flat lists → Arrow arrays, the same values as row-wise pyarrow inference."""

from __future__ import annotations

import pyarrow as pa

from promptprism.collector.otlp.attribute_text import otel_attribute_string
from promptprism.collector.write._columns import (
    STRING_MAP,
    MapColumn,
    list_array,
    pluck,
    repeat,
    strings,
)


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
