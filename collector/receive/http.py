"""OTLP/HTTP receiver: ``POST /v1/traces`` and ``POST /v1/logs``, protobuf or JSON, optionally gzip.

The handler authenticates, reads the body within the receive limit,
decompresses it within the same limit, and hands it to ``Ingest`` on a
worker thread (decoding and the sink's durable write block). Answers follow
OTLP/HTTP: the response body is an ``ExportTraceServiceResponse`` (partial
success; ``ExportLogsServiceResponse`` for logs) or a ``google.rpc.Status``
in the request's encoding; 400 / 413 / 401 / 503 + Retry-After / 500 as
SPEC §4 asks, the same for both signals.
"""

from __future__ import annotations

import json
import logging
import math
import zlib

import anyio
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import metrics as outcomes
from .._logsafe import describe_store_error
from ..otlp import MalformedPayload
from ..store.base import StoreError
from ..write.ingest import ENCODING_JSON, ENCODING_PROTOBUF, Ingest
from ..write.sink import Backpressure
from .auth import authorized

logger = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
TRANSPORT = "http"
PROTOBUF_TYPE = "application/x-protobuf"
JSON_TYPE = "application/json"
# Exports decoded and written at once; as for gRPC (grpc.MAX_WORKERS),
# each holds up to the receive limit in memory while the sink writes it.
MAX_CONCURRENT_EXPORTS = 8
# Exports whose bodies may be held in memory at once (being read, waiting for
# a decoder, being decoded). Checked before a body is read, so memory stays
# under this × the receive limit (16 × 64 MiB = 1 GiB by default) however many
# connections are open; past it the receiver is full and answers 503 with
# Retry-After at once. Twice the decoders: one export read while one decodes.
MAX_HELD_EXPORTS = 2 * MAX_CONCURRENT_EXPORTS
# What a full receiver asks the exporter to wait before retrying.
FULL_RETRY_AFTER_SECONDS = 1


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


def _media_type(header: str) -> str:
    return header.split(";", 1)[0].strip().lower()


def _status_body(encoding: str, code: int, message: str) -> tuple[bytes, str]:
    if encoding == ENCODING_JSON:
        return json.dumps({"code": code, "message": message}).encode(), JSON_TYPE
    return status_pb2.Status(code=code, message=message).SerializeToString(), PROTOBUF_TYPE


def _error(status: int, encoding: str, code: int, message: str, headers: dict | None = None) -> Response:
    body, media_type = _status_body(encoding, code, message)
    return Response(body, status_code=status, media_type=media_type, headers=headers)


def _success(encoding: str, rejected: int, message: str) -> Response:
    if encoding == ENCODING_JSON:
        document = {"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}} if rejected else {}
        return Response(json.dumps(document).encode(), media_type=JSON_TYPE)
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    return Response(response.SerializeToString(), media_type=PROTOBUF_TYPE)


def _logs_success(encoding: str, rejected: int, message: str) -> Response:
    if encoding == ENCODING_JSON:
        document = ({"partialSuccess": {"rejectedLogRecords": str(rejected), "errorMessage": message}}
                    if rejected else {})
        return Response(json.dumps(document).encode(), media_type=JSON_TYPE)
    response = ExportLogsServiceResponse()
    if rejected:
        response.partial_success.rejected_log_records = rejected
        response.partial_success.error_message = message
    return Response(response.SerializeToString(), media_type=PROTOBUF_TYPE)


def traces_app(ingest: Ingest, *, token: str | None, receive_limit_bytes: int) -> Starlette:
    """The OTLP/HTTP app: traces and logs share the limiter, limits and answers."""
    limiter = anyio.CapacityLimiter(MAX_CONCURRENT_EXPORTS)
    holding = anyio.CapacityLimiter(MAX_HELD_EXPORTS)
    metrics = ingest.metrics

    async def export(request: Request) -> Response:
        return await _export(request, ingest.export,
                             lambda encoding, outcome: _success(encoding, outcome.rejected_spans, outcome.error_message))

    async def export_logs(request: Request) -> Response:
        return await _export(request, ingest.export_logs,
                             lambda encoding, outcome: _logs_success(encoding, outcome.rejected_log_records,
                                                                     outcome.error_message))

    async def _export(request: Request, ingest_export, answer) -> Response:
        media_type = _media_type(request.headers.get("content-type", ""))
        encoding = ENCODING_JSON if media_type == JSON_TYPE else ENCODING_PROTOBUF
        if not authorized(token, request.headers.get("authorization")):
            metrics.export_finished(TRANSPORT, outcomes.OUTCOME_UNAUTHENTICATED)
            return _error(401, encoding, code_pb2.UNAUTHENTICATED, "missing or wrong bearer token",
                          {"WWW-Authenticate": "Bearer"})
        if media_type not in (PROTOBUF_TYPE, JSON_TYPE):
            return _error(415, encoding, code_pb2.INVALID_ARGUMENT,
                          f"Content-Type must be {PROTOBUF_TYPE} or {JSON_TYPE}")
        content_encoding = request.headers.get("content-encoding", "identity").strip().lower()
        if content_encoding not in ("identity", "gzip", ""):
            return _error(415, encoding, code_pb2.INVALID_ARGUMENT, "Content-Encoding must be gzip or identity")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > receive_limit_bytes:
            return _too_large(encoding)
        try:
            holding.acquire_nowait()
        except anyio.WouldBlock:
            metrics.export_finished(TRANSPORT, outcomes.OUTCOME_BACKPRESSURE)
            return _error(503, encoding, code_pb2.UNAVAILABLE, "receiver full, retry later",
                          {"Retry-After": str(FULL_RETRY_AFTER_SECONDS)})
        try:
            return await _read_and_ingest(request, ingest_export, answer, encoding, content_encoding)
        finally:
            holding.release()

    async def _read_and_ingest(request: Request, ingest_export, answer, encoding: str,
                               content_encoding: str) -> Response:
        chunks, received = [], 0
        async for chunk in request.stream():
            received += len(chunk)
            if received > receive_limit_bytes:
                return _too_large(encoding)
            chunks.append(chunk)
        body = b"".join(chunks)
        try:
            outcome = await anyio.to_thread.run_sync(_decode_and_ingest, ingest_export, body, content_encoding,
                                                     encoding, limiter=limiter)
        except PayloadTooLarge:
            return _too_large(encoding)
        except MalformedPayload as error:
            metrics.export_finished(TRANSPORT, outcomes.OUTCOME_MALFORMED, len(body))
            return _error(400, encoding, code_pb2.INVALID_ARGUMENT, str(error))
        except Backpressure as error:
            metrics.export_finished(TRANSPORT, outcomes.OUTCOME_BACKPRESSURE, len(body))
            retry_after = str(max(1, math.ceil(error.retry_after_seconds)))
            return _error(503, encoding, code_pb2.UNAVAILABLE, f"retry later: {error}", {"Retry-After": retry_after})
        except StoreError as error:
            metrics.export_finished(TRANSPORT, outcomes.OUTCOME_ERROR, len(body))
            logger.error("store refused an OTLP/HTTP export: %s", describe_store_error(error))
            return _error(500, encoding, code_pb2.INTERNAL, "the store refused the data")
        return answer(encoding, outcome)

    def _decode_and_ingest(ingest_export, body: bytes, content_encoding: str, encoding: str):
        if content_encoding == "gzip":
            body = gunzip(body, receive_limit_bytes)
        return ingest_export(body, encoding, TRANSPORT)

    def _too_large(encoding: str) -> Response:
        metrics.export_finished(TRANSPORT, outcomes.OUTCOME_TOO_LARGE)
        return _error(413, encoding, code_pb2.RESOURCE_EXHAUSTED,
                      f"request larger than the receive limit of {receive_limit_bytes} bytes")

    return Starlette(routes=[Route(TRACES_PATH, export, methods=["POST"]),
                             Route(LOGS_PATH, export_logs, methods=["POST"])])
