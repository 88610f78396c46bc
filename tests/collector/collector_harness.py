"""A real collector on free ports and real OTel SDK exporters pointed at it.

Shared by the receive, app and fault tests. Spans carry promptprism events
built from ``names`` (via ``prompt_spans``), exactly as an instrumented
application sends them.
"""

from __future__ import annotations

import contextlib
import socket

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from promptprism.collector.app import Collector
from promptprism.collector.config import CollectorConfig
from promptprism.wire import names

from .prompt_spans import block_events, prompt_attributes

# Room for the 1,000-block prompt and its tool events.
TEST_MAX_EVENTS = 2048


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def collector_config(data_dir, **settings) -> CollectorConfig:
    flags = {
        "data_dir": str(data_dir),
        "otlp_grpc_address": f"127.0.0.1:{free_port()}",
        "otlp_http_address": f"127.0.0.1:{free_port()}",
        "ui_address": f"127.0.0.1:{free_port()}",
    }
    flags.update({key: value for key, value in settings.items()})
    return CollectorConfig.load(flags, environ={})


@contextlib.contextmanager
def running_collector(store, data_dir, **settings):
    collector = Collector(collector_config(data_dir, **settings), store=store).start()
    try:
        yield collector
    finally:
        collector.stop()


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


def stored_request(store, request_id) -> dict | None:
    rows = store.query(f"SELECT * FROM {store.database}.requests FINAL WHERE request_id = {{id:String}}",
                       {"id": request_id})
    return rows[0] if rows else None


def stored_blocks(store, request_id) -> list[dict]:
    return store.query(
        f"SELECT b.index AS index, b.name AS name, b.layer AS layer, b.stability AS stability, b.start AS start, "
        f"b.end AS end, b.size AS size, b.sha256 AS sha256, c.content AS content "
        f"FROM (SELECT * FROM {store.database}.blocks FINAL WHERE request_id = {{id:String}}) AS b "
        f"LEFT JOIN (SELECT sha256, any(content) AS content FROM {store.database}.contents GROUP BY sha256) AS c "
        f"ON b.sha256 = c.sha256 ORDER BY b.index",
        {"id": request_id})


def count_rows(store, table: str, where: str = "1", params=None) -> int:
    return store.query(f"SELECT count() AS n FROM {store.database}.{table} WHERE {where}", params)[0]["n"]
