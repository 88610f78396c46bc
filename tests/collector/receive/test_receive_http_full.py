"""A full OTLP/HTTP receiver answers 503 + Retry-After before reading a body.

Bodies are held in memory while read and decoded; the bound on how many may
be held is checked before reading, so open connections cannot pile up
receive-limit-sized bodies.
"""

from __future__ import annotations

import socket
import time

import httpx

from promptprism.collector.receive import http as receive_http

from ..collector_harness import running_collector


def _slow_upload(address: str) -> socket.socket:
    """An export whose body has started but will not finish: it holds its place."""
    host, port = address.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=10)
    connection.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: test\r\nContent-Type: application/x-protobuf\r\n"
                       b"Content-Length: 100000\r\n\r\n" + b"\x0a" * 10)
    return connection


def _post_empty_export(endpoint: str) -> httpx.Response:
    return httpx.post(endpoint + "/v1/traces", content=b"", timeout=10,
                      headers={"Content-Type": "application/x-protobuf"})


def test_held_bodies_are_bounded_and_a_full_receiver_says_retry(store, tmp_path, monkeypatch):
    monkeypatch.setattr(receive_http, "MAX_HELD_EXPORTS", 2)
    with running_collector(store, tmp_path) as collector:
        endpoint = collector.endpoints()["otlp_http"]
        held = [_slow_upload(endpoint) for _ in range(2)]
        try:
            deadline = time.monotonic() + 10
            answer = _post_empty_export(endpoint)
            while answer.status_code == 200 and time.monotonic() < deadline:  # the uploads reach the app
                time.sleep(0.05)
                answer = _post_empty_export(endpoint)
            assert answer.status_code == 503
            assert answer.headers["Retry-After"] == str(receive_http.FULL_RETRY_AFTER_SECONDS)
        finally:
            for connection in held:
                connection.close()
        deadline = time.monotonic() + 10
        answer = _post_empty_export(endpoint)
        while answer.status_code == 503 and time.monotonic() < deadline:  # places freed as uploads end
            time.sleep(0.05)
            answer = _post_empty_export(endpoint)
        assert answer.status_code == 200
