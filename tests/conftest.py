"""Fixtures shared by every test: free ports and real chdb stores.

chdb allows one data directory per process (NOTES.md), so the whole test run
shares one embedded session and each test gets a fresh database in it.
"""

from __future__ import annotations

import os
import socket
import uuid

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
