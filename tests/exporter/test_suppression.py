"""Our export path creates no spans, even in an app with HTTP client auto-instrumentation."""

from __future__ import annotations

import requests
from opentelemetry.instrumentation.utils import is_http_instrumentation_enabled, is_instrumentation_enabled
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from promptprism.exporter import SuppressInstrumentationSpanExporter, configure, suppressed_instrumentation


def instrumentation_enabled() -> bool:
    """What an HTTP client instrumentation checks: opentelemetry-instrumentation's own test of
    OpenTelemetry's keys (a key of our own would leave it True)."""
    return is_http_instrumentation_enabled()


class ContextRecordingExporter(SpanExporter):
    def __init__(self):
        self.seen: list[tuple[str, bool]] = []

    def export(self, spans):
        self.seen.append(("export", instrumentation_enabled()))
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis=30000):
        self.seen.append(("force_flush", instrumentation_enabled()))
        return True

    def shutdown(self):
        self.seen.append(("shutdown", instrumentation_enabled()))


def test_every_call_into_the_exporter_runs_suppressed_and_the_context_is_restored():
    inner = ContextRecordingExporter()
    exporter = SuppressInstrumentationSpanExporter(inner)
    exporter.export([])
    exporter.force_flush()
    exporter.shutdown()
    assert inner.seen == [("export", False), ("force_flush", False), ("shutdown", False)]
    assert instrumentation_enabled()


def test_the_wrapper_returns_failure_instead_of_raising():
    class Exploding(SpanExporter):
        def export(self, spans):
            raise RuntimeError("boom")

    assert SuppressInstrumentationSpanExporter(Exploding()).export([]) is SpanExportResult.FAILURE
    assert instrumentation_enabled()


def test_suppression_sets_the_keys_the_sdk_and_instrumentations_check():
    seen = []

    class Recording(SpanExporter):
        def export(self, spans):
            seen.append(is_instrumentation_enabled())  # inside the SDK's BatchSpanProcessor: suppressed
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Recording()))
    provider.get_tracer("test").start_span("span").end()
    assert provider.force_flush()
    provider.shutdown()
    with suppressed_instrumentation():
        seen.append(is_instrumentation_enabled())
        seen.append(is_http_instrumentation_enabled())
    assert seen == [False, False, False]
    assert is_instrumentation_enabled() and is_http_instrumentation_enabled()


class StartedSpans(SpanProcessor):
    """Records the name of every span started on the provider."""

    def __init__(self):
        self.names: list[str] = []

    def on_start(self, span, parent_context=None):
        self.names.append(span.name)


def test_no_span_for_our_own_http_export_with_requests_instrumented(clean_environment, http_receiver, monkeypatch):
    tracing = configure(set_global=False, protocol="http/protobuf", endpoint=http_receiver.endpoint)
    try:
        started = StartedSpans()
        tracing.tracer_provider.add_span_processor(started)
        tracer = tracing.get_tracer("requests-instrumentation-stand-in")
        original_send = requests.Session.send
        sends = []

        # What opentelemetry-instrumentation-requests does: wrap Session.send and
        # start a client span unless instrumentation is suppressed.
        def instrumented_send(session, request, **keywords):
            sends.append(request.url)
            if not instrumentation_enabled():
                return original_send(session, request, **keywords)
            with tracer.start_as_current_span(f"HTTP {request.method}"):
                return original_send(session, request, **keywords)

        monkeypatch.setattr(requests.Session, "send", instrumented_send)

        with tracing.get_tracer("app").start_as_current_span("chat"):
            pass
        assert tracing.force_flush()
        assert sends, "the exporter did not go through requests; the test proves nothing"
        assert [span.name for span in http_receiver.spans()] == ["chat"]
        assert started.names == ["chat"]

        # Control: the stand-in does create spans for the application's own requests.
        requests.get(f"{http_receiver.endpoint}/elsewhere", timeout=5)
        assert started.names == ["chat", "HTTP GET"]
    finally:
        tracing.shutdown()
