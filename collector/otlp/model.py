"""Decoded OTLP: spans and log records as plain data, before any promptprism meaning.

Pure data, no I/O. ``traces`` and ``logs`` build these from OTLP payloads;
the write path turns them into request records and table rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# otel_traces spellings of the OTLP enums (OpenTelemetry Collector ClickHouse exporter).
SPAN_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
STATUS_CODES = ("Unset", "Ok", "Error")


@dataclass(slots=True)
class SpanEvent:
    time_ns: int
    name: str
    attributes: dict[str, object]  # typed values as decoded (str, int, float, bool, list, dict)


@dataclass(slots=True)
class SpanLink:
    trace_id: str
    span_id: str
    trace_state: str
    attributes: dict[str, object]


@dataclass(slots=True)
class DecodedSpan:
    """One OTLP span, decoded, with its resource and scope. Every span becomes
    an ``otel_traces`` row; those that are LLM requests also become a
    ``RequestRecord``."""

    trace_id: str  # 32 lowercase hex
    span_id: str  # 16 lowercase hex
    parent_span_id: str
    trace_state: str
    name: str
    kind: str  # otel_traces spelling: "Internal", "Server", "Client", "Producer", "Consumer", "Unspecified"
    start_time_ns: int
    end_time_ns: int
    status_code: str  # "Unset" | "Ok" | "Error"
    status_message: str
    service: str
    resource_attributes: dict[str, object]
    scope_name: str
    scope_version: str
    attributes: dict[str, object]
    events: list[SpanEvent]
    links: list[SpanLink]
    dropped_events_count: int = 0
    dropped_attributes_count: int = 0


@dataclass(slots=True)
class DecodedLogRecord:
    """One OTLP log record, decoded, with its resource and scope. GenAI
    content events become ``genai_events`` rows; every other record an
    ``otel_logs`` row."""

    time_ns: int  # the record's time, or its observed time when the sender left it 0
    observed_time_ns: int
    trace_id: str  # 32 lowercase hex, or "" without trace context
    span_id: str  # 16 lowercase hex, or ""
    flags: int
    severity_number: int
    severity_text: str
    event_name: str  # the OTLP field, else the older `event.name` attribute
    body: object  # typed value as decoded (str, int, float, bool, bytes, list, dict, None)
    attributes: dict[str, object]
    service: str
    resource_attributes: dict[str, object]
    resource_schema_url: str
    scope_name: str
    scope_version: str
    scope_attributes: dict[str, object]
    scope_schema_url: str
    sequence: int = 0  # position in its export: orders records with equal timestamps


@dataclass(slots=True)
class MetricExemplar:
    time_ns: int
    value: float
    span_id: str  # 16 lowercase hex, or ""
    trace_id: str  # 32 lowercase hex, or ""
    filtered_attributes: dict[str, object]


@dataclass(slots=True)
class DecodedMetricPoint:
    """One data point of an OTLP metric, with its metric, resource and scope. ``kind``
    names the ``otel_metrics_*`` table it becomes a row of (``sum``, ``gauge``,
    ``histogram``, ``exponential_histogram``, ``summary``); the fields a kind does
    not have keep their defaults."""

    kind: str
    service: str
    resource_attributes: dict[str, object]
    resource_schema_url: str
    scope_name: str
    scope_version: str
    scope_attributes: dict[str, object]
    scope_dropped_attributes_count: int
    scope_schema_url: str
    name: str
    description: str
    unit: str
    attributes: dict[str, object]
    start_time_ns: int
    time_ns: int
    flags: int = 0
    exemplars: list[MetricExemplar] = field(default_factory=list)
    aggregation_temporality: int = 0  # sum, histograms: OTLP's enum (1 delta, 2 cumulative)
    is_monotonic: bool = False  # sum
    value: float = 0.0  # sum, gauge
    count: int = 0  # histograms, summary
    sum: float = 0.0
    minimum: float = 0.0  # histograms (0 when the sender left it out, as the exporter stores it)
    maximum: float = 0.0
    bucket_counts: list[int] = field(default_factory=list)  # histogram
    explicit_bounds: list[float] = field(default_factory=list)
    scale: int = 0  # exponential histogram
    zero_count: int = 0
    positive_offset: int = 0
    positive_bucket_counts: list[int] = field(default_factory=list)
    negative_offset: int = 0
    negative_bucket_counts: list[int] = field(default_factory=list)
    quantiles: list[tuple[float, float]] = field(default_factory=list)  # summary: (quantile, value)
