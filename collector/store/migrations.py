"""Versioned schema: ``schema/NNN_*.sql`` and ``schema/NNN_*.py`` applied in order, once each.

Applied versions are recorded in ``schema_migrations`` so an upgraded
collector brings an older database forward and reads the rows it wrote.
Every statement is idempotent (``IF NOT EXISTS``) so a migration interrupted
halfway can simply be applied again; a Python step (``apply(store)``, for a
backfill SQL cannot compute) is written to be re-runnable the same way.
``apply_migrations`` is the one loop that runs them, for a single server
here and ON CLUSTER in ``cluster``.
"""

from __future__ import annotations

import importlib
import re
import string
from dataclasses import dataclass
from importlib import resources
from typing import Callable, Iterable

from .base import Store, StoreError

_FILE_PATTERN = re.compile(r"^(\d{3})_[a-z0-9_]+\.(sql|py)$")
SCHEMA_PACKAGE = f"{__package__}.schema"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]  # DDL, placeholders filled; empty for a Python step
    apply: Callable[[Store], None] | None = None  # a Python step's ``apply(store)``

    @property
    def is_python(self) -> bool:
        return self.apply is not None


def _split(sql: str) -> tuple[str, ...]:
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return tuple(part.strip() for part in body.split(";") if part.strip())


def load_migrations(*, database: str, retention_days: int) -> list[Migration]:
    """The DDL with placeholders filled: ``${db}``, ``${ttl_days}``."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", database):
        raise ValueError(f"database name {database!r} must be an identifier ([A-Za-z_][A-Za-z0-9_]*)")
    if not isinstance(retention_days, int) or retention_days < 1:
        raise ValueError(f"retention must be a whole number of days >= 1, got {retention_days!r}")
    found = []
    for entry in resources.files(SCHEMA_PACKAGE).iterdir():
        match = _FILE_PATTERN.match(entry.name)
        if not match:
            continue
        version = int(match.group(1))
        if match.group(2) == "py":
            module = importlib.import_module(f"{SCHEMA_PACKAGE}.{entry.name.removesuffix('.py')}")
            found.append(Migration(version, entry.name, (), module.apply))
            continue
        text = string.Template(entry.read_text(encoding="utf-8")).substitute(
            db=database, ttl_days=retention_days
        )
        found.append(Migration(version, entry.name, _split(text)))
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"two migrations share a version: {[m.name for m in found]}")
    return found


def applied_versions(store: Store) -> set[int]:
    store.execute(
        f"CREATE TABLE IF NOT EXISTS {store.database}.schema_migrations "
        "(version UInt32, name String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3)) "
        "ENGINE = ReplacingMergeTree ORDER BY version"
    )
    rows = store.query(f"SELECT version FROM {store.database}.schema_migrations FINAL")
    return {int(row["version"]) for row in rows}


def apply_migrations(store: Store, migrations: Iterable[Migration], done: set[int], *,
                     up_to: int | None = None) -> list[str]:
    """Run each of ``migrations`` not in ``done`` (up to version ``up_to``), in
    order, and record it in ``schema_migrations``; return the names applied."""
    applied = []
    for migration in migrations:
        if migration.version in done or (up_to is not None and migration.version > up_to):
            continue
        try:
            for statement in migration.statements:
                store.execute(statement)
            if migration.apply is not None:
                migration.apply(store)
        except StoreError as error:  # name the migration: the store's text names only the statement
            raise type(error)(f"migration {migration.name} failed: {error}") from error
        store.execute(
            f"INSERT INTO {store.database}.schema_migrations (version, name) "
            "VALUES ({version:UInt32}, {name:String})",
            {"version": migration.version, "name": migration.name},
        )
        applied.append(migration.name)
    return applied


def migrate(store: Store, *, up_to: int | None = None) -> list[str]:
    """Apply every migration not yet recorded (up to version ``up_to``); return the names applied."""
    done = applied_versions(store)
    migrations = load_migrations(database=store.database, retention_days=store.retention_days)
    return apply_migrations(store, migrations, done, up_to=up_to)
