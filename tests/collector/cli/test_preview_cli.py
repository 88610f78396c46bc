"""``promptprism preview``: the same manifest as the library, as a table or JSON, with no free text."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings

from promptprism.collector.cli import main
from promptprism.instrumentation.manifest import build_manifest
from promptprism.wire import names

from instrumentation.manifest_strategies import dialect_and_body

HOSTILE_MODEL = "\x1b[31mgpt\x1b[0m<img src=x onerror=alert(1)>"
HOSTILE_TOOL = "drop table;\nrm -rf /"


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def write_body(directory: str, body: object, name: str = "body.json") -> str:
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(body, handle, ensure_ascii=False)
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dialect_and_body)
def test_cli_json_has_the_exact_sum_identity_for_every_dialect(case):
    dialect, body = case
    with tempfile.TemporaryDirectory() as directory:
        status, out, _ = run_cli(["preview", write_body(directory, body), "--dialect", dialect, "--json"])
    assert status == 0
    shown = json.loads(out)
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert shown["bytes_total"] == len(canonical)
    assert shown["bytes_system"] + shown["bytes_tools"] + shown["bytes_messages"] + shown["bytes_framing"] == len(canonical)
    assert shown["body_sha256"] == build_manifest(body, dialect).body_sha256
    assert shown["tokens_are_estimates"] is True


def test_table_shows_classes_estimates_and_headroom(tmp_path):
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "S" * 4000,
            "tools": [{"name": "search", "input_schema": {"type": "object"}}],
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [{"role": "user", "content": "hello"}]}
    status, out, _ = run_cli(["preview", write_body(str(tmp_path), body), "--context-window", "1500"])
    assert status == 0
    manifest = build_manifest(body, names.DIALECT_ANTHROPIC_MESSAGES, context_window=1500)
    assert "anthropic-messages (detected)" in out
    assert f"{manifest.bytes_system:,}" in out and f"{manifest.bytes_total:,}" in out
    assert "search" in out and "reasoning budget   2,048 tokens" in out
    assert manifest.headroom_tokens < 0 and "DOES NOT FIT" in out
    assert "estimates" in out


def test_hostile_identifiers_never_printed(tmp_path):
    body = {"model": HOSTILE_MODEL, "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": HOSTILE_TOOL, "parameters": {}}}],
            "reasoning_effort": "<b>max</b>"}
    path = write_body(str(tmp_path), body)
    for argv in (["preview", path], ["preview", path, "--json"]):
        status, out, _ = run_cli(argv)
        assert status == 0
        assert "\x1b" not in out and "<img" not in out and "rm -rf" not in out and "<b>" not in out
        assert "sha256:" in out
        # JSON escapes would hide a raw match: decode and look again.
        if "--json" in argv:
            decoded = json.loads(out)
            assert decoded["model"].startswith("sha256:")
            assert decoded["tools"][0]["name"].startswith("sha256:")


def test_bad_input_errors_never_echo_the_body(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"model": "sk-SECRETSECRET\x1b[2J", oops}')
    status, out, err = run_cli(["preview", str(broken)])
    assert status == 2 and out == ""  # a bad argument, named by its file
    assert "not valid JSON" in err and "SECRET" not in err and "\x1b" not in err
    array = write_body(str(tmp_path), [1, 2], "array.json")
    status, _, err = run_cli(["preview", array])
    assert status == 2 and "JSON object" in err
    status, _, err = run_cli(["preview", str(tmp_path / "missing.json")])
    assert status == 1 and "cannot read" in err


def test_context_window_must_be_positive(tmp_path):
    path = write_body(str(tmp_path), {"model": "m", "messages": []})
    with pytest.raises(SystemExit):
        run_cli(["preview", path, "--context-window", "0"])


def test_installed_command_reads_stdin_and_imports_no_provider_library(tmp_path):
    body = {"model": "gpt-5", "instructions": "Be terse.", "input": "hi", "reasoning": {"effort": "low"}}
    script = (
        "import sys; from promptprism.collector.cli import main; status = main(['preview', '-', '--json']); "
        "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules; sys.exit(status)"
    )
    completed = subprocess.run([sys.executable, "-c", script], input=json.dumps(body).encode(),
                               capture_output=True, timeout=60)
    assert completed.returncode == 0, completed.stderr.decode()
    shown = json.loads(completed.stdout)
    assert shown["dialect"] == names.DIALECT_OPENAI_RESPONSES and shown["dialect_detected"] is True
    assert shown["reasoning_effort"] == "low"
    assert shown["bytes_system"] + shown["bytes_tools"] + shown["bytes_messages"] + shown["bytes_framing"] == shown["bytes_total"]


def test_schema_flag_prints_the_schema_that_the_json_output_validates_against(tmp_path):
    import jsonschema

    from promptprism.instrumentation.manifest import json_schema

    status, out, _ = run_cli(["preview", "--schema"])
    assert status == 0
    schema = json.loads(out)
    assert schema == json_schema()
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "S" * 400,
            "tools": [{"name": "search", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": "hello"}]}
    status, out, _ = run_cli(["preview", write_body(str(tmp_path), body), "--json", "--context-window", "1500"])
    assert status == 0
    jsonschema.validate(json.loads(out), schema, cls=jsonschema.Draft202012Validator)


def test_preview_without_a_body_or_schema_is_a_clear_error():
    status, _, err = run_cli(["preview"])
    assert status == 1 and "BODY.json" in err and "--schema" in err
