"""A request's document (``request_docs.doc``, migration 048), built where its export is converted.

The store can build it: migration 048's ``doc`` DEFAULT packs the row's
EPHEMERAL inputs with ``toJSONString``. That cost ~50 µs of the collector
process's CPU a request, inside the group INSERT that follows the last
acknowledgement of a burst, when the workers are idle (README "Ingest
throughput"). Built here, in the workers, the INSERT only stores it.

``document_array`` gives, for a table of document inputs (``rows.request_docs_table``),
exactly the bytes the DEFAULT gives for the same row — ClickHouse 24.8 and
26.x alike (tests/collector/write/test_documents.py inserts the inputs and
compares): the fields of ``DOCUMENT_COLUMNS`` in order as one JSON object,
then ``content_refs``: ``null`` when no content field was captured, else the
twenty content-reference columns as an object. ClickHouse's spelling:

- strings: ``"`` ``\\`` ``/`` escaped with a backslash, ``\\b \\f \\n \\r \\t``,
  the other control bytes as ``\\u00XX`` (upper-case hex), U+2028 and U+2029
  as ``\\u2028`` / ``\\u2029``; everything else as it is, DEL too;
- integers plain, booleans ``true``/``false``, a NULL ``null``;
- floats as their shortest round-trip digits laid out as ECMAScript's
  ``Number.prototype.toString`` does (fixed from 1e-6 up to 1e21, else
  ``1.5e-7``), without its ``+`` in the exponent; ``-0`` stays; NaN and the
  infinities are ``null``;
- a map as an object in its order; a content key as the lower-case hex of its
  16 bytes (else the ASCII-lowered first 32 bytes, as the DEFAULT does).

``documents_python`` is the definition; ``_documents.pyx`` is the same in one
C pass over the Arrow buffers and hands back (None) any input it does not take.
Without the compiled builder (no C compiler at install) the documents are
left to the store (``stored_rows``): the definition is ~10× its cost.
A field added to the record adds its column to ``record.py`` and to a new
``doc`` DEFAULT (README "Adding a field to the request record"); the test
that compares this builder with the DEFAULT keeps the two the same.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..record import REQUEST_CONTENT_COLUMNS, REQUEST_DOCUMENT_INPUT_COLUMNS, Column

# A document row's own columns: the keys, the thread it is filed under, which copy of a request wins
# (`merged_spans`, the DEFAULT's length(merged_span_ids)) and the document. What an INSERT names.
DOCUMENT_KEY_COLUMNS = ("thread", "trace_id", "request_id", "started_at")
DOCUMENT_ROW_COLUMNS = (*DOCUMENT_KEY_COLUMNS, "merged_spans", "doc")
_STORED_KEYS = ("trace_id", "request_id", "started_at")  # the inputs that are columns of the row too
# The document's fields, in the DEFAULT's order, with their declared types.
DOCUMENT_COLUMNS: tuple[Column, ...] = tuple(
    column for column in REQUEST_DOCUMENT_INPUT_COLUMNS
    if column.name not in _STORED_KEYS and column not in REQUEST_CONTENT_COLUMNS)
CONTENT_REF_COLUMNS: tuple[Column, ...] = REQUEST_CONTENT_COLUMNS
_FORMS = tuple(column.name for column in CONTENT_REF_COLUMNS if column.name.endswith("_form"))
CONTENT_KEY_BYTES = 16

# Kinds of value, from a column's declared ClickHouse type.
STRING, INTEGER, FLOAT, BOOL, MAP, KEY = "string", "integer", "float", "bool", "map", "key"


def value_kind(column_type: str) -> tuple[str, bool]:
    """``(kind, is_array)`` of a declared type: what a value of it looks like in a document."""
    array = column_type.startswith("Array(")
    inner = column_type[len("Array("):-1] if array else column_type
    if inner.startswith("Nullable("):
        inner = inner[len("Nullable("):-1]
    if inner.startswith("LowCardinality("):
        inner = inner[len("LowCardinality("):-1]
    if inner == "String":
        return STRING, array
    if inner in ("UInt8", "UInt16", "UInt32", "UInt64", "Int8", "Int16", "Int32", "Int64"):
        return INTEGER, array
    if inner == "Float64":
        return FLOAT, array
    if inner == "Bool":
        return BOOL, array
    if inner.startswith("Map("):
        return MAP, array
    raise ValueError(f"no document spelling for {column_type}")


def _kinds(columns: tuple[Column, ...]) -> list[tuple[str, str, bool]]:
    kinds = []
    for column in columns:
        kind, array = value_kind(column.type)
        if column.name.endswith("_keys") and column in CONTENT_REF_COLUMNS:
            kind = KEY
        kinds.append((column.name, kind, array))
    return kinds


DOCUMENT_KINDS = _kinds(DOCUMENT_COLUMNS)
CONTENT_REF_KINDS = _kinds(CONTENT_REF_COLUMNS)

# --- the definition ------------------------------------------------------------

_ESCAPED = re.compile(rb'[\x00-\x1f"\\/]|\xe2\x80[\xa8\xa9]')
_SHORT = {b'"': b'\\"', b"\\": b"\\\\", b"/": b"\\/", b"\b": b"\\b", b"\f": b"\\f", b"\n": b"\\n",
          b"\r": b"\\r", b"\t": b"\\t", "\u2028".encode(): b"\\u2028", "\u2029".encode(): b"\\u2029"}


def _escape(match: re.Match) -> bytes:
    found = match.group()
    return _SHORT.get(found) or b"\\u%04X" % found[0]


def json_string(value: bytes) -> bytes:
    """``value`` (UTF-8, or any bytes) as ClickHouse writes a String in JSON."""
    return b'"' + _ESCAPED.sub(_escape, value) + b'"'


def json_float(value: float) -> bytes:
    """A Float64 as ClickHouse writes it in JSON: ECMAScript's layout of the shortest digits, no '+'."""
    if math.isnan(value) or math.isinf(value):
        return b"null"
    if value == 0:
        return b"-0" if math.copysign(1.0, value) < 0 else b"0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)  # the decimal point's place after the first digit
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    count = len(digits)
    if count <= point <= 21:
        text = digits + "0" * (point - count)
    elif 0 < point <= 21:
        text = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        power = point - 1
        text = digits[0] + ("." + digits[1:] if count > 1 else "") + "e" + ("-" if power < 0 else "") + str(abs(power))
    return (sign + text).encode()


def json_key(key: bytes) -> bytes:
    """A content key as the DEFAULT spells it: hex of 16 bytes, else the ASCII-lowered first 32 bytes."""
    if len(key) == CONTENT_KEY_BYTES:
        return b'"' + key.hex().encode() + b'"'
    return json_string(key[:32].lower())


def _scalar(value: Any, kind: str) -> bytes:
    if kind == STRING:
        return json_string(value.encode("utf-8") if value is not None else b"")
    if kind == INTEGER:
        return b"%d" % (value or 0)
    if kind == FLOAT:
        return json_float(value)
    if kind == BOOL:
        return b"true" if value else b"false"
    if kind == KEY:
        return json_key(value or b"")
    # MAP: pyarrow gives a list of (key, value) pairs in the map's order
    return b"{" + b",".join(json_string(k.encode("utf-8")) + b":" + json_string((v or "").encode("utf-8"))
                            for k, v in (value or ())) + b"}"


def _value(value: Any, kind: str, array: bool, nullable: bool) -> bytes:
    if array:
        return b"[" + b",".join(_scalar(item, kind) for item in (value or ())) + b"]"
    if value is None and (nullable or kind == FLOAT):
        return b"null"
    return _scalar(value, kind)


def _object(columns: dict[str, list], kinds: list[tuple[str, str, bool]], nullable: dict[str, bool],
            row: int) -> bytes:
    return b"{" + b",".join(json_string(name.encode()) + b":" + _value(columns[name][row], kind, array, nullable[name])
                            for name, kind, array in kinds) + b"}"


_NULLABLE = {column.name: column.type.startswith("Nullable(") for column in (*DOCUMENT_COLUMNS, *CONTENT_REF_COLUMNS)}


def documents_python(table: pa.Table) -> list[bytes]:
    """Each row's document, from a table of document inputs (the definition)."""
    names = [name for name, _, _ in DOCUMENT_KINDS] + [name for name, _, _ in CONTENT_REF_KINDS]
    columns = {name: table.column(name).to_pylist() for name in names}
    documents = []
    for row in range(table.num_rows):
        body = _object(columns, DOCUMENT_KINDS, _NULLABLE, row)
        if sum(columns[form][row] or 0 for form in _FORMS) == 0:
            references = b"null"
        else:
            references = _object(columns, CONTENT_REF_KINDS, _NULLABLE, row)
        documents.append(body[:-1] + b',"content_refs":' + references + b"}")
    return documents


# --- the row the store keeps ------------------------------------------------------

try:  # the same documents in one C pass (README "Ingest throughput")
    from ._documents import documents as _compiled_documents
except ImportError:  # not built: the definition, slower
    _compiled_documents = None


def document_array(table: pa.Table) -> pa.Array:
    """The ``doc`` column of a table of document inputs."""
    if _compiled_documents is not None:
        built = _compiled_documents(table)
        if built is not None:
            return built
    return pa.array([document.decode("utf-8", "replace") for document in documents_python(table)],
                    pa.string())


def stored_rows(inputs: pa.Table) -> pa.Table:
    """The ``request_docs`` rows this collector inserts, from a table of inputs: with the compiled
    builder, the rows the store keeps (``document_rows``); without it, the inputs themselves (every
    one present), which the store packs into the same documents (its DEFAULT) for ~50 µs of the
    collector process's CPU a request, where the pure-Python definition takes ~400–500 µs."""
    if _compiled_documents is None:
        return with_every_input(inputs)
    return document_rows(inputs)


def in_stored_layout(table: pa.Table) -> pa.Table:
    """A ``request_docs`` table of either layout (an earlier collector's spool file holds the inputs;
    a collector with the compiled builder spools documents) as ``stored_rows`` lays them out here,
    so that it groups with the rows made now."""
    built = "doc" in table.column_names
    if _compiled_documents is None:
        return with_every_input(document_inputs(table) if built else table)
    return table if built else document_rows(table)


def with_every_input(table: pa.Table) -> pa.Table:
    """``table`` with each document input it lacks (a spool file of a collector older than the field)
    as the store fills an input an INSERT does not name: NULL when nullable, else the type's zero."""
    from ..store.declared import arrow_type  # the store's types, only here

    present = set(table.column_names)  # read once: this runs for every export
    for column in REQUEST_DOCUMENT_INPUT_COLUMNS:
        if column.name in present:
            continue
        kind = arrow_type(column.type)
        if column.type.startswith("Nullable("):
            default = None
        elif pa.types.is_list(kind) or pa.types.is_map(kind):
            default = []
        elif pa.types.is_string(kind) or pa.types.is_binary(kind):
            default = ""
        elif pa.types.is_boolean(kind):
            default = False
        else:
            default = 0
        table = table.append_column(column.name, pa.array([default] * table.num_rows, kind))
    return table


def document_rows(table: pa.Table) -> pa.Table:
    """``request_docs`` rows as the store keeps them (``DOCUMENT_ROW_COLUMNS``), from a table of inputs."""
    table = with_every_input(table)
    merged = table.column("merged_span_ids")
    lengths = pc.list_value_length(merged).fill_null(0).cast(pa.uint32())
    return pa.table({**{name: table.column(name) for name in DOCUMENT_KEY_COLUMNS},
                     "merged_spans": lengths, "doc": document_array(table)})


def document_inputs(rows: pa.Table) -> pa.Table:
    """``document_rows``' inverse: a table of ``request_docs`` rows back as the inputs their documents
    were built from (the layout ``rows.request_docs_table`` gives). For tests and tools that read a
    request's fields from rows laid out for the store; ``document_rows`` of it gives ``rows`` again.
    A NaN or infinite float, ``null`` in a document, comes back as NULL."""
    from ..store.declared import arrow_type  # the store's types, only here

    parsed = [json.loads(document) for document in rows.column("doc").to_pylist()]
    references = [found.get("content_refs") or {} for found in parsed]
    columns: dict[str, pa.Array] = {name: rows.column(name) for name in DOCUMENT_KEY_COLUMNS}
    for column in DOCUMENT_COLUMNS:
        kind = arrow_type(column.type)
        values = [found[column.name] for found in parsed]
        if pa.types.is_map(kind):
            values = [list(value.items()) for value in values]
        elif pa.types.is_floating(kind):  # 1e21 reads back as an int
            values = [None if value is None else float(value) for value in values]
        columns[column.name] = pa.array(values, kind)
    for column in CONTENT_REF_COLUMNS:
        kind = pa.list_(pa.binary()) if column.name.endswith("_keys") else arrow_type(column.type)
        empty = 0 if column.name.endswith("_form") else []
        values = [found.get(column.name, empty) for found in references]
        if column.name.endswith("_keys"):
            values = [[bytes.fromhex(key) for key in keys] for keys in values]
        columns[column.name] = pa.array(values, kind)
    order = ["thread", "trace_id", "request_id", *(c.name for c in REQUEST_DOCUMENT_INPUT_COLUMNS if c.name != "trace_id"
                                                     and c.name != "request_id")]
    return pa.table({name: columns[name] for name in order})
