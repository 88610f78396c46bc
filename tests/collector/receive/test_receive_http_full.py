"""OTLP/HTTP under stalled, slow and unauthenticated uploads (issue 14, must fix 2).

Sixteen ``POST /v1/traces`` with ``Content-Length: 1000000``, 10 bytes sent and
the connection left open used to make every other export 503. Now a body
costs only the bytes it has sent (a byte budget of bodies in memory), the
number of bodies arriving at once is bounded, a body has a time limit to
arrive, and the token is checked before any of it counts. The uploads are
held open from the test itself, on loopback.
"""

from __future__ import annotations

import socket

import httpx

from promptprism.collector.receive import http as receive_http
from support import wait_until

from ..collector_harness import PARTS, assert_exact_map, emit_prompt, exporter, prompt_export, running_collector, \
    tracer_for
from .stalled_clients import stalled_http_upload

TOKEN = "s3cret"
STALLED_UPLOADS = 16


def _post(endpoint: str, body: bytes = b"", token: str | None = None) -> httpx.Response:
    headers = {"Content-Type": "application/x-protobuf"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(endpoint + "/v1/traces", content=body, timeout=30, headers=headers)


def _answer_status(connection: socket.socket, timeout: float = 30.0) -> int | None:
    """The status line the server answered on a held connection (None: closed without one)."""
    connection.settimeout(timeout)
    received = b""
    while b"\r\n" not in received:
        data = connection.recv(4096)
        if not data:
            return None
        received += data
    return int(received.split(b" ", 2)[1])


def _export_through_the_sdk(store, collector, token: str | None = None) -> None:
    headers = {"authorization": f"Bearer {token}"} if token else None
    provider, tracer = tracer_for(exporter(collector, "http", headers=headers))
    _, request_id = emit_prompt(tracer, PARTS)
    provider.shutdown()
    assert_exact_map(store, request_id, PARTS)


def _until_status(endpoint: str, wanted: int, unwanted: int, **post) -> httpx.Response:
    """Post until the answer is not ``unwanted`` (the held uploads reach the app asynchronously)."""
    answers = []
    wait_until(lambda: answers.append(_post(endpoint, **post)) or answers[-1].status_code != unwanted,
               message=f"still {unwanted}")
    assert answers[-1].status_code == wanted, answers[-1].text
    return answers[-1]


def test_sixteen_stalled_uploads_do_not_block_other_exports(store, tmp_path):
    with running_collector(store, tmp_path) as collector:
        endpoint = collector.endpoints()["otlp_http"]
        stalled = [stalled_http_upload(endpoint) for _ in range(STALLED_UPLOADS)]
        try:
            for _ in range(3):
                _export_through_the_sdk(store, collector)
                assert _post(endpoint, prompt_export()).status_code == 200
        finally:
            for connection in stalled:
                connection.close()


def test_uploads_without_the_token_are_refused_before_their_body(store, tmp_path):
    with running_collector(store, tmp_path, ingest_token=TOKEN) as collector:
        endpoint = collector.endpoints()["otlp_http"]
        stalled = [stalled_http_upload(endpoint) for _ in range(STALLED_UPLOADS)]
        try:
            assert [_answer_status(connection) for connection in stalled] == [401] * STALLED_UPLOADS
            _export_through_the_sdk(store, collector, TOKEN)
        finally:
            for connection in stalled:
                connection.close()


def test_arriving_bodies_are_bounded_and_a_full_receiver_says_retry(store, tmp_path, monkeypatch):
    monkeypatch.setattr(receive_http, "MAX_ARRIVING_BODIES", 2)
    with running_collector(store, tmp_path) as collector:
        endpoint = collector.endpoints()["otlp_http"]
        held = [stalled_http_upload(endpoint) for _ in range(2)]
        try:
            answer = _until_status(endpoint, 503, 200)
            assert answer.headers["Retry-After"] == str(receive_http.FULL_RETRY_AFTER_SECONDS)
        finally:
            for connection in held:
                connection.close()
        _until_status(endpoint, 200, 503)  # places freed as the uploads end


def test_bytes_held_are_bounded_by_what_arrived(store, tmp_path, monkeypatch):
    limit = 64 * 1024
    monkeypatch.setattr(receive_http, "HELD_RECEIVE_LIMITS", 1)
    with running_collector(store, tmp_path, receive_limit_bytes=limit) as collector:
        endpoint = collector.endpoints()["otlp_http"]
        # Announcing the whole budget costs nothing until it is sent.
        announced = stalled_http_upload(endpoint, announced=limit, sent=10)
        try:
            _until_status(endpoint, 400, 503, body=b"\xff" * 1000)  # garbage, but read: room left
        finally:
            announced.close()
        sending = stalled_http_upload(endpoint, announced=limit, sent=limit - 100)
        try:
            _until_status(endpoint, 503, 400, body=b"\xff" * 1000)
        finally:
            sending.close()
        _until_status(endpoint, 400, 503, body=b"\xff" * 1000)


def test_a_body_that_does_not_arrive_in_time_is_answered_retryable(store, tmp_path, monkeypatch):
    monkeypatch.setattr(receive_http, "BODY_READ_TIMEOUT_SECONDS", 0.2)
    with running_collector(store, tmp_path) as collector:
        endpoint = collector.endpoints()["otlp_http"]
        connection = stalled_http_upload(endpoint)
        try:
            assert _answer_status(connection) == 503
        finally:
            connection.close()
        _export_through_the_sdk(store, collector)


def test_a_client_that_disconnects_mid_body_is_one_rate_limited_line(store, tmp_path, caplog):
    with running_collector(store, tmp_path) as collector:
        endpoint = collector.endpoints()["otlp_http"]
        for _ in range(3):
            stalled_http_upload(endpoint).close()

        def said() -> list:
            return [record for record in caplog.records if "disconnected" in record.getMessage()]
        wait_until(lambda: said(), message="the disconnect was not noticed")
        _export_through_the_sdk(store, collector)
    assert len(said()) == 1 and said()[0].exc_info is None
    assert not [record for record in caplog.records if record.levelname == "ERROR"]
