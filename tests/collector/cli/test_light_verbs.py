"""The light verbs run on the base install: `promptprism --help`, `template show` and `preview`
load none of the collector extra's dependencies (or the providers')."""

from __future__ import annotations

import json
import subprocess

import pytest

from support import python_without

# What `promptprism[collector]` and `promptprism[providers]` add to the base install.
EXTRA_ONLY = ("grpc", "chdb", "clickhouse_connect", "starlette", "uvicorn", "pyarrow", "google.protobuf",
              "opentelemetry.proto", "opentelemetry.exporter", "prometheus_client", "httpx", "yaml", "openai",
              "anthropic")

CLI = "from promptprism.collector.cli import main; sys.exit(main(sys.argv[1:]))"


def run_cli(*arguments: str, stdin: str = "") -> subprocess.CompletedProcess:
    """The CLI with the extras' packages made unimportable, as on a base install."""
    return python_without(EXTRA_ONLY, CLI, *arguments, stdin=stdin)


def test_the_probe_blocks_the_collector_dependencies():
    completed = run_cli("collector", "--data-dir", "/nonexistent", "--otlp-grpc-address", "127.0.0.1:0")
    assert completed.returncode != 0
    assert "is not installed here" in completed.stderr


@pytest.mark.parametrize("arguments", [("--help",), ("template", "--help"), ("preview", "--help")])
def test_help_works_on_the_base_install(arguments):
    completed = run_cli(*arguments)
    assert completed.returncode == 0, completed.stderr
    assert "usage: promptprism" in completed.stdout


def test_template_show_works_on_the_base_install(tmp_path):
    (tmp_path / "system.j2").write_text("You help {{ user }}.\n", encoding="utf-8")
    completed = run_cli("template", "show", "system", "--templates", str(tmp_path), "--json")
    assert completed.returncode == 0, completed.stderr
    shown = json.loads(completed.stdout)
    assert shown["origin"] == "builtin" and "You help" in shown["text"]


def test_preview_works_on_the_base_install():
    body = {"model": "gpt-4o", "messages": [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": "Hello"}]}
    completed = run_cli("preview", "-", "--json", stdin=json.dumps(body))
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["dialect"] == "chat-completions"
