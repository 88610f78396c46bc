"""One Arrow table ↔ Arrow IPC stream bytes. Pure, no I/O.

The one serialisation of a table the write path uses: a worker's tables
cross the process boundary this way (``convert.to_wire``), and spool files
hold them this way (``spool``). Arrow keeps column names and types, so bytes
written by an older collector load into a newer schema.
"""

from __future__ import annotations

import pyarrow as pa


def table_to_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def table_into(table: pa.Table, buffer: memoryview) -> int:
    """Write ``table``'s IPC stream at the start of ``buffer`` (writable); returns its length.
    Raises (``pa.ArrowException`` or ``OSError``) when it does not fit."""
    sink = pa.FixedSizeBufferWriter(pa.py_buffer(buffer))
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.tell()


def table_from_bytes(data: bytes) -> pa.Table:
    """Raises ``pa.ArrowException`` (``ArrowInvalid``) when ``data`` is not one IPC stream."""
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
