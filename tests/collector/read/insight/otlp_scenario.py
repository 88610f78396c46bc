"""The scripted scenario as real OTLP: OpenTelemetry SDK spans with
promptprism block events, exported over OTLP/HTTP to a running collector."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind

from promptprism.collector.record import RequestRecord
from promptprism.wire import names


def span_attributes(record: RequestRecord) -> dict:
    return {
        names.SCHEMA_VERSION_ATTR: names.SCHEMA_VERSION,
        names.GEN_AI_OPERATION_NAME: record.operation,
        names.GEN_AI_PROVIDER_NAME: record.provider,
        names.GEN_AI_REQUEST_MODEL: record.model,
        names.GEN_AI_RESPONSE_MODEL: record.response_model,
        names.GEN_AI_CONVERSATION_ID: record.conversation_id,
        names.GEN_AI_USAGE_INPUT_TOKENS: record.input_tokens,
        names.GEN_AI_USAGE_OUTPUT_TOKENS: record.output_tokens,
        names.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: record.cache_read_tokens,
        names.PROMPT_BYTES: record.prompt_bytes,
        names.PROMPT_SHA256: record.prompt_sha256,
        names.PROMPT_BLOCK_COUNT: len(record.blocks),
        names.PROMPT_MAPPED: True,
        names.PROMPT_TEMPLATE_NAME: record.template_name,
        names.PROMPT_TEMPLATE_ORIGIN: record.template_origin,
        names.MESSAGE_ID: record.message_id,
        names.PROCESS_KIND: record.process_kind,
        names.REQUEST_TOKENS_ESTIMATE: record.tokens_estimate,
        names.REQUEST_CONTEXT_WINDOW: record.context_window,
        names.REQUEST_HEADROOM_TOKENS: record.headroom_tokens,
    }


def block_attributes(block, *, content: bool) -> dict:
    attributes = {
        names.BLOCK_INDEX: block.index, names.BLOCK_NAME: block.name, names.BLOCK_LAYER: block.layer,
        names.BLOCK_STABILITY: block.stability, names.BLOCK_SOURCE: block.source,
        names.BLOCK_START: block.start, names.BLOCK_END: block.end, names.BLOCK_SIZE: block.size,
        names.BLOCK_SHA256: block.sha256,
    }
    if content:
        attributes[names.BLOCK_CONTENT] = block.content
    return attributes


def send(records: list[RequestRecord], endpoint: str, *, content: bool = True) -> None:
    """Export every record as one span, backdated to its started_at, and wait for the answers."""
    provider = TracerProvider(resource=Resource.create({"service.name": records[0].service}),
                              span_limits=SpanLimits(max_events=1024))
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=30)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(names.TRACER_NAME)
    try:
        for record in records:
            span = tracer.start_span(record.span_name, kind=SpanKind.CLIENT, start_time=record.started_at_ns,
                                     attributes=span_attributes(record))
            for block in record.blocks:
                span.add_event(names.EVENT_PROMPT_BLOCK, block_attributes(block, content=content),
                               timestamp=record.started_at_ns)
            span.end(end_time=record.started_at_ns + record.duration_ns)
    finally:
        provider.shutdown()
