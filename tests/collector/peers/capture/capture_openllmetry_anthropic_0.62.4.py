"""OpenLLMetry opentelemetry-instrumentation-anthropic 0.62.4 (anthropic 2.15 in venvs/openllmetry).

CAPTURE_OPENLLMETRY_MODE=events -> AnthropicInstrumentor(use_attributes=False): prompts/completions as log
records (events) instead of span attributes. Metrics on (TRACELOOP_METRICS_ENABLED default true) and
exported. Content: TRACELOOP_TRACE_CONTENT (default true).
Non-LLM spans: the app's own INTERNAL parent span, a tool span, an urllib HTTP CLIENT span
anthropic 2.x's own spans: off (ANTHROPIC_OPEN_TELEMETRY=false) except in dup_* runs
(traceloop-sdk workflow/task spans are in capture_traceloop_sdk_0.62.4.py).
"""
import os

import peerlib
from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
from opentelemetry.instrumentation.urllib import URLLibInstrumentor

events = os.environ.get("CAPTURE_OPENLLMETRY_MODE") == "events"
telemetry = peerlib.Telemetry("capture-openllmetry-anthropic", logs=events, metrics=True)
AnthropicInstrumentor(use_attributes=not events).instrument(
    tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider,
    logger_provider=telemetry.logger_provider)
URLLibInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
tracer = telemetry.tracer
client = peerlib.anthropic_client()


def run_tool(name: str, arguments: str) -> str:
    with tracer.start_as_current_span(f"tool {name}") as span:
        span.set_attribute("tool.arguments.bytes", len(arguments))
        return peerlib.TOOL_RESULT


def app(body):
    def scenario():
        with tracer.start_as_current_span("handle_turn") as span:
            span.set_attribute("app.conversation", "conv-openllmetry-anthropic-1")
            peerlib.fetch_fixture()
            body()
        telemetry.shutdown()
    return scenario


peerlib.run({
    "messages": app(lambda: peerlib.messages(client)),
    "messages_stream": app(lambda: peerlib.messages(client, stream=True)),
    "cache": app(lambda: peerlib.messages_cache(client)),
    "error": app(lambda: peerlib.messages_error(client)),
    "tool_call": app(lambda: peerlib.messages_tool_loop(client, run_tool)),
})
