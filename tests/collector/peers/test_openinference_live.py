"""Live: the real OpenInference instrumentations (openai 0.1.66, anthropic 3.1.0, dev dependencies)
around the real openai and anthropic clients, with the anthropic SDK's own spans on, exporting over
gRPC and over HTTP to a running collector. Each provider call is one complete request record; the
Anthropic call, traced by both OpenInference and the SDK, is stored once."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from promptprism.collector.read import lookups

from ..collector_harness import running_collector, stored_blocks, stored_requests
from .openinference_app import CONVERSATION, SERVICE, SYSTEM, TIMETABLE
from .peer_captures import expected_calls

REPOSITORY = Path(__file__).resolve().parents[3]
APP_TIMEOUT_SECONDS = 90  # interpreter start, both clients and instrumentations imported, two calls


def run_app(protocol: str, endpoint: str) -> dict:
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "PROMPTPRISM_"))}
    environment["OPENINFERENCE_HIDE_INPUTS"] = "false"
    environment["PYTHONPATH"] = str(REPOSITORY) + os.pathsep + environment.get("PYTHONPATH", "")
    finished = subprocess.run([sys.executable, "-m", "tests.collector.peers.openinference_app", protocol, endpoint],
                              cwd=REPOSITORY, env=environment, capture_output=True, text=True,
                              timeout=APP_TIMEOUT_SECONDS)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return json.loads(finished.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_openinference_and_the_anthropic_sdk_live(store, tmp_path, protocol):
    with running_collector(store, tmp_path) as running:
        endpoints = running.endpoints()
        ran = run_app(protocol, endpoints["otlp_grpc"] if protocol == "grpc" else endpoints["otlp_http"])
    calls = expected_calls(ran["provider_requests"])
    records = stored_requests(store, "trace_id = {trace:String}", {"trace": ran["trace_id"]})
    scopes = {row["ScopeName"] for row in store.query(
        f"SELECT ScopeName FROM {store.database}.otel_traces WHERE TraceId = {{trace:String}}",
        {"trace": ran["trace_id"]})}
    assert "com.anthropic.sdk.python" in scopes  # the SDK did trace its call
    assert [record["provider"] for record in records] == ["anthropic", "openai"]
    system = SYSTEM.encode("utf-8")
    for record, call in zip(records, calls, strict=True):
        assert (record["model"], record["operation"], record["service"]) == (call.model, "chat", SERVICE)
        assert record["scope_name"].startswith("openinference.instrumentation.")
        assert (record["input_tokens"], record["output_tokens"]) == (
            call.usage["input_tokens"], call.usage["output_tokens"])
        assert record["conversation_id"] == CONVERSATION and record["finish_reasons"]
        assert (record["prompt_bytes"], record["prompt_sha256"]) == (len(system), hashlib.sha256(system).hexdigest())
        assert [block["content"] for block in stored_blocks(store, record["request_id"])] == [SYSTEM]
        # captured content is stored content-addressed (README, Storage schema): read it as the API serves it
        served = lookups.request(store, record["request_id"])
        messages = [message for message in served["messages"] if message["role"] != "system"]
        assert [message["role"] for message in messages] == ["user", "assistant", "user"]
        outputs = served["response"]["messages"]
        assert outputs[0]["parts"][0]["content"] == call.answer_text
        tools = store.query(f"SELECT name, size FROM {store.database}.tools FINAL WHERE request_id = {{id:String}}",
                            {"id": record["request_id"]})
        assert [tool["name"] for tool in tools] == [TIMETABLE["name"]] and record["tools_count"] == 1
    anthropic_record, openai_record = records
    # One call, two spans: OpenInference's kept, the SDK's folded in (its response id, stop reason, cache counts).
    assert len(anthropic_record["merged_span_ids"]) == 1 and openai_record["merged_span_ids"] == []
    assert anthropic_record["response_id"].startswith("msg_")
    assert anthropic_record["cache_creation_tokens"] == calls[0].usage["cache_creation_tokens"]


def test_the_inspector_names_the_span_folded_into_a_request(store, tmp_path):
    from .peer_captures import replay, scenarios

    scenario = next(case for case in scenarios("openinference-anthropic-3.1.0") if case.name == "dup_with_sdk_spans")
    with running_collector(store, tmp_path) as running:
        replay(scenario, running.endpoints())
        record = store.query(f"SELECT request_id, merged_span_ids FROM {store.database}.requests FINAL", None)[0]
        import urllib.request

        with urllib.request.urlopen(f"{running.endpoints()['ui']}/requests/{record['request_id']}", timeout=30) as page:
            html = page.read().decode()
        with urllib.request.urlopen(f"{running.endpoints()['ui']}/api/requests/{record['request_id']}",
                                    timeout=30) as answer:
            served = json.load(answer)
    assert served["merged_span_ids"] == record["merged_span_ids"] and len(record["merged_span_ids"]) == 1
    assert "also traced as" in html and record["merged_span_ids"][0] in html
