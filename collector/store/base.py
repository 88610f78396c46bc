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
    """The store cannot take the query right now (unreachable, full, not writable, overloaded);
    the caller may retry later or spool."""


# ClickHouse answers that mean "try again later" rather than "this is wrong":
# the store is busy, out of room or not writable right now, and the same
# rows may pass once an operator or a merge has fixed that. The names are
# ClickHouse's (errorCodeToName).
TRANSIENT_SERVER_CODES = frozenset({
    159,  # TIMEOUT_EXCEEDED
    202,  # TOO_MANY_SIMULTANEOUS_QUERIES
    241,  # MEMORY_LIMIT_EXCEEDED
    173,  # CANNOT_ALLOCATE_MEMORY
    252,  # TOO_MANY_PARTS
    243,  # NOT_ENOUGH_SPACE
    210,  # NETWORK_ERROR
    209,  # SOCKET_TIMEOUT
    279,  # ALL_CONNECTION_TRIES_FAILED
    242,  # TABLE_IS_READ_ONLY
    164,  # READONLY
    999,  # KEEPER_EXCEPTION
    225,  # NO_ZOOKEEPER
    236,  # ABORTED
    394,  # QUERY_WAS_CANCELLED
    439,  # CANNOT_SCHEDULE_TASK
    74,  # CANNOT_READ_FROM_FILE_DESCRIPTOR
    75,  # CANNOT_WRITE_TO_FILE_DESCRIPTOR
    76,  # CANNOT_OPEN_FILE
    425,  # SYSTEM_ERROR
})
# The operating system's words for a fault of the disk or the process, which
# ClickHouse passes on inside other codes (STD_EXCEPTION's filesystem_error,
# CANNOT_OPEN_FILE's errno text): the data directory not writable, the disk
# or a quota full, out of file descriptors or memory.
_TRANSIENT_SYSTEM_TEXT = re.compile(
    r"Permission denied|Operation not permitted|No space left on device|Read-only file system|"
    r"Disk quota exceeded|File too large|Too many open files|Cannot allocate memory|Input/output error")
_CODE = re.compile(r"Code: (\d+)")


def server_code(text: str) -> int | None:
    """The ClickHouse error code quoted in an error's text (``Code: 243. DB::Exception: …``)."""
    found = _CODE.search(text)
    return int(found.group(1)) if found else None


def is_transient(text: str, code: int | None = None) -> bool:
    """True when a failure with this text (and code) may pass later: retry or spool, never refuse the data."""
    if code is None:
        code = server_code(text)
    return code in TRANSIENT_SERVER_CODES or bool(_TRANSIENT_SYSTEM_TEXT.search(text))


Columns = Mapping[str, Sequence[Any]]


class Store(Protocol):
    database: str
    retention_days: int
    # How many inserts can run at once: on different lanes, side by side; on
    # one lane, one after another. The sink inserts a group's request tables on
    # lane 0 and the rest (`otel_traces`) on lane 1 when there are two.
    insert_lanes: int

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        """Run a statement that returns nothing (DDL, OPTIMIZE, …)."""

    def query(self, sql: str, params: Mapping[str, Any] | None = None, *,
              settings: Mapping[str, int | str] | None = None) -> list[dict[str, Any]]:
        """Run a SELECT and return its rows as dicts; ``settings``: ClickHouse settings of this query only."""

    def insert(self, table: str, columns: Any, *, dedup_token: str | None = None, lane: int = 0) -> None:
        """Insert a pyarrow.Table (column names = table columns) into ``database.table``.

        With ``dedup_token`` a repeat of the same insert is dropped by
        ClickHouse (``insert_deduplication_token``; the tables set
        ``non_replicated_deduplication_window``). ``lane``: below ``insert_lanes``.
        """

    def close(self) -> None: ...


# Sent with every deduplicated insert: a re-sent block dropped from a table is
# dropped from the materialized views it feeds too. ClickHouse 24.8 otherwise
# still feeds the dropped block to the views (measured: three identical inserts
# → one row, the view's target counted three times); 26.x behaves so already.
MATERIALIZED_VIEW_DEDUPLICATION = "deduplicate_blocks_in_dependent_materialized_views"

# Sent with every insert. By default a ReplacingMergeTree table runs a
# replacing merge over each new block before writing it, to collapse rows with
# equal sorting keys inside that one INSERT. Those rows are rare here (a resent
# export is dropped by its token; only the calls memory's rewrite of a request
# stored by an export of the same group shares keys) and behave as rows with
# equal keys from two INSERTs always do: both stay until a background merge
# keeps the one inserted last, and the reads already take one copy. The step
# cost ~13 of ~28 ms of CPU per 512-span export inserting `blocks` (20 k rows,
# benchmarks/ingest.py's exports in groups of 4, interleaved with it on).
INSERT_SETTINGS: dict[str, int] = {"optimize_on_insert": 0}

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


_SETTING_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def settings_clause(settings: Mapping[str, int | str]) -> str:
    """`` SETTINGS a = 1, b = 'x'`` for the end of a SELECT; names validated, values integers or quoted."""
    parts = []
    for name, value in settings.items():
        if not _SETTING_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a setting name")
        if isinstance(value, bool) or not isinstance(value, int):
            value = "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
        parts.append(f"{name} = {value}")
    return " SETTINGS " + ", ".join(parts) if parts else ""


def parse_json_each_row(payload: bytes) -> list[dict[str, Any]]:
    """Decode a JSONEachRow answer (one JSON object per line)."""
    return [json.loads(line) for line in payload.splitlines() if line.strip()]
