"""A small agent instrumented with the real OpenInference instrumentations (openai and anthropic), the
anthropic SDK's own spans left on (its default), exporting over OTLP to a collector. Run as a
subprocess by the live test (the tracer provider is process-global):

    python -m tests.collector.peers.openinference_app grpc|http ENDPOINT [batch|simple]

``simple`` exports every span alone as it ends (SimpleSpanProcessor): the SDK's span of the
Anthropic call travels in an export before OpenInference's.

It calls promptprism's fake provider in this process, prints the ids and what the provider received
as one JSON line, and exits once everything is exported.
"""

from __future__ import annotations

import json
import sys

import anthropic
import openai
from openinference.instrumentation import OITracer, TraceConfig, using_session
from openinference.instrumentation.anthropic import AnthropicInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from promptprism.collector.demo.fake_provider import FakeProvider

SERVICE = "openinference-live"
CONVERSATION = "conv-openinference-live"
SYSTEM = "You are Prism, a careful travel assistant. Answer in one short paragraph. 🚆"
HISTORY = [{"role": "user", "content": "I want to go from Lyon to Turin next Friday."},
           {"role": "assistant", "content": "Morning or afternoon?"},
           {"role": "user", "content": "Morning, please. What will the weather be?"}]
TIMETABLE = {"name": "get_timetable", "description": "Train departures between two stations.",
             "parameters": {"type": "object", "properties": {"origin": {"type": "string"},
                                                             "destination": {"type": "string"}},
                            "required": ["origin", "destination"]}}


def exporter(protocol: str, endpoint: str):
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=30)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint + "/v1/traces", timeout=30)


def main(protocol: str, endpoint: str, processor: str = "batch") -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    processors = {"batch": BatchSpanProcessor, "simple": SimpleSpanProcessor}
    provider.add_span_processor(processors[processor](exporter(protocol, endpoint)))
    trace.set_tracer_provider(provider)  # the anthropic SDK's own spans use the global provider
    AnthropicInstrumentor().instrument(tracer_provider=provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = OITracer(provider.get_tracer("openinference-live-app"), TraceConfig())
    with FakeProvider() as fake:
        anthropic_client = anthropic.Anthropic(base_url=fake.anthropic_base_url, api_key="sk-test", max_retries=0)
        openai_client = openai.OpenAI(base_url=fake.openai_base_url, api_key="sk-test", max_retries=0)
        with using_session(CONVERSATION):
            with tracer.start_as_current_span("trip_planner", openinference_span_kind="agent") as agent:
                anthropic_client.messages.create(
                    model="claude-sonnet-4-5", max_tokens=256, system=SYSTEM, messages=HISTORY,
                    tools=[{"name": TIMETABLE["name"], "description": TIMETABLE["description"],
                            "input_schema": TIMETABLE["parameters"]}])
                openai_client.chat.completions.create(
                    model="gpt-4o-mini", max_tokens=256, messages=[{"role": "system", "content": SYSTEM}, *HISTORY],
                    tools=[{"type": "function", "function": TIMETABLE}])
                trace_id = format(agent.get_span_context().trace_id, "032x")
        received = [{"path": request.path, "body": json.loads(request.body)} for request in fake.received]
    provider.shutdown()  # exports what is queued
    print(json.dumps({"trace_id": trace_id, "provider_requests": received}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
