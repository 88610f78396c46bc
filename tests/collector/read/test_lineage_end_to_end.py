"""Comparisons stay within one lineage: the API, the inspector, the CLI and the SQL panels.

Two services and two models share conversation ids (as the demo's gateway,
worker and compactor do). A lineage is the conversation with the same
service, provider, model and process kind (``collector/read/lineage.py``); no
answer may compare a request with one of another lineage: not ``previous``,
not the trace page's growth, not ``prompt diff`` by default, not a cache
verdict, not growth attribution. On one day one of the gateway's lineages
moves its turn block before the identity block, and ``promptprism cache``
still names it.
"""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest

from promptprism.collector.cli import main as cli_main
from promptprism.collector.read.insight import grafana as dashboard
from promptprism.collector.read.insight.queries import GRAFANA, QUERIES
from promptprism.collector.read.lineage import lineage_key

from grafana.macros import ALL, TimeRange, Variable, expand  # tests/ is on sys.path (rootdir conftest)

from .. import read_side_data as data
from ..collector_harness import running_collector

DAY_NS = 86_400 * 10**9
MINUTE_NS = 60 * 10**9
CONVERSATIONS = ("shared-1", "shared-2")
TURNS = 3
# (service, provider, model, process kind, process id): three lineages per conversation.
GATEWAY = ("gateway", "openai", "gpt-4.1", "channel", "web-1")
GATEWAY_MINI = ("gateway", "openai", "gpt-4.1-mini", "channel", "web-1")
WORKER = ("worker", "anthropic", "claude-test", "worker", "w-1")
STREAMS = (GATEWAY, GATEWAY_MINI, WORKER)
# Days back, oldest first; the later two days are the current period of a 2-day growth window.
DAYS_AGO = (3, 2, 1, 0)
REORDER_DAY, REORDER_CONVERSATION = 1, "shared-1"


def _parts(stream, conversation: str, day: int, turn: int) -> list:
    state = data.Part("state", "state", "turn", "app", f"{conversation} day {day} turn {turn}: open tasks {turn}.\n")
    if stream is WORKER:
        return [data.Part("identity", "identity", "static", "config", "You are the background worker. " * 50),
                data.Part("knowledge", "knowledge", "turn", "retrieval", f"Document {day}.{turn}\n" * 30)]
    if stream is GATEWAY_MINI:
        return [data.Part("identity", "identity", "static", "config", "You write short replies.\n"), state]
    parts = [data.Part("identity", "identity", "static", "config", "You are the studio assistant. " * 10),
             data.Part("skills", "skills", "static", "skills/", "- calendar\n- notes\n" * 6),
             data.Part("memory", "memory", "session", "memory-store", f"{conversation} prefers email.\n")]
    if day == REORDER_DAY and conversation == REORDER_CONVERSATION:
        return [state, *parts]  # a template override put the per-turn state first, for one day
    return [*parts, state]


def _records(now_ns: int) -> list:
    records, number = [], 0
    for day in DAYS_AGO:
        for conversation in CONVERSATIONS:
            for turn in range(TURNS):
                trace_id = f"{0x11ea9e00 + number:032x}"  # one trace per turn: gateway, mini and worker
                for position, stream in enumerate(STREAMS):
                    # The worker sends one request a day in the earlier period and a turn's worth later:
                    # a shift of traffic towards its larger prompt, which is not growth of any prompt.
                    if stream is WORKER and day >= 2 and turn > 0:
                        continue
                    number += 1
                    service, provider, model, process_kind, process_id = stream
                    parts = _parts(stream, conversation, day, turn)
                    record = data.build_record(
                        trace_id=trace_id, request_id=f"{0x11ea9e0000000000 + number:016x}", parts=parts,
                        service=service, provider=provider, model=model, response_model=model,
                        process_kind=process_kind, process_id=process_id, conversation_id=conversation,
                        system_instructions="")
                    record.started_at_ns = now_ns - day * DAY_NS - 3 * 3600 * 10**9 + (turn * 10 + position) * MINUTE_NS
                    # The provider served the stable prefix from its cache, except on a day's first turn.
                    stable = 0
                    for block in record.blocks:
                        if block.stability == "turn":
                            break
                        stable += block.size
                    record.cache_read_tokens = 0 if turn == 0 else stable // 4
                    records.append(record)
    return records


def _key(record) -> tuple:
    return lineage_key({"conversation_id": record.conversation_id, "trace_id": record.trace_id,
                        "service": record.service, "provider": record.provider, "model": record.model,
                        "process_kind": record.process_kind, "process_id": record.process_id})


@pytest.fixture
def collector_with_streams(store, tmp_path):
    now_ns = int(time.time()) * 10**9
    records = _records(now_ns)
    data.write(store, records)
    with running_collector(store, tmp_path / "collector") as collector:
        yield collector.endpoints()["ui"], store, records, now_ns


def _cli(capsys, *argv: str) -> str:
    assert cli_main(list(argv)) == 0
    return capsys.readouterr().out


def test_no_comparison_crosses_a_lineage(collector_with_streams, capsys):
    ui, store, records, now_ns = collector_with_streams
    lineage_of = {record.request_id: _key(record) for record in records}
    by_lineage: dict[tuple, int] = {}
    for record in records:
        by_lineage[_key(record)] = by_lineage.get(_key(record), 0) + 1
    assert len(by_lineage) == len(CONVERSATIONS) * len(STREAMS)

    # API: every request's previous is in its lineage, and every follow-up has one.
    compared = 0
    for record in records:
        previous = httpx.get(f"{ui}/api/requests/{record.request_id}", timeout=30).json()["previous"]
        if previous:
            assert lineage_of[previous["request_id"]] == lineage_of[record.request_id], record.request_id
            compared += 1
    assert compared == sum(count - 1 for count in by_lineage.values())

    # Inspector: the trace page's growth and its "diff with previous" links.
    links = 0
    for trace_id in sorted({record.trace_id for record in records}):
        page = httpx.get(f"{ui}/trace/{trace_id}", timeout=30).text
        for earlier, later in re.findall(r'href="/diff\?a=([0-9a-f]{16})&amp;b=([0-9a-f]{16})"', page):
            assert lineage_of[earlier] == lineage_of[later], (trace_id, earlier, later)
            links += 1
    assert links == compared

    # CLI: `prompt show` names the previous request, `prompt diff` with one id compares with it.
    worker = [record for record in records if record.service == "worker"][-1]
    shown = _cli(capsys, "prompt", "show", worker.request_id, "--url", ui)
    previous_id = re.search(r"^previous ([0-9a-f]{16}) \(conversation\)", shown, re.M).group(1)
    assert lineage_of[previous_id] == lineage_of[worker.request_id]
    mini = [record for record in records if record.model == "gpt-4.1-mini"][-1]
    diff = json.loads(_cli(capsys, "prompt", "diff", mini.request_id, "--url", ui, "--json"))
    assert diff["a_chosen_as"] == "previous" and diff["same_lineage"] is True
    assert lineage_of[diff["a"]["request_id"]] == lineage_of[mini.request_id]

    # Cache verdicts (CLI JSON): only within a lineage. The one break is the day after the
    # reorder, when the identity block is back in front.
    cache = json.loads(_cli(capsys, "cache", "--url", ui, "--json", "--since", "5d", "--requests", "1000"))
    follow_ups = [row for row in cache["requests"] if row["previous_request_id"]]
    assert len(follow_ups) == compared
    for row in follow_ups:
        assert lineage_of[row["previous_request_id"]] == lineage_of[row["request_id"]], row
    breaks = [row for row in cache["requests"] if row["verdict"] == "break"]
    assert [(row["conversation_id"], row["model"], row["changed_block"]) for row in breaks] == [
        (REORDER_CONVERSATION, "gpt-4.1", "identity")]
    text = _cli(capsys, "cache", "--url", ui, "--since", "5d")
    assert text.splitlines()[0].startswith(f"turn block state sits before stable block identity in {TURNS} request(s)")

    # Growth: the worker's share of the traffic grew, no prompt did.
    growth = json.loads(_cli(capsys, "growth", "--url", ui, "--json", "--since", "2d"))
    assert growth["total"]["lineages_compared"] == len(by_lineage)
    assert growth["attribution"] and all(row["delta_bytes"] == 0 for row in growth["attribution"]), growth

    # The SQL panels, expanded as Grafana does.
    variables = {"database": Variable("database", store.database),
                 "service": Variable("service", ALL, ["gateway", "worker"]),
                 "model": Variable("model", ALL, ["gpt-4.1", "gpt-4.1-mini", "claude-test"]),
                 "process": Variable("process", ALL, ["channel", "worker"]),
                 "dimension": Variable("dimension", "name", []),
                 "inspector_url": Variable("inspector_url", ui)}
    now_ms = now_ns // 10**6
    panel_sql = {panel["targets"][0]["meta"]["promptprism_query"]: panel["targets"][0]["rawSql"]
                 for panel in dashboard.build_dashboard()["panels"] if panel["type"] != "row"}
    five_days = TimeRange(now_ms - 5 * 86_400_000, now_ms, 86_400_000)
    [by_block] = store.query(expand(panel_sql["cache_breaks_by_block"], variables, five_days))
    assert (by_block["block"], by_block["breaks"]) == ("identity", 1)
    series = store.query(expand(panel_sql["cache_series"], variables, five_days))
    assert sum(row["follow_ups"] for row in series) == compared and sum(row["breaks"] for row in series) == 1
    # The per-request analysis under the panels, in the panels' rendering.
    rows = store.query(expand(QUERIES["cache_requests"].render(GRAFANA), variables, five_days))
    assert len([row for row in rows if row["previous_request_id"]]) == compared
    for row in rows:
        if row["previous_request_id"]:
            assert lineage_of[row["previous_request_id"]] == lineage_of[row["request_id"]]
    attribution = store.query(expand(panel_sql["growth_attribution"], variables,
                                     TimeRange(now_ms - 2 * 86_400_000, now_ms, 3_600_000)))
    assert attribution and all(row["delta_bytes"] == 0 for row in attribution)
