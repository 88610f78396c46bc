"""Fixtures shared by every test: free ports and real chdb stores; and the
check that a test run leaves no process of its own behind.

chdb allows one data directory per process (README "Storage schema"), so the
whole test run shares one embedded session and each test gets a fresh
database in it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import uuid

import pytest

from support import (HAS_PROC, Schema, command_line, copy_schema, environment_of, free_port, parent_of,
                     process_ids, read_schema, wait_for_exit)

# Every process this run starts inherits this variable (test helpers that
# clear OTEL_* / PROMPTPRISM_* keep it), so the check below finds them even
# after they were orphaned, e.g. the workers of a collector killed with SIGKILL.
RUN_MARKER = "PYTEST_PROMPTPRISM_RUN"
RUN_ID = f"{os.getpid()}-{uuid.uuid4().hex}"
os.environ[RUN_MARKER] = RUN_ID
# A process whose parent just ended gets this long to notice and exit (the
# variable lets the test of this check run in seconds).
LEFTOVER_GRACE_SECONDS = float(os.environ.get("PYTEST_LEFTOVER_GRACE_SECONDS", "30"))


# Tests marked `clickhouse` run twice in `make test`: on ClickHouse 26.x (chdb
# 4.x, .venv) and on 24.8, the compose file's server version (chdb 2.1.1,
# .venv-ch248): the migrations, every named read and insight query, every
# dashboard panel, the server store behind the HTTP fixture and the binding
# of parameters. The header names the ClickHouse a run uses.


def pytest_report_header(config):
    try:
        import chdb
    except ImportError:
        return None
    return f"ClickHouse {chdb.engine_version} (chdb {chdb.__version__})"


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture(scope="session")
def chdb_root(tmp_path_factory):
    """The process's one chdb session, under a temporary data directory."""
    from promptprism.collector.store.embedded import EmbeddedStore

    store = EmbeddedStore(str(tmp_path_factory.mktemp("chdb")), database="promptprism_root")
    yield store
    store.close()


@pytest.fixture(scope="session")
def migrated_template(chdb_root):
    """Every migration applied once, to a database dropped as soon as the ``store`` fixture's copies
    have its ``Schema`` (support.py: on ClickHouse 24.8 a standing database slows every statement)."""
    from promptprism.collector.store.migrations import migrate

    database = f"template_{uuid.uuid4().hex[:12]}"
    try:
        migrate(chdb_root.with_database(database))
        return read_schema(chdb_root, database)
    finally:
        chdb_root.execute(f"DROP DATABASE IF EXISTS {database} SYNC")


@pytest.fixture
def store(chdb_root, migrated_template):
    """A migrated, empty database of its own for one test.

    A copy of the template (each table, materialized view and view created
    again from its CREATE statement, and the migration records) instead of
    the migrations run again: ~30 statements instead of ~145, which `make
    test`'s second pass on ClickHouse 24.8 needs to fit its budget. A test of
    the migrations themselves migrates a database of its own.
    """
    yield from _migrated_copy(chdb_root, migrated_template)


@pytest.fixture
def second_store(chdb_root, migrated_template):
    """Another migrated, empty database, for a test that compares two stores (as ``store``)."""
    yield from _migrated_copy(chdb_root, migrated_template)


@pytest.fixture(scope="session")
def migrated_database(chdb_root, migrated_template):
    """``with migrated_database() as store:`` a copy of the template as ``store`` gives one, for a
    fixture of a wider scope (data written once for a module's tests, a collector over it)."""
    return contextlib.contextmanager(functools.partial(_migrated_copy, chdb_root, migrated_template))


def _migrated_copy(chdb_root, schema, prefix: str = "test"):
    fresh = chdb_root.with_database(f"{prefix}_{uuid.uuid4().hex[:12]}")
    try:
        copy_schema(fresh, schema)
        yield fresh
    finally:
        chdb_root.execute(f"DROP DATABASE IF EXISTS {fresh.database} SYNC")


@pytest.fixture(scope="session")
def schema_before(chdb_root):
    """``with schema_before(version) as store:`` a database of its own at the schema just before
    migration ``version`` (dropped afterwards), for a test of that migration over older rows.

    Once per run, the migrations are applied one at a time and the schema after each is kept
    (``_SchemaHistory``); each such database is a copy of it, as ``store`` is of the whole schema,
    instead of the migrations before ``version`` run again (on ClickHouse 24.8, ~120 statements
    of ~0.1 s each per test). A test of the migration then migrates the copy forward for real.
    """
    history = _SchemaHistory(chdb_root)

    @contextlib.contextmanager
    def before(version: int):
        schema = history.before(version)
        fresh = chdb_root.with_database(f"test_{uuid.uuid4().hex[:12]}")
        try:
            copy_schema(fresh, schema)
            yield fresh
        finally:
            chdb_root.execute(f"DROP DATABASE IF EXISTS {fresh.database} SYNC")

    return before


class _SchemaHistory:
    """The schema after each migration, found on demand: one database brought forward a migration at
    a time, dropped in between (support.py ``Schema``) and copied back from where it got to when a
    later migration is asked for."""

    def __init__(self, chdb_root):
        from promptprism.collector.store.migrations import load_migrations

        self.root = chdb_root
        self.database = f"history_{uuid.uuid4().hex[:12]}"
        self.pending = load_migrations(database=self.database, retention_days=chdb_root.retention_days)
        self.schemas: dict[int, Schema] = {}

    def before(self, version: int) -> Schema:
        """The schema after the last migration before ``version``."""
        from promptprism.collector.store.migrations import applied_versions, apply_migrations

        if self.pending and self.pending[0].version < version:
            store = self.root.with_database(self.database)
            try:
                if self.schemas:
                    copy_schema(store, self.schemas[max(self.schemas)])
                assert applied_versions(store) == {known for known in self.schemas}  # (creates the records' table)
                while self.pending and self.pending[0].version < version:
                    migration = self.pending.pop(0)
                    apply_migrations(store, [migration], set())  # the loop `migrate` runs them with
                    self.schemas[migration.version] = read_schema(self.root, self.database)
            finally:
                self.root.execute(f"DROP DATABASE IF EXISTS {self.database} SYNC")
        return self.schemas[max(known for known in self.schemas if known < version)]


def processes_of_this_run() -> list[int]:
    """Every running process started by this run, except this one and its own resource
    tracker (multiprocessing's helper, which ends when this process does)."""
    found = []
    for pid in process_ids():
        if pid == os.getpid() or environment_of(pid).get(RUN_MARKER) != RUN_ID:
            continue
        if parent_of(pid) == os.getpid() and "multiprocessing.resource_tracker" in command_line(pid):
            continue
        found.append(pid)
    return found


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when a process it started outlives it (collectors, ingest workers, chdb, Chromium)."""
    if not HAS_PROC:
        return
    workers = sys.modules.get("promptprism.collector.write.workers")
    if workers is not None:
        workers.close_pools()  # the in-process pools end at exit; end them now so what is left is a leak
    leftovers = wait_for_exit(processes_of_this_run(), timeout=LEFTOVER_GRACE_SECONDS)
    if not leftovers:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(leftovers)} process(es) started by this test run are still running:"]
    lines += [f"  pid {pid} (parent {parent_of(pid)}): {command_line(pid)[:200]}" for pid in leftovers]
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
