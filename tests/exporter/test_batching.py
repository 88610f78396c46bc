"""Size estimates against the real protobuf encoder, and the splitting exporter's contract."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from promptprism.exporter import SizeBoundedSpanExporter, estimate_span_bytes, split_by_size
from promptprism.exporter._batching import estimate_group_bytes


@pytest.fixture
def make_spans():
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "batching-test", "team": "prompts"}),
        span_limits=SpanLimits(max_events=10_000, max_attribute_length=SpanLimits.UNSET),
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("promptprism.test", "1.0")

    def make(count: int = 1, *, content_bytes: int = 1000, events: int = 5, text: str = "a"):
        for number in range(count):
            with tracer.start_as_current_span(f"chat gpt-{number}") as span:
                span.set_attribute("promptprism.prompt.bytes", content_bytes)
                span.set_attribute("promptprism.prompt.mapped", True)
                span.set_attribute("gen_ai.request.temperature", 0.25)
                span.set_attribute("negative", -(2**62))
                span.set_attribute("gen_ai.response.finish_reasons", ["stop", "length"])
                span.set_attribute("promptprism.attempt.list", [1, -2, 3])
                for index in range(events):
                    span.add_event(
                        "promptprism.prompt.block",
                        {
                            "promptprism.block.index": index,
                            "promptprism.block.name": f"block-{index}",
                            "promptprism.block.content": text * (content_bytes // max(events, 1)),
                        },
                    )
                span.set_status(Status(StatusCode.ERROR, "provider said no"))
        spans = list(memory.get_finished_spans())
        memory.clear()
        return spans

    yield make
    provider.shutdown()


def encoded_bytes(spans) -> int:
    return encode_spans(spans).ByteSize()


@pytest.mark.parametrize(
    ("content_bytes", "events", "text"),
    [(0, 0, "a"), (100, 1, "a"), (30_000, 40, "a"), (30_000, 40, "é"), (5000, 1000, "語"), (1, 3, "🙂")],
)
def test_estimate_is_an_upper_bound_and_not_far_above(make_spans, content_bytes, events, text):
    (span,) = make_spans(content_bytes=content_bytes, events=events, text=text)
    actual = encoded_bytes([span])
    estimate = estimate_span_bytes(span) + estimate_group_bytes(span)
    assert estimate >= actual
    # Far above would split batches needlessly; the fixed framing bounds add a few hundred bytes.
    assert estimate <= 1.3 * actual + 512


def test_estimate_covers_links_and_trace_state(make_spans):
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("links")
    with tracer.start_as_current_span("parent") as parent:
        pass
    with tracer.start_as_current_span("child", links=[Link(parent.get_span_context(), {"why": "x" * 500})]):
        pass
    for span in memory.get_finished_spans():
        assert estimate_span_bytes(span) + estimate_group_bytes(span) >= encoded_bytes([span])


def test_split_keeps_order_and_every_chunk_under_the_bound(make_spans):
    spans = make_spans(40, content_bytes=20_000, events=10)
    bound = 100_000
    chunks = split_by_size(spans, bound)
    assert len(chunks) > 1
    assert [span for chunk in chunks for span in chunk] == spans
    for chunk in chunks:
        assert encoded_bytes(chunk) <= bound


def test_split_sends_an_oversized_span_alone(make_spans):
    small = make_spans(2, content_bytes=100)
    (big,) = make_spans(content_bytes=50_000)
    chunks = split_by_size([small[0], big, small[1]], 10_000)
    assert chunks == [[small[0]], [big], [small[1]]]


def test_split_of_nothing_is_nothing():
    assert split_by_size([], 100) == []


class RecordingExporter(SpanExporter):
    def __init__(self, results=None, raise_on_call=None):
        self.calls: list[list] = []
        self.results = list(results or [])
        self.raise_on_call = raise_on_call

    def export(self, spans):
        self.calls.append(list(spans))
        if self.raise_on_call == len(self.calls):
            raise RuntimeError("transport exploded")
        return self.results.pop(0) if self.results else SpanExportResult.SUCCESS


def test_exporter_hands_chunks_in_turn_and_counts(make_spans):
    spans = make_spans(30, content_bytes=20_000, events=10)
    inner = RecordingExporter()
    exporter = SizeBoundedSpanExporter(inner, max_request_bytes=100_000)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert len(inner.calls) > 1
    assert [span for call in inner.calls for span in call] == spans
    assert exporter.statistics.requests == len(inner.calls)
    assert exporter.statistics.spans == 30
    assert exporter.statistics.failed_requests == 0


def test_a_failed_chunk_does_not_stop_the_others(make_spans):
    spans = make_spans(30, content_bytes=20_000, events=10)
    inner = RecordingExporter(results=[SpanExportResult.FAILURE], raise_on_call=2)
    exporter = SizeBoundedSpanExporter(inner, max_request_bytes=100_000)
    assert exporter.export(spans) is SpanExportResult.FAILURE
    assert [span for call in inner.calls for span in call] == spans
    assert exporter.statistics.failed_requests == 2
    assert exporter.statistics.failed_spans == len(inner.calls[0]) + len(inner.calls[1])


def test_oversized_spans_are_counted_and_logged_at_a_bounded_rate(make_spans, caplog):
    spans = make_spans(5, content_bytes=50_000)
    inner = RecordingExporter()
    exporter = SizeBoundedSpanExporter(inner, max_request_bytes=10_000)
    with caplog.at_level(logging.WARNING, logger="promptprism.exporter._batching"):
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert [len(call) for call in inner.calls] == [1] * 10  # every one sent, alone
    assert exporter.statistics.oversized_spans == 10
    warnings = [record for record in caplog.records if "request bound" in record.getMessage()]
    assert len(warnings) == 1


def test_bound_must_be_positive():
    with pytest.raises(ValueError):
        SizeBoundedSpanExporter(RecordingExporter(), max_request_bytes=0)
