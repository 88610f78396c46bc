"""Fixtures shared by every test: free ports and real chdb stores.

chdb allows one data directory per process (NOTES.md), so the whole test run
shares one embedded session and each test gets a fresh database in it.
"""

from __future__ import annotations

import uuid

import pytest

from support import IN_CI, free_port  # noqa: F401  (re-exported for older imports)


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


@pytest.fixture
def store(chdb_root):
    """A migrated, empty database of its own for one test."""
    from promptprism.collector.store.migrations import migrate

    database = f"test_{uuid.uuid4().hex[:12]}"
    fresh = chdb_root.with_database(database)
    migrate(fresh)
    yield fresh
    chdb_root.execute(f"DROP DATABASE IF EXISTS {database} SYNC")
