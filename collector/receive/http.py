"""OTLP/HTTP receiver: ``POST /v1/traces``, ``/v1/logs`` and ``/v1/metrics``, protobuf or JSON, optionally gzip.

The handler authenticates, reads the body within the receive limit,
decompresses it within the same limit, and hands it to ``Ingest`` on a
worker thread (decoding and the sink's durable write block). Every answer
comes from the outcome (``answers``): the response body is the signal's
``Export…ServiceResponse`` (partial success) or a ``google.rpc.Status``, in
the request's encoding, with the status code the outcome's row of the
status table names.
"""

from __future__ import annotations

import logging
import zlib

import anyio
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._logsafe import RateLimitedLog
from ..otlp import MalformedPayload
from ..write.ingest import (
    ENCODING_JSON,
    ENCODING_PROTOBUF,
    KIND_LOGS,
    KIND_METRICS,
    KIND_TRACES,
    MALFORMED,
    RETRY,
    TOO_LARGE,
    UNAUTHENTICATED,
    UNSUPPORTED,
    ExportOutcome,
    Ingest,
)
from .answers import JSON_TYPE, PROTOBUF_TYPE, http_answer
from .auth import authorized

logger = logging.getLogger(__name__)

ABOUT_PATH = "/"
ABOUT_SERVICE = "promptprism collector"
TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
METRICS_PATH = "/v1/metrics"
TRANSPORT = "http"
# Exports decoded and written at once; as for gRPC (grpc.MAX_WORKERS),
# each holds up to the receive limit in memory while the sink writes it.
MAX_CONCURRENT_EXPORTS = 8
# Bodies being received at once. An arriving body holds only the bytes it
# has sent so far (counted against the byte budget below), so this bounds
# coroutines and sockets, not memory: a slow or stalled sender takes one of
# 64 places for at most BODY_READ_TIMEOUT_SECONDS, and sixteen stalled
# uploads leave room for the exports behind them. Past it the receiver is
# full and answers 503 with Retry-After at once.
MAX_ARRIVING_BODIES = 64
# Bytes of bodies held in memory at once (arriving, waiting for a decoder,
# being decoded), as a number of receive limits: 16 × 64 MiB = 1 GiB by
# default, whatever the number of connections. Counted as bytes arrive, not
# as Content-Length announces them, so an announced size costs nothing until
# it is sent. Twice the decoders: one export read while one decodes.
HELD_RECEIVE_LIMITS = 2 * MAX_CONCURRENT_EXPORTS
# How long a body may take to arrive. OTLP exporters give a whole export
# 10 s by default (the Python and Go SDKs), so a body still arriving after
# three times that has been abandoned by its sender.
BODY_READ_TIMEOUT_SECONDS = 30.0
# What a full receiver asks the exporter to wait before retrying.
FULL_RETRY_AFTER_SECONDS = 1


def _reachable(url: str | None, asked_host: str | None) -> str | None:
    """``url`` with a wildcard host (0.0.0.0, ::) replaced by the host the client reached us at."""
    if url is None or not asked_host:
        return url
    for wildcard in ("//0.0.0.0:", "//[::]:"):
        if wildcard in url:
            host = f"[{asked_host}]" if ":" in asked_host else asked_host
            return url.replace(wildcard, f"//{host}:", 1)
    return url


class PayloadTooLarge(Exception):
    pass


def gunzip(data: bytes, limit: int) -> bytes:
    """Decompress gzip (all members) without ever holding more than ``limit`` bytes."""
    parts, total = [], 0
    while data:
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = decompressor.decompress(data, limit - total + 1)
        except zlib.error as error:
            raise MalformedPayload(f"bad gzip body: {error}") from None
        total += len(chunk)
        if total > limit or decompressor.unconsumed_tail:
            raise PayloadTooLarge()
        if not decompressor.eof:
            raise MalformedPayload("truncated gzip body")
        parts.append(chunk)
        data = decompressor.unused_data
    return b"".join(parts)


class _HeldBytes:
    """The byte budget of bodies in memory (used on the server's one event loop: no lock)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0

    def take(self, amount: int) -> bool:
        if self.held + amount > self.limit:
            return False
        self.held += amount
        return True

    def give(self, amount: int) -> None:
        self.held -= amount


def _media_type(header: str) -> str:
    return header.split(";", 1)[0].strip().lower()


def traces_app(ingest: Ingest, *, token: str | None, receive_limit_bytes: int,
               inspector_url: str | None = None) -> Starlette:
    """The OTLP/HTTP app: traces and logs share the limiter, limits and answers.

    ``GET /`` says what listens here and where its inspector is
    (``inspector_url``), so a tool given only the OTLP endpoint (``promptprism
    demo``) can link to the right page; with an ingest token it needs the token.
    """
    limiter = anyio.CapacityLimiter(MAX_CONCURRENT_EXPORTS)
    arriving = anyio.CapacityLimiter(MAX_ARRIVING_BODIES)
    held = _HeldBytes(HELD_RECEIVE_LIMITS * receive_limit_bytes)
    disconnects = RateLimitedLog(logger)
    metrics = ingest.metrics

    def answer(outcome: ExportOutcome, encoding: str) -> Response:
        found = http_answer(outcome, encoding, metrics, TRANSPORT)
        return Response(found.body, status_code=found.status, media_type=found.media_type,
                        headers=found.headers or None)

    async def about(request: Request) -> Response:
        if not authorized(token, request.headers.get("authorization")):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        return JSONResponse({"service": ABOUT_SERVICE, "otlp": [TRACES_PATH, LOGS_PATH, METRICS_PATH],
                             "inspector": _reachable(inspector_url, request.url.hostname)})

    async def export(request: Request) -> Response:
        return await _export(request, KIND_TRACES)

    async def export_logs(request: Request) -> Response:
        return await _export(request, KIND_LOGS)

    async def export_metrics(request: Request) -> Response:
        return await _export(request, KIND_METRICS)

    async def _export(request: Request, signal: str) -> Response:
        media_type = _media_type(request.headers.get("content-type", ""))
        encoding = ENCODING_JSON if media_type == JSON_TYPE else ENCODING_PROTOBUF
        if not authorized(token, request.headers.get("authorization")):
            return answer(ExportOutcome(UNAUTHENTICATED, signal, message="missing or wrong bearer token"), encoding)
        if media_type not in (PROTOBUF_TYPE, JSON_TYPE):
            return answer(ExportOutcome(UNSUPPORTED, signal,
                                        message=f"Content-Type must be {PROTOBUF_TYPE} or {JSON_TYPE}"), encoding)
        content_encoding = request.headers.get("content-encoding", "identity").strip().lower()
        if content_encoding not in ("identity", "gzip", ""):
            return answer(ExportOutcome(UNSUPPORTED, signal, message="Content-Encoding must be gzip or identity"),
                          encoding)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > receive_limit_bytes:
            return answer(_too_large(signal), encoding)
        try:
            arriving.acquire_nowait()
        except anyio.WouldBlock:
            return answer(_full(signal, "receiver full, retry later"), encoding)
        reserved = 0
        try:
            chunks = []
            try:
                with anyio.fail_after(BODY_READ_TIMEOUT_SECONDS):
                    async for chunk in request.stream():
                        if reserved + len(chunk) > receive_limit_bytes:
                            return answer(_too_large(signal), encoding)
                        if not held.take(len(chunk)):
                            return answer(_full(signal, "receiver full, retry later"), encoding)
                        reserved += len(chunk)
                        chunks.append(chunk)
            except TimeoutError:
                return answer(_full(signal, f"the body did not arrive within {BODY_READ_TIMEOUT_SECONDS:g} s"),
                              encoding)
            except ClientDisconnect:  # nobody is left to answer: one rate-limited line, no traceback
                disconnects.warning("an OTLP/HTTP client disconnected before sending its whole body")
                return Response(status_code=400)
            finally:
                arriving.release()
            body = b"".join(chunks)
            del chunks
            outcome = await anyio.to_thread.run_sync(_decode_and_ingest, signal, body, content_encoding, encoding,
                                                     limiter=limiter)
            return answer(outcome, encoding)
        finally:
            held.give(reserved)

    def _decode_and_ingest(signal: str, body: bytes, content_encoding: str, encoding: str) -> ExportOutcome:
        if content_encoding == "gzip":
            try:
                body = gunzip(body, receive_limit_bytes)
            except PayloadTooLarge:
                return _too_large(signal)
            except MalformedPayload as error:
                return ExportOutcome(MALFORMED, signal, message=str(error), payload_bytes=len(body))
        return ingest.export(body, encoding, TRANSPORT, signal)

    def _full(signal: str, message: str) -> ExportOutcome:
        return ExportOutcome(RETRY, signal, message=message, retry_after_seconds=FULL_RETRY_AFTER_SECONDS)

    def _too_large(signal: str) -> ExportOutcome:
        return ExportOutcome(TOO_LARGE, signal,
                             message=f"request larger than the receive limit of {receive_limit_bytes} bytes")

    return Starlette(routes=[Route(ABOUT_PATH, about, methods=["GET"]),
                             Route(TRACES_PATH, export, methods=["POST"]),
                             Route(LOGS_PATH, export_logs, methods=["POST"]),
                             Route(METRICS_PATH, export_metrics, methods=["POST"])])
