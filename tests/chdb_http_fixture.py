"""TEST fixture: chdb served behind the ClickHouse HTTP interface on loopback.

No ClickHouse server is installed for the tests (README "Development"), so the server store is tested
against this: a stdlib ThreadingHTTPServer in a subprocess (chdb allows one
data directory per process) implementing what clickhouse-connect uses with
``compress=False``:

- ``GET /ping`` → ``Ok.``
- the statement in the ``query`` URL parameter and/or the body (ClickHouse
  concatenates them), ``param_*`` arguments → chdb query parameters,
  ``database`` → ``USE``, other URL arguments → settings (``SET`` for the
  statement, back to ``DEFAULT`` after);
- ``INSERT … FORMAT X`` followed by data (chunked, optionally gzip): the data
  goes to a temporary file loaded with ``INSERT … FROM INFILE '…' FORMAT X``;
- on chdb 2.1.x (ClickHouse 24.8, ``make test``'s second pass), whose
  session takes no parameters and breaks for good on a string-valued ``SET``:
  ``param_*`` values are unescaped and bound into the text
  (``promptprism.collector.store.inline``), settings become the statement's
  own ``SETTINGS`` clause (a SELECT, an INSERT with data; DDL runs without
  them: clickhouse-connect sends only its client defaults there), and data
  is loaded with ``INSERT … SELECT * FROM file('…', 'X')``;
- the headers clickhouse-connect reads (X-ClickHouse-Summary, -Format,
  -Timezone, -Query-Id, -Exception-Code) and ClickHouse-style error bodies.

Never shipped in the package. Run: ``python tests/chdb_http_fixture.py --port P --data-dir D``.
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qsl, urlparse

from support import free_port  # tests/ is on sys.path: the rootdir conftest, or this script's own folder

# URL arguments that steer the HTTP session, not the query: never SET.
TRANSPORT_ARGUMENTS = {
    "query", "database", "user", "password", "query_id", "session_id", "session_timeout", "session_check",
    "compress", "decompress", "buffer_size", "wait_end_of_query", "quota_key", "client_protocol_version",
    "role", "default_format", "enable_http_compression", "send_progress_in_http_headers",
    "http_headers_progress_interval_ms", "http_zlib_compression_level", "cancel_http_readonly_queries_on_client_close",
}
SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FORMAT_AT_END = re.compile(r"\bFORMAT\s+([A-Za-z0-9_]+)\s*;?\s*$", re.IGNORECASE)
ERROR_CODE = re.compile(r"Code:\s*(\d+)")
SELECT_LIKE = re.compile(r"^\s*(\(|SELECT\b|WITH\b|SHOW\b|DESCRIBE\b|DESC\b|EXPLAIN\b|EXISTS\b)", re.IGNORECASE)
TRAILING_SETTINGS = re.compile(r"\bSETTINGS\s+[A-Za-z_][A-Za-z0-9_]*\s*=[^()]*$", re.IGNORECASE)
# ClickHouse's escaped text format (how a param_* value arrives): backslash escapes.
ESCAPED = re.compile(r"\\(x[0-9A-Fa-f]{2}|.)", re.DOTALL)
ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "0": "\0", "a": "\a", "v": "\v", "e": "\x1b"}


def _unescaped(text: str):
    """A param_* value as the Python value it stands for (``\\N`` is NULL)."""
    if text == "\\N":
        return None
    return ESCAPED.sub(lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x" and len(m.group(1)) == 3
                       else ESCAPES.get(m.group(1), m.group(1)), text)


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "chdb-http-fixture"

    def log_message(self, format, *args):  # quiet: tests read failures, not access logs
        if os.environ.get("CHDB_FIXTURE_LOG"):
            sys.stderr.write("fixture: " + (format % args) + "\n")

    def do_GET(self):
        path = urlparse(self.path).path
        if path in ("/ping", "/"):
            if path == "/ping" or not urlparse(self.path).query:
                return self._send(200, b"Ok.\n", {"Content-Type": "text/plain; charset=UTF-8"})
        self._handle(b"")

    def do_POST(self):
        self._handle(self._read_body())

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            body = b"".join(parts)
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        return body

    def _send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _handle(self, body: bytes) -> None:
        arguments = dict(parse_qsl(urlparse(self.path).query, keep_blank_values=True))
        statement = arguments.get("query", "")
        data = b""
        if statement.lstrip().upper().startswith("INSERT") and body:
            data = body
        elif body:
            text_end = body.find(b"\n")
            first_line = body if text_end < 0 else body[:text_end]
            whole = (statement + " " if statement else "") + first_line.decode("utf-8", "replace")
            if whole.lstrip().upper().startswith("INSERT") and FORMAT_AT_END.search(whole):
                statement, data = whole, (b"" if text_end < 0 else body[text_end + 1:])
            else:
                statement = (statement + " " if statement else "") + body.decode("utf-8")
        query_id = arguments.get("query_id") or str(uuid.uuid4())
        params = {key[len("param_"):]: value for key, value in arguments.items() if key.startswith("param_")}
        settings = {key: value for key, value in arguments.items()
                    if key not in TRANSPORT_ARGUMENTS and not key.startswith("param_") and SETTING_NAME.fullmatch(key)}
        try:
            payload, fmt, written = self.server.run(statement, data, params, settings, arguments.get("database"),
                                                     arguments.get("default_format") or "TabSeparated")
        except Exception as error:  # a ClickHouse-style error answer
            message = str(error)
            match = ERROR_CODE.search(message)
            code = match.group(1) if match else "1000"
            text = message if message.startswith("Code:") else f"Code: {code}. DB::Exception: {message}"
            return self._send(500, (text + "\n").encode("utf-8"), {
                "Content-Type": "text/plain; charset=UTF-8", "X-ClickHouse-Exception-Code": code,
                "X-ClickHouse-Query-Id": query_id})
        summary = {"read_rows": "0", "read_bytes": "0", "written_rows": str(written), "written_bytes": "0",
                   "total_rows_to_read": "0", "result_rows": "0", "result_bytes": str(len(payload)), "elapsed_ns": "0"}
        self._send(200, payload, {
            "Content-Type": "application/octet-stream" if fmt in ("Native", "Arrow", "ArrowStream", "Parquet")
            else "text/plain; charset=UTF-8",
            "X-ClickHouse-Format": fmt, "X-ClickHouse-Timezone": "UTC", "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Server-Display-Name": "chdb-fixture", "X-ClickHouse-Summary": json.dumps(summary)})


class FixtureServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, data_dir: str):
        super().__init__(address, _Handler)
        from chdb import session

        self.session = session.Session(os.path.join(data_dir, "clickhouse"))
        self.legacy = "params" not in inspect.signature(self.session.query).parameters  # chdb 2.1.x
        self.lock = threading.Lock()  # one statement (with its SETs) at a time
        self.spool_dir = tempfile.mkdtemp(prefix="chdb-fixture-")

    def _with_body(self, statement: str, data: bytes, default_format: str,
                   source: Callable[[str, str], str]) -> tuple[str, str, str | None]:
        """The statement without its trailing FORMAT, the format, and the request body (if any) written to
        a file that ``source(path, fmt)`` names after the statement's head (INSERT … FROM INFILE on chdb ≥ 3,
        INSERT … SELECT FROM file() on 2.1.x). The caller removes the file."""
        match = FORMAT_AT_END.search(statement)
        fmt = match.group(1) if match else default_format
        if not data:
            return (statement[:match.start()].rstrip() if match else statement), fmt, None
        path = os.path.join(self.spool_dir, f"{uuid.uuid4().hex}.bin")
        with open(path, "wb") as handle:
            handle.write(data)
        head = statement[:match.start()] if match else statement
        return head.rstrip() + source(path, fmt), fmt, path

    def run(self, statement: str, data: bytes, params: dict, settings: dict, database: str | None,
            default_format: str) -> tuple[bytes, str, int]:
        if self.legacy:
            return self.run_legacy(statement, data, params, settings, database, default_format)
        statement, fmt, path = self._with_body(statement.strip().rstrip(";"), data, default_format,
                                               lambda path, fmt: f" FROM INFILE {_quote(path)} FORMAT {fmt}")
        with self.lock:
            applied = []
            try:
                if database:
                    self.session.query(f"USE {database}" if SETTING_NAME.fullmatch(database) else "SELECT 1")
                for key, value in settings.items():
                    self.session.query(f"SET {key} = {_quote(value)}")
                    applied.append(key)
                if params:
                    result = self.session.query(statement, fmt, params=params)
                else:
                    result = self.session.query(statement, fmt)
                payload = result.bytes()
            finally:
                for key in applied:
                    self.session.query(f"SET {key} = DEFAULT")
                if path:
                    os.unlink(path)
        # chdb does not report rows written; nothing in promptprism reads it.
        return payload, fmt, 0

    def run_legacy(self, statement: str, data: bytes, params: dict, settings: dict, database: str | None,
                   default_format: str) -> tuple[bytes, str, int]:
        from promptprism.collector.store.embedded import UNFINISHED, legacy_drop
        from promptprism.collector.store.inline import bind_inline

        statement = statement.strip().rstrip(";")
        drop = legacy_drop(statement)
        statement, fmt, path = self._with_body(drop or statement, data, default_format,
                                               lambda path, fmt: f" SELECT * FROM file({_quote(path)}, {_quote(fmt)})")
        if params:
            statement = bind_inline(statement, {key: _unescaped(value) for key, value in params.items()})
        if settings and (data or SELECT_LIKE.match(statement)):
            clause = ", ".join(f"{key} = {_quote(value)}" for key, value in settings.items())
            statement += (", " if TRAILING_SETTINGS.search(statement) else " SETTINGS ") + clause
        with self.lock:
            try:
                if database:
                    self.session.query(f"USE {database}" if SETTING_NAME.fullmatch(database) else "SELECT 1")
                payload = self.session.query(statement, fmt).bytes()
            except Exception as error:
                code = ERROR_CODE.search(str(error))
                if drop and code and int(code.group(1)) == UNFINISHED:
                    payload = b""  # chdb 2.1.x: gone from the catalog (store/embedded.py, legacy_drop)
                else:
                    raise
            finally:
                if path:
                    os.unlink(path)
        return payload, fmt, 0


class ChdbHttpProcess:
    """Start/stop the fixture in a subprocess; ``url`` is what the server store takes."""

    # The subprocess imports chdb and opens its data dir: a few seconds on 2 busy cores.
    START_TIMEOUT_SECONDS = 60

    def __init__(self, data_dir: str, port: int | None = None, database: str = "promptprism"):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.database = database
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://default:secret@127.0.0.1:{self.port}/{self.database}"

    def start(self) -> "ChdbHttpProcess":
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--port", str(self.port), "--data-dir", self.data_dir],
            stdout=subprocess.DEVNULL, stderr=None)
        deadline = time.monotonic() + self.START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chdb HTTP fixture exited with {self.process.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ping", timeout=1) as answer:
                    if answer.read().startswith(b"Ok."):
                        return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("chdb HTTP fixture did not start")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", required=True)
    arguments = parser.parse_args()
    server = FixtureServer(("127.0.0.1", arguments.port), arguments.data_dir)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
        if not server.legacy:  # chdb 2.1.x has no close() (its cleanup() deletes the directory)
            server.session.close()


if __name__ == "__main__":
    main()
