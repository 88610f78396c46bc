"""An application instrumented with opentelemetry-instrumentation-openai-v2.

Run as a subprocess by the end-to-end test, because the GenAI content mode
(OTEL_SEMCONV_STABILITY_OPT_IN, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)
is read once per process. It sends one chat request with the real ``openai``
client to the fake provider; its spans and logs go out through the real OTLP
exporters (both processors export synchronously, so every log record is its
own export and reaches the collector before the span, which ends last).
Prints ``{"trace_id", "span_id"}`` of the request span.

    python -m tests.collector.openai_v2_app PROTOCOL OTLP_ENDPOINT
"""

from __future__ import annotations

import json
import sys

import openai
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from promptprism.collector.demo.fake_provider import FakeProvider

SYSTEM_PROMPT = "You are Prism, a careful assistant.\nAnswer briefly; use <metric> units & cite sources. 🍵"
MESSAGES = [
    {"role": "system", "content": SYSTEM_PROMPT},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": "what is 2+2?"},
]


def exporters(protocol: str, endpoint: str):
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return (OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=30),
                OTLPLogExporter(endpoint=endpoint, insecure=True, timeout=30))
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return (OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=30),
            OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", timeout=30))


def main(protocol: str, endpoint: str) -> None:
    span_exporter, log_exporter = exporters(protocol, endpoint)
    resource = Resource.create({"service.name": "openai-v2-app"})
    seen = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    tracer_provider.add_span_processor(SimpleSpanProcessor(seen))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    with FakeProvider() as provider:
        client = openai.OpenAI(base_url=provider.openai_base_url, api_key="test", max_retries=0)
        client.chat.completions.create(model="gpt-test", messages=MESSAGES)
    tracer_provider.shutdown()
    logger_provider.shutdown()
    [span] = seen.get_finished_spans()
    print(json.dumps({"trace_id": f"{span.context.trace_id:032x}", "span_id": f"{span.context.span_id:016x}"}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
