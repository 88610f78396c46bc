"""The fields ``record.py`` declares with their one span attribute, copied by their column's type. Pure.

Derived from the declaration once, at import: a text column takes the value
as text, an integer column a whole number (an unsigned one only when it is
not negative), a real column a number, an array a list of strings, and a
content field its JSON text. A value that does not fit leaves the field at
its default (runtime is lenient).
"""

from __future__ import annotations

from typing import Mapping

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


# (attribute, field) per kind of copy, bound once: this runs for every request span.
_TEXT, _UNSIGNED, _SIGNED = _pairs("text"), _pairs("unsigned"), _pairs("signed")
_NUMBER, _LIST, _CONTENT = _pairs("number"), _pairs("list"), _pairs("content")


def fill(attributes: Mapping[str, object], record: RequestRecord) -> None:
    get = attributes.get
    for key, field_name in _TEXT:
        value = get(key)
        if value is not None:
            setattr(record, field_name, text(value))
    for key, field_name in _UNSIGNED:
        whole = integer(get(key))
        if whole is not None and whole >= 0:
            setattr(record, field_name, whole)
    for key, field_name in _SIGNED:
        whole = integer(get(key))
        if whole is not None:
            setattr(record, field_name, whole)
    for key, field_name in _NUMBER:
        real = number(get(key))
        if real is not None:
            setattr(record, field_name, real)
    for key, field_name in _LIST:
        value = get(key)
        if value is not None:
            setattr(record, field_name, string_list(value))
    for key, field_name in _CONTENT:
        value = get(key)
        if value is not None:
            setattr(record, field_name, content_text(value))


CONVENTION = Convention(
    name="declared", fill=fill,
    attributes=frozenset(column.attribute for column in RECORD_COLUMNS if column.attribute))
