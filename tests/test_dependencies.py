"""Each install carries only what its imports need (pyproject's extras).

The base install (wire, instrumentation) and the exporter extra run without
the collector's, the providers' and the tests' packages; the collector runs
without the tests' HTTP client and YAML reader, which live in the dev extra.
"""

from __future__ import annotations

import tomllib

import pytest

from support import REPOSITORY, python_without

# Only the dev extra brings these (the tests' HTTP client, the deploy tests' YAML).
DEV_ONLY = ("httpx", "yaml", "h2")
# What the collector and providers extras add to the base install and the exporter extra.
COLLECTOR_AND_PROVIDERS = ("chdb", "clickhouse_connect", "starlette", "uvicorn", "pyarrow", "prometheus_client",
                           "blake3", "openai", "anthropic")

BASE_INSTALL = """
from promptprism.wire import names
from promptprism.instrumentation import TemplateCatalog, block, prompt_tracer_provider, start_llm_request
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

memory = InMemorySpanExporter()
provider = prompt_tracer_provider()
provider.add_span_processor(SimpleSpanProcessor(memory))
prompt = TemplateCatalog({"system": "You are {{ who }}."}).render("system", [block("who", "Ada", layer="identity")])
call = start_llm_request(provider=names.PROVIDER_OPENAI, operation=names.OPERATION_CHAT, model="gpt-4o",
                         prompt=prompt, tracer_provider=provider)
call.end()
assert len(memory.get_finished_spans()) == 1
print("ok")
"""

EXPORTER_EXTRA = """
from promptprism.exporter import configure
for protocol in ("grpc", "http/protobuf"):
    tracing = configure(set_global=False, protocol=protocol, endpoint="http://127.0.0.1:9")
    tracing.shutdown()
print("ok")
"""

COLLECTOR_EXTRA = """
from promptprism.collector.app import Collector
from promptprism.collector.cli import main
print("ok")
"""


def test_the_base_install_needs_no_extra():
    completed = python_without(DEV_ONLY + COLLECTOR_AND_PROVIDERS + ("grpc", "opentelemetry.exporter"), BASE_INSTALL)
    assert completed.returncode == 0 and completed.stdout.strip() == "ok", completed.stderr


def test_the_exporter_extra_needs_neither_the_collector_nor_the_dev_packages():
    completed = python_without(DEV_ONLY + COLLECTOR_AND_PROVIDERS, EXPORTER_EXTRA)
    assert completed.returncode == 0 and completed.stdout.strip() == "ok", completed.stderr


def test_the_collector_needs_no_dev_package():
    completed = python_without(DEV_ONLY + ("openai", "anthropic"), COLLECTOR_EXTRA)
    assert completed.returncode == 0 and completed.stdout.strip() == "ok", completed.stderr


def test_the_probe_can_fail():
    completed = python_without(("yaml",), "import yaml")
    assert completed.returncode != 0 and "yaml is not installed here" in completed.stderr


@pytest.mark.parametrize("extra", ["exporter", "collector"])
def test_dev_only_packages_are_declared_in_dev_only(extra):
    declared = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = declared["dependencies"] + declared["optional-dependencies"][extra]
    names = {requirement.split(">")[0].split("=")[0].split("[")[0].strip().lower() for requirement in requirements}
    assert not names & {"httpx", "pyyaml"}
