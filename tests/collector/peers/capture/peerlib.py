"""Shared by the Python capture scripts: fixed prompts, OTel wiring from the standard env vars, a runner.

Standard library + opentelemetry-sdk/exporters only, so it imports in every peer's venv.
The orchestrator (run_captures.py) sets:
  OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_PROTOCOL (grpc | http/protobuf) [/ _COMPRESSION]
  FAKE_OPENAI_BASE_URL, FAKE_ANTHROPIC_BASE_URL   the fake provider
  FIXTURE_URL                                     a 200 JSON document (served by the capture server)
  OPENAI_API_KEY=sk-test, ANTHROPIC_API_KEY=sk-test (dummy; the fake provider needs none)
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Callable

# --- fixed, deterministic content --------------------------------------------------------------------

SYSTEM_PROMPT = ("You are Prism, a careful travel assistant for Acme Rail. "
                 "Answer in one short paragraph and never invent timetables.")

HISTORY = [  # role/content pairs, provider-neutral
    ("user", "I want to go from Lyon to Turin next Friday."),
    ("assistant", "Sure. Do you prefer to travel in the morning or in the afternoon?"),
    ("user", "Morning, please. And what will the weather be in Turin?"),
]

TOOL_TIMETABLE = {
    "name": "get_timetable",
    "description": "Train departures between two stations on a date.",
    "parameters": {"type": "object", "properties": {
        "origin": {"type": "string"}, "destination": {"type": "string"},
        "date": {"type": "string", "description": "ISO date"}},
        "required": ["origin", "destination", "date"]},
}
TOOL_WEATHER = {
    "name": "get_weather",
    "description": "Weather forecast for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TOOLS = [TOOL_TIMETABLE, TOOL_WEATHER]

# > 1 KiB so the fake provider's simulated prompt cache applies (CACHE_MINIMUM_BYTES = 1024).
LONG_SYSTEM_PROMPT = SYSTEM_PROMPT + "\n\nHouse rules:\n" + "\n".join(
    f"{i}. Rule {i}: quote prices in euros, name the station, give the platform when known, "
    f"and say when a connection is shorter than ten minutes." for i in range(1, 16))

TOOL_RESULT = json.dumps({"departures": ["07:12", "08:40"], "platform": "B"})

OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-sonnet-4-5"
MAX_TOKENS = 256


def openai_messages(system: str = SYSTEM_PROMPT) -> list[dict]:
    return [{"role": "system", "content": system}] + [{"role": r, "content": c} for r, c in HISTORY]


def openai_tools() -> list[dict]:
    return [{"type": "function", "function": t} for t in TOOLS]


def responses_tools() -> list[dict]:
    return [{"type": "function", **t} for t in TOOLS]


def responses_input() -> list[dict]:
    return [{"role": r, "content": c} for r, c in HISTORY]


def anthropic_messages() -> list[dict]:
    return [{"role": r, "content": c} for r, c in HISTORY]


def anthropic_tools() -> list[dict]:
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in TOOLS]


def anthropic_cached_system() -> list[dict]:
    return [{"type": "text", "text": LONG_SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}]


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"{name} is not set (run through run_captures.py)")
    return value


# --- OpenTelemetry from the standard variables ---------------------------------------------------------

class Telemetry:
    def __init__(self, service: str, *, logs: bool = False, metrics: bool = False, set_global: bool = True):
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        grpc = protocol == "grpc"
        resource = Resource.create({"service.name": service})
        if grpc:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        if set_global:
            trace.set_tracer_provider(self.tracer_provider)
        self.logger_provider = None
        self.meter_provider = None
        if logs:
            from opentelemetry._logs import set_logger_provider
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
            if grpc:
                from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
            else:
                from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            self.logger_provider = LoggerProvider(resource=resource)
            self.logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
            if set_global:
                set_logger_provider(self.logger_provider)
        if metrics:
            from opentelemetry import metrics as metrics_api
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
            if grpc:
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
            else:
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            reader = PeriodicExportingMetricReader(OTLPMetricExporter(), export_interval_millis=3_600_000)
            self.meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
            if set_global:
                metrics_api.set_meter_provider(self.meter_provider)
        self.tracer = self.tracer_provider.get_tracer("capture.app")

    def shutdown(self) -> None:
        # Metrics once, at the end (a single deterministic export), then logs, then spans.
        if self.meter_provider is not None:
            self.meter_provider.shutdown()  # collects and exports once
        if self.logger_provider is not None:
            self.logger_provider.force_flush()
            self.logger_provider.shutdown()
        self.tracer_provider.force_flush()
        self.tracer_provider.shutdown()


def fetch_fixture() -> dict:
    """An HTTP client call that is not an LLM call (becomes an HTTP CLIENT span where urllib is instrumented)."""
    import urllib.request
    with urllib.request.urlopen(env("FIXTURE_URL"), timeout=10) as response:
        return json.loads(response.read())


def run(scenarios: dict[str, Callable[[], None]]) -> None:
    """python capture_x.py SCENARIO | --list"""
    if len(sys.argv) != 2 or sys.argv[1] not in scenarios:
        if len(sys.argv) == 2 and sys.argv[1] == "--list":
            print("\n".join(scenarios))
            return
        raise SystemExit(f"usage: {sys.argv[0]} {{{'|'.join(scenarios)}}}")
    try:
        scenarios[sys.argv[1]]()
    except Exception:
        traceback.print_exc()
        raise SystemExit(1)


# --- the calls, the same for every peer ------------------------------------------------------------------

def openai_client():
    import openai
    return openai.OpenAI(base_url=env("FAKE_OPENAI_BASE_URL"), api_key="sk-test", max_retries=0)


def anthropic_client(**kwargs):
    import anthropic
    return anthropic.Anthropic(base_url=env("FAKE_ANTHROPIC_BASE_URL"), api_key="sk-test", max_retries=0, **kwargs)


def chat(client, *, stream: bool = False, tool_choice=None) -> str:
    """System prompt + 3 history messages + 2 tools. Returns the text (or tool-call arguments)."""
    kwargs = dict(model=OPENAI_MODEL, messages=openai_messages(), tools=openai_tools(), temperature=0.2,
                  max_tokens=MAX_TOKENS)
    if tool_choice is not None:
        kwargs["tool_choice"] = tool_choice
    if not stream:
        response = client.chat.completions.create(**kwargs)
        message = response.choices[0].message
        return message.content or (message.tool_calls[0].function.arguments if message.tool_calls else "")
    parts = []
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    return "".join(parts)


def chat_tool_loop(client, run_tool: Callable[[str, str], str]) -> str:
    """Call 1 forces get_timetable; run_tool(name, arguments) -> result; call 2 sends the result back."""
    messages = openai_messages()
    first = client.chat.completions.create(model=OPENAI_MODEL, messages=messages, tools=openai_tools(),
                                           tool_choice={"type": "function", "function": {"name": "get_timetable"}},
                                           max_tokens=MAX_TOKENS)
    call = first.choices[0].message.tool_calls[0]
    result = run_tool(call.function.name, call.function.arguments)
    messages = messages + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.function.name,
                                                             "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": result},
    ]
    second = client.chat.completions.create(model=OPENAI_MODEL, messages=messages, tools=openai_tools(),
                                            max_tokens=MAX_TOKENS)
    return second.choices[0].message.content or ""


def responses(client, *, stream: bool = False) -> str:
    kwargs = dict(model=OPENAI_MODEL, instructions=SYSTEM_PROMPT, input=responses_input(), tools=responses_tools(),
                  max_output_tokens=MAX_TOKENS)
    if not stream:
        return client.responses.create(**kwargs).output_text
    parts = []
    for event in client.responses.create(stream=True, **kwargs):
        if getattr(event, "type", "") == "response.output_text.delta":
            parts.append(event.delta)
    return "".join(parts)


def messages(client, *, stream: bool = False) -> str:
    kwargs = dict(model=ANTHROPIC_MODEL, system=SYSTEM_PROMPT, messages=anthropic_messages(),
                  tools=anthropic_tools(), max_tokens=MAX_TOKENS)  # anthropic 2.15: no temperature
    if not stream:
        response = client.messages.create(**kwargs)
        return "".join(getattr(block, "text", "") for block in response.content)
    parts = []
    for event in client.messages.create(stream=True, **kwargs):
        if event.type == "content_block_delta" and getattr(event.delta, "text", None):
            parts.append(event.delta.text)
    return "".join(parts)


def messages_cache(client) -> list[dict]:
    """The same long system prompt with cache_control twice: call 1 writes the cache, call 2 reads it."""
    usages = []
    for _ in range(2):
        response = client.messages.create(model=ANTHROPIC_MODEL, system=anthropic_cached_system(),
                                          messages=anthropic_messages(), max_tokens=MAX_TOKENS)
        usages.append(response.usage.model_dump())
    return usages


def messages_tool_loop(client, run_tool: Callable[[str, str], str]) -> str:
    """Call 1 is forced to use a tool (tool_choice any); call 2 sends the tool_result back."""
    history = anthropic_messages()
    first = client.messages.create(model=ANTHROPIC_MODEL, system=SYSTEM_PROMPT, messages=history,
                                   tools=anthropic_tools(), tool_choice={"type": "any"}, max_tokens=MAX_TOKENS)
    use = next(block for block in first.content if block.type == "tool_use")
    result = run_tool(use.name, json.dumps(use.input))
    history = history + [
        {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": result}]},
    ]
    second = client.messages.create(model=ANTHROPIC_MODEL, system=SYSTEM_PROMPT, messages=history,
                                    tools=anthropic_tools(), max_tokens=MAX_TOKENS)
    return "".join(getattr(block, "text", "") for block in second.content)


def chat_cache(client) -> list[dict]:
    """The same long system prompt twice: the fake provider reports cached prompt tokens on call 2."""
    usages = []
    for _ in range(2):
        response = client.chat.completions.create(model=OPENAI_MODEL, messages=openai_messages(LONG_SYSTEM_PROMPT),
                                                  max_tokens=MAX_TOKENS)
        usages.append(response.usage.model_dump())
    return usages


def chat_error(client) -> str:
    """The fake provider answers HTTP 500 for a model name containing fail-500 (no retries: max_retries=0)."""
    try:
        client.chat.completions.create(model=OPENAI_MODEL + "-fail-500", messages=openai_messages(),
                                       max_tokens=MAX_TOKENS)
    except Exception as exc:  # openai.InternalServerError
        print("expected error:", type(exc).__name__)
        return type(exc).__name__
    raise AssertionError("the fake provider did not fail")


def messages_error(client) -> str:
    try:
        client.messages.create(model=ANTHROPIC_MODEL + "-fail-500", system=SYSTEM_PROMPT,
                               messages=anthropic_messages(), max_tokens=MAX_TOKENS)
    except Exception as exc:  # anthropic.InternalServerError
        print("expected error:", type(exc).__name__)
        return type(exc).__name__
    raise AssertionError("the fake provider did not fail")
