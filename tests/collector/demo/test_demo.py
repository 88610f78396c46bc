"""``promptprism demo`` against a real collector subprocess: the span mix arrives and is readable."""

from __future__ import annotations

import collections
import datetime
import json
import os
import re
import subprocess
import time
import urllib.request

import pytest

from support import free_port, wait_until

from ..collector_harness import PROMPTPRISM, collector_process

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("chdb")

pytestmark = pytest.mark.slow

DEMO_REQUESTS = 48
DEMO_DAYS = 3
INGEST_TIMEOUT_SECONDS = 60


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def stored_requests(ui: str, at_least: int) -> list[dict]:
    """The collector's requests once at least ``at_least`` are readable (acknowledged = durable, then indexed)."""
    found: list[dict] = []

    def enough() -> bool:
        found[:] = get_json(f"{ui}/api/requests?limit=1000&since=2000-01-01T00:00:00Z")["requests"]
        return len(found) >= at_least

    wait_until(enough, timeout=INGEST_TIMEOUT_SECONDS, message=f"fewer than {at_least} requests readable")
    return found


@pytest.fixture(scope="module")
def collector(tmp_path_factory):
    with collector_process(tmp_path_factory.mktemp("demo-collector")) as running:
        yield {**running.ports, "ui": running.ui}


def run_demo(environment: dict[str, str], *arguments: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "PROMPTPRISM_"))}
    env.update(environment)
    return subprocess.run([*PROMPTPRISM, "demo", *arguments], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def demo_run(collector):
    started = time.time()
    completed = run_demo({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                          "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector['grpc']}",
                          "PROMPTPRISM_URL": collector["ui"]},
                         "--requests", str(DEMO_REQUESTS), "--days", str(DEMO_DAYS))
    assert completed.returncode == 0, completed.stderr
    requests = stored_requests(collector["ui"], DEMO_REQUESTS)
    return{"completed": completed, "requests": requests, "started": started}


def test_demo_prints_a_trace_url_that_the_collector_serves(collector, demo_run):
    output = demo_run["completed"].stdout
    match = re.search(r"(http://\S+)/trace/([0-9a-f]{32})", output)
    assert match, output
    assert match.group(1) == collector["ui"]
    trace = get_json(f"{collector['ui']}/api/traces/{match.group(2)}")
    assert trace["requests"]
    assert "requests" in demo_run["completed"].stderr  # progress went to stderr


def test_every_request_arrived_with_the_expected_mix(demo_run):
    requests = demo_run["requests"]
    assert len(requests) == DEMO_REQUESTS
    mix = collections.Counter((request["service"], request["process"]["kind"], request["provider"])
                              for request in requests)
    assert set(mix) == {
        ("demo-chat-gateway", "channel", "openai"),
        ("demo-agent-worker", "worker", "anthropic"),
        ("demo-memory-compactor", "compactor", "openai"),
    }, mix
    unmapped = [request for request in requests if not request["prompt"]["mapped"]]
    assert unmapped and all(request["prompt"]["unmapped_reason"] == "not_rendered" for request in unmapped)
    assert len(unmapped) < len(requests) / 2
    origins = {request["prompt"]["template"]["origin"] for request in requests if request["prompt"]["mapped"]}
    assert {"builtin", "global", "scope"} <= origins
    conversations = collections.Counter(request["conversation_id"] for request in requests)
    assert max(conversations.values()) >= 5  # conversations over many turns
    assert any((request["usage"]["cache_read_tokens"] or 0) > 0 for request in requests)


def test_history_grows_within_a_conversation(demo_run):
    channel = [request for request in demo_run["requests"]
               if request["process"]["kind"] == "channel" and request["prompt"]["mapped"]]
    by_conversation = collections.defaultdict(list)
    for request in channel:
        by_conversation[request["conversation_id"]].append(request)
    grew = False
    for requests in by_conversation.values():
        ordered = sorted(requests, key=lambda request: request["started_at"])
        counts = [request["messages_count"] for request in ordered]
        grew = grew or (len(counts) >= 3 and counts[-1] > counts[0])
    assert grew


def test_spans_are_backdated_over_several_days(demo_run):
    now = datetime.datetime.now(datetime.timezone.utc)
    started = [datetime.datetime.fromisoformat(request["started_at"].replace("Z", "+00:00"))
               for request in demo_run["requests"]]
    assert all(moment < now for moment in started)
    span_days = (max(started) - min(started)).total_seconds() / 86_400
    assert span_days > DEMO_DAYS - 1.5


def test_batch_run_with_a_repair_attempt(demo_run):
    compactions = [request for request in demo_run["requests"] if request["process"]["kind"] == "compactor"]
    assert all(request["run"]["mode"] == "batch" and request["run"]["id"] for request in compactions)
    attempts = {request["run"]["attempt"] for request in compactions}
    assert {0, 1} <= attempts
    assert any(request["status"]["code"].lower() == "error" for request in compactions)


def test_some_requests_put_a_turn_block_before_the_identity_block(collector, demo_run):
    legacy = [request for request in demo_run["requests"]
              if request["prompt"]["mapped"] and request["prompt"]["template"]["origin"] == "scope"]
    assert legacy
    detail = get_json(f"{collector['ui']}/api/requests/{legacy[0]['request_id']}")
    names = [block["name"] for block in detail["prompt"]["blocks"]]
    assert names.index("state") < names.index("identity")
    normal = next(request for request in demo_run["requests"]
                  if request["process"]["kind"] == "channel" and request["prompt"]["mapped"]
                  and request["prompt"]["template"]["origin"] == "builtin")
    detail = get_json(f"{collector['ui']}/api/requests/{normal['request_id']}")
    names = [block["name"] for block in detail["prompt"]["blocks"]]
    assert names.index("identity") < names.index("state")
    assert detail["prompt"]["blocks"][-1]["stability"] == "turn"  # nothing stable after the turn block


def test_growth_and_overview_name_the_block_and_layer_that_grew_with_no_flags(collector, demo_run):
    """Straight after the demo: skills arrive on a later day, and the default periods show it."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "PROMPTPRISM_"))}
    completed = subprocess.run([*PROMPTPRISM, "growth", "--url", collector["ui"]], env=env, capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    summary, periods = completed.stdout.splitlines()[:2]
    assert summary.startswith("prompt +") and ": skills (layer skills) +" in summary, completed.stdout
    assert "(the later half of the stored requests, against the earlier half)" in periods
    with urllib.request.urlopen(f"{collector['ui']}/overview", timeout=30) as response:
        page = response.read().decode("utf-8")
    assert "skills (layer skills) +" in page and "By layer: prompt +" in page and "skills +" in page


def test_demo_fails_clearly_when_nothing_listens():
    """No exporter timeout set: the demo checks the endpoint first instead of retrying for minutes."""
    for protocol, endpoint in (("http/protobuf", f"http://127.0.0.1:{free_port()}"),
                               ("grpc", f"http://127.0.0.1:{free_port()}")):
        completed = run_demo({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol},
                             "--requests", "3", "--days", "1", timeout=60)
        assert completed.returncode == 1
        (line,) = completed.stderr.strip().splitlines()
        assert line.startswith(f"promptprism demo: no collector at {endpoint}"), line
        assert "promptprism collector" in line and "OTEL_EXPORTER_OTLP_ENDPOINT" in line


def test_demo_names_the_other_port_when_the_transport_does_not_match(collector):
    """gRPC's port given for http/protobuf (or the HTTP port for grpc): one line naming the right port,
    before anything is sent, instead of an export that fails after its retries."""
    cases = (("http/protobuf", collector["grpc"], "OTLP/gRPC port", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
             ("grpc", collector["http"], "OTLP/HTTP port", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"))
    for protocol, port, named, remedy in cases:
        endpoint = f"http://127.0.0.1:{port}"
        completed = run_demo({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol},
                             "--requests", "3", "--days", "1", timeout=60)
        assert completed.returncode == 1, completed.stderr
        (line,) = completed.stderr.strip().splitlines()
        assert line.startswith(f"promptprism demo: {endpoint}"), line
        assert named in line and remedy in line, line


def test_a_second_run_starts_new_conversations(collector, demo_run):
    """Runs last in this module: it adds a second run's requests to the collector."""
    first = {request["request_id"]: request for request in demo_run["requests"]}
    completed = run_demo({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                          "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector['grpc']}",
                          "PROMPTPRISM_URL": collector["ui"]}, "--requests", "8", "--days", "1")
    assert completed.returncode == 0, completed.stderr
    requests = stored_requests(collector["ui"], len(first) + 8)
    second = [request for request in requests if request["request_id"] not in first]
    assert len(second) == 8
    first_ids = {request["conversation_id"] for request in first.values()} - {""}
    second_ids = {request["conversation_id"] for request in second} - {""}
    assert second_ids and not first_ids & second_ids, (first_ids, second_ids)
    first_runs = {request["run"]["id"] for request in first.values()} - {""}
    assert not first_runs & {request["run"]["id"] for request in second}


# The overview of the demo's store (issue 12). Its speed is a benchmark's
# figure, not a test's (the project's rule: tests assert behaviour, never
# wall-clock time): benchmarks/overview.py measures a load against a baseline
# in the same run (~0.6-0.9 s of the collector's CPU, ~1.9-2.1 s before the
# read side specialized its SQL for the store). A bound here failed on a
# shared 2-core machine (3.99 s at load ~7) without anything being wrong.
def test_the_overview_of_the_demo_store_answers(collector, demo_run):
    url = f"{collector['ui']}/overview"
    for _ in range(2):  # the second load is served from warm caches, as a refresh is
        with urllib.request.urlopen(url, timeout=60) as response:
            assert response.status == 200
            page = response.read().decode("utf-8")
        assert "Prompt growth" in page


def test_demo_links_to_the_collectors_own_inspector_without_promptprism_url(collector):
    """Over OTLP/HTTP the demo asks the collector (GET /) where its inspector listens: the link is right
    on a collector whose UI is not on the default port, with PROMPTPRISM_URL unset. (Last in the module:
    it adds requests.)"""
    completed = run_demo({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                          "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector['http']}"},
                         "--requests", "3", "--days", "1")
    assert completed.returncode == 0, completed.stderr
    match = re.search(r"open a trace: (http://\S+)/trace/([0-9a-f]{32})", completed.stdout)
    assert match, completed.stdout
    assert match.group(1) == collector["ui"]
