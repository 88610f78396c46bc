"""store.declared: declared columns → Arrow types and lenient integer columns."""

from __future__ import annotations

import pyarrow as pa
import pytest

from promptprism.collector.record import REQUEST_COLUMNS, RequestRecord
from promptprism.collector.store.declared import DeclaredTable, arrow_type, integer_array

STRING_MAP = pa.map_(pa.string(), pa.string())


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




def test_a_declared_table_lays_out_every_column_with_its_type():
    record = RequestRecord(trace_id="a" * 32, request_id="b" * 16, attempt=2**40, prompt_bytes=-5,
                           finish_reasons=["stop"], attributes={"k": "v"}, blocks=[])
    table = DeclaredTable(REQUEST_COLUMNS).table([record])
    assert table.column_names == [column.name for column in REQUEST_COLUMNS]
    assert all(table.schema.field(column.name).type == arrow_type(column.type) for column in REQUEST_COLUMNS)
    [row] = table.to_pylist()
    assert (row["attempt"], row["prompt_bytes"], row["block_count"]) == (2**31 - 1, 0, 0)
    assert (row["finish_reasons"], row["attributes"], row["input_tokens"]) == (["stop"], [("k", "v")], None)
