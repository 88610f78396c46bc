"""A fake provider on a free loopback port and an in-memory span exporter per test."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from promptprism.collector.demo.fake_provider import FakeProvider
from promptprism.instrumentation import prompt_tracer_provider

pytest.importorskip("openai")
pytest.importorskip("anthropic")


@pytest.fixture(scope="module")
def fake_provider():
    with FakeProvider() as provider:
        yield provider


class Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = prompt_tracer_provider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self):
        return list(self.exporter.get_finished_spans())

    def only(self):
        finished = self.finished()
        assert len(finished) == 1, [span.name for span in finished]
        return finished[0]


@pytest.fixture
def spans():
    recorded = Spans()
    yield recorded
    recorded.tracer_provider.shutdown()
