"""OpenInference openinference-instrumentation-openai 0.1.66 (openai 3.57 in venvs/openinference).

Non-LLM spans: an OpenInference AGENT / CHAIN span around the calls (input.value/output.value set),
a TOOL span for the tool execution, and an urllib HTTP CLIENT span. Session id via using_session.
Content: on by default; OPENINFERENCE_HIDE_INPUTS/OUTPUTS=true turn it off.
"""
import json

import peerlib
from openinference.instrumentation import OITracer, TraceConfig, using_session
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.instrumentation.urllib import URLLibInstrumentor

telemetry = peerlib.Telemetry("capture-openinference-openai")
OpenAIInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
URLLibInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
tracer = OITracer(telemetry.tracer_provider.get_tracer("capture.app"), TraceConfig())
client = peerlib.openai_client()


def run_tool(name: str, arguments: str) -> str:
    with tracer.start_as_current_span(name, openinference_span_kind="tool") as span:
        span.set_tool(name=name, description="looks up trains", parameters=peerlib.TOOL_TIMETABLE["parameters"])
        span.set_input(arguments, mime_type="application/json")
        span.set_output(peerlib.TOOL_RESULT, mime_type="application/json")
        return peerlib.TOOL_RESULT


def agent(kind: str, body):
    def scenario():
        with using_session("conv-oi-openai-1"):
            with tracer.start_as_current_span("trip_planner", openinference_span_kind=kind) as span:
                span.set_input(peerlib.HISTORY[-1][1])
                peerlib.fetch_fixture()
                answer = body()
                span.set_output(answer)
        telemetry.shutdown()
    return scenario


peerlib.run({
    "chat": agent("agent", lambda: peerlib.chat(client)),
    "chat_stream": agent("chain", lambda: peerlib.chat(client, stream=True)),
    "chat_tool_call": agent("agent", lambda: peerlib.chat_tool_loop(client, run_tool)),
    "responses": agent("chain", lambda: peerlib.responses(client)),
    "responses_stream": agent("chain", lambda: peerlib.responses(client, stream=True)),
    "chat_error": agent("chain", lambda: peerlib.chat_error(client)),
    "chat_cache": agent("chain", lambda: peerlib.chat_cache(client)),
})
