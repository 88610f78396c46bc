"""Helpers shared by test modules (importable as ``support``: pytest puts
``tests/`` on sys.path for the rootdir conftest). Fixtures stay in conftest.py;
plain functions and constants live here, because several directories have a
conftest.py of their own and ``from conftest import …`` would pick whichever
was imported first."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# The repository root, wherever a test module sits below tests/.
REPOSITORY = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def metric_value(exposition: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name{labels}`` (exactly these labels) in a /metrics answer; None when absent."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


def wait_until(condition, timeout: float = 30.0, message: str = "condition not reached") -> None:
    """Poll ``condition`` (cheap, side-effect free) until it holds; fail with ``message`` at the deadline.

    For state another process or thread reaches (rows readable, a spool
    drained), not for guessing how long something takes.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not condition():
        assert time.monotonic() < deadline, message
        pause.wait(0.05)


# `make test` runs its two passes (ClickHouse 26.x and 24.8) at the same time, each
# taking its ports from its own range below the kernel's ephemeral ports (set in
# the Makefile): a port found free is then neither handed to the other pass nor
# taken by the kernel as the source port of some client's connection before the
# server binds it (an ephemeral port chosen with bind(0) and released can be;
# a CI run lost a test to that). A process hands a port out once (until it has
# handed out half the range).
PORT_RANGE = os.environ.get("PROMPTPRISM_TEST_PORTS", "")
_GIVEN: set[int] = set()


def free_port() -> int:
    if PORT_RANGE:
        import random

        low, high = (int(bound) for bound in PORT_RANGE.split("-"))
        if len(_GIVEN) > (high + 1 - low) // 2:
            _GIVEN.clear()  # most of the range handed out: the earliest tests' servers are long gone
        for candidate in random.sample(range(low, high + 1), min(200, high + 1 - low)):
            if candidate in _GIVEN:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", candidate))
                except OSError:
                    continue
                _GIVEN.add(candidate)
                return candidate
        raise RuntimeError(f"no free port in PROMPTPRISM_TEST_PORTS={PORT_RANGE}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Runs ``code`` in a fresh interpreter where the named modules (and their
# submodules) cannot be imported, as on an install without them.
_WITHOUT_PROBE = """
import sys
from importlib.abc import MetaPathFinder

BLOCKED = {blocked!r}


class Uninstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == blocked or name.startswith(blocked + ".") for blocked in BLOCKED):
            raise ImportError(f"{{name}} is not installed here")
        return None


sys.meta_path.insert(0, Uninstalled())
"""


def python_without(blocked: tuple[str, ...], code: str, *arguments: str, stdin: str = "",
                   timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -c code arguments…`` with ``blocked`` unimportable; output captured as text."""
    return subprocess.run([sys.executable, "-c", _WITHOUT_PROBE.format(blocked=tuple(blocked)) + code, *arguments],
                          input=stdin, capture_output=True, text=True, timeout=timeout)


# --- copies of a migrated schema ----------------------------------------------------------


@dataclass(frozen=True)
class Schema:
    """A migrated schema kept as text, for copies: ``database``'s CREATE statements and migration records.

    Kept apart from any database so that the one it was read from can be dropped at once: chdb 2.1.1
    (ClickHouse 24.8, `make test`'s second pass) loads every table of its data directory for each
    statement, ~3 ms of CPU per table, so a migrated database left standing (~30 tables) doubled
    the cost of every statement after it."""

    database: str  # the database the statements name
    statements: tuple[str, ...]
    migrations: tuple[tuple[int, str], ...]  # (version, name) of each applied migration


def schema_statements(store, database: str) -> list[str]:
    """The CREATE statements of ``database``'s tables, materialized views and views (any store),
    in an order that creates them again: tables, the views that write into them, the views that read them."""
    rows = store.query(
        "SELECT name, engine, create_table_query FROM system.tables "
        "WHERE database = {db:String} AND NOT startsWith(name, '.inner') ORDER BY name", {"db": database})
    order = {"MaterializedView": 1, "View": 2}
    return [row["create_table_query"] for row in sorted(rows, key=lambda row: order.get(row["engine"], 0))]


def read_schema(store, database: str) -> Schema:
    """``database``'s schema and migration records (any store), to copy once the database is gone."""
    records = store.query(f"SELECT version, name FROM {database}.schema_migrations FINAL ORDER BY version")
    return Schema(database, tuple(schema_statements(store, database)),
                  tuple((int(row["version"]), row["name"]) for row in records))


def copy_schema(store, schema: Schema) -> None:
    """Create ``schema``'s tables and views again in ``store``'s database, with its migration records:
    the schema ``migrate`` leaves, in ~30 statements instead of the ~145 of the migrations. The
    database exists already."""
    import pyarrow as pa

    for statement in schema.statements:
        store.execute(statement.replace(f"{schema.database}.", f"{store.database}."))
    versions, names = zip(*schema.migrations)
    store.insert("schema_migrations", pa.table({"version": pa.array(versions, pa.uint32()),
                                                "name": pa.array(names, pa.string())}))


# --- processes (Linux /proc) --------------------------------------------------------------

HAS_PROC = Path("/proc/self/stat").exists()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # gone meanwhile, or not ours to read
        return b""


def process_ids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def is_running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (an exited child nobody reaped yet)."""
    stat = _read(Path(f"/proc/{pid}/stat")).decode("latin-1")
    return bool(stat) and stat.rpartition(")")[2].split()[0] != "Z"


def parent_of(pid: int) -> int | None:
    stat = _read(Path(f"/proc/{pid}/stat")).decode("latin-1")
    return int(stat.rpartition(")")[2].split()[1]) if stat else None


def command_line(pid: int) -> str:
    return _read(Path(f"/proc/{pid}/cmdline")).replace(b"\0", b" ").decode("utf-8", "replace").strip()


def environment_of(pid: int) -> dict[str, str]:
    """The environment ``pid`` was started with."""
    found = {}
    for entry in _read(Path(f"/proc/{pid}/environ")).split(b"\0"):
        key, separator, value = entry.partition(b"=")
        if separator:
            found[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time ``pid`` has used so far (0 when it is gone)."""
    stat = _read(Path(f"/proc/{pid}/stat")).decode("latin-1")
    if not stat:
        return 0.0
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)


def children_of(pid: int) -> list[int]:
    return [child for child in process_ids() if parent_of(child) == pid]


def wait_for_exit(pids, timeout: float) -> list[int]:
    """Wait until none of ``pids`` runs (they need not be our children); those still running at the deadline."""
    running = [pid for pid in pids if is_running(pid)]

    def all_gone() -> bool:
        running[:] = [pid for pid in running if is_running(pid)]
        return not running

    try:
        wait_until(all_gone, timeout)
    except AssertionError:
        pass
    return running
