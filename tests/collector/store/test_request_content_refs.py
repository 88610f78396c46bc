"""A request's content references packed into one column (migration 047).

A store written before the migration (twenty item columns in
`request_content`) answers every request and its trace after it as a store
written today; only `content_refs` is stored afterwards, rows written since
are packed by the store itself from the columns the write path names, and a
run interrupted after the table exchange can run again without losing a
row.
"""

from __future__ import annotations

import pytest

from promptprism.collector.read import lookups
from promptprism.collector.record import REQUEST_CONTENT_COLUMNS
from promptprism.collector.store.migrations import load_migrations, migrate
from promptprism.collector.write.rows import build_tables

from .older_schema import current_store, stored_columns, store_before, write_as_of
from .test_request_content import conversation, expected, served

pytestmark = pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)

KEYS = ("thread", "started_at", "request_id")
ITEM_COLUMNS = {column.name for column in REQUEST_CONTENT_COLUMNS} - set(KEYS)


def stored_part_columns(store) -> set[str]:
    """The columns the active parts of `request_content` hold on disk."""
    rows = store.query("SELECT DISTINCT column FROM system.parts_columns WHERE active AND database = {db:String} "
                       "AND table = 'request_content'", {"db": store.database})
    return {row["column"] for row in rows}


def answers(store, records) -> tuple[list, dict]:
    return [lookups.request(store, record.request_id) for record in records], lookups.trace(store, records[0].trace_id)


@pytest.fixture
def store_before_047(schema_before):
    records = conversation(0x470, 5)
    with store_before(schema_before, 47, records) as store:  # the item columns stored one by one
        yield store, records


def test_a_store_written_before_the_migration_answers_as_one_written_today(store_before_047, migrated_database):
    store, records = store_before_047
    assert ITEM_COLUMNS <= stored_part_columns(store)
    assert "047_request_content_refs.sql" in migrate(store, up_to=47)
    assert stored_part_columns(store) == {*KEYS, "content_refs"}
    migrate(store)  # on to today's schema (the references in each request's document since 048)
    with current_store(migrated_database, records) as reference:
        assert answers(store, records) == answers(reference, records)
    for record in records:
        assert served(store, record) == expected(record)


def test_rows_written_after_it_are_packed_by_the_store(store_before_047):
    store, records = store_before_047
    migrate(store, up_to=47)
    later = conversation(0x470, 7)[5:]  # the conversation goes on: its next two requests
    assert ITEM_COLUMNS <= stored_columns(store, "request_content")  # still named by an INSERT
    write_as_of(store, build_tables([], later))
    assert stored_part_columns(store) == {*KEYS, "content_refs"}
    migrate(store)  # and, copied into their documents (migration 049), every request reads back whole
    for record in [*records, *later]:
        assert served(store, record) == expected(record)


def test_a_run_interrupted_after_the_exchange_runs_again(store_before_047):
    store, records = store_before_047
    (migration,) = [known for known in load_migrations(database=store.database, retention_days=store.retention_days)
                    if known.version == 47]
    exchange = next(index for index, statement in enumerate(migration.statements) if statement.startswith("EXCHANGE"))
    for statement in migration.statements[: exchange + 1]:
        store.execute(statement)
    # the new table is live (its item columns cannot be read), the old one not yet dropped
    assert stored_part_columns(store) == {*KEYS, "content_refs"}
    assert "047_request_content_refs.sql" in migrate(store)
    for record in records:
        assert served(store, record) == expected(record)
