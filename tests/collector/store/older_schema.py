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
