"""OTLP/gRPC receiver: ``TraceService/Export``, ``LogsService/Export`` and ``MetricsService/Export`` on one grpcio server.

The server is grpcio's asyncio server on its own thread and event loop. A
call waiting for its message costs a coroutine, not a thread, so clients
that open streams and stall cannot take the workers that valid exports
need. Each method is served as a stream-unary handler (the same unary call
on the wire) so that the handler runs *before* the message is read: it
checks the bearer token on the call's metadata first (an unauthenticated
call is answered without reading a byte of its message), then takes a
place among the calls allowed to hold a message, then waits a bounded time
for the message to arrive. The raw request bytes go to ``Ingest`` on a
worker thread (decoding and the sink's durable write block), undeserialized
so the payload is parsed once and its bytes give the dedup token. grpcio
itself enforces the receive limit (on the decompressed size) and answers
RESOURCE_EXHAUSTED past it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from concurrent import futures

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ..write.ingest import (
    ENCODING_PROTOBUF,
    KIND_LOGS,
    KIND_METRICS,
    KIND_TRACES,
    MALFORMED,
    RETRY,
    UNAUTHENTICATED,
    ExportOutcome,
    Ingest,
)
from .answers import grpc_answer
from .auth import AUTHORIZATION, authorized

SERVICE_NAME = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE_NAME = "opentelemetry.proto.collector.logs.v1.LogsService"
METRICS_SERVICE_NAME = "opentelemetry.proto.collector.metrics.v1.MetricsService"
METHOD_NAME = "Export"
TRANSPORT = "grpc"

# Concurrent exports being decoded and written. Each holds a decoded batch
# (up to the receive limit) in memory; the sink queues and groups them, so a
# few threads keep both cores busy while bounding memory.
MAX_WORKERS = 8
# Authenticated calls that may hold a message at once: arriving, waiting for
# a worker or being decoded. Memory stays under this × the receive limit;
# past it the receiver is full and answers UNAVAILABLE + RetryInfo at once
# (README "What the receivers answer"). Four times the workers, so a handful of stalled or slow
# senders (each waits at most MESSAGE_ARRIVAL_TIMEOUT_SECONDS) leaves room
# for the exports behind them.
MAX_HOLDING_CALLS = 4 * MAX_WORKERS
# How long a call's message may take to arrive once the call is admitted.
# OTLP exporters give a whole export 10 s by default (the Python and Go SDKs),
# so a message still arriving after three times that has been abandoned by
# its sender; the call is answered UNAVAILABLE and its place freed.
MESSAGE_ARRIVAL_TIMEOUT_SECONDS = 30.0
# What a full receiver asks the exporter to wait before retrying.
FULL_RETRY_AFTER_SECONDS = 1.0
# Calls grpcio admits at all (holding a message or not yet authenticated).
# Past it grpcio itself answers RESOURCE_EXHAUSTED without RetryInfo, before
# our code runs, which some exporters (Go's) treat as permanent; an admitted
# call costs a coroutine until it is answered, so the cap is set high and
# only a runaway number of connections reaches it.
MAX_CONCURRENT_RPCS = 1024
# On shutdown, calls in flight get this long to finish before being cancelled.
STOP_GRACE_SECONDS = 10.0
# Waiting for the event loop thread to build or stop the server; it takes milliseconds.
LOOP_CALL_TIMEOUT_SECONDS = 60.0

# service → (signal, response type)
SERVICES = {
    SERVICE_NAME: (KIND_TRACES, ExportTraceServiceResponse),
    LOGS_SERVICE_NAME: (KIND_LOGS, ExportLogsServiceResponse),
    METRICS_SERVICE_NAME: (KIND_METRICS, ExportMetricsServiceResponse),
}


@contextlib.contextmanager
def ipv6_wildcard_held(port: int):
    """The port to give grpcio for ``0.0.0.0`` so that it listens on IPv4 only.

    grpcio binds any wildcard address as ``[::]`` dual-stack (IPv6 too) and
    binds ``0.0.0.0`` alone only when ``[::]:port`` is taken. So while grpcio
    binds, this holds ``[::]:port`` itself (an IPv6-only socket, bound, never
    listening) and lets it go after: then nothing listens on IPv6 at that port
    and IPv6 clients are refused. Port 0: the system picks a port free on
    IPv6 and grpcio binds it on IPv4 (``tests/collector/test_exposure.py``).
    """
    try:
        held = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:  # no IPv6 on this host: grpcio binds IPv4 alone anyway
        yield port
        return
    with held:
        try:
            held.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            held.bind(("::", port))
        except OSError:  # no IPv6 address, or [::]:port taken by another program: grpcio cannot take it either
            yield port
            return
        yield held.getsockname()[1]


class GrpcReceiver:
    def __init__(self, ingest: Ingest, *, host: str, port: int, token: str | None = None,
                 receive_limit_bytes: int, tls_cert_file: str | None = None, tls_key_file: str | None = None):
        self.ingest = ingest
        self.token = token
        self.metrics = ingest.metrics
        self.host = host
        self.holding = 0  # calls holding a message (read on the event loop only)
        self._executor = futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="promptprism-grpc")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="promptprism-grpc-loop", daemon=True)
        self._thread.start()
        self._server: grpc.aio.Server | None = None
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        credentials = None
        if tls_cert_file:
            with open(tls_key_file, "rb") as key, open(tls_cert_file, "rb") as cert:
                credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
        try:
            self.port = self._on_loop(self._build(target, credentials, receive_limit_bytes))
        except RuntimeError:  # grpcio's "Failed to bind" (older versions returned 0)
            self.port = 0
        if not self.port:
            self._close_loop()
            raise OSError(f"cannot listen for OTLP/gRPC on {target}")

    def _on_loop(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(LOOP_CALL_TIMEOUT_SECONDS)

    async def _build(self, target: str, credentials, receive_limit_bytes: int) -> int:
        self._server = grpc.aio.server(
            maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
            options=[
                ("grpc.max_receive_message_length", receive_limit_bytes),
                ("grpc.max_send_message_length", receive_limit_bytes),
            ],
        )
        handlers = []
        for service, (signal, response_type) in SERVICES.items():
            handler = grpc.stream_unary_rpc_method_handler(
                self._behavior(signal), request_deserializer=None,
                response_serializer=response_type.SerializeToString)
            handlers.append(grpc.method_handlers_generic_handler(service, {METHOD_NAME: handler}))
        self._server.add_generic_rpc_handlers(tuple(handlers))
        host, _, port = target.rpartition(":")
        with ipv6_wildcard_held(int(port)) if host == "0.0.0.0" else contextlib.nullcontext(int(port)) as port:
            target = f"{host}:{port}"
            if credentials is not None:
                return self._server.add_secure_port(target, credentials)
            return self._server.add_insecure_port(target)

    def start(self) -> None:
        self._on_loop(self._server.start())

    def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        if self._server is not None and self._thread.is_alive():
            self._on_loop(self._server.stop(grace_seconds))
        self._close_loop()
        self._executor.shutdown(wait=True)

    def _close_loop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def _behavior(self, signal: str):
        async def export(request_iterator, context: grpc.aio.ServicerContext):
            return await self._answer(signal, context)
        return export

    async def _answer(self, signal: str, context: grpc.aio.ServicerContext):
        """Authenticate, admit, read the one message in bounded time, ingest; answer the outcome."""
        if self.token:
            header = next((value for key, value in context.invocation_metadata() or () if key == AUTHORIZATION),
                          None)
            if not authorized(self.token, header):
                outcome = ExportOutcome(UNAUTHENTICATED, signal, message="missing or wrong bearer token")
                return await grpc_answer(outcome, context, self.metrics, TRANSPORT)
        if self.holding >= MAX_HOLDING_CALLS:
            outcome = ExportOutcome(RETRY, signal, message="receiver full, retry later",
                                    retry_after_seconds=FULL_RETRY_AFTER_SECONDS)
            return await grpc_answer(outcome, context, self.metrics, TRANSPORT)
        self.holding += 1
        try:
            try:
                # A deadline on this task, not asyncio.wait_for: that reads in a task of its own,
                # and a 20 MB message then reached the export ~20 ms later (session 26).
                async with asyncio.timeout(MESSAGE_ARRIVAL_TIMEOUT_SECONDS):
                    payload = await context.read()
            except TimeoutError:
                outcome = ExportOutcome(RETRY, signal, retry_after_seconds=FULL_RETRY_AFTER_SECONDS,
                                        message=f"the message did not arrive within {MESSAGE_ARRIVAL_TIMEOUT_SECONDS:g} s")
                return await grpc_answer(outcome, context, self.metrics, TRANSPORT)
            if payload is grpc.aio.EOF:
                outcome = ExportOutcome(MALFORMED, signal, message="the call carried no request message")
                return await grpc_answer(outcome, context, self.metrics, TRANSPORT)
            outcome = await asyncio.get_running_loop().run_in_executor(
                self._executor, self.ingest.export, payload, ENCODING_PROTOBUF, TRANSPORT, signal)
        finally:
            self.holding -= 1
        return await grpc_answer(outcome, context, self.metrics, TRANSPORT)
