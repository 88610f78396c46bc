"""A tiny OTLP capture server: answers success, keeps every payload raw and decoded.

OTLP/HTTP: POST /v1/traces, /v1/logs, /v1/metrics (protobuf or JSON, gzip or deflate).
OTLP/gRPC: TraceService, LogsService, MetricsService Export (raw bytes kept via a generic handler).

Each payload is written to OUT/<signal>-<n>.<pb|json>[.gz] exactly as received (for gRPC: the
serialized request message after gRPC's own decompression), plus

  OUT/<signal>-<n>.decoded.json   the decoded message in OTLP/JSON shape (lowerCamelCase, hex ids);
                                  a valid OTLP/JSON body that tests can POST again
  OUT/<signal>-<n>.meta.json      transport, path, content type/encoding, sizes

and one line per request in OUT/requests.log.

Run:  /work/main/.venv/bin/python capture_server.py --out DIR [--http-port 0] [--grpc-port 0]
It prints one JSON line {"http": port, "grpc": port} when both listen. Or import CaptureServer.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import http.server
import json
import os
import signal
import threading
import time
import zlib
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

SIGNALS = {
    # signal: (request class, response class, gRPC service, HTTP path)
    "traces": (trace_service_pb2.ExportTraceServiceRequest, trace_service_pb2.ExportTraceServiceResponse,
               "opentelemetry.proto.collector.trace.v1.TraceService", "/v1/traces"),
    "logs": (logs_service_pb2.ExportLogsServiceRequest, logs_service_pb2.ExportLogsServiceResponse,
             "opentelemetry.proto.collector.logs.v1.LogsService", "/v1/logs"),
    "metrics": (metrics_service_pb2.ExportMetricsServiceRequest, metrics_service_pb2.ExportMetricsServiceResponse,
                "opentelemetry.proto.collector.metrics.v1.MetricsService", "/v1/metrics"),
}
HTTP_PATHS = {path: signal for signal, (_, _, _, path) in SIGNALS.items()}
ID_KEYS = {"traceId", "spanId", "parentSpanId"}
MAX_BODY = 64 * 1024 * 1024


def _ids_to_hex(node: Any) -> Any:
    """protobuf JSON writes bytes as base64; OTLP/JSON wants trace and span ids as hex."""
    if isinstance(node, dict):
        return {k: (base64.b64decode(v).hex() if k in ID_KEYS and isinstance(v, str) else _ids_to_hex(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_ids_to_hex(v) for v in node]
    return node


def _ids_to_b64(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in ID_KEYS and isinstance(v, str):
                try:
                    v = base64.b64encode(bytes.fromhex(v)).decode()
                except ValueError:
                    pass  # already base64 (some exporters)
                out[k] = v
            else:
                out[k] = _ids_to_b64(v)
        return out
    if isinstance(node, list):
        return [_ids_to_b64(v) for v in node]
    return node


def decode(signal_name: str, body: bytes, is_json: bool) -> dict:
    request_cls = SIGNALS[signal_name][0]
    if is_json:
        message = json_format.ParseDict(_ids_to_b64(json.loads(body)), request_cls(), ignore_unknown_fields=True)
    else:
        message = request_cls.FromString(body)
    return _ids_to_hex(json_format.MessageToDict(message))


class CaptureServer:
    def __init__(self, out_dir: str, http_port: int = 0, grpc_port: int = 0, host: str = "127.0.0.1"):
        self.out_dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self.received: list[dict] = []
        self._http = _Server((host, http_port), _handler(self))
        self._http.daemon_threads = True
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                                 options=[("grpc.max_receive_message_length", MAX_BODY)])
        handlers = []
        for signal_name, (_, response_cls, service, _) in SIGNALS.items():
            handlers.append(grpc.method_handlers_generic_handler(service, {
                "Export": grpc.unary_unary_rpc_method_handler(
                    self._grpc_export(signal_name, response_cls),
                    request_deserializer=None,  # keep the raw bytes
                    response_serializer=lambda message: message.SerializeToString()),
            }))
        self._grpc.add_generic_rpc_handlers(handlers)
        self.grpc_port = self._grpc.add_insecure_port(f"{host}:{grpc_port}")
        self.http_port = self._http.server_address[1]
        self._thread: threading.Thread | None = None

    # --- recording ----------------------------------------------------------------------------

    def record(self, signal_name: str, body: bytes, *, transport: str, path: str, content_type: str,
               content_encoding: str, wire: bytes, headers: dict[str, str]) -> tuple[bool, str]:
        is_json = "json" in content_type
        with self._lock:
            n = self._counts.get(signal_name, 0) + 1
            self._counts[signal_name] = n
        stem = os.path.join(self.out_dir, f"{signal_name}-{n}")
        raw_name = stem + (".json" if is_json else ".pb") + ({"gzip": ".gz", "deflate": ".zz"}.get(content_encoding, "") if transport == "http" else "")
        meta = {"signal": signal_name, "n": n, "transport": transport, "path": path, "content_type": content_type,
                "content_encoding": content_encoding or "identity", "wire_bytes": len(wire),
                "decoded_bytes": len(body), "raw_file": os.path.basename(raw_name), "received_at": time.time(),
                "user_agent": headers.get("user-agent", "")}
        with open(raw_name, "wb") as f:
            f.write(wire)  # exactly as received (gRPC: after gRPC's own decompression)
        ok, error = True, ""
        try:
            decoded = decode(signal_name, body, is_json)
            with open(stem + ".decoded.json", "w") as f:
                json.dump(decoded, f, indent=1, ensure_ascii=False)
        except Exception as exc:  # keep the raw bytes anyway
            ok, error = False, f"{type(exc).__name__}: {exc}"
            meta["decode_error"] = error
        with open(stem + ".meta.json", "w") as f:
            json.dump(meta, f, indent=1)
        with self._lock:
            self.received.append(meta)
            with open(os.path.join(self.out_dir, "requests.log"), "a") as f:
                f.write(f"{transport} {path} {content_type} enc={meta['content_encoding']} "
                        f"{len(wire)}B -> {os.path.basename(raw_name)}{' DECODE ERROR ' + error if error else ''}\n")
        return ok, error

    def note(self, line: str) -> None:
        with self._lock, open(os.path.join(self.out_dir, "requests.log"), "a") as f:
            f.write(line + "\n")

    def _grpc_export(self, signal_name: str, response_cls: Any):
        def export(request: bytes, context: grpc.ServicerContext) -> Any:
            metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
            ok, error = self.record(signal_name, request, transport="grpc", path=SIGNALS[signal_name][2] + "/Export",
                                    content_type="application/grpc+proto",
                                    content_encoding=metadata.get("grpc-encoding", ""),
                                    wire=request, headers=metadata)
            if not ok:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
            return response_cls()
        return export

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> "CaptureServer":
        self._grpc.start()
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._grpc.stop(grace=1).wait()

    def __enter__(self) -> "CaptureServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _Server(http.server.ThreadingHTTPServer):
    pass


def _handler(server: CaptureServer):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.startswith("/fixture/"):
                # A plain JSON document for the capture scripts' non-LLM HTTP client span.
                server.note(f"http GET {self.path} -> 200 (fixture)")
                self._reply(200, json.dumps({"doc": "Lyon-Turin trains run via Chambery."}).encode(), "application/json")
                return
            server.note(f"http GET {self.path} -> 404")
            self._reply(404, b"not found", "text/plain")

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                wire = self._read_chunked()
            else:
                wire = self.rfile.read(length)
            signal_name = HTTP_PATHS.get(path)
            if signal_name is None:
                server.note(f"http POST {path} {len(wire)}B -> 404")
                self._reply(404, b"not found", "text/plain")
                return
            content_type = (self.headers.get("Content-Type") or "application/x-protobuf").split(";")[0].strip()
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            try:
                if encoding == "gzip":
                    body = gzip.decompress(wire)
                elif encoding == "deflate":
                    body = zlib.decompress(wire)
                else:
                    body = wire
            except Exception as exc:
                server.note(f"http POST {path} bad {encoding}: {exc} -> 400")
                self._reply(400, b"bad encoding", "text/plain")
                return
            ok, error = server.record(signal_name, body, transport="http", path=path, content_type=content_type,
                                      content_encoding=encoding, wire=wire,
                                      headers={k.lower(): v for k, v in self.headers.items()})
            if not ok:
                self._reply(400, error.encode(), "text/plain")
                return
            response = SIGNALS[signal_name][1]()
            if "json" in content_type:
                self._reply(200, b"{}", "application/json")
            else:
                self._reply(200, response.SerializeToString(), "application/x-protobuf")

        def _read_chunked(self) -> bytes:
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--http-port", type=int, default=0)
    parser.add_argument("--grpc-port", type=int, default=0)
    args = parser.parse_args()
    server = CaptureServer(args.out, args.http_port, args.grpc_port).start()
    print(json.dumps({"http": server.http_port, "grpc": server.grpc_port}), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()


if __name__ == "__main__":
    main()
