"""promptprism exporter: OTel SDK + OTLP exporter wiring from the standard OTEL_* variables.

    from promptprism.exporter import configure

    tracing = configure()          # OTEL_EXPORTER_OTLP_* → provider, batch processor, OTLP exporter
    ...
    tracing.shutdown()             # flushes what is queued

Imports only OpenTelemetry packages and the standard library; the OTLP
exporters themselves come with ``promptprism[exporter]`` and are imported
when :func:`configure` builds one.
"""

from ._batching import (
    DEFAULT_MAX_REQUEST_BYTES,
    ExportStatistics,
    SizeBoundedSpanExporter,
    estimate_span_bytes,
    split_by_size,
)
from ._configure import (
    DEFAULT_MAX_EXPORT_BATCH_SIZE,
    DEFAULT_MAX_QUEUE_SIZE,
    DEFAULT_SCHEDULE_DELAY_MILLIS,
    PROMPTPRISM_EXPORT_MAX_REQUEST_BYTES,
    ConfigurationError,
    ConfiguredTracing,
    ExportSettings,
    build_resource,
    build_span_exporter,
    configure,
    resolve_settings,
)
from ._suppression import SuppressInstrumentationSpanExporter, suppressed_instrumentation

__all__ = [
    "DEFAULT_MAX_EXPORT_BATCH_SIZE",
    "DEFAULT_MAX_QUEUE_SIZE",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_SCHEDULE_DELAY_MILLIS",
    "PROMPTPRISM_EXPORT_MAX_REQUEST_BYTES",
    "ConfigurationError",
    "ConfiguredTracing",
    "ExportSettings",
    "ExportStatistics",
    "SizeBoundedSpanExporter",
    "SuppressInstrumentationSpanExporter",
    "build_resource",
    "build_span_exporter",
    "configure",
    "estimate_span_bytes",
    "resolve_settings",
    "split_by_size",
    "suppressed_instrumentation",
]
