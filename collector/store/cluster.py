"""The same migrations, for a ClickHouse cluster.

Selected by configuration: ``PROMPTPRISM_CLICKHOUSE_CLUSTER=<cluster name>``
(a cluster from the servers' ``remote_servers``). Every statement of
``schema/NNN_*.sql`` is translated, not rewritten by hand, so the cluster
schema cannot drift from the single-server one:

* ``CREATE TABLE db.X … ENGINE = E`` becomes ``db.X_local ON CLUSTER`` with
  ``ReplicatedE('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')``
  plus ``db.X ON CLUSTER AS db.X_local ENGINE = Distributed(…)`` under the
  original name, so every query (API, CLI, Grafana) runs unchanged;
* ``ALTER TABLE db.X`` applies to ``db.X_local ON CLUSTER`` (and, for
  columns, to the Distributed table too);
* a materialized view reads and writes the local tables of its shard;
* a plain ``CREATE VIEW`` is created ``ON CLUSTER`` unchanged: it reads the
  Distributed tables under their original names, so it sees every shard,
  and ``FINAL`` in it runs on each shard, where a request's copies live;
* a table rebuild (migration 006: a ``X__rebuild`` staging table, ``INSERT …
  SELECT``, ``EXCHANGE TABLES``, ``DROP TABLE``): the copy runs once, through
  the Distributed tables (rows land on the shard of their sharding key, and
  the insert returns once they are there); the exchange swaps the local
  tables ``ON CLUSTER`` (each Distributed table names its local table, so it
  follows); a drop removes the Distributed and the local table.

Rows are sharded by trace id (``requests``, ``tools``, ``otel_traces``,
``genai_events``, ``otel_logs``): a request and its spans live on one shard, so
``FINAL`` collapses re-sent copies there and a co-located join is correct.
A request's document (``request_docs``, migration 048) is sharded by its
thread, so a conversation's documents, read together, are on one shard.
``contents`` is sharded by its hash, as it is content-addressed.

Print the DDL: ``python -m promptprism.collector.store.cluster --cluster NAME``
and feed it to ``clickhouse-client --multiquery``; or call
``migrate_cluster(store, cluster)``. It records the versions in a
``schema_migrations`` table replicated across the whole cluster, so a
collector's own start-up migration finds nothing left to do.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from .base import Store
from .migrations import Migration, apply_migrations, load_migrations

from ..config import PROMPTPRISM_CLICKHOUSE_CLUSTER

# ZooKeeper/Keeper path per shard; {shard} and {replica} are the servers'
# <macros>, {database} and {table} are filled in by ClickHouse itself.
REPLICA_PATH = "/clickhouse/tables/{shard}/{database}/{table}"
REPLICA_NAME = "{replica}"
# A rebuild's staging table is swapped into the live name afterwards and
# dropped (not SYNC) on a re-run; a path from its UUID (ClickHouse's own
# default_replica_path) never collides with the path of a table still live or
# not yet cleaned up. The macros are expanded when the table is created, so a
# path stays with its table through EXCHANGE.
REBUILD_REPLICA_PATH = "/clickhouse/tables/{uuid}/{shard}"
REBUILD_SUFFIX = "__rebuild"
# One replication group for the whole cluster (no {shard}): every node must
# see which migrations ran, whichever shard a collector connects to.
MIGRATIONS_PATH = "/clickhouse/tables/all/{database}/schema_migrations"

# The shard of a row. Trace id keeps a request with its tools and spans (and,
# until migration 050, its blocks); contents are addressed by hash.
SHARDING_KEYS = {
    "requests": "cityHash64(trace_id)",
    "blocks": "cityHash64(trace_id)",
    "tools": "cityHash64(trace_id)",
    # filled by a view on each shard's `requests` inserts: beside its request
    "request_ids": "cityHash64(trace_id)",
    # a conversation's key lists side by side, as the table is sorted
    "request_content": "cityHash64(thread)",
    # a conversation's documents on one shard: a trace's read of a thread's window is one shard's
    "request_docs": "cityHash64(thread)",
    # filled by a view on each shard's `request_docs` inserts: beside the thread's documents
    "trace_threads": "cityHash64(thread)",
    "contents": "cityHash64(sha256)",
    "otel_traces": "cityHash64(TraceId)",
    "otel_traces_trace_id_ts": "cityHash64(TraceId)",
    # GenAI content events live beside their request's rows: the read-time
    # join by (trace_id, span_id) then finds them on the request's shard, and
    # a re-sent copy collapses under FINAL there.
    "genai_events": "cityHash64(trace_id)",
    "otel_logs": "cityHash64(TraceId)",
    # The hourly rollups (migration 024): every computation of an hour on one
    # shard, where a newer one replaces the older on merge.
    **{table: "cityHash64(hour)" for table in ("rollup_hours", "prompt_parts_hourly", "prompt_requests_hourly",
                                               "cache_hourly")},
    "rollup_runs": "cityHash64(job)",
    # Metric points are never joined to anything: spread evenly.
    **{f"otel_metrics_{kind}": "rand()" for kind in ("sum", "gauge", "histogram", "exponential_histogram", "summary")},
}
DEFAULT_SHARDING_KEY = "rand()"

# A copy through Distributed tables returns only once every row is on its
# shard: the EXCHANGE that follows must see them (ClickHouse 23.x renamed
# insert_distributed_sync to this; 24.8 and 26.x take it).
DISTRIBUTED_COPY_SETTINGS = "SETTINGS distributed_foreground_insert = 1"

# Settings that exist under another name on replicated tables.
REPLICATED_SETTINGS = {"non_replicated_deduplication_window": "replicated_deduplication_window"}

LOCAL_SUFFIX = "_local"
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_CREATE_TABLE = re.compile(rf"^CREATE TABLE IF NOT EXISTS ({_IDENTIFIER})\.({_IDENTIFIER})\s", re.S)
_ENGINE = re.compile(r"ENGINE\s*=\s*(\w+)(?:\(([^()]*)\))?")
_CREATE_VIEW = re.compile(
    rf"^CREATE MATERIALIZED VIEW IF NOT EXISTS ({_IDENTIFIER})\.({_IDENTIFIER})\s+TO\s+({_IDENTIFIER})\.({_IDENTIFIER})\s",
    re.S)
_CREATE_PLAIN_VIEW = re.compile(rf"^CREATE VIEW IF NOT EXISTS ({_IDENTIFIER})\.({_IDENTIFIER})\s+AS\s", re.S)
_ALTER = re.compile(rf"^ALTER TABLE ({_IDENTIFIER})\.({_IDENTIFIER})\s+(.*)$", re.S)
_INSERT_SELECT = re.compile(rf"^INSERT INTO ({_IDENTIFIER})\.({_IDENTIFIER})\s*\([^()]*\)\s*SELECT\s", re.S)
_EXCHANGE = re.compile(
    rf"^EXCHANGE TABLES ({_IDENTIFIER})\.({_IDENTIFIER}) AND ({_IDENTIFIER})\.({_IDENTIFIER})$")
_DROP = re.compile(rf"^DROP TABLE IF EXISTS ({_IDENTIFIER})\.({_IDENTIFIER})$")


class ClusterDDLError(ValueError):
    """A migration statement this translator does not know how to distribute."""


def cluster_name(environ=None) -> str | None:
    """The configured cluster, or None for a single server."""
    value = (os.environ if environ is None else environ).get(PROMPTPRISM_CLICKHOUSE_CLUSTER, "").strip()
    if not value:
        return None
    if not re.fullmatch(_IDENTIFIER, value):
        raise ClusterDDLError(f"{PROMPTPRISM_CLICKHOUSE_CLUSTER}={value!r}: a cluster name is an identifier")
    return value


def _replicated_engine(match: re.Match, path: str = REPLICA_PATH) -> str:
    engine, arguments = match.group(1), (match.group(2) or "").strip()
    if engine.startswith("Replicated"):
        return match.group(0)
    replication = f"'{path}', '{REPLICA_NAME}'"
    return f"ENGINE = Replicated{engine}({replication}{', ' + arguments if arguments else ''})"


def _base_table(table: str) -> str:
    """The table a rebuild's staging table stands in for (``contents__rebuild`` → ``contents``)."""
    return table[: -len(REBUILD_SUFFIX)] if table.endswith(REBUILD_SUFFIX) else table


def _rename_settings(text: str) -> str:
    for plain, replicated in REPLICATED_SETTINGS.items():
        text = re.sub(rf"\b{plain}\b", replicated, text)
    return text


def translate(statement: str, cluster: str) -> list[str]:
    """One single-server statement → its cluster statements."""
    text = statement.strip()
    on_cluster = f"ON CLUSTER {cluster}"
    create = _CREATE_TABLE.match(text)
    if create:
        database, table = create.groups()
        body = text[create.end():]
        if not _ENGINE.search(body):
            raise ClusterDDLError(f"CREATE TABLE {table} has no ENGINE clause")
        path = REBUILD_REPLICA_PATH if table.endswith(REBUILD_SUFFIX) else REPLICA_PATH
        local_body = _rename_settings(_ENGINE.sub(lambda match: _replicated_engine(match, path), body, count=1))
        local = f"CREATE TABLE IF NOT EXISTS {database}.{table}{LOCAL_SUFFIX} {on_cluster} {local_body}"
        # A staging table is sharded like the table it replaces: the copy keeps every row on its shard.
        sharding = SHARDING_KEYS.get(_base_table(table), DEFAULT_SHARDING_KEY)
        distributed = (
            f"CREATE TABLE IF NOT EXISTS {database}.{table} {on_cluster} AS {database}.{table}{LOCAL_SUFFIX} "
            f"ENGINE = Distributed({cluster}, {database}, {table}{LOCAL_SUFFIX}, {sharding})"
        )
        return [local, distributed]
    view = _CREATE_VIEW.match(text)
    if view:
        database, name, target_database, target = view.groups()
        query = text[view.end():]
        # The view runs on each shard's inserts: read the local source table.
        query = re.sub(rf"\bFROM\s+{database}\.({_IDENTIFIER})\b",
                       lambda m: f"FROM {database}.{m.group(1)}{LOCAL_SUFFIX}", query)
        return [f"CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.{name} {on_cluster} "
                f"TO {target_database}.{target}{LOCAL_SUFFIX} {query}"]
    plain_view = _CREATE_PLAIN_VIEW.match(text)
    if plain_view:
        database, name = plain_view.groups()
        return [f"CREATE VIEW IF NOT EXISTS {database}.{name} {on_cluster} AS {text[plain_view.end():]}"]
    alter = _ALTER.match(text)
    if alter:
        database, table, action = alter.groups()
        statements = [f"ALTER TABLE {database}.{table}{LOCAL_SUFFIX} {on_cluster} {_rename_settings(action)}"]
        if re.match(r"(ADD|DROP|MODIFY|RENAME) COLUMN\b", action):
            # A Distributed table has its own column list; keep it in step.
            statements.append(f"ALTER TABLE {database}.{table} {on_cluster} {action}")
        return statements
    if _INSERT_SELECT.match(text):
        # Run once, on the node the migration talks to; INSERT has no ON CLUSTER.
        return [f"{text} {DISTRIBUTED_COPY_SETTINGS}"]
    exchange = _EXCHANGE.match(text)
    if exchange:
        database, first, other_database, second = exchange.groups()
        return [f"EXCHANGE TABLES {database}.{first}{LOCAL_SUFFIX} AND "
                f"{other_database}.{second}{LOCAL_SUFFIX} {on_cluster}"]
    drop = _DROP.match(text)
    if drop:
        database, table = drop.groups()
        return [f"DROP TABLE IF EXISTS {database}.{table} {on_cluster}",
                f"DROP TABLE IF EXISTS {database}.{table}{LOCAL_SUFFIX} {on_cluster}"]
    raise ClusterDDLError(f"cannot distribute statement: {text[:80]}…")


def load_cluster_migrations(*, database: str, retention_days: int, cluster: str) -> list[Migration]:
    if not re.fullmatch(_IDENTIFIER, cluster):
        raise ClusterDDLError(f"cluster name {cluster!r} must be an identifier")
    return [
        Migration(migration.version, migration.name,
                  tuple(out for statement in migration.statements for out in translate(statement, cluster)),
                  migration.apply)
        for migration in load_migrations(database=database, retention_days=retention_days)
    ]


def preamble(database: str, cluster: str) -> list[str]:
    return [
        f"CREATE DATABASE IF NOT EXISTS {database} ON CLUSTER {cluster}",
        f"CREATE TABLE IF NOT EXISTS {database}.schema_migrations ON CLUSTER {cluster} "
        "(version UInt32, name String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3)) "
        f"ENGINE = ReplicatedReplacingMergeTree('{MIGRATIONS_PATH}', '{{shard}}-{{replica}}') ORDER BY version",
    ]


def migrate_cluster(store: Store, cluster: str, *, up_to: int | None = None) -> list[str]:
    """Apply the not yet recorded migrations ON CLUSTER; return the names applied."""
    for statement in preamble(store.database, cluster):
        store.execute(statement)
    done = {int(row["version"]) for row in
            store.query(f"SELECT version FROM {store.database}.schema_migrations FINAL")}
    migrations = load_cluster_migrations(database=store.database, retention_days=store.retention_days,
                                         cluster=cluster)
    return apply_migrations(store, migrations, done, up_to=up_to)


def script(*, database: str, retention_days: int, cluster: str) -> str:
    """The whole cluster DDL as one ``clickhouse-client --multiquery`` script."""
    lines = [f"-- promptprism schema for cluster {cluster}: generated by "
             "`python -m promptprism.collector.store.cluster`; do not edit."]
    lines.extend(statement + ";" for statement in preamble(database, cluster))
    for migration in load_cluster_migrations(database=database, retention_days=retention_days, cluster=cluster):
        lines.append(f"\n-- {migration.name}")
        if migration.is_python:
            # Not recorded here: the first `promptprism migrate` or collector start-up runs it.
            lines.append("-- a Python step (a backfill): applied by `promptprism migrate` or the collector's "
                         "start-up migration, not by this script")
            continue
        lines.extend(statement + ";" for statement in migration.statements)
        # Migration names are our own file names ([a-z0-9_]), safe to quote.
        lines.append(f"INSERT INTO {database}.schema_migrations (version, name) "
                     f"VALUES ({migration.version}, '{migration.name}');")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m promptprism.collector.store.cluster",
                                     description="Print the promptprism schema as ON CLUSTER DDL.")
    parser.add_argument("--cluster", default=None, help=f"cluster name (default ${PROMPTPRISM_CLICKHOUSE_CLUSTER})")
    parser.add_argument("--database", default="promptprism")
    parser.add_argument("--retention-days", type=int, default=30)
    args = parser.parse_args(argv)
    cluster = args.cluster or cluster_name()
    if not cluster:
        parser.error(f"give --cluster or set {PROMPTPRISM_CLICKHOUSE_CLUSTER}")
    sys.stdout.write(script(database=args.database, retention_days=args.retention_days, cluster=cluster))
    return 0


if __name__ == "__main__":
    sys.exit(main())
