"""`request_ids` in granules of 1,024 rows (migration 042): a store written
before it is migrated, every request is still found by id and by prefix, and
a request written afterwards is found too (the view that fills the table was
made again for the rebuilt table)."""

from __future__ import annotations


import pytest

from promptprism.collector.read import lookups
from promptprism.collector.store.migrations import migrate
from promptprism.collector.write.rows import build_tables

from .older_schema import store_before, write_as_of
from .test_request_content import conversation

pytestmark = pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)


def _granularity(store) -> str:
    (row,) = store.query("SELECT create_table_query AS ddl FROM system.tables "
                         "WHERE database = {db:String} AND name = 'request_ids'", {"db": store.database})
    return "1024" if "index_granularity = 1024" in row["ddl"] else "default"


def _ids(store) -> list[str]:
    rows = store.query("SELECT request_id FROM {db:Identifier}.request_ids ORDER BY request_id LIMIT 1 BY request_id",
                       {"db": store.database})
    return [row["request_id"] for row in rows]


@pytest.fixture
def store_before_042(schema_before):
    records = conversation(0x420, 3)
    with store_before(schema_before, 42, records) as store:
        yield store, records


def test_requests_written_before_and_after_the_migration_are_found_by_id_and_prefix(store_before_042):
    store, records = store_before_042
    assert _granularity(store) == "default"
    assert "042_request_ids_small_granules.sql" in migrate(store)
    assert _granularity(store) == "1024"
    assert _ids(store) == sorted(record.request_id for record in records)
    later = conversation(0x430, 2)
    write_as_of(store, build_tables([], later))  # through the view made again for the rebuilt table
    assert _ids(store) == sorted(record.request_id for record in [*records, *later])
    for record in [*records, *later]:
        assert lookups.request(store, record.request_id)["request_id"] == record.request_id
    with pytest.raises(lookups.Ambiguous) as raised:  # a prefix reads the rebuilt table too
        lookups.request(store, later[0].request_id[:15])
    assert set(raised.value.candidates) == {record.request_id for record in later}
    assert not {"request_ids__rebuild"} & {row["name"] for row in store.query(
        "SELECT name FROM system.tables WHERE database = {db:String}", {"db": store.database})}


def test_the_migration_runs_again_after_an_interruption(store_before_042):
    store, records = store_before_042
    migrate(store)
    # as if a run had stopped after the exchange: the view gone, the staging table left
    store.execute(f"DROP TABLE IF EXISTS {store.database}.request_ids_mv")
    store.execute(f"DELETE FROM {store.database}.schema_migrations WHERE version = 42")
    assert "042_request_ids_small_granules.sql" in migrate(store)
    later = conversation(0x440, 1)
    write_as_of(store, build_tables([], later))
    assert _ids(store) == sorted(record.request_id for record in [*records, *later])
