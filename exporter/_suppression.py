"""Never trace our own export path.

An application with requests/urllib3/httpx/grpc auto-instrumentation would
otherwise create a client span for every OTLP request we send, which is
exported in the next batch, which creates another span: a feedback loop that
also fills the collector with spans about itself.

The SDK's BatchSpanProcessor already sets the generic suppression key around
``export``; this wrapper sets it for every call into the exporter (shutdown and
force_flush too, and under any processor), and also sets the HTTP-only key and
the plain-string key that older instrumentations check.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

logger = logging.getLogger(__name__)

# The keys the SDK and opentelemetry-instrumentation's utils check. They live
# in a private spot of opentelemetry.context (its own FIXME says so); importing
# them is what the SDK's own processors do, and the fallback keeps a future
# move from breaking the application.
try:
    from opentelemetry.context import _SUPPRESS_HTTP_INSTRUMENTATION_KEY, _SUPPRESS_INSTRUMENTATION_KEY
except ImportError:  # a future SDK moved them: fall back to creating matching keys
    _SUPPRESS_INSTRUMENTATION_KEY = context.create_key("suppress_instrumentation")
    _SUPPRESS_HTTP_INSTRUMENTATION_KEY = context.create_key("suppress_http_instrumentation")

# Instrumentations written before the key objects existed look up this string.
SUPPRESS_INSTRUMENTATION_PLAIN_KEY = "suppress_instrumentation"

SUPPRESS_INSTRUMENTATION_KEY = _SUPPRESS_INSTRUMENTATION_KEY
SUPPRESS_HTTP_INSTRUMENTATION_KEY = _SUPPRESS_HTTP_INSTRUMENTATION_KEY


@contextmanager
def suppressed_instrumentation() -> Iterator[None]:
    """Within this block, instrumentations that honour suppression create no spans."""
    current = context.get_current()
    for key in (SUPPRESS_INSTRUMENTATION_KEY, SUPPRESS_HTTP_INSTRUMENTATION_KEY, SUPPRESS_INSTRUMENTATION_PLAIN_KEY):
        current = context.set_value(key, True, current)
    token = context.attach(current)
    try:
        yield
    finally:
        context.detach(token)


class SuppressInstrumentationSpanExporter(SpanExporter):
    """Runs every call into the wrapped exporter with instrumentation suppressed."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with suppressed_instrumentation():
            try:
                return self.inner.export(spans)
            except Exception:  # exporters return a result; the app must never see this
                logger.exception("span exporter raised while exporting %d spans", len(spans))
                return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        with suppressed_instrumentation():
            try:
                self.inner.shutdown()
            except Exception:
                logger.exception("span exporter raised during shutdown")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with suppressed_instrumentation():
            try:
                return self.inner.force_flush(timeout_millis)
            except Exception:
                logger.exception("span exporter raised during force_flush")
                return False
