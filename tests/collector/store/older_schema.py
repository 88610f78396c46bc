"""Rows as a collector of an older version wrote them, for tests that migrate a store written before a migration.

Today's write path lays out every column the record declares; a store at an
older schema version lacks the later ones. ``write_as_of`` inserts the
write path's tables with those columns left out, which is exactly what the
older collector wrote.
"""

from __future__ import annotations

from promptprism.collector.write.rows import TableSet


def stored_columns(store, table: str) -> set[str]:
    rows = store.query("DESCRIBE TABLE {db:Identifier}.{table:Identifier}", {"db": store.database, "table": table})
    return {row["name"] for row in rows}


def write_as_of(store, tables: TableSet) -> None:
    """Insert each non-empty table with only the columns the store's table has now."""
    for name, table in tables.non_empty():
        present = stored_columns(store, name)
        store.insert(name, table.select([column for column in table.column_names if column in present]))


# The content fields `requests` held as JSON text before migration 021 (now
# in request_content and contents), in the columns that migration drops.
CONTENT_FIELDS_BEFORE_021 = ("system_instructions", "input_messages", "output_messages", "template_variables")


def with_content_columns(tables: TableSet, records) -> TableSet:
    """``tables`` with the content columns `requests` had before migration 021,
    filled from ``records`` as a collector of that version filled them."""
    import pyarrow as pa

    by_id = {record.request_id: record for record in records}
    requests = tables.tables["requests"]
    ids = requests.column("request_id").to_pylist()
    for name in CONTENT_FIELDS_BEFORE_021:
        requests = requests.append_column(name, pa.array([getattr(by_id[i], name) for i in ids], pa.string()))
    kept = {name: table for name, table in tables.tables.items() if name != "request_content"}
    return TableSet({**kept, "requests": requests}, tables.content_keys, tables.spans, tables.requests)
