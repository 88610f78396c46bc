"""`contents` in granules of 32 rows and 16 KB compression blocks (migration 052): a store written
before it holds the same text after it, every request and trace reads the same, text written
afterwards lands in the rebuilt table, and a run stopped before it was recorded runs again."""

from __future__ import annotations

import pytest

from promptprism.collector.read import lookups
from promptprism.collector.store.migrations import migrate
from promptprism.collector.write.rows import build_tables

from .older_schema import current_store, store_before, write_as_of
from .test_request_content import conversation

pytestmark = pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)

MIGRATION = "052_contents_small_granules.sql"


def _settings(store) -> tuple[str, str]:
    (row,) = store.query("SELECT create_table_query AS ddl FROM system.tables "
                         "WHERE database = {db:String} AND name = 'contents'", {"db": store.database})
    ddl = row["ddl"]
    return ("32" if "index_granularity = 32" in ddl else "128" if "index_granularity = 128" in ddl else "other",
            "16 KB" if "max_compress_block_size = 16384" in ddl else "default")


def _text(store) -> list[tuple[str, str, int, str]]:
    rows = store.query("SELECT toString(day) AS day, hex(sha256) AS key, size, content, count() AS copies "
                       "FROM {db:Identifier}.contents GROUP BY day, sha256, size, content ORDER BY day, key",
                       {"db": store.database})
    return [(row["day"], row["key"], int(row["size"]), row["content"], int(row["copies"])) for row in rows]


@pytest.fixture
def store_before_052(schema_before):
    records = conversation(0x5200, 3)
    with store_before(schema_before, 52, records) as store:
        yield store, records


def test_a_store_written_before_the_migration_reads_the_same_after_it(store_before_052, migrated_database):
    store, records = store_before_052
    with current_store(migrated_database, records) as reference:
        before = [lookups.request(reference, record.request_id) for record in records]
        trace_before = lookups.trace(reference, records[2].trace_id)
    text_before = _text(store)
    assert text_before and all(copies == 1 for *_, copies in text_before)
    assert _settings(store) == ("128", "default")
    assert MIGRATION in migrate(store)
    assert _settings(store) == ("32", "16 KB")
    # the catch-up copy (rows written during the copy) repeats what was copied, as in migrations 023
    # and 040: ReplacingMergeTree collapses the copies when the day's parts merge; reads take one
    after = _text(store)
    assert [text[:4] for text in after] == [text[:4] for text in text_before]
    assert all(copies in (1, 2) for *_, copies in after)
    assert [lookups.request(store, record.request_id) for record in records] == before
    assert lookups.trace(store, records[2].trace_id) == trace_before
    assert "You are careful.\n" in {block["content"] for block in trace_before["requests"][0]["prompt"]["blocks"]}
    later = conversation(0x5300, 2)
    write_as_of(store, build_tables([], later))
    assert lookups.request(store, later[1].request_id)["prompt"]["blocks"][0]["content"] == "You are careful.\n"
    store.execute(f"OPTIMIZE TABLE {store.database}.contents FINAL")
    assert all(copies == 1 for *_, copies in _text(store))
    assert not {"contents__rebuild"} & {row["name"] for row in store.query(
        "SELECT name FROM system.tables WHERE database = {db:String}", {"db": store.database})}


def test_the_migration_runs_again_after_an_interruption(store_before_052):
    store, records = store_before_052
    text_before = _text(store)
    migrate(store, up_to=52)
    # as if a run had stopped before it was recorded
    store.execute(f"DELETE FROM {store.database}.schema_migrations WHERE version = 52")
    assert MIGRATION in migrate(store)
    assert [(day, key, size, content) for day, key, size, content, _ in _text(store)] == \
        [(day, key, size, content) for day, key, size, content, _ in text_before]
    assert lookups.request(store, records[0].request_id)["prompt"]["blocks"][0]["content"] == "You are careful.\n"
