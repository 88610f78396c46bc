"""Never trace our own export path.

An application with requests/urllib3/httpx/grpc auto-instrumentation would
otherwise create a client span for every OTLP request we send, which is
exported in the next batch, which creates another span: a feedback loop that
also fills the collector with spans about itself.

The SDK's BatchSpanProcessor already sets OpenTelemetry's suppression key
around ``export``; this wrapper sets it for every call into the exporter
(shutdown and force_flush too, and under any processor), with the same keys
opentelemetry-instrumentation's ``suppress_instrumentation()`` and
``suppress_http_instrumentation()`` set.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

# OpenTelemetry's own keys, the objects the SDK's span processors set and
# opentelemetry-instrumentation's is_instrumentation_enabled() /
# is_http_instrumentation_enabled() check. opentelemetry-api keeps them in
# opentelemetry.context without a public name (its FIXME waits for the
# specification); the public helpers live in opentelemetry-instrumentation,
# which would bring wrapt into every application, so we set the same keys.
# A key made here with context.create_key would never equal them.
from opentelemetry.context import _SUPPRESS_HTTP_INSTRUMENTATION_KEY as SUPPRESS_HTTP_INSTRUMENTATION_KEY
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY as SUPPRESS_INSTRUMENTATION_KEY

logger = logging.getLogger(__name__)

# opentelemetry-instrumentation sets and checks this plain string too, for
# instrumentations written before the key objects existed.
SUPPRESS_INSTRUMENTATION_PLAIN_KEY = "suppress_instrumentation"


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
