"""Real OTLP receivers on free ports for the exporter tests.

- a gRPC TraceService (opentelemetry-proto's generated servicer) with a small
  receive limit, recording every Export call with its metadata;
- an HTTP server answering POST /v1/traces with protobuf, recording headers;
- a TCP relay that counts the bytes crossing it, to see gRPC compression on
  the wire (grpcio hides grpc-encoding from the servicer).
"""

from __future__ import annotations

import gzip
import http.server
import os
import socket
import threading
from concurrent import futures
from dataclasses import dataclass, field

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

# 1 MiB: small enough that a test batch of a few MiB must be split to pass,
# large enough for the test's single 1,000-event span.
TEST_RECEIVE_LIMIT_BYTES = 1024 * 1024


@dataclass
class ReceivedExport:
    request: trace_service_pb2.ExportTraceServiceRequest
    # Size of the decoded request, what the receiver's limit counts.
    request_bytes: int
    metadata: dict[str, str]
    # HTTP only: the body as it crossed the wire (compressed when gzip).
    wire_bytes: int = 0

    def spans(self):
        for resource_spans in self.request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                yield from scope_spans.spans


@dataclass
class Receiver:
    endpoint: str
    limit_bytes: int
    exports: list[ReceivedExport] = field(default_factory=list)
    rejected: int = 0

    def spans(self):
        return [span for export in self.exports for span in export.spans()]


def _clear_exporter_environment(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("OTEL_", "PROMPTPRISM_EXPORT_")):
            monkeypatch.delenv(name)


@pytest.fixture
def clean_environment(monkeypatch):
    """No OTEL_* variable from the machine leaks into a test."""
    _clear_exporter_environment(monkeypatch)
    return monkeypatch


class _RecordingTraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: Receiver):
        self.receiver = receiver
        self.lock = threading.Lock()

    def Export(self, request, context):  # noqa: N802 - generated gRPC method name
        metadata = {item.key: item.value for item in context.invocation_metadata()}
        with self.lock:
            self.receiver.exports.append(ReceivedExport(request, request.ByteSize(), metadata))
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
def grpc_receiver():
    receiver = Receiver(endpoint="", limit_bytes=TEST_RECEIVE_LIMIT_BYTES)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=2),
        options=[("grpc.max_receive_message_length", TEST_RECEIVE_LIMIT_BYTES)],
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_RecordingTraceService(receiver), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    receiver.endpoint = f"http://127.0.0.1:{port}"
    yield receiver
    server.stop(grace=None)


def _http_handler(receiver: Receiver):
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *arguments):  # keep pytest output quiet
            pass

        def _answer(self, status: int, body: bytes = b"") -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802 - http.server's method name
            length = int(self.headers.get("Content-Length", "0"))
            wire = self.rfile.read(length)
            if self.path != "/v1/traces":
                self._answer(404)
                return
            body = gzip.decompress(wire) if self.headers.get("Content-Encoding") == "gzip" else wire
            if len(body) > receiver.limit_bytes:
                with lock:
                    receiver.rejected += 1
                self._answer(413)
                return
            request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
            headers = {key.lower(): value for key, value in self.headers.items()}
            with lock:
                receiver.exports.append(ReceivedExport(request, len(body), headers, wire_bytes=len(wire)))
            self._answer(200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

    return Handler


@pytest.fixture
def http_receiver():
    receiver = Receiver(endpoint="", limit_bytes=TEST_RECEIVE_LIMIT_BYTES)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _http_handler(receiver))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    receiver.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    yield receiver
    server.shutdown()
    server.server_close()


class ByteCountingRelay:
    """Forwards TCP connections to a target and counts client → server bytes."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.client_bytes = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source, destination, counted):
        try:
            while data := source.recv(65536):
                if counted:
                    with self._lock:
                        self.client_bytes += len(data)
                destination.sendall(data)
        except OSError:
            pass
        finally:
            for connection in (source, destination):
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self._closed = True
        self._listener.close()


@pytest.fixture
def relay_to():
    relays = []

    def make(target_port: int) -> ByteCountingRelay:
        relay = ByteCountingRelay(target_port)
        relays.append(relay)
        return relay

    yield make
    for relay in relays:
        relay.close()
