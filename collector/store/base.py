"""The store interface every part of the collector talks to.

Two implementations run the same DDL and the same SQL: ``embedded`` (chdb,
in-process) and ``server`` (clickhouse-connect). SQL takes parameters in
ClickHouse's ``{name:Type}`` syntax and they are always bound, never
formatted into the text. Rows come back as dicts decoded from JSONEachRow,
so both stores return identical Python values.
"""

from __future__ import annotations

import json
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

    def insert(self, table: str, columns: Any) -> None:
        """Insert a pyarrow.Table (column names = table columns) into ``database.table``."""

    def close(self) -> None: ...


def parse_json_each_row(payload: bytes) -> list[dict[str, Any]]:
    """Decode a JSONEachRow answer (one JSON object per line)."""
    return [json.loads(line) for line in payload.splitlines() if line.strip()]
