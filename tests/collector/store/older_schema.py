"""Rows as a collector of an older version wrote them, for tests that migrate a store written before a migration.

Today's write path lays out every column the record declares; a store at an
older schema version lacks the later ones. ``write_as_of`` inserts the
write path's tables with those columns left out, which is exactly what the
older collector wrote.
"""

from __future__ import annotations

import contextlib
import hashlib

import pyarrow as pa
import pyarrow.compute as pc

from promptprism.collector.record import CONTENT_COLUMNS, REQUEST_COLUMNS, REQUEST_TOOL_COLUMNS, content_columns
from promptprism.collector.store.migrations import applied_versions, load_migrations
from promptprism.collector.write.documents import document_inputs
from promptprism.collector.write.rows import BLOCK_ARRAYS, TableSet, build_tables


def stored_columns(store, table: str) -> set[str]:
    rows = store.query("DESCRIBE TABLE {db:Identifier}.{table:Identifier}", {"db": store.database, "table": table})
    return {row["name"] for row in rows}


def stored_tables(store) -> set[str]:
    rows = store.query("SELECT name FROM system.tables WHERE database = {db:String}", {"db": store.database})
    return {row["name"] for row in rows}


@contextlib.contextmanager
def store_before(schema_before, version: int, records):
    """A database of its own at the schema just before migration ``version`` (the ``schema_before``
    fixture) holding ``records`` as a collector of that time wrote them (``write_as_of``); dropped afterwards."""
    with schema_before(version) as store:
        assert max(applied_versions(store)) < version <= max(known.version for known in load_migrations(
            database=store.database, retention_days=store.retention_days))
        write_as_of(store, build_tables([], records))
        yield store


@contextlib.contextmanager
def current_store(migrated_database, records):
    """A database of its own at today's schema (the ``migrated_database`` fixture) holding ``records``
    as today's collector writes them: what a migrated store must answer like, when the read side
    cannot read the store before the migration."""
    with migrated_database() as store:
        write_as_of(store, build_tables([], records))
        yield store


def write_as_of(store, tables: TableSet) -> None:
    """Insert each non-empty table with only the columns the store's table has now; before
    migration 050, each request's blocks and content references as rows of `blocks` and
    `request_content` too (before 048, only there); before migration 046, a request's tools as
    rows of `tools`; before migration 040, content keys as hex digests; before migration 021,
    captured content goes into the `requests` columns it was held in then."""
    if max(applied_versions(store)) < 51:
        tables = requests_whole(tables)
    if max(applied_versions(store)) < 50:
        tables = documents_unfolded(tables)
    if "tool_names" not in stored_columns(store, "requests"):
        tables = tools_in_their_table(tables)
    if max(applied_versions(store)) < 40:
        tables = hex_content_keys(tables)
    if set(CONTENT_FIELDS_BEFORE_021) <= stored_columns(store, "requests"):
        tables = _content_in_requests(tables)
    present_tables = stored_tables(store)
    legacy = [(name, tables.tables[name]) for name in LEGACY_TABLES if name in tables.tables]
    for name, table in [*legacy, *tables.non_empty()]:
        if name not in present_tables or not table.num_rows:
            continue
        present = stored_columns(store, name)
        store.insert(name, table.select([column for column in table.column_names if column in present]))


# Tables the write path filled before migration 050 (their rows are in `request_docs` since).
LEGACY_TABLES = ("request_content", "blocks")
_LEGACY_BLOCK_KEYS = ("started_at", "trace_id", "request_id", "service", "model", "process_kind", "conversation_id")


def inputs_of(documents: pa.Table | None) -> pa.Table | None:
    """`request_docs` rows as the inputs their documents were built from (the layout the store's
    DEFAULT packs): what the layouts before 050 and 051 are made of."""
    if documents is None or "doc" not in documents.column_names:
        return documents
    return document_inputs(documents)


def requests_whole(tables: TableSet) -> TableSet:
    """The layout before migration 051: `requests` with every column of the record, as the document
    inputs hold them (its tool arrays too)."""
    documents = inputs_of(tables.tables.get("request_docs"))
    if documents is None:
        return tables
    columns = [column.name for column in REQUEST_COLUMNS + REQUEST_TOOL_COLUMNS]
    return TableSet({**tables.tables, "requests": documents.select(columns)}, tables.content_keys, tables.spans,
                    tables.requests)


def documents_unfolded(tables: TableSet) -> TableSet:
    """The layout before migration 050: the block arrays and content references of each
    `request_docs` row as rows of `blocks` (one per block) and `request_content` (one per request
    with captured content)."""
    documents = inputs_of(tables.tables.get("request_docs"))
    if documents is None or not documents.num_rows:
        return tables
    parents = pc.list_parent_indices(documents.column("block_index"))
    blocks = {key: documents.column(key).take(parents) for key in _LEGACY_BLOCK_KEYS}
    for array, column in BLOCK_ARRAYS.items():
        blocks[column] = pc.list_flatten(documents.column(array))
    captured = pc.greater(pc.add(*(pc.cast(documents.column(f"{column.name}_form"), pa.int32())
                                   for column in CONTENT_COLUMNS[:2])), 0)
    for column in CONTENT_COLUMNS[2:]:
        captured = pc.or_(captured, pc.greater(documents.column(f"{column.name}_form"), 0))
    with_content = documents.filter(captured)
    threads = pc.if_else(pc.equal(with_content.column("conversation_id"), ""), with_content.column("trace_id"),
                         with_content.column("conversation_id"))
    references = pa.table({"thread": threads, "started_at": with_content.column("started_at"),
                           "request_id": with_content.column("request_id"),
                           **{part.name: with_content.column(part.name)
                              for column in CONTENT_COLUMNS for part in content_columns(column)}})
    return TableSet({**tables.tables, "blocks": pa.table(blocks), "request_content": references},
                    tables.content_keys, tables.spans, tables.requests)


def tools_in_their_table(tables: TableSet) -> TableSet:
    """The layout before migration 046: each request's tools (its row's arrays) as rows of `tools`."""
    requests = tables.tables.get("requests")
    if requests is None or "tool_names" not in requests.column_names:
        return tables
    columns = {name: [] for name in ("started_at", "trace_id", "request_id", "service", "index", "name", "size",
                                     "sha256", "content_sha256", "redacted")}
    for row in requests.to_pylist():
        for index, values in enumerate(zip(row["tool_names"], row["tool_sizes"], row["tool_sha256"],
                                           row["tool_content_sha256"], row["tool_redacted"])):
            for name, value in zip(columns, (row["started_at"], row["trace_id"], row["request_id"], row["service"],
                                             index, *values)):
                columns[name].append(value)
    old = tables.tables.get("tools")
    rows = pa.table(columns, schema=old.schema) if old is not None else pa.table(columns)
    converted = {**tables.tables, "tools": pa.concat_tables([old, rows]) if old is not None else rows}
    return TableSet(converted, tables.content_keys, tables.spans, tables.requests)


# The content fields `requests` held as JSON text before migration 021 (now
# in request_content and contents), in the columns that migration drops.
CONTENT_FIELDS_BEFORE_021 = ("system_instructions", "input_messages", "output_messages", "template_variables")


def hex_content_keys(tables: TableSet) -> TableSet:
    """The layout before migration 040: `contents` keyed by the text's whole sha256 in hex, the
    `request_content` key lists of those, and a block's or tool's content_sha256 set whenever its
    text is stored (the sha256 itself for text as sent). Every key's text must be in the tables."""
    converted = dict(tables.tables)
    contents = tables.tables.get("contents", pa.table({"sha256": pa.array([], pa.binary()), "content": []}))
    digests = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in contents.column("content").to_pylist()]
    by_key = {digest[:32]: digest for digest in digests}
    if "contents" in converted:
        converted["contents"] = contents.set_column(contents.column_names.index("sha256"), "sha256",
                                                    pa.array(digests, pa.string()))
    references = tables.tables.get("request_content")
    if references is not None:
        for index, name in enumerate(references.column_names):
            if name.endswith("_keys"):
                keys = [[by_key[key.hex()] for key in row] for row in references.column(name).to_pylist()]
                references = references.set_column(index, name, pa.array(keys, pa.list_(pa.string())))
        converted["request_content"] = references
    stored = set(digests)
    for name in ("blocks", "tools"):
        table = tables.tables.get(name)
        if table is not None:
            pointers = [pointer or (sha256 if sha256 in stored else "") for sha256, pointer in
                        zip(table.column("sha256").to_pylist(), table.column("content_sha256").to_pylist())]
            converted[name] = table.set_column(table.column_names.index("content_sha256"), "content_sha256",
                                               pa.array(pointers, pa.string()))
    return TableSet(converted, tables.content_keys, tables.spans, tables.requests)


def _content_in_requests(tables: TableSet) -> TableSet:
    """The layout before migration 021: each content field's JSON text in `requests`, joined back from
    `request_content` and the item texts in `contents` (read.content), and no `request_content`."""
    from promptprism.collector.read import content

    texts = {(str(row["day"]), row["sha256"]): row["content"] for row in tables.tables["contents"].to_pylist()}
    requests = tables.tables["requests"]
    days = {row["request_id"]: str(row["started_at"].date()) for row in requests.select(
        ["request_id", "started_at"]).to_pylist()}
    references = {row["request_id"]: {**row, "content_day": days[row["request_id"]]}
                  for row in tables.tables.get("request_content", pa.table({"request_id": []})).to_pylist()}
    ids = requests.column("request_id").to_pylist()
    for name in CONTENT_FIELDS_BEFORE_021:
        values = [content.joined_text(references[i], name, texts) if i in references else "" for i in ids]
        requests = requests.append_column(name, pa.array(values, pa.string()))
    kept = {name: table for name, table in tables.tables.items() if name != "request_content"}
    return TableSet({**kept, "requests": requests}, tables.content_keys, tables.spans, tables.requests)
