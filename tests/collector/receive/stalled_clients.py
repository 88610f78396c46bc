"""Clients that start an export and never finish it, held open from the test on loopback.

- :class:`StalledGrpcCall`: one HTTP/2 stream of an OTLP/gRPC ``Export`` call
  (raw frames through the ``h2`` package) that sends its headers and a gRPC
  length prefix announcing a large message, then a few bytes of it, then
  nothing; it can wait for the status the server answers.
- :func:`stalled_http_upload`: ``POST /v1/traces`` with a large
  ``Content-Length`` and a few bytes of body, the connection left open.
"""

from __future__ import annotations

import socket
import time

import h2.config
import h2.connection
import h2.events

from ..collector_harness import EXPORT_PATH

ANNOUNCED_BYTES = 1_000_000
SENT_BYTES = 50


class StalledGrpcCall:
    def __init__(self, endpoint: str, *, metadata: tuple[tuple[str, str], ...] = (), path: str = EXPORT_PATH):
        target = endpoint.removeprefix("http://")
        host, port = target.rsplit(":", 1)
        self.socket = socket.create_connection((host, int(port)), timeout=10)
        self.connection = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.connection.initiate_connection()
        stream = self.connection.get_next_available_stream_id()
        self.connection.send_headers(stream, [
            (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", target),
            ("content-type", "application/grpc"), ("te", "trailers"), *metadata])
        self.connection.send_data(stream, b"\x00" + ANNOUNCED_BYTES.to_bytes(4, "big") + b"\x0a" * SENT_BYTES)
        self.socket.sendall(self.connection.data_to_send())

    def status(self, timeout: float = 30.0) -> int | None:
        """The grpc-status the server answered (waiting up to ``timeout``); None if the connection closed first."""
        deadline = time.monotonic() + timeout
        while True:
            self.socket.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.socket.recv(65536)
            except TimeoutError:
                raise AssertionError(f"no grpc-status within {timeout} s") from None
            if not data:
                return None
            for event in self.connection.receive_data(data):
                if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    headers = dict(event.headers)
                    if "grpc-status" in headers:
                        return int(headers["grpc-status"])
            pending = self.connection.data_to_send()
            if pending:
                self.socket.sendall(pending)

    def close(self) -> None:
        self.socket.close()


def stalled_http_upload(endpoint: str, *, headers: dict[str, str] | None = None,
                        announced: int = ANNOUNCED_BYTES, sent: int = 10) -> socket.socket:
    """An OTLP/HTTP export whose body has started but will not finish."""
    host, port = endpoint.removeprefix("http://").rsplit(":", 1)
    connection = socket.create_connection((host, int(port)), timeout=10)
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    connection.sendall((f"POST /v1/traces HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-protobuf\r\n"
                        f"Content-Length: {announced}\r\n{extra}\r\n").encode() + b"\x0a" * sent)
    return connection
