"""columns: flat lists → Arrow arrays, the same values as row-wise pyarrow inference."""

from __future__ import annotations

import pyarrow as pa
import pytest

from promptprism.collector.otlp.attribute_text import otel_attribute_string
from promptprism.collector.write._columns import (
    STRING_MAP,
    MapColumn,
    list_array,
    pluck,
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
    assert pluck([pa.array([1]), pa.array([1, 2])], "null_count") == [0, 0]


# --- the compiled string columns (write/_strings.pyx) against the definition ---------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from promptprism.collector.write import _columns  # noqa: E402
from support import IN_CI  # noqa: E402

COMPILED_STRINGS = _columns._compiled_string_array
ANY_VALUES = st.lists(st.one_of(
    st.text(max_size=8), st.integers(-2**70, 2**70), st.sampled_from([0, -1, 2**63 - 1, -2**63, 2**63, -2**63 - 1]),
    st.booleans(), st.none(), st.floats(), st.binary(max_size=4), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2), st.just("\ud800")), max_size=30)


@pytest.mark.skipif(COMPILED_STRINGS is not None or not IN_CI, reason="built, or not under CI")
def test_under_ci_the_compiled_string_columns_are_built():
    assert COMPILED_STRINGS is not None, "setup.py did not build promptprism.collector.write._strings"


def definition_or_error(values, stringify):
    try:
        return _columns.strings_python(values, stringify)
    except Exception as error:  # noqa: BLE001 - the compiled path must fail alike (it hands these back)
        return type(error)


@pytest.mark.skipif(COMPILED_STRINGS is None, reason="the compiled string columns are not built here")
@settings(max_examples=300, deadline=None, derandomize=True)
@given(ANY_VALUES)
def test_compiled_string_columns_equal_the_definition(values):
    expected = definition_or_error(values, otel_attribute_string)
    answer = COMPILED_STRINGS(values, otel_attribute_string)
    if answer is not None:  # None: handed back (a lone surrogate, an int past 64 bits)
        assert answer.type == pa.string() and answer.equals(expected)
    if isinstance(expected, pa.Array):
        assert strings(values, otel_attribute_string).equals(expected)


@pytest.mark.skipif(COMPILED_STRINGS is None, reason="the compiled string columns are not built here")
def test_compiled_string_columns_take_the_usual_values():
    values = ["promptprism.block.index", 7, -2**63, 2**63 - 1, "Émile 😀", ""]
    assert COMPILED_STRINGS(values, otel_attribute_string).to_pylist() == [
        "promptprism.block.index", "7", str(-2**63), str(2**63 - 1), "Émile 😀", ""]


# --- dictionary-encoded keys and names (otel_traces) ----------------------------------------------

from promptprism.collector.write._columns import (  # noqa: E402
    DICTIONARY_KEYED_MAP,
    STRING_DICTIONARY,
    dictionary_keyed,
    dictionary_strings,
)

MAPS = st.lists(st.lists(st.tuples(st.sampled_from(["a", "b", "promptprism.block.index", "é", ""]),
                                   st.text(max_size=4)), max_size=5), max_size=8)


@given(MAPS, st.integers(0, 3))
@settings(max_examples=60, deadline=None)
def test_dictionary_keyed_maps_hold_the_same_pairs(rows, start):
    plain = pa.array(rows, STRING_MAP)
    for maps in (plain, plain.slice(min(start, len(rows)))):  # a slice's offsets index the whole arrays
        keyed = dictionary_keyed(maps)
        assert keyed.type == DICTIONARY_KEYED_MAP
        assert keyed.to_pylist() == maps.to_pylist()


def test_dictionary_strings_hold_the_same_strings():
    names = pa.array(["promptprism.prompt.block", "x", "promptprism.prompt.block", ""])
    encoded = dictionary_strings(names)
    assert encoded.type == STRING_DICTIONARY
    assert encoded.to_pylist() == names.to_pylist()
    assert len(encoded.dictionary) == 3
