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


def run_app(protocol: str, endpoint: str, processor: str = "batch") -> dict:
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "PROMPTPRISM_"))}
    environment["OPENINFERENCE_HIDE_INPUTS"] = "false"
    environment["PYTHONPATH"] = str(REPOSITORY) + os.pathsep + environment.get("PYTHONPATH", "")
    finished = subprocess.run([sys.executable, "-m", "tests.collector.peers.openinference_app", protocol, endpoint,
                               processor],
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
        assert [tool["name"] for tool in served["tools"]] == [TIMETABLE["name"]] and record["tools_count"] == 1
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


@pytest.mark.parametrize("protocol, workers", [("grpc", 1), ("http", 0)])
def test_one_call_exported_span_by_span_is_one_request_counted_once(store, tmp_path, protocol, workers):
    """SimpleSpanProcessor: the anthropic SDK's span of the call is exported (and stored) alone, before
    OpenInference's. The later export folds its span into the stored record, which it replaces: one
    request, its tokens counted once by the API, and by the insight totals once the table's parts merged
    (workers=1: a worker process converts each export, the collector process decides)."""
    import urllib.request

    with running_collector(store, tmp_path, ingest_workers=workers) as running:
        endpoints = running.endpoints()
        ran = run_app(protocol, endpoints["otlp_grpc"] if protocol == "grpc" else endpoints["otlp_http"], "simple")
        with urllib.request.urlopen(f"{endpoints['ui']}/api/traces/{ran['trace_id']}", timeout=30) as answer:
            served = json.load(answer)["requests"]
        with urllib.request.urlopen(f"{endpoints['ui']}/metrics", timeout=30) as answer:
            metrics = answer.read().decode()
    assert "promptprism_collector_calls_merged_across_exports_total 1.0" in metrics
    assert "promptprism_collector_calls_stored_apart_total 0.0" in metrics
    calls = expected_calls(ran["provider_requests"])
    spans = store.query(f"SELECT SpanId, ScopeName FROM {store.database}.otel_traces WHERE TraceId = {{trace:String}}",
                        {"trace": ran["trace_id"]})
    sdk = [row["SpanId"] for row in spans if row["ScopeName"] == "com.anthropic.sdk.python"]
    wrapper = [row["SpanId"] for row in spans if row["ScopeName"] == "openinference.instrumentation.anthropic"]
    assert len(sdk) == 1 and len(wrapper) == 1
    # The API: one request per call, the merged one (the SDK's span, stored first, with OpenInference's folded in).
    assert [request["provider"] for request in served] == ["anthropic", "openai"]
    anthropic_request = served[0]
    assert (anthropic_request["request_id"], anthropic_request["merged_span_ids"]) == (sdk[0], wrapper)
    assert [request["usage"]["input_tokens"] for request in served] == [call.usage["input_tokens"] for call in calls]
    assert anthropic_request["usage"]["cache_creation_tokens"] == calls[0].usage["cache_creation_tokens"]
    assert anthropic_request["conversation_id"] == CONVERSATION  # OpenInference's, the SDK's span has none
    assert [message["role"] for message in anthropic_request["messages"] if message["role"] != "system"] == [
        "user", "assistant", "user"]
    assert anthropic_request["prompt"]["bytes"] == len(SYSTEM.encode("utf-8"))
    assert anthropic_request["tools_count"] == 1
    # The store: the merged row replaces the stored one (the last inserted survives, FINAL and merges alike).
    final = stored_requests(store, "trace_id = {trace:String}", {"trace": ran["trace_id"]})
    assert [(row["request_id"], row["merged_span_ids"]) for row in final] == [(sdk[0], wrapper), (
        served[1]["request_id"], [])]
    # The view every insight query and panel reads (without FINAL), once the parts merged as ClickHouse does.
    store.execute(f"OPTIMIZE TABLE {store.database}.requests FINAL")
    totals = store.query(f"SELECT count() AS requests, sum(input_tokens) AS input FROM {store.database}.prompt_requests "
                         "WHERE trace_id = {trace:String}", {"trace": ran["trace_id"]})[0]
    assert (totals["requests"], totals["input"]) == (2, sum(call.usage["input_tokens"] for call in calls))
