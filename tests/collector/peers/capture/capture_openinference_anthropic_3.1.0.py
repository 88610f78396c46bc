"""OpenInference openinference-instrumentation-anthropic 3.1.0 (anthropic 2.15 in venvs/openinference).

anthropic 2.x makes its own spans by default (scope com.anthropic.sdk.python): the run matrix turns them
off (ANTHROPIC_OPEN_TELEMETRY=false) for the peer-alone captures and leaves them on for dup_* captures.
Non-LLM spans: OpenInference AGENT span, TOOL span, urllib HTTP CLIENT span.
"""
import peerlib
from openinference.instrumentation import OITracer, TraceConfig, using_session
from openinference.instrumentation.anthropic import AnthropicInstrumentor
from opentelemetry.instrumentation.urllib import URLLibInstrumentor

telemetry = peerlib.Telemetry("capture-openinference-anthropic")
AnthropicInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
URLLibInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
tracer = OITracer(telemetry.tracer_provider.get_tracer("capture.app"), TraceConfig())
client = peerlib.anthropic_client()


def run_tool(name: str, arguments: str) -> str:
    with tracer.start_as_current_span(name, openinference_span_kind="tool") as span:
        span.set_tool(name=name, description="looks up trains", parameters=peerlib.TOOL_TIMETABLE["parameters"])
        span.set_input(arguments, mime_type="application/json")
        span.set_output(peerlib.TOOL_RESULT, mime_type="application/json")
        return peerlib.TOOL_RESULT


def agent(body):
    def scenario():
        with using_session("conv-oi-anthropic-1"):
            with tracer.start_as_current_span("trip_planner", openinference_span_kind="agent") as span:
                span.set_input(peerlib.HISTORY[-1][1])
                peerlib.fetch_fixture()
                answer = body()
                span.set_output(str(answer))
        telemetry.shutdown()
    return scenario


peerlib.run({
    "messages": agent(lambda: peerlib.messages(client)),
    "messages_stream": agent(lambda: peerlib.messages(client, stream=True)),
    "cache": agent(lambda: peerlib.messages_cache(client)),
    "error": agent(lambda: peerlib.messages_error(client)),
    "tool_call": agent(lambda: peerlib.messages_tool_loop(client, run_tool)),
})
