"""`otel_traces` and `blocks` write parts under 64 MB compact (migration 045):
an insert past the default threshold (10 MB) makes a wide part before the
migration and a compact one (a few files instead of ~100) after it; the rows
read back the same, and running the migration again changes nothing.

`blocks` is a table only before migration 050 (a view of `request_docs` since,
with no parts of its own), so the store is migrated up to 045 alone
(``migrate(store, up_to=45)``) while the test inserts into it; migrated fully
afterwards, `otel_traces` keeps the setting."""

from __future__ import annotations

import pyarrow as pa
import pytest

from promptprism.collector.store.migrations import migrate
from promptprism.collector.write.rows import build_tables

from .older_schema import documents_unfolded, store_before
from .test_request_content import conversation

pytestmark = pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)

TABLES = ("otel_traces", "blocks")
# One insert of copies of a conversation's block rows this large (Arrow's size, about the
# uncompressed size ClickHouse counts): past the default wide-part threshold (10 MB) and
# well under the migration's 64 MB.
INSERT_BYTES = 20 * 1024 * 1024


def part_types(store, table: str) -> list[str]:
    rows = store.query("SELECT part_type FROM system.parts WHERE database = {db:String} AND table = {table:String} "
                       "AND active ORDER BY modification_time, name", {"db": store.database, "table": table})
    return [row["part_type"] for row in rows]


def wide_part_threshold(store, table: str) -> str:
    (row,) = store.query("SELECT create_table_query AS ddl FROM system.tables WHERE database = {db:String} "
                         "AND name = {table:String}", {"db": store.database, "table": table})
    return "64 MB" if "min_bytes_for_wide_part = 67108864" in row["ddl"] else "default"


def block_rows(store) -> dict:
    (row,) = store.query("SELECT count() AS rows, sum(size) AS bytes, uniqExact(request_id) AS requests "
                         "FROM {db:Identifier}.blocks", {"db": store.database})
    return {name: int(value) for name, value in row.items()}


@pytest.fixture
def store_before_045(schema_before):
    records = conversation(0x4500, 3)
    with store_before(schema_before, 45, records) as store:
        yield store, records


def test_an_insert_past_10_mb_is_compact_after_the_migration(store_before_045):
    store, records = store_before_045
    # the block rows a collector of that time wrote (today's write path keeps them in request_docs)
    blocks = documents_unfolded(build_tables([], records)).tables["blocks"]
    many = pa.concat_tables([blocks] * (INSERT_BYTES // blocks.nbytes + 1))
    assert all(wide_part_threshold(store, table) == "default" for table in TABLES)
    store.insert("blocks", many)
    assert part_types(store, "blocks")[-1] == "Wide"  # as before the migration
    before = block_rows(store)
    assert migrate(store, up_to=45) == ["045_compact_insert_parts.sql"]
    assert all(wide_part_threshold(store, table) == "64 MB" for table in TABLES)
    assert block_rows(store) == before
    store.insert("blocks", many)
    assert part_types(store, "blocks")[-1] == "Compact"
    after = block_rows(store)
    assert after["rows"] == before["rows"] + many.num_rows and after["requests"] == before["requests"]
    assert migrate(store, up_to=45) == []  # applied once
    # The later migrations (050 turns `blocks` into a view) leave otel_traces's setting as it is.
    assert "050_blocks_from_documents.sql" in migrate(store)
    assert wide_part_threshold(store, "otel_traces") == "64 MB"
    assert migrate(store) == []
