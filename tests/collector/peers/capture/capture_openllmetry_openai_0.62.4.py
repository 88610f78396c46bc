"""OpenLLMetry opentelemetry-instrumentation-openai 0.62.4 (openai 3.57 in venvs/openllmetry).

CAPTURE_OPENLLMETRY_MODE=events -> OpenAIInstrumentor(use_attributes=False): prompts/completions as log
records (events) instead of span attributes. Metrics on (TRACELOOP_METRICS_ENABLED default true) and
exported. Content: TRACELOOP_TRACE_CONTENT (default true).
Non-LLM spans: the app's own INTERNAL parent span, a tool span, an urllib HTTP CLIENT span
(traceloop-sdk workflow/task spans are in capture_traceloop_sdk_0.62.4.py).
"""
import os

import peerlib
from opentelemetry.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.instrumentation.urllib import URLLibInstrumentor

events = os.environ.get("CAPTURE_OPENLLMETRY_MODE") == "events"
telemetry = peerlib.Telemetry("capture-openllmetry-openai", logs=events, metrics=True)
OpenAIInstrumentor(use_attributes=not events).instrument(
    tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider,
    logger_provider=telemetry.logger_provider)
URLLibInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
tracer = telemetry.tracer
client = peerlib.openai_client()


def run_tool(name: str, arguments: str) -> str:
    with tracer.start_as_current_span(f"tool {name}") as span:
        span.set_attribute("tool.arguments.bytes", len(arguments))
        return peerlib.TOOL_RESULT


def app(body):
    def scenario():
        with tracer.start_as_current_span("handle_turn") as span:
            span.set_attribute("app.conversation", "conv-openllmetry-openai-1")
            peerlib.fetch_fixture()
            body()
        telemetry.shutdown()
    return scenario


peerlib.run({
    "chat": app(lambda: peerlib.chat(client)),
    "chat_stream": app(lambda: peerlib.chat(client, stream=True)),
    "chat_tool_call": app(lambda: peerlib.chat_tool_loop(client, run_tool)),
    "responses": app(lambda: peerlib.responses(client)),
    "responses_stream": app(lambda: peerlib.responses(client, stream=True)),
    "chat_error": app(lambda: peerlib.chat_error(client)),
    "chat_cache": app(lambda: peerlib.chat_cache(client)),
})
