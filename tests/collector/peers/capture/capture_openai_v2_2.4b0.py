"""opentelemetry-instrumentation-openai-v2 2.4b0 (+ opentelemetry-util-genai 0.4b0, openai 3.57, venvs/openai-v2).
Modes (env, set by run_captures.py):
  latest experimental, SPAN_ONLY: OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental
                                  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY
  legacy events:                  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (log records)
  content off:                    neither
Non-LLM spans: the app's INTERNAL parent span, a tool span and an urllib HTTP CLIENT span.
"""
import peerlib
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.instrumentation.urllib import URLLibInstrumentor

telemetry = peerlib.Telemetry("capture-openai-v2", logs=True, metrics=True)
OpenAIInstrumentor().instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider,
                                logger_provider=telemetry.logger_provider)
URLLibInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
tracer = telemetry.tracer
client = peerlib.openai_client()


def run_tool(name: str, arguments: str) -> str:
    with tracer.start_as_current_span(f"execute_tool {name}"):
        return peerlib.TOOL_RESULT


def app(body):
    def scenario():
        with tracer.start_as_current_span("handle_turn"):
            peerlib.fetch_fixture()
            body()
        telemetry.shutdown()
    return scenario


peerlib.run({
    "chat": app(lambda: peerlib.chat(client)),
    "chat_stream": app(lambda: peerlib.chat(client, stream=True)),
    "chat_tool_call": app(lambda: peerlib.chat_tool_loop(client, run_tool)),
    "chat_error": app(lambda: peerlib.chat_error(client)),
    "chat_cache": app(lambda: peerlib.chat_cache(client)),
})
