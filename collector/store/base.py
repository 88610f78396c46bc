"""The store interface every part of the collector talks to.

Two implementations run the same DDL and the same SQL: ``embedded`` (chdb,
in-process) and ``server`` (clickhouse-connect). SQL takes parameters in
ClickHouse's ``{name:Type}`` syntax and they are always bound, never
formatted into the text. Rows come back as dicts decoded from JSONEachRow,
so both stores return identical Python values.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Protocol, Sequence


class StoreError(Exception):
    """A query failed for a reason that retrying will not fix (bad SQL, bad data)."""


class StoreUnavailable(StoreError):
    """The store cannot be reached right now; the caller may retry later or spool."""


Columns = Mapping[str, Sequence[Any]]


class Store(Protocol):
    database: str
    retention_days: int

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        """Run a statement that returns nothing (DDL, OPTIMIZE, …)."""

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a SELECT and return its rows as dicts."""

    def insert(self, table: str, columns: Any, *, dedup_token: str | None = None) -> None:
        """Insert a pyarrow.Table (column names = table columns) into ``database.table``.

        With ``dedup_token`` a repeat of the same insert is dropped by
        ClickHouse (``insert_deduplication_token``; the tables set
        ``non_replicated_deduplication_window``).
        """

    def close(self) -> None: ...


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Column names may be Nested sub-columns (`Events.Timestamp`).
_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_TOKEN = re.compile(r"[A-Za-z0-9_:.-]{1,200}")


def checked_identifier(name: str) -> str:
    """A database or table name, validated: these are formatted into SQL, never bound."""
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"{name!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
    return name


def column_list(names: Sequence[str]) -> str:
    """``(`a`, `Events.Timestamp`, …)`` for an INSERT, every name validated."""
    for name in names:
        if not _COLUMN.fullmatch(name):
            raise ValueError(f"{name!r} is not a column name")
    return "(" + ", ".join(f"`{name}`" for name in names) + ")"


def checked_token(token: str) -> str:
    """An insert_deduplication_token (we make them: hex digests), validated before use."""
    if not _TOKEN.fullmatch(token):
        raise ValueError(f"{token!r} is not a deduplication token")
    return token


def parse_json_each_row(payload: bytes) -> list[dict[str, Any]]:
    """Decode a JSONEachRow answer (one JSON object per line)."""
    return [json.loads(line) for line in payload.splitlines() if line.strip()]
