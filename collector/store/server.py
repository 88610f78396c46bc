"""The server store: a ClickHouse server through clickhouse-connect (HTTP).

Same DDL and the same SQL as the embedded store. Rows come back as
JSONEachRow and go through the same decoder, so both stores return identical
Python values; inserts send the pyarrow table as Arrow. A failure to reach
the server, or an answer that may pass later (``base.is_transient``: busy,
full, not writable), is ``StoreUnavailable`` (the sink spools); any other
error the server answers with is ``StoreError``.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping
from urllib.parse import unquote, urlparse

from .base import (INSERT_SETTINGS, MATERIALIZED_VIEW_DEDUPLICATION, StoreError, StoreUnavailable, checked_identifier, checked_token,
                   is_transient, parse_json_each_row)

DEFAULT_DATABASE = "promptprism"
# Connecting is quick or it is not going to work: fail over to the spool fast.
CONNECT_TIMEOUT_SECONDS = 3
# A large insert or a dashboard query on a busy server may take a while, but
# a receiver must not hang behind a stalled server for clickhouse-connect's
# default 300 s.
SEND_RECEIVE_TIMEOUT_SECONDS = 30



def parse_url(url: str) -> dict[str, Any]:
    """``http(s)://user:password@host:8123/database`` → clickhouse-connect arguments."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"store URL {url!r}: expected http(s)://user:password@host:8123/database")
    database = parsed.path.strip("/") or DEFAULT_DATABASE
    checked_identifier(database)
    return {
        "host": parsed.hostname,
        "port": parsed.port or (8443 if parsed.scheme == "https" else 8123),
        "username": unquote(parsed.username or "default"),
        "password": unquote(parsed.password or ""),
        "secure": parsed.scheme == "https",
        "database": database,
    }


def _server_code(error: BaseException) -> int | None:
    code = getattr(error, "code", None)
    if isinstance(code, int):
        return code
    text = str(error)
    marker = text.find("Code: ")
    if marker >= 0:
        digits = "".join(ch for ch in text[marker + 6:marker + 12] if ch.isdigit())
        return int(digits) if digits else None
    return None


class ServerStore:
    def __init__(self, url: str, *, retention_days: int = 30, auto_migrate: bool = False,
                 cluster: str | None = None):
        self._arguments = parse_url(url)
        self.database = self._arguments.pop("database")
        self.retention_days = retention_days
        self.url = url
        # Created lazily: a collector starts (and spools) while the server is down.
        self._client_instance = None
        # Guards client creation (and the migration run on it); the client itself is thread-safe.
        self._lock = threading.RLock()
        # The server runs concurrent inserts itself: two lanes are two of the sink's threads waiting on it.
        self.insert_lanes = 2
        self._needs_migration = auto_migrate
        # README "Deploying": on a cluster the same migrations run ON CLUSTER (store/cluster.py).
        self.cluster = cluster

    def _client(self):
        with self._lock:
            if self._client_instance is None:
                import clickhouse_connect  # heavy import, collector side only

                try:
                    self._client_instance = clickhouse_connect.get_client(
                        **self._arguments,
                        compress=False,
                        connect_timeout=CONNECT_TIMEOUT_SECONDS,
                        send_receive_timeout=SEND_RECEIVE_TIMEOUT_SECONDS,
                        # One HTTP session would serialise every query server-side.
                        autogenerate_session_id=False,
                    )
                except Exception as error:
                    raise self._translate(error) from error
            if self._needs_migration:
                self._needs_migration = False  # migrating calls back into _client()
                try:
                    self.migrate()
                except BaseException:
                    self._needs_migration = True
                    raise
            return self._client_instance

    def migrate(self) -> list[str]:
        """Apply the schema: plain migrations, or ON CLUSTER when a cluster is configured."""
        if self.cluster:
            from .cluster import migrate_cluster

            return migrate_cluster(self, self.cluster)
        from .migrations import migrate

        self.ensure_database()
        return migrate(self)

    def _translate(self, error: BaseException) -> StoreError:
        from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

        if isinstance(error, StoreError):
            return error
        code = _server_code(error)
        if isinstance(error, OperationalError) and code is None or is_transient(str(error), code):
            with self._lock:
                self._client_instance = None  # reconnect next time
            return StoreUnavailable(f"ClickHouse at {self._arguments['host']}:{self._arguments['port']}: {error}")
        if isinstance(error, DatabaseError):
            return StoreError(str(error))
        # urllib3 / socket errors that slipped past clickhouse-connect
        if isinstance(error, (OSError, ConnectionError, TimeoutError)):
            return StoreUnavailable(str(error))
        return StoreError(str(error))

    def ensure_database(self) -> None:
        self.execute(f"CREATE DATABASE IF NOT EXISTS {self.database}")

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        try:
            self._client().command(sql, parameters=dict(params) if params else None)
        except Exception as error:
            raise self._translate(error) from error

    def query(self, sql: str, params: Mapping[str, Any] | None = None, *,
              settings: Mapping[str, int | str] | None = None) -> list[dict[str, Any]]:
        try:
            payload = self._client().raw_query(
                sql, parameters=dict(params) if params else None, fmt="JSONEachRow",
                settings={"output_format_json_quote_64bit_integers": 0, **(settings or {})})
        except Exception as error:
            raise self._translate(error) from error
        return parse_json_each_row(payload)

    def insert(self, table: str, columns: Any, *, dedup_token: str | None = None, lane: int = 0) -> None:
        settings = dict(INSERT_SETTINGS)
        if dedup_token:
            settings.update({"insert_deduplication_token": checked_token(dedup_token),
                             MATERIALIZED_VIEW_DEDUPLICATION: 1})
        try:
            self._client().insert_arrow(checked_identifier(table), columns, database=self.database, settings=settings)
        except Exception as error:
            raise self._translate(error) from error

    def ping(self) -> bool:
        try:
            return bool(self._client().ping())
        except StoreError:
            return False

    def close(self) -> None:
        with self._lock:
            if self._client_instance is not None:
                self._client_instance.close()
                self._client_instance = None
