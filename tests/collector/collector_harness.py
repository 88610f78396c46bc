"""The one way tests start a collector, and what they send it.

- :func:`running_collector`: a ``Collector`` in this process, on free ports,
  with the test's store.
- :func:`collector_process`: ``promptprism collector`` in a subprocess, on
  free ports, waited for on ``/healthz``; it can be killed and started again
  on the same ports and data directory.
- Real OTel SDK exporters pointed at either, and prompt spans carrying
  promptprism events built from ``names`` (via ``prompt_spans``), exactly as an
  instrumented application sends them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from promptprism.collector.app import Collector
from promptprism.collector.config import CollectorConfig
from promptprism.collector.read import content, queries
from promptprism.collector.record import REQUEST_COLUMNS, REQUEST_TOOL_COLUMNS
from promptprism.wire import names
from support import free_port

from .prompt_spans import block_events, prompt_attributes, sha

# Room for the 1,000-block prompt and its tool events.
TEST_MAX_EVENTS = 2048
# The console script's entry point, run by this interpreter (installed or not).
PROMPTPRISM = [sys.executable, "-c", "import sys; from promptprism.collector.cli import main; sys.exit(main())"]
# A collector subprocess imports grpc and chdb and opens its store; chdb's
# first start in a fresh directory takes seconds on 2 busy cores.
STARTUP_TIMEOUT_SECONDS = 90
# SIGTERM flushes the sink and stops the listeners; a healthy stop takes a second.
STOP_TIMEOUT_SECONDS = 60
EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

# A prompt in three blocks with multi-byte UTF-8 in each.
PARTS = [
    ("identity", "identity", "static", "Tu es Émile, l'assistant du magasin. "),
    ("memory", "memory", "session", "Le client aime le thé 🍵 et le café ☕. "),
    ("question", "template", "turn", "Réponds en 日本語 si on te le demande."),
]


# --- a collector in this process ------------------------------------------------------------


def collector_config(data_dir, **settings) -> CollectorConfig:
    flags = {
        "data_dir": str(data_dir),
        "otlp_grpc_address": f"127.0.0.1:{free_port()}",
        "otlp_http_address": f"127.0.0.1:{free_port()}",
        "ui_address": f"127.0.0.1:{free_port()}",
    }
    flags.update(settings)
    return CollectorConfig.load(flags, environ={})


@contextlib.contextmanager
def running_collector(store, data_dir, **settings):
    collector = Collector(collector_config(data_dir, **settings), store=store).start()
    try:
        yield collector
    finally:
        collector.stop()


# --- a collector subprocess -------------------------------------------------------------------


@dataclass
class CollectorProcess:
    """``promptprism collector`` on fixed free ports; its output goes to ``log_path``."""

    directory: Path
    arguments: tuple[str, ...] = ()
    environment: dict[str, str] | None = None
    ports: dict[str, int] = field(default_factory=lambda: {name: free_port() for name in ("grpc", "http", "ui")})
    process: subprocess.Popen | None = None

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "collector.log"

    @property
    def ui(self) -> str:
        return f"http://127.0.0.1:{self.ports['ui']}"

    def endpoints(self) -> dict[str, str]:
        """As ``Collector.endpoints()``, so the export helpers take either."""
        return {"otlp_grpc": f"http://127.0.0.1:{self.ports['grpc']}",
                "otlp_http": f"http://127.0.0.1:{self.ports['http']}", "ui": self.ui}

    def start(self) -> "CollectorProcess":
        """Start (or start again, same ports and data) and return once ``/healthz`` answers 200."""
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [*PROMPTPRISM, "collector", "--data-dir", str(self.data_dir),
                   "--otlp-grpc-address", f"127.0.0.1:{self.ports['grpc']}",
                   "--otlp-http-address", f"127.0.0.1:{self.ports['http']}",
                   "--ui-address", f"127.0.0.1:{self.ports['ui']}", *self.arguments]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            env=self.environment if self.environment is not None else os.environ)
        try:
            wait_healthy(self.ui, self.process, self.log_path)
        except BaseException:
            self.kill()
            raise
        return self

    def stop(self) -> int:
        """SIGTERM (flush, then exit) and wait; SIGKILL past the timeout. Returns the exit status."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()


@contextlib.contextmanager
def collector_process(directory, *arguments: str, environment: dict[str, str] | None = None):
    """A started :class:`CollectorProcess` under ``directory``, stopped (SIGTERM) afterwards."""
    collector = CollectorProcess(Path(directory), tuple(arguments), environment).start()
    try:
        yield collector
    finally:
        collector.stop()


def wait_healthy(ui: str, process: subprocess.Popen, log_path: Path,
                 timeout: float = STARTUP_TIMEOUT_SECONDS) -> None:
    """Poll ``/healthz`` until 200; fail with the log when the process exits or the time is up."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        if process.poll() is not None:
            raise AssertionError(f"collector exited with {process.returncode}:\n{_tail(log_path)}")
        try:
            with urllib.request.urlopen(f"{ui}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"collector not healthy after {timeout:.0f} s:\n{_tail(log_path)}")
        pause.wait(0.1)


def _tail(log_path: Path) -> str:
    return log_path.read_text(errors="replace")[-4000:] if log_path.exists() else ""


# --- what tests send -------------------------------------------------------------------------


def exporter(collector, protocol="grpc", *, headers=None, compression=None, timeout=30):
    endpoints = collector.endpoints()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoints["otlp_grpc"], insecure=True, headers=headers,
                                compression=compression, timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoints["otlp_http"] + "/v1/traces", headers=headers,
                            compression=compression, timeout=timeout)


def tracer_for(span_exporter, *, max_events=TEST_MAX_EVENTS, service="receive-test"):
    """A provider that exports every span as it ends (acknowledged = durable)."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}),
                              span_limits=SpanLimits(max_events=max_events))
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    return provider, provider.get_tracer(names.TRACER_NAME, "test")


def emit_prompt(tracer, parts, *, content=True, mutate=None, extra=None) -> tuple[str, str]:
    """One LLM request span with a block map; returns (trace_id, request_id) in hex."""
    prompt, events = block_events(parts, content=content)
    attributes = prompt_attributes(prompt, len(events), **(extra or {}))
    if mutate:
        mutate(attributes, events)
    with tracer.start_as_current_span("chat gpt-4o") as span:
        span.set_attributes(attributes)
        for event in events:
            span.add_event(names.EVENT_PROMPT_BLOCK, event)
        context = span.get_span_context()
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def prompt_export(parts=PARTS) -> bytes:
    """One prompt span encoded as an ExportTraceServiceRequest, as the SDK's OTLP exporters send it."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider, tracer = tracer_for(memory)
    emit_prompt(tracer, parts)
    provider.shutdown()
    return encode_spans(memory.get_finished_spans()).SerializeToString()


def grpc_export(collector, payload: bytes, metadata=()):
    """Send raw payload bytes to the collector's TraceService/Export; (response, call) or grpc.RpcError."""
    target = collector.endpoints()["otlp_grpc"].removeprefix("http://")
    with grpc.insecure_channel(target, options=[("grpc.max_send_message_length", -1)]) as channel:
        call = channel.unary_unary(EXPORT_PATH, request_serializer=None,
                                   response_deserializer=ExportTraceServiceResponse.FromString)
        return call.with_call(payload, metadata=metadata, timeout=30)


# --- what tests read back ----------------------------------------------------------------------


# The fields of a request its document holds and its `requests` row does not (migration 051).
DOCUMENT_ONLY_FIELDS = (*(column.name for column in REQUEST_COLUMNS if column.document_only),
                        *(column.name for column in REQUEST_TOOL_COLUMNS))


def stored_request(store, request_id) -> dict | None:
    """The request's `requests` row (FINAL) with the fields only its document holds (DOCUMENT_ONLY_FIELDS)."""
    rows = store.query(f"SELECT * FROM {store.database}.requests FINAL WHERE request_id = {{id:String}}",
                       {"id": request_id})
    return with_document_fields(store, rows[0]) if rows else None


def with_document_fields(store, row: dict, document: dict | None = None) -> dict:
    """``row`` (of `requests`) with DOCUMENT_ONLY_FIELDS from the request's document; a request stored
    without one (which the write path never does) gets none of them, and a test reading one fails."""
    document = document if document is not None else stored_document(store, row["request_id"])
    if document is not None:
        row.update({name: document[name] for name in DOCUMENT_ONLY_FIELDS})
    return row


def stored_document(store, request_id) -> dict | None:
    """The request's document (`request_docs`, migration 048) as ``queries.document_row`` gives it, found by
    its id whatever thread it is filed under: of two copies not merged yet, the one with more merged spans,
    as the read side takes it."""
    rows = store.query(
        f"SELECT trace_id, request_id, toUnixTimestamp64Nano(started_at) AS started_at_ns, "
        f"toString(toDate(started_at)) AS day, doc FROM {store.database}.request_docs "
        f"WHERE request_id = {{id:String}} ORDER BY merged_spans DESC LIMIT 1", {"id": request_id})
    return queries.document_row(rows[0]) if rows else None


def stored_blocks(store, request_id) -> list[dict]:
    """The request's blocks, from the block arrays of its document, in index order, each with its text
    from `contents` ('' when not captured)."""
    document = stored_document(store, request_id)
    blocks = queries.document_blocks(document) if document else []
    keys = sorted({block["sha256"][:32] for block in blocks})  # keys: 16 raw bytes (migration 040)
    texts = {row["key"]: row["content"] for row in store.query(
        f"SELECT lower(hex(sha256)) AS key, any(content) AS content FROM {store.database}.contents "
        f"WHERE sha256 IN (SELECT unhex(arrayJoin(JSONExtract({{keys:String}}, 'Array(String)')))) GROUP BY sha256",
        {"keys": json.dumps(keys)})} if keys else {}
    return [{key: block[key] for key in ("index", "name", "layer", "stability", "start", "end", "size", "sha256")}
            | {"content": texts.get(block["sha256"][:32].lower(), "")} for block in blocks]


def stored_requests(store, where: str, params=None) -> list[dict]:
    """Rows of `requests` matching ``where``, with the fields only their documents hold
    (``with_document_fields``) and their content fields (messages, variables, system instructions)
    joined back from the content references in each request's document and `contents` the way the
    read side does."""
    rows = store.query(f"SELECT *, toUnixTimestamp64Nano(started_at) AS started_at_ns "
                       f"FROM {store.database}.requests FINAL WHERE {where} ORDER BY started_at, request_id", params)
    documents = [stored_document(store, row["request_id"]) for row in rows]
    for row, document in zip(rows, documents):
        with_document_fields(store, row, document)
    references = {document["request_id"]: document["content_refs"] for document in documents
                  if document and document["content_refs"]}
    content.fill(rows, references, queries.contents_for(store, content.keys(references.values())))
    return rows


def count_rows(store, table: str, where: str = "1", params=None) -> int:
    return store.query(f"SELECT count() AS n FROM {store.database}.{table} WHERE {where}", params)[0]["n"]


def assert_exact_map(store, request_id, parts):
    """The stored request has exactly ``parts`` as its block map, byte for byte, with content."""
    record = stored_request(store, request_id)
    prompt = "".join(text for *_, text in parts).encode("utf-8")
    assert record["mapped"] is True and record["unmapped_reason"] == ""
    assert (record["prompt_bytes"], record["prompt_sha256"], record["block_count"]) == (
        len(prompt), sha(prompt), len(parts))
    blocks = stored_blocks(store, request_id)
    position = 0
    for block, (name, layer, stability, text) in zip(blocks, parts, strict=True):
        size = len(text.encode("utf-8"))
        assert (block["name"], block["layer"], block["stability"]) == (name, layer, stability)
        assert (block["start"], block["end"], block["size"], block["sha256"]) == (
            position, position + size, size, sha(text))
        assert block["content"] == text
        assert prompt[block["start"]:block["end"]] == text.encode("utf-8")
        position += size
