"""OpenLIT openlit 1.45.0 with its DEFAULT settings: openlit.init() and nothing else; it builds its own tracer,
meter and logger providers from OTEL_EXPORTER_OTLP_ENDPOINT (HTTP unless OTEL_EXPORTER_OTLP_PROTOCOL=grpc)
and exports metrics and log records by default. openlit 1.45 pins openai<3 and anthropic<1 (venvs/openlit:
openai 2.54, anthropic 0.125: no anthropic-SDK spans here).

CAPTURE_OPENLIT_CONTENT=false -> openlit.init(capture_message_content=False) (the one non-default run).
Non-LLM spans: @openlit.trace (a CLIENT span that sets gen_ai.output.messages to the function's return
value!), openlit.start_trace, openlit's own HTTP client instrumentations (httpx under openai 2.x /
anthropic 0.x, urllib for the fixture fetch).
"""
import os

import openlit

import peerlib

if os.environ.get("CAPTURE_OPENLIT_CONTENT") == "false":
    openlit.init(capture_message_content=False)
else:
    openlit.init()


def run_tool(name: str, arguments: str) -> str:
    with openlit.start_trace(f"tool {name}") as span:
        span.set_result(peerlib.TOOL_RESULT)
        return peerlib.TOOL_RESULT


def app(body):
    @openlit.trace
    def plan_trip() -> str:
        peerlib.fetch_fixture()
        return str(body())

    def scenario():
        with openlit.agent_context("trip_planner"):
            plan_trip()
        # openlit registered its providers globally; flush them the way an app's exit would
        from opentelemetry import _logs, metrics, trace
        for provider in (metrics.get_meter_provider(), _logs.get_logger_provider(), trace.get_tracer_provider()):
            if hasattr(provider, "shutdown"):
                provider.shutdown()
    return scenario


peerlib.run({
    "openai_chat": app(lambda: peerlib.chat(peerlib.openai_client())),
    "openai_chat_stream": app(lambda: peerlib.chat(peerlib.openai_client(), stream=True)),
    "openai_chat_tool_call": app(lambda: peerlib.chat_tool_loop(peerlib.openai_client(), run_tool)),
    "openai_chat_cache": app(lambda: peerlib.chat_cache(peerlib.openai_client())),
    "openai_chat_error": app(lambda: peerlib.chat_error(peerlib.openai_client())),
    "anthropic_error": app(lambda: peerlib.messages_error(peerlib.anthropic_client())),
    "openai_responses": app(lambda: peerlib.responses(peerlib.openai_client())),
    "anthropic_messages": app(lambda: peerlib.messages(peerlib.anthropic_client())),
    "anthropic_messages_stream": app(lambda: peerlib.messages(peerlib.anthropic_client(), stream=True)),
    "anthropic_cache": app(lambda: peerlib.messages_cache(peerlib.anthropic_client())),
    "anthropic_tool_call": app(lambda: peerlib.messages_tool_loop(peerlib.anthropic_client(), run_tool)),
})
