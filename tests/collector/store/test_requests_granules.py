"""`requests` in granules of 1,024 rows (migration 043): a store written
before it answers every request and trace the same after it, holds each row
once, and a request written afterwards is found by id (the view that fills
`request_ids` reads the rebuilt table)."""

from __future__ import annotations


import pytest

from promptprism.collector.read import lookups
from promptprism.collector.store.migrations import migrate
from promptprism.collector.write.rows import build_tables

from .older_schema import current_store, store_before, write_as_of
from .test_request_content import conversation

pytestmark = pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)


def _settings(store) -> str:
    (row,) = store.query("SELECT create_table_query AS ddl FROM system.tables "
                         "WHERE database = {db:String} AND name = 'requests'", {"db": store.database})
    return "1024" if "index_granularity = 1024" in row["ddl"] else "default"


def _stored(store) -> list[tuple[str, int]]:
    rows = store.query("SELECT request_id, count() AS copies, max(lineage_key) AS lineage FROM {db:Identifier}.requests "
                       "GROUP BY request_id ORDER BY request_id", {"db": store.database})
    return [(row["request_id"], int(row["copies"]), int(row["lineage"])) for row in rows]


@pytest.fixture
def store_before_043(schema_before):
    records = conversation(0x4300, 3)
    with store_before(schema_before, 43, records) as store:
        yield store, records


def test_a_store_written_before_the_migration_answers_the_same_after_it(store_before_043, migrated_database):
    store, records = store_before_043
    # Today's read side needs later columns (migration 046): the answers are those of a store written today.
    with current_store(migrated_database, records) as reference:
        before = [lookups.request(reference, record.request_id) for record in records]
        trace_before = lookups.trace(reference, records[1].trace_id)
    stored_before = _stored(store)
    assert _settings(store) == "default"
    assert "043_requests_small_granules.sql" in migrate(store)
    assert _settings(store) == "1024"
    assert _stored(store) == stored_before and all(copies == 1 for _, copies, _ in stored_before)
    assert [lookups.request(store, record.request_id) for record in records] == before
    assert lookups.trace(store, records[1].trace_id) == trace_before
    later = conversation(0x4400, 2)
    write_as_of(store, build_tables([], later))  # request_ids through the view, from the rebuilt table
    for record in later:
        assert lookups.request(store, record.request_id)["request_id"] == record.request_id
    assert not {"requests__rebuild"} & {row["name"] for row in store.query(
        "SELECT name FROM system.tables WHERE database = {db:String}", {"db": store.database})}


def test_the_migration_runs_again_after_an_interruption(store_before_043):
    store, records = store_before_043
    migrate(store, up_to=43)
    # as if a run had stopped before it was recorded
    store.execute(f"DELETE FROM {store.database}.schema_migrations WHERE version = 43")
    assert "043_requests_small_granules.sql" in migrate(store)
    assert [request_id for request_id, _, _ in _stored(store)] == sorted(record.request_id for record in records)
    later = conversation(0x4500, 1)
    write_as_of(store, build_tables([], later))
    assert lookups.request(store, later[0].request_id)["request_id"] == later[0].request_id
