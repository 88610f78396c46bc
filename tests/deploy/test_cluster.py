"""Cluster DDL generated from the same migrations: parsed by ClickHouse
(chdb's parser), checked statement by statement, and the local tables run in
chdb with replication taken out (chdb has no Keeper and no remote servers)."""

from __future__ import annotations

import re

import pytest

from promptprism.collector.store import cluster
from promptprism.collector.store.migrations import load_migrations

CLUSTER = "prism_cluster"


def _all(database: str) -> list[str]:
    return cluster.preamble(database, CLUSTER) + [
        statement
        for migration in cluster.load_cluster_migrations(database=database, retention_days=30, cluster=CLUSTER)
        for statement in migration.statements
    ]


def _single_server_tables(database: str) -> set[str]:
    """The tables the migrations leave behind (a rebuild's staging table is dropped again, and so are
    `blocks` and `request_content` by migration 050)."""
    tables = set()
    for migration in load_migrations(database=database, retention_days=30):
        for statement in migration.statements:
            match = re.match(rf"CREATE TABLE IF NOT EXISTS {database}\.(\w+)", statement)
            if match and not match.group(1).endswith(cluster.REBUILD_SUFFIX):
                tables.add(match.group(1))
            dropped = re.match(rf"DROP TABLE IF EXISTS {database}\.(\w+)$", statement)
            if dropped and not dropped.group(1).endswith(cluster.REBUILD_SUFFIX):
                tables.discard(dropped.group(1))
    return tables


def test_every_statement_parses(store):
    for statement in _all("promptprism"):
        assert store.query(f"EXPLAIN AST {statement}"), statement


def test_local_replicated_and_distributed_tables_for_every_table():
    statements = _all("promptprism")
    tables = _single_server_tables("promptprism")
    assert {"requests", "request_docs", "trace_threads", "tools", "contents", "otel_traces"} <= tables
    assert not {"blocks", "request_content"} & tables  # dropped by migration 050 (`blocks` is a view since)
    for table in tables:
        (local,) = [s for s in statements if s.startswith(f"CREATE TABLE IF NOT EXISTS promptprism.{table}_local ")]
        assert f"ON CLUSTER {CLUSTER}" in local
        assert re.search(r"ENGINE = Replicated\w*MergeTree\('/clickhouse/tables/\{shard\}/\{database\}/\{table\}', '\{replica\}'", local)
        assert "non_replicated_deduplication_window" not in local
        (distributed,) = [s for s in statements if s.startswith(f"CREATE TABLE IF NOT EXISTS promptprism.{table} ")]
        assert distributed.endswith(
            f"AS promptprism.{table}_local ENGINE = Distributed({CLUSTER}, promptprism, {table}_local, "
            f"{cluster.SHARDING_KEYS[table]})")
    # A request, its tools and spans share a shard; a conversation's documents and their lookup rows another.
    assert {cluster.SHARDING_KEYS[t] for t in ("requests", "tools")} == {"cityHash64(trace_id)"}
    assert {cluster.SHARDING_KEYS[t] for t in ("request_docs", "trace_threads")} == {"cityHash64(thread)"}


def test_alters_and_views_use_local_tables():
    for statement in _all("promptprism"):
        if statement.startswith("ALTER TABLE"):
            assert f"ON CLUSTER {CLUSTER}" in statement
            target = re.match(r"ALTER TABLE promptprism\.(\w+)", statement).group(1)
            assert target.endswith("_local") or " COLUMN " in statement, statement
        if statement.startswith("CREATE MATERIALIZED VIEW"):
            assert re.search(r"TO promptprism\.\w+_local ", statement)
            assert re.search(r"FROM promptprism\.\w+_local\b", statement)
    # A column added to a local table is added to its Distributed table too.
    statements = _all("promptprism")
    for statement in statements:
        if statement.startswith("ALTER TABLE") and "_local" in statement and " ADD COLUMN " in statement:
            twin = statement.replace("_local ON CLUSTER", " ON CLUSTER", 1)
            assert twin in statements


def _runnable_in_chdb(statement: str, database: str) -> str:
    """A cluster statement as chdb can run it: no ON CLUSTER, replication taken
    out, and a Merge table over the local table in place of the Distributed one
    (the same read path for one shard: the original name over ``X_local``)."""
    plain = statement.replace(f" ON CLUSTER {CLUSTER}", "")
    plain = re.sub(r"Replicated(\w*MergeTree)\('[^']*', '[^']*'(, )?", r"\1(", plain)
    # A Merge table takes no inserts: the one shard's local table does.
    plain = re.sub(rf"^INSERT INTO {database}\.(\w+) ", rf"INSERT INTO {database}.\1_local ", plain)
    return re.sub(rf"ENGINE = Distributed\({CLUSTER}, {database}, (\w+), .*\)$",
                  lambda match: f"ENGINE = Merge({database}, '^{match.group(1)}$')", plain)


def test_local_tables_run_in_chdb_without_replication(store):
    """The cluster DDL with replication taken out: local tables, their ALTERs, the
    views over the original names; and the views answer through those names."""
    database = store.database + "_cluster"
    store.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
    try:
        for statement in _all(database):
            if statement.startswith("CREATE DATABASE"):
                continue
            store.execute(_runnable_in_chdb(statement, database))
        tables = {row["name"] for row in store.query(f"SHOW TABLES FROM {database}")}
        for table in _single_server_tables("promptprism"):
            assert f"{table}_local" in tables
        columns = {row["name"] for row in store.query(f"DESCRIBE TABLE {database}.requests_local")}
        assert "received_at" in columns
        # An event-only system prompt written to the local tables, read through the views.
        store.execute(f"INSERT INTO {database}.requests_local (started_at, trace_id, request_id, mapped) "
                      f"VALUES (now64(9), '{'ab' * 16}', '{'cd' * 8}', false)")
        # With the contribution ingest computes for it (conventions/events.py).
        store.execute(f"INSERT INTO {database}.genai_events_local (timestamp, trace_id, span_id, event_name, body, "
                      "contribution, message_has_parts, system_text) "
                      f"VALUES (now64(9), '{'ab' * 16}', '{'cd' * 8}', 'gen_ai.system.message', "
                      "'{\"content\": \"Be brief.\"}', 'input', true, 'Be brief.')")
        rows = store.query(f"SELECT prompt_bytes, block_count FROM {database}.prompt_requests")
        assert rows == [{"prompt_bytes": len("Be brief."), "block_count": 1}]
        assert store.query(f"SELECT name, size FROM {database}.prompt_blocks") == [{"name": "system", "size": 9}]
    finally:
        store.execute(f"DROP DATABASE IF EXISTS {database} SYNC")


def test_the_contents_rebuild_of_006_on_a_cluster():
    """Staging table beside the live one, copied through the Distributed tables
    (in the foreground), swapped on every node, dropped with its Distributed twin."""
    (migration,) = [m for m in cluster.load_cluster_migrations(database="promptprism", retention_days=30,
                                                                cluster=CLUSTER) if m.version == 6]
    statements = list(migration.statements)
    local = next(s for s in statements if s.startswith("CREATE TABLE IF NOT EXISTS promptprism.contents__rebuild_local "))
    assert "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}')" in local
    assert "ORDER BY (day, sha256)" in local and "replicated_deduplication_window = 10000" in local
    assert next(s for s in statements if s.startswith("CREATE TABLE IF NOT EXISTS promptprism.contents__rebuild ")) \
        .endswith("ENGINE = Distributed(prism_cluster, promptprism, contents__rebuild_local, cityHash64(sha256))")
    copies = [s for s in statements if s.startswith("INSERT INTO")]
    assert len(copies) == 2 and all(s.endswith("SETTINGS distributed_foreground_insert = 1") for s in copies)
    assert "EXCHANGE TABLES promptprism.contents_local AND promptprism.contents__rebuild_local " \
           f"ON CLUSTER {CLUSTER}" in statements
    assert statements[-2:] == [f"DROP TABLE IF EXISTS promptprism.contents__rebuild ON CLUSTER {CLUSTER}",
                               f"DROP TABLE IF EXISTS promptprism.contents__rebuild_local ON CLUSTER {CLUSTER}"]


def test_the_rebuilt_contents_keep_every_day_on_one_shard_in_chdb(store):
    """The cluster DDL up to 005, a text stored on seven days and merged, then 006: every day reads back."""
    database = store.database + "_cluster"
    store.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
    migrations = cluster.load_cluster_migrations(database=database, retention_days=30, cluster=CLUSTER)
    try:
        for migration in migrations:
            if migration.version == 6:
                store.execute(f"INSERT INTO {database}.contents_local (day, sha256, size, content) "
                              "SELECT today() - number, 'abc', 4, 'text' FROM numbers(7)")
                store.execute(f"OPTIMIZE TABLE {database}.contents_local FINAL")
                assert store.query(f"SELECT count() AS n FROM {database}.contents FINAL") == [{"n": 1}]
            for statement in migration.statements:
                store.execute(_runnable_in_chdb(statement, database))
        assert store.query(f"SELECT count() AS n FROM {database}.contents FINAL") == [{"n": 7}]
        assert store.query(f"SELECT sorting_key FROM system.tables WHERE database = {{db:String}} "
                           f"AND name = 'contents_local'", {"db": database}) == [{"sorting_key": "day, sha256"}]
    finally:
        store.execute(f"DROP DATABASE IF EXISTS {database} SYNC")


def test_plain_views_are_created_on_cluster_over_the_distributed_tables():
    views = [statement for statement in _all("promptprism") if statement.startswith("CREATE VIEW")]
    assert {re.match(r"CREATE VIEW IF NOT EXISTS promptprism\.(\w+) ", view).group(1) for view in views} >= \
        {"event_prompts", "prompt_requests", "prompt_blocks"}
    for view in views:
        assert f" ON CLUSTER {CLUSTER} AS " in view
        assert "_local" not in view  # every shard's rows, through the Distributed tables


def test_script_records_versions_and_configuration_selects_the_cluster():
    text = cluster.script(database="promptprism", retention_days=14, cluster=CLUSTER)
    assert "toIntervalDay(14)" in text or "INTERVAL 14 DAY" in text
    for migration in load_migrations(database="promptprism", retention_days=14):
        # A Python step is left to `promptprism migrate` (or start-up): the script cannot run it.
        recorded = f"VALUES ({migration.version}, '{migration.name}');" in text
        assert recorded != migration.is_python, migration.name
    assert cluster.cluster_name({"PROMPTPRISM_CLICKHOUSE_CLUSTER": "prism"}) == "prism"
    assert cluster.cluster_name({}) is None
    with pytest.raises(cluster.ClusterDDLError):
        cluster.cluster_name({"PROMPTPRISM_CLICKHOUSE_CLUSTER": "x; DROP"})


def test_unknown_statement_is_refused():
    with pytest.raises(cluster.ClusterDDLError):
        cluster.translate("DROP TABLE promptprism.requests", CLUSTER)
    with pytest.raises(cluster.ClusterDDLError):
        cluster.translate("INSERT INTO promptprism.contents VALUES ('2025-01-01', 'a', 1, 'x')", CLUSTER)
