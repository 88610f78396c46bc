"""The scripted scenario sent as OTLP through a running collector; then
`promptprism growth` and `promptprism cache` find, name and quantify it, and
the insight API, the overview page and the Grafana panels agree."""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from promptprism.collector.cli import main as cli_main
from promptprism.collector.read.insight.queries import BYTES_PER_TOKEN

from support import wait_until

from ...collector_harness import collector_process
from . import scenario
from .otlp_scenario import send

pytestmark = pytest.mark.slow


def _get(url: str):
    # 60 s: slack for a loaded machine (the test asserts answers, not speed)
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.status, response.read().decode("utf-8")


@pytest.fixture(scope="module")
def running_collector(tmp_path_factory):
    environment = {**os.environ, "PROMPTPRISM_UI_TOKEN": ""}
    with collector_process(tmp_path_factory.mktemp("collector"), environment=environment) as collector:
        now_ns = int(time.time()) * 10**9
        records = scenario.records(now_ns)
        send(records, collector.endpoints()["otlp_http"] + "/v1/traces")
        # Acknowledged means durable (store or spool); wait until all are readable.
        wait_until(lambda: len(json.loads(_get(f"{collector.ui}/api/requests?limit=1000")[1])["requests"])
                   >= len(records), timeout=30, message="records not readable after export")
        yield collector.ui, now_ns


def _cli(capsys, *argv: str) -> str:
    assert cli_main(list(argv)) == 0
    return capsys.readouterr().out


def test_growth_cli_names_and_quantifies_the_skill_growth(running_collector, capsys):
    ui, _ = running_collector
    text = _cli(capsys, "growth", "--url", ui)
    first = text.splitlines()[0]
    assert first.startswith("prompt +") and ": skills_prompt (layer skills) +" in first, text
    expected = f"+{scenario.SKILL_GROWTH:,}"
    skills_line = next(line for line in text.splitlines() if line.startswith("skills_prompt"))
    assert expected in skills_line and f"+{scenario.SKILL_GROWTH // BYTES_PER_TOKEN:,}" in skills_line

    answer = json.loads(_cli(capsys, "growth", "--url", ui, "--json", "--by", "layer"))
    assert answer["attribution"][0]["series"] == "skills"
    assert answer["attribution"][0]["delta_bytes"] == scenario.SKILL_GROWTH
    assert answer["attribution"][0]["contribution_pct"] == pytest.approx(scenario.expected_growth_pct(), abs=0.6)


def test_cache_cli_names_the_turn_block_moved_before_identity(running_collector, capsys):
    ui, _ = running_collector
    text = _cli(capsys, "cache", "--url", ui, "--requests", "3")
    lines = text.splitlines()
    assert lines[0].startswith("turn block user_context sits before stable block identity in 4 request(s)"), text
    assert "turn_before_stable" in text  # the per-request verdicts
    # The verdict's inputs, per request: expected prefix (bytes, ≈ tokens) and the reported cache read.
    header = next(line for line in lines if line.startswith("request "))
    assert "expected prefix B" in header and "≈ tokens" in header and "reported cache read" in header

    answer = json.loads(_cli(capsys, "cache", "--url", ui, "--json", "--since", "14d"))
    blocks = {row["block"]: row for row in answer["by_block"]}
    # The memory updates broke the cache once a week; the first request of a conversation this
    # week has no previous request (the last one was a week earlier: only one within a day is
    # compared, whatever the window), so the grown skills break nothing; the reordered day's
    # turn block first leaves nothing to expect from the cache, which the misordered line names.
    assert {block: row["breaks"] for block, row in blocks.items()} == {"memory": 2}
    assert blocks["memory"]["reported_cache_read_tokens"] < blocks["memory"]["expected_prefix_tokens"]
    assert answer["misordered"][0]["uncacheable_tokens"] > 0
    row = answer["requests"][0]
    assert {"expected_prefix_bytes", "expected_prefix_tokens", "cache_read_tokens", "cache_read_covers_prefix"} <= set(row)


def test_cli_filters_and_errors(running_collector, capsys):
    ui, _ = running_collector
    answer = json.loads(_cli(capsys, "growth", "--url", ui, "--json", "--service", "nobody"))
    assert answer["attribution"] == []
    assert cli_main(["growth", "--url", ui, "--since", "yesterday"]) == 1
    assert "since='yesterday': expected an RFC 3339 time" in capsys.readouterr().err


def test_overview_page_and_headroom_api(running_collector):
    ui, _ = running_collector
    status, html = _get(f"{ui}/overview?since=14d")
    # The inspector's page: its header, search box and stylesheet; no script but the inspector's own.
    assert status == 200 and "<svg" in html and html.count("<script") == 1 and 'class="topbar"' in html
    assert "skills_prompt" in html and "user_context" in html
    # Growth compares the later half of the requests stored in the window with the earlier half, and says so.
    assert "Periods compared:" in html and "the later half of the stored requests" in html
    assert "skills_prompt (layer skills) +" in html and "By layer: prompt +" in html
    # The cache verdicts come with their inputs.
    verdicts = html[html.index('id="cache-verdicts"'):]
    assert "expected prefix B" in verdicts and "reported cache read" in verdicts
    status, body = _get(f"{ui}/api/insight/headroom")
    answer = json.loads(body)
    assert answer["requests"][0]["context_window"] == scenario.CONTEXT_WINDOW
