"""The fields ``record.py`` declares with their one span attribute, copied by their column's type. Pure.

Derived from the declaration once, at import: a text column takes the value
as text, an integer column a whole number (an unsigned one only when it is
not negative), a real column a number, an array a list of strings, and a
content field its JSON text. A value that does not fit leaves the field at
its default (runtime is lenient).
"""

from __future__ import annotations

from typing import Callable, Mapping

from ..record import RECORD_COLUMNS, Column, RequestRecord
from ._convention import Convention, content_text, integer, number, string_list, text

_NULLABLE = "Nullable("


def _kind(column: Column) -> str:
    """Which copy a column's type asks for."""
    if column.content:
        return "content"
    kind = column.type[len(_NULLABLE):-1] if column.type.startswith(_NULLABLE) else column.type
    if kind in ("String", "LowCardinality(String)"):
        return "text"
    if kind.startswith("UInt"):
        return "unsigned"
    if kind.startswith("Int"):
        return "signed"
    if kind.startswith("Float"):
        return "number"
    if kind.startswith("Array("):
        return "list"
    raise TypeError(f"record field {column.field}: no copy from an attribute into a {column.type} column")


def _pairs(kind: str) -> tuple[tuple[str, str], ...]:
    return tuple((column.attribute, column.field) for column in RECORD_COLUMNS
                 if column.attribute and _kind(column) == kind)


def _unsigned(value: object) -> int | None:
    whole = integer(value)
    return whole if whole is not None and whole >= 0 else None


# Each declared attribute's field and how its value is copied (None: the field keeps its default),
# bound once: this runs for every request span, over the span's attributes (~15) rather than over
# every declared one (~40).
_COPIES: dict[str, tuple[str, Callable[[object], object]]] = {
    key: (field_name, copy)
    for kind, copy in (("text", text), ("unsigned", _unsigned), ("signed", integer), ("number", number),
                       ("list", string_list), ("content", content_text))
    for key, field_name in _pairs(kind)}


def fill(attributes: Mapping[str, object], record: RequestRecord) -> None:
    copies = _COPIES
    for key, value in attributes.items():
        found = copies.get(key)
        if found is None or value is None:
            continue
        field_name, copy = found
        copied = copy(value)
        if copied is not None:
            setattr(record, field_name, copied)


CONVENTION = Convention(
    name="declared", fill=fill,
    attributes=frozenset(column.attribute for column in RECORD_COLUMNS if column.attribute))
