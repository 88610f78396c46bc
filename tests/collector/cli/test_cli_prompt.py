"""``promptprism prompt show|diff|list``: the real command against a real ``promptprism collector``
process, fed over OTLP by the OTel SDK."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from support import REPOSITORY, free_port

from .. import read_side_data as data
from ..collector_harness import collector_process

VENV_COMMAND = pathlib.Path(sys.executable).with_name("promptprism")
# The venv's entry point when installed; the same main() through the interpreter otherwise.
PROMPTPRISM = [str(VENV_COMMAND)] if VENV_COMMAND.exists() else [
    sys.executable, "-c", "import sys; from promptprism.collector.cli import main; sys.exit(main())"]
UI_TOKEN = "read-side-token"


@pytest.fixture(scope="module")
def collector(tmp_path_factory):
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PROMPTPRISM_")}
    with collector_process(tmp_path_factory.mktemp("collector"), "--ui-token", UI_TOKEN,
                           environment=environment) as running:
        data.send_over_otlp(data.scenario(), running.endpoints()["otlp_grpc"])
        yield running.ui, {**environment, "PROMPTPRISM_URL": running.ui, "PROMPTPRISM_UI_TOKEN": UI_TOKEN}


def promptprism(environment, *arguments, status=0):
    result = subprocess.run(PROMPTPRISM + list(arguments), capture_output=True, text=True, env=environment,
                            timeout=60)
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    return result


def error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_show_prints_a_table_of_blocks_with_shares(collector):
    _, environment = collector
    output = promptprism(environment, "prompt", "show", data.SECOND).stdout
    assert f"request {data.SECOND}  trace {data.AGENT_TRACE}" in output
    header = next(line for line in output.splitlines() if line.startswith("  #") or line.startswith("#"))
    assert "bytes%" in header and "tokens%" in header
    rows = [line.split() for line in output.splitlines() if line.strip()[:2] in ("0 ", "1 ", "2 ", "3 ", "4 ", "5 ")]
    assert [row[1] for row in rows] == ["identity", "template", "instructions", "memory", "knowledge", "state"]
    memory = rows[3]
    assert memory[2:5] == ["memory", "session", "memory-store"] and memory[5] == "478" and memory[6] == "65.6%"
    assert f"previous {data.FIRST} (conversation): prompt +445 B" in output
    assert "tools: 2 (calendar_lookup" in output


def test_show_content_prints_exact_text(collector):
    _, environment = collector
    output = promptprism(environment, "prompt", "show", data.FIRST, "--content").stdout
    for part in data.agent_parts("User prefers short answers. 🎯\n", "Doc: the calendar has two meetings.\n"):
        assert part.text in output
    assert f"State: {data.XSS}" in output  # a terminal gets the text as it was sent


def test_show_json_is_the_api_object(collector):
    url, environment = collector
    shown = json.loads(promptprism(environment, "prompt", "show", data.UNMAPPED[:5], "--json").stdout)
    assert shown["request_id"] == data.UNMAPPED and shown["prompt"]["unmapped_reason"] == "sentinel_collision"
    assert "UNMAPPED: sentinel_collision" in promptprism(environment, "prompt", "show", data.UNMAPPED).stdout


def test_diff_lists_the_responsible_block_first(collector):
    _, environment = collector
    output = promptprism(environment, "prompt", "diff", data.FIRST, data.THIRD).stdout
    assert "responsible: memory" in output
    table = [line.split() for line in output.splitlines() if line.split() and line.split()[0] in
             ("resized", "added", "changed", "removed", "moved")]
    assert [row[:2] for row in table] == [["resized", "memory"], ["added", "skills"], ["changed", "knowledge"]]
    assert "prompt +484 B" in output
    parsed = json.loads(promptprism(environment, "prompt", "diff", data.FIRST, data.THIRD, "--json").stdout)
    assert parsed["responsible"] == "memory" and parsed["blocks"][0]["bytes_delta"] == 445


def test_list_with_filters(collector):
    _, environment = collector
    output = promptprism(environment, "prompt", "list").stdout.splitlines()
    ids = [line.split()[2] for line in output[1:]]
    assert ids == [data.NO_CONTENT, data.UNMAPPED, data.THIRD, data.SECOND, data.FIRST]

    def listed(*filters):
        answer = json.loads(promptprism(environment, "prompt", "list", "--json", *filters).stdout)
        return [item["request_id"] for item in answer["requests"]]

    assert listed("--service", "billing") == [data.NO_CONTENT]
    assert listed("--model", "gpt-small") == [data.UNMAPPED]
    assert listed("--conversation", data.CONVERSATION, "--limit", "2") == [data.THIRD, data.SECOND]
    assert listed("--message-id", "message-7", "--since", "1d") == [data.THIRD, data.SECOND, data.FIRST]
    assert listed("--process", "worker:w-3") == [data.UNMAPPED]
    assert listed("--run-id", "run-2") == [data.NO_CONTENT]
    assert listed("--until", "2000-01-01T00:00:00Z") == []
    assert "no requests match" in promptprism(environment, "prompt", "list", "--service", "nobody").stdout


def test_ambiguous_prefix_lists_candidates_in_one_line(collector):
    _, environment = collector
    line = error_line(promptprism(environment, "prompt", "show", "a1b2", status=1))
    assert "ambiguous" in line and all(candidate in line for candidate in (data.FIRST, data.SECOND, data.THIRD))


def test_diff_with_one_id_compares_with_the_previous_request_of_its_lineage(collector):
    _, environment = collector
    output = promptprism(environment, "prompt", "diff", data.THIRD).stdout
    assert output.splitlines()[0].startswith(f"a {data.SECOND}")
    assert "a is b's previous request in its lineage" in output and "not in the same lineage" not in output
    line = error_line(promptprism(environment, "prompt", "diff", data.FIRST, status=1))
    assert "404" in line and "first of its lineage" in line
    # Two ids of different lineages are compared as asked, and the output says so.
    output = promptprism(environment, "prompt", "diff", data.UNMAPPED, data.SECOND).stdout
    assert "note: a and b are not in the same lineage" in output


def test_unknown_request_is_one_line(collector):
    _, environment = collector
    line = error_line(promptprism(environment, "prompt", "show", "ffffffffffffffff", status=1))
    assert line.startswith("promptprism prompt: 404") and "no request" in line
    line = error_line(promptprism(environment, "prompt", "diff", data.FIRST, "ffff", status=1))
    assert "404" in line


@pytest.mark.parametrize("arguments", [
    ("prompt", "show", "xyz!"), ("prompt", "show", "a1b"), ("prompt", "diff"),
    ("prompt", "list", "--limit", "ten"), ("prompt", "show"),
])
def test_bad_arguments_are_one_line_without_contacting_the_collector(collector, arguments):
    environment = {**collector[1], "PROMPTPRISM_URL": "http://127.0.0.1:9"}  # nothing listens there
    line = error_line(promptprism(environment, *arguments, status=2))
    assert line.startswith("promptprism prompt")


def test_bad_filter_value_is_reported_by_the_api_in_one_line(collector):
    _, environment = collector
    line = error_line(promptprism(environment, "prompt", "list", "--since", "last tuesday", status=1))
    assert "400" in line and "since" in line


def test_unreachable_collector_is_one_line(collector):
    environment = {**collector[1], "PROMPTPRISM_URL": f"http://127.0.0.1:{free_port()}"}
    line = error_line(promptprism(environment, "prompt", "show", data.FIRST, status=1))
    assert "cannot reach the collector" in line


def test_missing_ui_token_is_named(collector):
    environment = {key: value for key, value in collector[1].items() if key != "PROMPTPRISM_UI_TOKEN"}
    line = error_line(promptprism(environment, "prompt", "list", status=1))
    assert "401" in line and "PROMPTPRISM_UI_TOKEN" in line


def test_readme_sample_output(collector):
    """Keeps the README's sample outputs reproducible: written to test-artifacts/ from a real run."""
    _, environment = collector
    artifacts = REPOSITORY / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    samples = []
    for arguments in (("prompt", "list"), ("prompt", "show", data.SECOND), ("prompt", "diff", data.FIRST, data.THIRD)):
        output = promptprism(environment, *arguments).stdout
        assert output.strip()
        samples.append("$ promptprism " + " ".join(arguments) + "\n" + output)
    (artifacts / "cli-samples.txt").write_text("\n".join(samples), encoding="utf-8")
