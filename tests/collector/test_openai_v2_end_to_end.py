"""The real openai client, instrumented by the real opentelemetry-instrumentation-openai-v2,
against the fake provider, exporting over real OTLP to a running collector.

Whichever way the instrumentation sends content — log records (older
conventions), span attributes (latest conventions, SPAN_ONLY) or the newer
operation-details log event (EVENT_ONLY) — the request the API serves is the
same: system prompt block size and hash, message history, response; and the
insight queries count that prompt in every mode.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support import metric_value

from .collector_harness import running_collector
from .log_samples import OPENAI_V2_EVENTS, SPAN_ID, TRACE_ID, WARNING, logs_payload
from .openai_v2_app import MESSAGES, SYSTEM_PROMPT

REPOSITORY = Path(__file__).resolve().parents[2]
# One subprocess: interpreter start, openai + instrumentation import, one request.
APP_TIMEOUT_SECONDS = 60

MODES = {
    # OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true: content as log records.
    "events": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    # Latest conventions, content on the span.
    "span": {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
             "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
    # Latest conventions, content as one gen_ai.client.inference.operation.details log record.
    "details": {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"},
}


def run_app(mode: str, protocol: str, endpoint: str) -> dict:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("OTEL_", "PROMPTPRISM_"))}
    environment.update(MODES[mode])
    environment["PYTHONPATH"] = str(REPOSITORY) + os.pathsep + environment.get("PYTHONPATH", "")
    finished = subprocess.run([sys.executable, "-m", "tests.collector.openai_v2_app", protocol, endpoint],
                              cwd=REPOSITORY, env=environment, capture_output=True, text=True,
                              timeout=APP_TIMEOUT_SECONDS)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return json.loads(finished.stdout.strip().splitlines()[-1])


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def essentials(request: dict) -> dict:
    """What must not depend on the way content travelled."""
    prompt = request["prompt"]
    return {
        "prompt": {key: prompt[key] for key in ("bytes", "sha256", "mapped", "unmapped_reason", "block_count",
                                                 "text", "content_captured")},
        "blocks": [{key: block[key] for key in ("index", "name", "layer", "stability", "start", "end", "size",
                                                "sha256", "content")} for block in prompt["blocks"]],
        "messages": request["messages"],
        "response": {key: request["response"][key] for key in ("model", "finish_reasons", "messages")},
        "model": request["model"], "provider": request["provider"], "operation": request["operation"],
        "usage": request["usage"],
    }


def test_every_content_mode_serves_the_same_request(store, tmp_path):
    with running_collector(store, tmp_path) as running:
        endpoints = running.endpoints()
        served = {}
        for mode, protocol in (("events", "grpc"), ("span", "http"), ("details", "http")):
            endpoint = endpoints["otlp_grpc"] if protocol == "grpc" else endpoints["otlp_http"]
            ids = run_app(mode, protocol, endpoint)
            served[mode] = get_json(f"{endpoints['ui']}/api/requests/{ids['span_id']}")
            assert served[mode]["trace_id"] == ids["trace_id"]
        metrics = urllib.request.urlopen(f"{endpoints['ui']}/metrics", timeout=30).read().decode()
        # The insight queries (behind the API, CLI, overview page and Grafana) count every mode's prompt.
        growth = get_json(f"{endpoints['ui']}/api/insight/growth?since=1h&service=openai-v2-app")

    expected_prompt = SYSTEM_PROMPT.encode("utf-8")
    span = essentials(served["span"])
    assert span["prompt"]["bytes"] == len(expected_prompt)
    assert span["prompt"]["sha256"] == hashlib.sha256(expected_prompt).hexdigest()
    assert span["prompt"]["text"] == SYSTEM_PROMPT and span["blocks"][0]["content"] == SYSTEM_PROMPT
    assert [message["role"] for message in span["messages"]] == [message["role"] for message in MESSAGES]
    assert span["response"]["messages"][0]["parts"][0]["type"] == "text"
    assert essentials(served["events"]) == span
    assert essentials(served["details"]) == span
    # Three requests, each the only one of its lineage (no conversation id, a trace each): nothing to
    # compare, but every one is counted, with the prompt the API serves.
    assert growth["attribution"] == [] and growth["total"]["current_requests_all"] == 3
    assert {(point["series"], point["bytes_per_request"]) for point in growth["series"]} == {
        ("(unmapped)", len(expected_prompt))}
    # Counted: the older mode sent 5 records (4 messages + the choice), the newer 1.
    assert metric_value(metrics, "promptprism_collector_log_records_received_total", kind="genai_event") == 6
    assert metric_value(metrics, "promptprism_collector_sink_genai_events_stored_total") == 6


def post(url: str, body: bytes, content_type: str, **headers) -> int:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": content_type, **headers})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status


def test_a_log_after_its_span_and_other_records_over_http(store, tmp_path):
    """The span first, its logs later in another export (gzip); a plain log record goes to otel_logs."""
    with running_collector(store, tmp_path) as running:
        endpoints = running.endpoints()
        span_payload = _span_payload(TRACE_ID, SPAN_ID)
        assert post(f"{endpoints['otlp_http']}/v1/traces", span_payload, "application/x-protobuf") == 200
        before = get_json(f"{endpoints['ui']}/api/requests/{SPAN_ID:016x}")
        assert before["prompt"]["bytes"] == 0 and before["messages"] is None
        payload = gzip.compress(logs_payload(extra=[WARNING], service="openai-v2-app"))
        assert post(f"{endpoints['otlp_http']}/v1/logs", payload, "application/x-protobuf",
                    **{"Content-Encoding": "gzip"}) == 200
        after = get_json(f"{endpoints['ui']}/api/requests/{SPAN_ID:016x}")
        listed = get_json(f"{endpoints['ui']}/api/requests?service=openai-v2-app")
    assert after["prompt"]["bytes"] > 0 and after["prompt"]["blocks"][0]["content"] == OPENAI_V2_EVENTS[0][1]["content"]
    assert [message["role"] for message in after["messages"]] == ["system", "user", "assistant", "user"]
    assert listed["requests"][0]["prompt"]["bytes"] == after["prompt"]["bytes"]
    rows = store.query(f"SELECT Body, SeverityText FROM {store.database}.otel_logs")
    assert rows == [{"Body": "disk almost full", "SeverityText": "WARN"}]


def _span_payload(trace_id: int, span_id: int) -> bytes:
    """The openai-v2 span of the older mode (no content on it), as the SDK encodes it."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class Fixed(IdGenerator):
        def generate_trace_id(self) -> int:
            return trace_id

        def generate_span_id(self) -> int:
            return span_id

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "openai-v2-app"}), id_generator=Fixed())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("opentelemetry.instrumentation.openai_v2").start_as_current_span("chat gpt-test") as span:
        span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.system": "openai",
                             "gen_ai.request.model": "gpt-test", "gen_ai.response.finish_reasons": ["stop"]})
    provider.shutdown()
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


@pytest.mark.parametrize("content_type", ["application/x-protobuf", "application/json"])
def test_malformed_logs_are_rejected_with_400(store, tmp_path, content_type):
    with running_collector(store, tmp_path) as running:
        with pytest.raises(urllib.error.HTTPError) as raised:
            post(f"{running.endpoints()['otlp_http']}/v1/logs", b"\xff\xfe not otlp", content_type)
    assert raised.value.code == 400
