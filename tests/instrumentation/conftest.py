"""Fixtures for the instrumentation tests: a real SDK tracer provider and clean process settings."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from promptprism.instrumentation import _capture as capture
from promptprism.instrumentation import _redact as redact
from promptprism.instrumentation import prompt_tracer_provider


@pytest.fixture(autouse=True)
def clean_settings(monkeypatch):
    """Content capture and redaction are process-wide: every test starts from the defaults."""
    monkeypatch.delenv(capture.ENV_CAPTURE_MESSAGE_CONTENT, raising=False)
    capture.configure_content_capture(None)
    capture.reread_environment()
    redact.set_redactor(None)
    yield
    capture.configure_content_capture(None)
    capture.reread_environment()
    redact.set_redactor(None)


@pytest.fixture
def exporter():
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(exporter):
    provider = prompt_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()
