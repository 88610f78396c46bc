"""Query parameters bound into the SQL text (store/inline.py), the binding chdb 2.1.x (ClickHouse 24.8) needs.

Run on whichever chdb is installed: `make test` runs this module on ClickHouse
26.x (where the store binds through chdb's own ``params`` and the two are
compared) and on 24.8 (where the store binds inline).
"""

from __future__ import annotations

import pytest

from promptprism.collector.store.base import StoreError
from promptprism.collector.store.inline import bind_inline

HOSTILE = ["plain", "O'Brien", "back\\slash", "trailing backslash\\", "\\", "\\'", "''", "tab\there", "tab\\there",
           "new\nline", "cr\rx", "nul\0x", "\x01\x1f\x7f", 'q"d', "`tick`", "{x:String}", "$$heredoc$$", "-- comment",
           "/* c */", "'; DROP TABLE requests; --", "uni ü 日本 🙂", "%_*", ""]

# `make test` runs this module on ClickHouse 24.8 too (tests/conftest.py).
pytestmark = pytest.mark.clickhouse


def test_a_bound_string_comes_back_byte_for_byte(store):
    for value in HOSTILE:
        [row] = store.query("SELECT {v:String} AS v, length({v:String}) AS n", {"v": value})
        assert row == {"v": value, "n": len(value.encode("utf-8"))}, repr(value)
        [row] = store.query(bind_inline("SELECT {v:String} AS v", {"v": value}))
        assert row["v"] == value, repr(value)


def test_inline_binding_selects_what_clickhouse_binding_selects(store):
    store.execute(f"CREATE TABLE {store.database}.names (name String, n Int64) ENGINE = MergeTree ORDER BY name")
    for index, value in enumerate(HOSTILE):
        store.execute(f"INSERT INTO {store.database}.names VALUES ({{name:String}}, {{n:Int64}})",
                      {"name": value, "n": index})
    for index, value in enumerate(HOSTILE):
        sql = (f"SELECT n FROM {{db:Identifier}}.names WHERE name = {{name:String}} AND n >= {{low:Int64}} "
               "ORDER BY n LIMIT {limit:UInt32}")
        params = {"db": store.database, "name": value, "low": -1, "limit": 5}
        inline = store.query(bind_inline(sql, params))
        assert inline == store.query(sql, params) == [{"n": index}], repr(value)


def test_placeholders_inside_literals_and_comments_stay_text():
    sql = "SELECT '{a:String}', `{a:String}`, $$ {a:String} $$ -- {a:String}\n, {a:String} /* {a:String} */"
    assert bind_inline(sql, {"a": "x"}) == (
        "SELECT '{a:String}', `{a:String}`, $$ {a:String} $$ -- {a:String}\n, 'x' /* {a:String} */")
    assert bind_inline("SELECT 'it''s {a:String}', {a:String}", {"a": "y"}) == "SELECT 'it''s {a:String}', 'y'"
    assert bind_inline("SELECT 'a\\'{a:String}', {a:String}", {"a": "z"}) == "SELECT 'a\\'{a:String}', 'z'"


def test_a_missing_or_malformed_value_is_a_store_error():
    with pytest.raises(StoreError, match="no value"):
        bind_inline("SELECT {a:String}", {})
    with pytest.raises(StoreError, match="not an integer"):
        bind_inline("SELECT {n:Int64}", {"n": "1 OR 1"})
    assert bind_inline("SELECT {n:UInt8}, {t:Identifier}", {"n": "7", "t": "we`ird"}) == "SELECT CAST(7 AS UInt8), `we\\`ird`"


def test_drops_are_made_synchronous_for_chdb_2():
    """chdb 2.1.x waits forever on the DROP after a DROP unless it is SYNC (store/embedded.py)."""
    from promptprism.collector.store.embedded import legacy_drop

    assert legacy_drop("DROP TABLE IF EXISTS db.prompt_blocks") == "DROP TABLE IF EXISTS db.prompt_blocks SYNC"
    assert legacy_drop("  drop view db.v;") == "drop view db.v SYNC"
    assert legacy_drop("DROP DATABASE IF EXISTS test_1 SYNC") == "DROP DATABASE IF EXISTS test_1 SYNC"
    assert legacy_drop("ALTER TABLE db.requests DROP COLUMN x") is None
    assert legacy_drop("SELECT 'DROP TABLE x'") is None


def test_two_drops_in_a_row_finish(store):
    """On chdb 2.1.x the second of two drops used to hang; on every version both finish and the tables are gone."""
    for name in ("first", "second"):
        store.execute(f"CREATE TABLE {store.database}.{name} (a UInt8) ENGINE = MergeTree ORDER BY a")
        store.execute(f"INSERT INTO {store.database}.{name} VALUES (1)")
    store.execute(f"CREATE VIEW {store.database}.third AS SELECT a FROM {store.database}.second")
    for name in ("first", "third", "second"):
        store.execute(f"DROP TABLE IF EXISTS {store.database}.{name}")
    names = {row["name"] for row in store.query(f"SHOW TABLES FROM {store.database}")}
    assert not names & {"first", "second", "third"}
