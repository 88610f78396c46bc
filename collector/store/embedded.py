"""The embedded store: ClickHouse in-process through chdb.

chdb allows one data directory per process (README "Storage schema"), so the
collector owns its store and read commands go through the collector's API.

Why not clickhouse-connect's own chdb interface (``get_client(interface="chdb")``,
which would let ``ServerStore`` serve both)? ``benchmarks/store_interface.py``
runs both on one engine: it is complete (every migration, the inserts and the
read side's lookups and reports give the same answers), but not as fast: the
same JSONEachRow queries cost more per call through the client (a point lookup,
``lookups.request``, 1.6–6× ours; a trace 1.2–1.8×) and inserts of a 512-span
export were 0.85–1.17× on a busy 2-core machine. Ours hands chdb each insert
as an Arrow stream file in about 100 lines; keep it unless that benchmark
shows the library as fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import re
import stat
import tempfile
import threading
from typing import Any, Mapping

from .base import (
    INSERT_SETTINGS,
    MATERIALIZED_VIEW_DEDUPLICATION,
    StoreError,
    StoreUnavailable,
    checked_identifier,
    checked_token,
    column_list,
    is_transient,
    parse_json_each_row,
    server_code,
    settings_clause,
)
from .inline import bind_inline, quoted

# chdb settings applied once per session: integers as JSON numbers, so rows
# decode to the same Python values as on the server store.
_SESSION_SETTINGS = ("SET output_format_json_quote_64bit_integers = 0",)


# Where each INSERT's Arrow stream file is written, under the data directory.
INSERT_DIR = "inserts"
# file() reads its path as a glob: a `*`, `?` or `{…}` in it would read other
# files, or none (`[` and `]` are literal).
_GLOB_CHARACTERS = re.compile(r"[*?{}]")


def insert_directory(data_dir: str) -> str:
    """``data_dir/inserts``, or, when that path holds glob characters, a directory of the system's
    temporary directory named after the data directory (the same one each time it opens)."""
    inside = os.path.join(data_dir, INSERT_DIR)
    if not _GLOB_CHARACTERS.search(inside):
        return inside
    name = hashlib.sha256(data_dir.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    outside = os.path.join(tempfile.gettempdir(), f"promptprism-inserts-{name}")
    if _GLOB_CHARACTERS.search(outside):
        raise StoreUnavailable(f"the embedded store's data directory {data_dir!r} and the temporary directory "
                               f"both contain one of * ? {{ }}, which ClickHouse's file() reads as a pattern: "
                               f"choose a data directory without them")
    # A shared temporary directory: the files must be ours alone, or another
    # user could swap one between its write and the INSERT that reads it.
    try:
        os.makedirs(outside, mode=0o700, exist_ok=True)
        info = os.lstat(outside)
    except OSError as error:
        raise StoreUnavailable(f"cannot make the insert directory {outside}: {error}") from error
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise StoreUnavailable(f"{outside} (for the inserts of {data_dir!r}, whose path ClickHouse's file() "
                               f"would read as a pattern) is not a directory only this user can open")
    return outside


def _clear_insert_files(directory: str) -> None:
    """Remove the Arrow files of inserts a killed process left (the spool holds their rows)."""
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(directory):
            if name.startswith("insert-") and name.endswith(".arrows"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, name))


def _open_session(session: Any, data_dir: str, path: str) -> Any:
    try:
        return session.Session(path)
    except Exception as error:  # another process holds the directory, …
        raise StoreUnavailable(f"cannot open embedded store at {data_dir}: {error}") from error


class EmbeddedStore:
    def __init__(self, data_dir: str, *, database: str = "promptprism", retention_days: int = 30):
        from chdb import session  # heavy import, only on the collector side

        self.database = checked_identifier(database)
        self.retention_days = retention_days
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        self._insert_dir = insert_directory(self.data_dir)
        path = os.path.join(self.data_dir, "clickhouse")
        self._session = _open_session(session, self.data_dir, path)
        # chdb 2.1.x (ClickHouse 24.8) takes no query parameters and has no
        # close() (its cleanup() deletes the directory): see legacy_drop and bind_inline.
        self.legacy = "params" not in inspect.signature(self._session.query).parameters
        # chdb sessions tolerate concurrent reads, but an insert must not
        # interleave with a SET; one lock keeps statements whole, and serves
        # a waiting insert before waiting reads so readers cannot starve ingest.
        self._lock = WriterFirstLock()
        # Lane 1: a second session on the same directory, for inserts only.
        # chdb runs one statement of a session at a time, two sessions' side by
        # side: a group's `otel_traces` INSERT beside its request tables' took
        # the three statements from 60 to 46 ms (README "Ingest throughput").
        # Not on chdb 2.1.x, which cannot close a session.
        try:
            self._side: Any = None if self.legacy else _open_session(session, self.data_dir, path)
        except StoreUnavailable:
            self._session.close()
            raise
        self._side_lock = WriterFirstLock()
        self.insert_lanes = 1 if self._side is None else 2
        _clear_insert_files(self._insert_dir)
        for statement in _SESSION_SETTINGS:
            self._session.query(statement)
            if self._side is not None:
                self._side.query(statement)
        self.execute(f"CREATE DATABASE IF NOT EXISTS {database}")

    def with_database(self, database: str, *, retention_days: int | None = None) -> "EmbeddedStore":
        """Another database on the same chdb session (one data dir per process).

        Tests use this for a fresh database each, as clickhouse-connect's own
        integration tests do.
        """
        view = object.__new__(EmbeddedStore)
        view.database = checked_identifier(database)
        view.retention_days = self.retention_days if retention_days is None else retention_days
        view.data_dir = self.data_dir
        view._session = self._session
        view._lock = self._lock
        view._side = self._side
        view._side_lock = self._side_lock
        view.insert_lanes = self.insert_lanes
        view._insert_dir = self._insert_dir
        view.legacy = self.legacy
        view.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
        return view

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self._run(sql, "CSV", params)

    def query(self, sql: str, params: Mapping[str, Any] | None = None, *,
              settings: Mapping[str, int | str] | None = None) -> list[dict[str, Any]]:
        if settings:
            # A trailing SETTINGS clause applies to this query only (chdb's
            # Session.query takes none); a comment or a ';' at the end would hide it.
            sql = sql.rstrip().rstrip(";") + "\n" + settings_clause(settings).lstrip()
        return parse_json_each_row(self._run(sql, "JSONEachRow", params))

    def insert(self, table: str, columns: Any, *, dedup_token: str | None = None, lane: int = 0) -> None:
        settings = dict(INSERT_SETTINGS)
        if dedup_token:
            settings.update({"insert_deduplication_token": checked_token(dedup_token),
                             MATERIALIZED_VIEW_DEDUPLICATION: 1})
        # Columns by name: a table with more columns (a later migration) fills
        # the rest from their DEFAULTs, and older spooled rows still load.
        target = f"{self.database}.{checked_identifier(table)} {column_list(columns.column_names)}"
        self._insert_from_file(target, columns, settings_clause(settings), lane)

    def _insert_from_file(self, target: str, columns: Any, settings: str, lane: int = 0) -> None:
        """The Arrow table goes to ClickHouse as an Arrow stream file read with ``file()``.

        chdb 2.1.x (ClickHouse 24.8) has no other way in for Arrow lists, maps
        and zoned timestamps; on chdb 4.x it is also cheaper than handing chdb
        the table itself (``Python(data)``): README "Ingest throughput". The
        file, under the data directory, lives only for the statement (one a
        killed process left is removed when the store opens); one that cannot
        be written is the store being unavailable (the spool keeps the batch
        and retries), not bad data.
        """
        import pyarrow.ipc

        try:
            os.makedirs(self._insert_dir, mode=0o700, exist_ok=True)
            handle, path = tempfile.mkstemp(prefix="insert-", suffix=".arrows", dir=self._insert_dir)
        except OSError as error:
            raise StoreUnavailable(f"cannot write the insert's Arrow file: {error}") from error
        try:
            try:
                with os.fdopen(handle, "wb") as sink, pyarrow.ipc.new_stream(sink, columns.schema) as writer:
                    writer.write_table(columns)
            except OSError as error:
                raise StoreUnavailable(f"cannot write the insert's Arrow file: {error}") from error
            self._run(f"INSERT INTO {target} SELECT * FROM file({quoted(path)}, 'ArrowStream'){settings}",
                      "CSV", None, writer=True, lane=lane)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def _run(self, sql: str, fmt: str, params: Mapping[str, Any] | None, *, writer: bool = False,
             lane: int = 0) -> bytes:
        drop = legacy_drop(sql) if self.legacy else None
        sql = drop or sql
        if not 0 <= lane < self.insert_lanes:
            raise ValueError(f"lane {lane}: the embedded store has {self.insert_lanes}")
        session, lock = (self._side, self._side_lock) if lane else (self._session, self._lock)
        with lock.hold(writer=writer):
            try:
                if params and self.legacy:
                    result = session.query(bind_inline(sql, params), fmt)
                elif params:
                    result = session.query(sql, fmt, params=bound_parameters(params))
                else:
                    result = session.query(sql, fmt)
            except StoreError:
                raise
            except Exception as error:
                text = str(error)
                if drop and server_code(text) == UNFINISHED:
                    return b""  # chdb 2.1.x: gone from the catalog, its files go at the next start
                if is_transient(text):  # a full or unwritable data directory, memory, too many parts
                    raise StoreUnavailable(text) from error
                raise StoreError(text) from error
        return result.bytes()

    def close(self) -> None:
        with self._lock.hold(writer=True):
            if not self.legacy:
                with self._side_lock.hold(writer=True):
                    self._side.close()
                self._session.close()
            # chdb 2.1.x has no close(): the session ends with the process.


# chdb 2.1.x (ClickHouse 24.8): after one DROP of a MergeTree table, the next
# DROP of anything (a table, a view, a database; CREATE OR REPLACE too) waits
# forever for its background drop, which never runs inside chdb. With SYNC the
# object leaves the catalog at once and the statement answers UNFINISHED
# ("will finish after restart"): the migrations' and tests' drops run so there.
# A ClickHouse 24.8 *server* drops normally; only the embedded engine needs this.
_DROP = re.compile(r"^\s*DROP\s+(TABLE|VIEW|DATABASE|DICTIONARY)\b", re.IGNORECASE)
_SYNC_AT_END = re.compile(r"\bSYNC\s*;?\s*$", re.IGNORECASE)
UNFINISHED = 341


def legacy_drop(sql: str) -> str | None:
    """A DROP statement as chdb 2.1.x must run it (with SYNC); None for any other statement."""
    if not _DROP.match(sql):
        return None
    statement = sql.strip().rstrip(";")
    return statement if _SYNC_AT_END.search(statement) else statement + " SYNC"


# ClickHouse reads a query parameter's text in its escaped format, where a
# backslash starts an escape sequence and a tab or newline ends a field; escaped
# here, every byte of a value means itself (the server store's client does the same).
_PARAMETER_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\0": "\\0"})


def bound_parameters(params: Mapping[str, Any]) -> dict[str, Any]:
    """Query parameters as chdb passes them to ClickHouse: string values escaped."""
    return {name: value.translate(_PARAMETER_ESCAPES) if isinstance(value, str) else value
            for name, value in params.items()}


class WriterFirstLock:
    """One statement at a time (reentrant); a waiting writer goes before waiting readers."""

    def __init__(self):
        self._condition = threading.Condition()
        self._owner: int | None = None
        self._depth = 0
        self._writers_waiting = 0

    @contextlib.contextmanager
    def hold(self, *, writer: bool = False):
        me = threading.get_ident()
        with self._condition:
            if self._owner == me:
                self._depth += 1
            else:
                self._writers_waiting += writer
                try:
                    while self._owner is not None or (not writer and self._writers_waiting):
                        self._condition.wait()
                finally:
                    self._writers_waiting -= writer
                self._owner, self._depth = me, 1
        try:
            yield
        finally:
            with self._condition:
                self._depth -= 1
                if not self._depth:
                    self._owner = None
                    self._condition.notify_all()
