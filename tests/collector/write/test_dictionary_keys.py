"""otel_traces' attribute keys and event names travel dictionary-encoded.

A table laid out before (plain strings: a spool file of an earlier version)
is encoded when it is read back, groups with today's tables, and both land
in the store with every attribute as sent.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from promptprism.collector.otlp.traces import decode_protobuf
from promptprism.collector.write._columns import DICTIONARY_KEYED_MAP, STRING_DICTIONARY, STRING_MAP
from promptprism.collector.write.reassemble import reassemble
from promptprism.collector.write.rows import TableSet, in_todays_layout, merge_tables, otel_traces_table

from ..collector_harness import prompt_export

pytestmark = pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)

ENCODED = {"SpanAttributes": DICTIONARY_KEYED_MAP, "Events.Name": pa.list_(STRING_DICTIONARY),
           "Events.Attributes": pa.list_(DICTIONARY_KEYED_MAP)}


def _traces(payload: bytes) -> pa.Table:
    spans = decode_protobuf(payload).spans
    records, _ = reassemble(spans)
    return otel_traces_table(spans, records)


def _plain(table: pa.Table) -> pa.Table:
    """``table`` as otel_traces_table laid it out before: keys and names as plain strings."""
    def plain_map(maps: pa.MapArray) -> pa.MapArray:
        return pa.MapArray.from_arrays(maps.offsets, maps.keys.cast(pa.string()), maps.items)

    for name in ENCODED:
        column = table.column(name).combine_chunks()
        if name == "SpanAttributes":
            column = plain_map(column)
        elif name == "Events.Name":
            column = pa.ListArray.from_arrays(column.offsets, column.values.cast(pa.string()))
        else:
            column = pa.ListArray.from_arrays(column.offsets, plain_map(column.values))
        table = table.set_column(table.column_names.index(name), name, column)
    return table


def test_otel_traces_encodes_keys_and_event_names():
    table = _traces(prompt_export())
    assert {name: table.schema.field(name).type for name in ENCODED} == ENCODED
    pairs = table.column("Events.Attributes").to_pylist()[0]
    assert pairs and all(isinstance(key, str) for event in pairs for key, _ in event)


def test_a_table_laid_out_before_is_encoded_and_groups_with_todays(store):
    today, earlier = _traces(prompt_export()), _plain(_traces(prompt_export()))
    assert earlier.schema.field("Events.Attributes").type == pa.list_(STRING_MAP)
    replayed = in_todays_layout({"otel_traces": earlier})["otel_traces"]
    assert replayed.schema == today.schema
    assert replayed.to_pylist() == earlier.to_pylist()

    group = merge_tables([TableSet({"otel_traces": today}), TableSet({"otel_traces": replayed})])
    store.insert("otel_traces", group.tables["otel_traces"])
    stored = store.query("SELECT SpanId, SpanAttributes, Events.Name AS names, Events.Attributes AS attributes "
                         "FROM {db:Identifier}.otel_traces", {"db": store.database})
    expected = {row["SpanId"]: row for row in today.to_pylist() + earlier.to_pylist()}
    assert len(stored) == len(expected) > 1
    for row in stored:
        sent = expected[row["SpanId"]]
        assert row["SpanAttributes"] == dict(sent["SpanAttributes"])
        assert row["names"] == sent["Events.Name"]
        assert row["attributes"] == [dict(pairs) for pairs in sent["Events.Attributes"]]
