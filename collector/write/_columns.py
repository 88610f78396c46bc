"""Flat Python lists → Arrow columns, built once per column. Pure, no I/O.

``rows`` lays out tens of thousands of block rows and event attribute maps
per export; building them as one dict or tuple per row and letting pyarrow
infer the nesting cost more than decoding the export (the Python walk is
the bottleneck; README "The collector", throughput). These helpers take what
``rows`` collects in flat lists — values, and offsets where rows nest — and
make each Arrow array in one call.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable, Iterable

import pyarrow as pa

STRING_MAP = pa.map_(pa.string(), pa.string())
# Strings that repeat across rows (attribute keys, event names) travel
# dictionary-encoded: each distinct string once, then 32-bit indexes.
STRING_DICTIONARY = pa.dictionary(pa.int32(), pa.string())
DICTIONARY_KEYED_MAP = pa.map_(STRING_DICTIONARY, pa.string())
# Offsets of list and map arrays: Arrow's default (non-"large") layouts use
# 32-bit offsets, which is what pa.list_ / pa.map_ columns carry.
OFFSET_TYPE = pa.int32()


try:  # the same columns built in one C pass (setup.py builds it beside the OTLP walk)
    from ._strings import string_array as _compiled_string_array
except ImportError:  # pure Python: the same arrays, slower (README, "Ingest throughput")
    _compiled_string_array = None


def strings(values: list, stringify: Callable[[Any], str]) -> pa.Array:
    """A string column; values that are not ``str`` go through ``stringify``.

    Compiled (``_strings.pyx``) when built; it hands what it cannot take back to
    ``strings_python``, the definition."""
    if _compiled_string_array is not None and type(values) is list:
        array = _compiled_string_array(values, stringify)
        if array is not None:
            return array
    return strings_python(values, stringify)


def strings_python(values: list, stringify: Callable[[Any], str]) -> pa.Array:
    """A string column; values that are not ``str`` go through ``stringify`` (the pure-Python definition).

    Every value is checked: pyarrow would take ``bytes`` as text and ``None``
    as null, where the exporter's convention wants base64 and "".
    ``int`` (not ``bool``) is written in decimal by every convention here,
    so it skips the call: block events carry four ints each.
    """
    kinds = set(map(type, values))  # one C pass; map keys from OTLP are always str
    if kinds <= _ONLY_STR:
        return pa.array(values, pa.string())
    if kinds <= _STR_AND_INT:  # str() is the identity on str and decimal on int: one C pass again
        return pa.array(list(map(str, values)), pa.string())
    return pa.array([value if (kind := value.__class__) is str else str(value) if kind is int else stringify(value)
                     for value in values], pa.string())


_ONLY_STR = frozenset({str})
_STR_AND_INT = frozenset({str, int})


class MapColumn:
    """A ``Map(String, String)`` column collected row by row as flat lists.

    ``add`` appends one dict (typed values; stringified once at the end),
    ``add_shared`` one that many rows share (a resource's attributes):
    its strings are made once and reused.
    """

    __slots__ = ("keys", "values", "offsets", "_shared", "_stringify")

    def __init__(self, stringify: Callable[[Any], str]):
        self.keys: list = []
        self.values: list = []
        self.offsets: list[int] = [0]
        self._shared: dict[int, tuple[object, list, list]] = {}
        self._stringify = stringify

    def add(self, mapping: dict) -> None:
        self.keys.extend(mapping)
        self.values.extend(mapping.values())
        self.offsets.append(len(self.keys))

    def add_without(self, mapping: dict, *left_out: str) -> None:
        """``add`` without the entries ``left_out``."""
        present = [key for key in left_out if key in mapping]
        if not present:
            self.add(mapping)
            return
        # Whole-list operations (C loops) rather than a Python loop per entry: one call per block event.
        keys, values = list(mapping), list(mapping.values())
        for key in present:
            position = keys.index(key)
            del keys[position], values[position]
        self.keys.extend(keys)
        self.values.extend(values)
        self.offsets.append(len(self.keys))

    def add_shared(self, mapping: dict) -> None:
        cached = self._shared.get(id(mapping))
        if cached is None or cached[0] is not mapping:
            cached = (mapping, list(mapping), [self._string(value) for value in mapping.values()])
            self._shared[id(mapping)] = cached  # holds the dict, so its id is not reused meanwhile
        self.keys.extend(cached[1])
        self.values.extend(cached[2])
        self.offsets.append(len(self.keys))

    def _string(self, value: Any) -> str:
        return value if value.__class__ is str else self._stringify(value)

    def array(self) -> pa.MapArray:
        keys = strings(self.keys, str)
        values = strings(self.values, self._stringify)
        return pa.MapArray.from_arrays(pa.array(self.offsets, OFFSET_TYPE), keys, values)


def dictionary_keyed(maps: pa.MapArray) -> pa.MapArray:
    """``maps`` with its keys dictionary-encoded (``DICTIONARY_KEYED_MAP``): the same maps.

    ``otel_traces``' attribute maps repeat a few dozen keys hundreds of
    thousands of times per export (~20k block events × ~8 keys): encoded, an
    export's table is ~40 % of the bytes to copy from a worker, spool and
    insert, and its INSERT costs less (README "Ingest throughput")."""
    if maps.offset:  # a slice: its offsets index the whole keys and items arrays
        maps = pa.concat_arrays([maps])
    return pa.MapArray.from_arrays(maps.offsets, maps.keys.dictionary_encode(), maps.items)


def dictionary_strings(strings_array: pa.Array) -> pa.DictionaryArray:
    """``strings_array`` dictionary-encoded (``STRING_DICTIONARY``): the same strings."""
    return strings_array.dictionary_encode()


def list_array(offsets: list[int], items: pa.Array) -> pa.ListArray:
    """Rows of ``items``: row ``n`` holds ``items[offsets[n]:offsets[n + 1]]``."""
    return pa.ListArray.from_arrays(pa.array(offsets, OFFSET_TYPE), items)


def pluck(items: Iterable[Any], name: str) -> list:
    """One attribute of every item (``attrgetter`` in C: no Python call per item)."""
    return list(map(attrgetter(name), items))
