"""promptprism exporter: OTel SDK + OTLP exporter wiring from the standard OTEL_* variables."""
