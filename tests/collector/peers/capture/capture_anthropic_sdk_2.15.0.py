"""anthropic 2.15.0's own spans (scope com.anthropic.sdk.python), on by default, through the global tracer provider.
ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content records content (default metadata_only).
Conversation id through client.with_options(open_telemetry={..., "conversation_id": ...}).
Non-LLM spans: the app's INTERNAL parent span and an urllib HTTP CLIENT span.
"""
import peerlib
from opentelemetry.instrumentation.urllib import URLLibInstrumentor

telemetry = peerlib.Telemetry("capture-anthropic-sdk")
URLLibInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
tracer = telemetry.tracer
base = peerlib.anthropic_client()
client = base.with_options(open_telemetry={**base.open_telemetry, "conversation_id": "conv-anthropic-sdk-1"})


def run_tool(name: str, arguments: str) -> str:
    with tracer.start_as_current_span(f"tool {name}"):
        return peerlib.TOOL_RESULT


def failing() -> None:
    import anthropic
    try:
        client.messages.create(model="claude-fail-500", system=peerlib.SYSTEM_PROMPT,
                               messages=peerlib.anthropic_messages(), max_tokens=peerlib.MAX_TOKENS)
    except anthropic.APIStatusError as exc:
        print("expected error:", type(exc).__name__, exc.status_code)


def app(body):
    def scenario():
        with tracer.start_as_current_span("handle_turn"):
            peerlib.fetch_fixture()
            body()
        telemetry.shutdown()
    return scenario


peerlib.run({
    "messages": app(lambda: peerlib.messages(client)),
    "messages_stream": app(lambda: peerlib.messages(client, stream=True)),
    "cache": app(lambda: peerlib.messages_cache(client)),
    "tool_call": app(lambda: peerlib.messages_tool_loop(client, run_tool)),
    "error_500": app(failing),
})
