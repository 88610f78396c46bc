"""OTLP/gRPC receiver: ``TraceService/Export`` and ``LogsService/Export`` on one grpcio server.

The handler only authenticates, hands the raw request bytes to ``Ingest``
and answers its outcome (``answers``). It takes the request undeserialized
so the payload is parsed once and its bytes give the dedup token. grpcio
itself enforces the receive limit (on the decompressed size) and answers
RESOURCE_EXHAUSTED past it.
"""

from __future__ import annotations

from concurrent import futures

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ..write.ingest import ENCODING_PROTOBUF, KIND_LOGS, KIND_TRACES, UNAUTHENTICATED, ExportOutcome, Ingest
from .answers import grpc_answer
from .auth import AUTHORIZATION, authorized

SERVICE_NAME = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE_NAME = "opentelemetry.proto.collector.logs.v1.LogsService"
METHOD_NAME = "Export"
TRANSPORT = "grpc"

# Concurrent exports being decoded and written. Each holds a decoded batch
# (up to the receive limit) in memory; the sink queues and groups them, so a
# few threads keep both cores busy while bounding memory.
MAX_WORKERS = 8
# Beyond the workers, calls wait in grpcio's queue up to this many. A waiting
# call has not read its message (grpcio reads it in the worker thread), so it
# costs a flow-control window, not a body: the body memory bound is
# MAX_WORKERS × the receive limit plus the sink's own bound, and a full sink
# answers UNAVAILABLE + RetryInfo (README "The collector", "What the receivers answer"). Past this cap grpcio itself
# answers RESOURCE_EXHAUSTED without RetryInfo, before our code runs, which some
# exporters (Go's) treat as permanent; the cap is set high so that only a
# runaway number of connections reaches it, while ordinary overload waits
# (and, past the exporter's deadline, DEADLINE_EXCEEDED, which every OTLP
# exporter retries).
MAX_CONCURRENT_RPCS = 1024
# On shutdown, calls in flight get this long to finish before being cancelled.
STOP_GRACE_SECONDS = 10.0


class GrpcReceiver:
    def __init__(self, ingest: Ingest, *, host: str, port: int, token: str | None = None,
                 receive_limit_bytes: int, tls_cert_file: str | None = None, tls_key_file: str | None = None):
        self.ingest = ingest
        self.token = token
        self.metrics = ingest.metrics
        # grpcio does not shut down an executor it was given: stop() does.
        self._executor = futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="promptprism-grpc")
        self._server = grpc.server(
            self._executor,
            maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
            options=[
                ("grpc.max_receive_message_length", receive_limit_bytes),
                ("grpc.max_send_message_length", receive_limit_bytes),
            ],
        )
        handler = grpc.unary_unary_rpc_method_handler(
            self._export, request_deserializer=None,
            response_serializer=ExportTraceServiceResponse.SerializeToString)
        logs_handler = grpc.unary_unary_rpc_method_handler(
            self._export_logs, request_deserializer=None,
            response_serializer=ExportLogsServiceResponse.SerializeToString)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE_NAME, {METHOD_NAME: handler}),
             grpc.method_handlers_generic_handler(LOGS_SERVICE_NAME, {METHOD_NAME: logs_handler})))
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            if tls_cert_file:
                with open(tls_key_file, "rb") as key, open(tls_cert_file, "rb") as cert:
                    credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
                self.port = self._server.add_secure_port(target, credentials)
            else:
                self.port = self._server.add_insecure_port(target)
        except RuntimeError:  # grpcio's "Failed to bind" (older versions returned 0)
            self.port = 0
        if not self.port:
            raise OSError(f"cannot listen for OTLP/gRPC on {target}")
        self.host = host

    def start(self) -> None:
        self._server.start()

    def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        self._server.stop(grace_seconds).wait()
        self._executor.shutdown(wait=True)

    def _export(self, payload: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        return self._answer(KIND_TRACES, payload, context)

    def _export_logs(self, payload: bytes, context: grpc.ServicerContext) -> ExportLogsServiceResponse:
        return self._answer(KIND_LOGS, payload, context)

    def _answer(self, signal: str, payload: bytes, context: grpc.ServicerContext):
        """Authenticate and ingest; answer the outcome (a failure aborts the call with its status)."""
        if self.token:
            header = next((value for key, value in context.invocation_metadata() if key == AUTHORIZATION), None)
            if not authorized(self.token, header):
                outcome = ExportOutcome(UNAUTHENTICATED, signal, message="missing or wrong bearer token")
                return grpc_answer(outcome, context, self.metrics, TRANSPORT)
        outcome = self.ingest.export(payload, ENCODING_PROTOBUF, TRANSPORT, signal)
        return grpc_answer(outcome, context, self.metrics, TRANSPORT)
