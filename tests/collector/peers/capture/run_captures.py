"""Runs every capture: for each (peer, scenario) a fresh fake provider and capture server, the peer's
script in its own venv (or node project), and the payloads in captures/<peer>-<version>/<scenario>/.

  /work/main/.venv/bin/python run_captures.py            # everything
  /work/main/.venv/bin/python run_captures.py openlit    # runs whose "<peer>/<scenario>" contains a filter
  /work/main/.venv/bin/python run_captures.py --list

Each scenario folder gets, beside the payloads written by capture_server.py:
  app.log                 the script's stdout/stderr (errors an instrumentation logs show up here)
  provider-requests.json  what the fake provider received (path, body) -- the ground truth for tests
  run.json                command, protocol, environment overrides, exit status
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

from capture_server import CaptureServer  # noqa: E402
from promptprism.instrumentation.fake_provider import FakeProvider  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.join(os.path.dirname(HERE), "captures")  # the tests replay these
VENVS = os.path.join(HERE, "venvs")


@dataclass
class Run:
    peer: str  # captures/<peer>/ (name-version)
    scenario: str
    command: list[str]  # relative script paths are resolved against cwd
    cwd: str = HERE
    protocol: str = "grpc"  # grpc | http/protobuf | http/json
    env: dict[str, str] = field(default_factory=dict)
    arg: str | None = None  # scenario name passed to the script (defaults to scenario)

    @property
    def key(self) -> str:
        return f"{self.peer}/{self.scenario}"


def py(venv: str, script: str) -> list[str]:
    return [os.path.join(VENVS, venv, "bin", "python"), script]


def node(script: str) -> list[str]:
    return ["node", script]


OI_OFF = {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"}
NO_SDK_SPANS = {"ANTHROPIC_OPEN_TELEMETRY": "false"}  # anthropic 2.x spans off: the peer alone
GZIP = {"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}
V2_SPAN_ONLY = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}


def runs() -> list[Run]:
    out: list[Run] = []

    # OpenInference (Python)
    p, s = "openinference-openai-0.1.66", py("openinference", "capture_openinference_openai_0.1.66.py")
    out += [Run(p, "chat", s), Run(p, "chat_stream", s, protocol="http/protobuf", env=GZIP),
            Run(p, "chat_tool_call", s), Run(p, "responses", s), Run(p, "responses_stream", s), Run(p, "chat_cache", s), Run(p, "chat_error", s),
            Run(p, "chat_content_off", s, env=OI_OFF, arg="chat"),
            Run(p, "chat_genai_semconv", s, env={"OPENINFERENCE_ENABLE_GENAI_SEMCONV": "true"}, arg="chat")]
    p, s = "openinference-anthropic-3.1.0", py("openinference", "capture_openinference_anthropic_3.1.0.py")
    out += [Run(p, "messages", s, env=NO_SDK_SPANS), Run(p, "messages_stream", s, protocol="http/protobuf", env=NO_SDK_SPANS),
            Run(p, "cache", s, env=NO_SDK_SPANS), Run(p, "tool_call", s, env=NO_SDK_SPANS), Run(p, "error", s, env=NO_SDK_SPANS),
            Run(p, "messages_content_off", s, env={**OI_OFF, **NO_SDK_SPANS}, arg="messages"),
            # the duplicate case: anthropic 2.15's own spans are on by default
            Run(p, "dup_with_sdk_spans", s, arg="messages"),
            Run(p, "dup_with_sdk_spans_stream", s, arg="messages_stream"),
            Run(p, "dup_with_sdk_spans_cache", s, arg="cache")]

    # OpenLLMetry (Python): attribute mode (default) and events mode (use_attributes=False -> log records)
    p, s = "openllmetry-openai-0.62.4", py("openllmetry", "capture_openllmetry_openai_0.62.4.py")
    ev = {"CAPTURE_OPENLLMETRY_MODE": "events"}
    out += [Run(p, "chat", s), Run(p, "chat_stream", s, protocol="http/protobuf"), Run(p, "chat_tool_call", s),
            Run(p, "responses", s), Run(p, "responses_stream", s), Run(p, "chat_cache", s), Run(p, "chat_error", s),
            Run(p, "chat_content_off", s, env={"TRACELOOP_TRACE_CONTENT": "false"}, arg="chat"),
            Run(p, "events_chat", s, env=ev, arg="chat"), Run(p, "events_chat_stream", s, env=ev, arg="chat_stream"),
            Run(p, "events_chat_tool_call", s, env=ev, arg="chat_tool_call")]
    p, s = "openllmetry-anthropic-0.62.4", py("openllmetry", "capture_openllmetry_anthropic_0.62.4.py")
    out += [Run(p, "messages", s, env=NO_SDK_SPANS), Run(p, "messages_stream", s, protocol="http/protobuf", env=NO_SDK_SPANS),
            Run(p, "cache", s, env=NO_SDK_SPANS), Run(p, "tool_call", s, env=NO_SDK_SPANS), Run(p, "error", s, env=NO_SDK_SPANS),
            Run(p, "messages_content_off", s, env={"TRACELOOP_TRACE_CONTENT": "false", **NO_SDK_SPANS}, arg="messages"),
            Run(p, "events_messages", s, env={**ev, **NO_SDK_SPANS}, arg="messages"),
            Run(p, "events_messages_stream", s, env={**ev, **NO_SDK_SPANS}, arg="messages_stream"),
            Run(p, "events_cache", s, env={**ev, **NO_SDK_SPANS}, arg="cache"),
            Run(p, "dup_with_sdk_spans", s, arg="messages"),
            Run(p, "dup_with_sdk_spans_stream", s, arg="messages_stream"),
            # hardest duplicate: events mode (no model, no response id on the OpenLLMetry span) + SDK span
            Run(p, "dup_events_with_sdk_spans", s, env=ev, arg="messages")]
    p, s = "openllmetry-traceloop-sdk-0.62.4", py("openllmetry-sdk", "capture_traceloop_sdk_0.62.4.py")
    out += [Run(p, "workflow_openai_chat", s, protocol="http/protobuf", arg="workflow"),
            Run(p, "workflow_anthropic_dup", s, protocol="http/protobuf", arg="workflow_anthropic")]

    # OpenLIT: default settings (openlit.init() with nothing but the endpoint from the environment)
    p, s = "openlit-1.45.0", py("openlit", "capture_openlit_1.45.0.py")
    out += [Run(p, "openai_chat", s, protocol="http/protobuf"), Run(p, "openai_chat_stream", s, protocol="http/protobuf"),
            Run(p, "openai_chat_tool_call", s, protocol="http/protobuf"),
            Run(p, "openai_responses", s, protocol="http/protobuf"), Run(p, "openai_chat_cache", s, protocol="http/protobuf"),
            Run(p, "openai_chat_error", s, protocol="http/protobuf"), Run(p, "anthropic_error", s, protocol="http/protobuf"),
            Run(p, "anthropic_messages", s, protocol="http/protobuf"),
            Run(p, "anthropic_messages_stream", s, protocol="http/protobuf"),
            Run(p, "anthropic_cache", s, protocol="http/protobuf"), Run(p, "anthropic_tool_call", s, protocol="http/protobuf"),
            Run(p, "openai_chat_grpc", s, protocol="grpc", arg="openai_chat"),
            Run(p, "openai_chat_content_off", s, protocol="http/protobuf",
                env={"CAPTURE_OPENLIT_CONTENT": "false"}, arg="openai_chat")]

    # anthropic SDK 2.15's own spans, alone
    p, s = "anthropic-sdk-2.15.0", py("anthropic-sdk", "capture_anthropic_sdk_2.15.0.py")
    content = {"ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE": "content"}
    out += [Run(p, "messages", s), Run(p, "messages_stream", s, protocol="http/protobuf"), Run(p, "cache", s),
            Run(p, "tool_call", s), Run(p, "error_500", s),
            Run(p, "messages_content", s, env=content, arg="messages"),
            Run(p, "messages_stream_content", s, env=content, arg="messages_stream"),
            Run(p, "tool_call_content", s, env=content, arg="tool_call")]

    # opentelemetry-instrumentation-openai-v2 (the project's reference)
    p, s = "openai-v2-2.4b0", py("openai-v2", "capture_openai_v2_2.4b0.py")
    out += [Run(p, "span_only_chat", s, env=V2_SPAN_ONLY, arg="chat"),
            Run(p, "span_only_chat_stream", s, protocol="http/protobuf", env=V2_SPAN_ONLY, arg="chat_stream"),
            Run(p, "span_only_chat_tool_call", s, env=V2_SPAN_ONLY, arg="chat_tool_call"),
            Run(p, "span_only_chat_cache", s, env=V2_SPAN_ONLY, arg="chat_cache"),
            Run(p, "span_only_chat_error", s, env=V2_SPAN_ONLY, arg="chat_error"),
            Run(p, "events_chat", s, env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, arg="chat"),
            Run(p, "chat_content_off", s, arg="chat")]

    # Node.js
    d = os.path.join(HERE, "node", "vercel-ai")
    s = node("capture_vercel_ai_6.0.326.js")
    p = "vercel-ai-6.0.326-openai-3.0.141"
    out += [Run(p, "chat_generate", s, d, protocol="http/protobuf"), Run(p, "chat_stream", s, d, protocol="grpc"),
            Run(p, "responses_generate", s, d, protocol="http/protobuf"),
            Run(p, "responses_stream", s, d, protocol="http/json"),
            Run(p, "chat_tool_loop", s, d, protocol="http/protobuf"), Run(p, "chat_cache", s, d, protocol="http/protobuf"),
            Run(p, "chat_error", s, d, protocol="http/protobuf"),
            Run(p, "chat_generate_content_off", s, d, protocol="http/protobuf", env={"CAPTURE_CONTENT": "false"},
                arg="chat_generate")]
    d = os.path.join(HERE, "node", "openinference")
    s = node("capture_openinference_openai_js_4.2.7.js")
    p = "openinference-openai-js-4.2.7"
    out += [Run(p, "chat", s, d, protocol="http/protobuf"), Run(p, "chat_stream", s, d, protocol="grpc"),
            Run(p, "chat_tool_call", s, d, protocol="http/protobuf"), Run(p, "responses", s, d, protocol="http/protobuf"),
            Run(p, "chat_error", s, d, protocol="http/protobuf")]
    d = os.path.join(HERE, "node", "openllmetry")
    s = node("capture_traceloop_openai_js_0.27.0.js")
    p = "traceloop-openai-js-0.27.0"
    out += [Run(p, "chat", s, d, protocol="http/protobuf"), Run(p, "chat_stream", s, d, protocol="grpc"),
            Run(p, "chat_tool_call", s, d, protocol="http/protobuf"), Run(p, "responses", s, d, protocol="http/protobuf"),
            Run(p, "chat_error", s, d, protocol="http/protobuf"),
            Run(p, "chat_content_off", s, d, protocol="http/protobuf", env={"TRACELOOP_TRACE_CONTENT": "false"},
                arg="chat")]
    return out


def run_one(run: Run) -> dict:
    out_dir = os.path.join(CAPTURES, run.peer, run.scenario)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    with FakeProvider() as provider, CaptureServer(out_dir) as capture:
        http_base = f"http://127.0.0.1:{capture.http_port}"
        endpoint = f"http://127.0.0.1:{capture.grpc_port}" if run.protocol == "grpc" else http_base
        overrides = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": run.protocol,
            "OTEL_SERVICE_NAME": f"capture-{run.peer}",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_BLRP_SCHEDULE_DELAY": "200",
            "FAKE_OPENAI_BASE_URL": provider.openai_base_url,
            "FAKE_ANTHROPIC_BASE_URL": provider.anthropic_base_url,
            "FIXTURE_URL": f"{http_base}/fixture/doc",
            "OPENAI_API_KEY": "sk-test",
            "ANTHROPIC_API_KEY": "sk-test",
            **run.env,
        }
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI", "ANTHROPIC",
                                                                            "TRACELOOP", "OPENINFERENCE", "OPENLIT"))}
        environ.update(overrides)
        command = run.command + [run.arg or run.scenario]
        started = time.time()
        with open(os.path.join(out_dir, "app.log"), "wb") as log:
            try:
                completed = subprocess.run(command, cwd=run.cwd, env=environ, stdout=log, stderr=subprocess.STDOUT,
                                           timeout=180)
                status = completed.returncode
            except subprocess.TimeoutExpired:
                status = "timeout"
        time.sleep(0.3)  # late exports (metrics readers, shutdown flushes) already answered; let the log settle
        received = []
        for request in provider.received:
            try:
                body = request.json()
            except ValueError:
                body = request.body.decode(errors="replace")
            received.append({"path": request.path, "body": body})
        with open(os.path.join(out_dir, "provider-requests.json"), "w") as f:
            json.dump(received, f, indent=1, ensure_ascii=False)
        signals = {}
        for meta in capture.received:
            signals[meta["signal"]] = signals.get(meta["signal"], 0) + 1
    shown = {k: v for k, v in overrides.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    summary = {"peer": run.peer, "scenario": run.scenario, "command": command, "cwd": os.path.relpath(run.cwd, HERE),
               "protocol": run.protocol, "env": {k: v for k, v in run.env.items()}, "exit_status": status,
               "seconds": round(time.time() - started, 1), "provider_requests": len(received), "exports": signals,
               "note": "ports in the endpoint variables were free ports of that run", "endpoints": shown}
    with open(os.path.join(out_dir, "run.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return summary


def main() -> None:
    args = sys.argv[1:]
    all_runs = runs()
    if args == ["--list"]:
        print("\n".join(r.key for r in all_runs))
        return
    selected = [r for r in all_runs if not args or any(a in r.key for a in args)]
    failures = 0
    for run in selected:
        summary = run_one(run)
        ok = summary["exit_status"] == 0 and summary["exports"]
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {run.key:60} exit={summary['exit_status']} "
              f"provider={summary['provider_requests']} exports={summary['exports']} {summary['seconds']}s", flush=True)
    print(f"{len(selected) - failures} ok, {failures} failed")


if __name__ == "__main__":
    main()
