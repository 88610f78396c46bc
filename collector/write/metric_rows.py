"""Decoded metric points → the ``otel_metrics_*`` tables' columns. Pure, no I/O.

One pyarrow table per OTLP metric type, laid out as the OpenTelemetry
Collector ClickHouse exporter lays out its rows (migration 011): attribute
maps stringified the way it does (``otlp.attribute_text``), ``Nested``
exemplars and quantiles as parallel arrays, a missing histogram min/max as 0.
"""

from __future__ import annotations

from typing import Iterable

import pyarrow as pa

from ..otlp.attribute_text import otel_attribute_string
from ..otlp.metrics import EXPONENTIAL_HISTOGRAM, GAUGE, HISTOGRAM, KINDS, SUM, SUMMARY
from ..otlp.model import DecodedMetricPoint
from ..store.declared import integer_array
from ._columns import STRING_MAP

TIMESTAMP = pa.timestamp("ns", tz="UTC")
# The table each metric type is stored in.
METRIC_TABLES = {kind: f"otel_metrics_{kind}" for kind in KINDS}


def _attributes(attributes: dict) -> list[tuple[str, str]]:
    return [(str(key), otel_attribute_string(value)) for key, value in attributes.items()]


def _common(points: list[DecodedMetricPoint]) -> dict[str, pa.Array]:
    return {
        "ResourceAttributes": pa.array([_attributes(point.resource_attributes) for point in points], STRING_MAP),
        "ResourceSchemaUrl": pa.array([point.resource_schema_url for point in points], pa.string()),
        "ScopeName": pa.array([point.scope_name for point in points], pa.string()),
        "ScopeVersion": pa.array([point.scope_version for point in points], pa.string()),
        "ScopeAttributes": pa.array([_attributes(point.scope_attributes) for point in points], STRING_MAP),
        "ScopeDroppedAttrCount": integer_array([point.scope_dropped_attributes_count for point in points],
                                               pa.uint32()),
        "ScopeSchemaUrl": pa.array([point.scope_schema_url for point in points], pa.string()),
        "ServiceName": pa.array([point.service for point in points], pa.string()),
        "MetricName": pa.array([point.name for point in points], pa.string()),
        "MetricDescription": pa.array([point.description for point in points], pa.string()),
        "MetricUnit": pa.array([point.unit for point in points], pa.string()),
        "Attributes": pa.array([_attributes(point.attributes) for point in points], STRING_MAP),
        "StartTimeUnix": pa.array([point.start_time_ns for point in points], TIMESTAMP),
        "TimeUnix": pa.array([point.time_ns for point in points], TIMESTAMP),
    }


def _exemplars(points: list[DecodedMetricPoint]) -> dict[str, pa.Array]:
    return {
        "Exemplars.FilteredAttributes": pa.array(
            [[_attributes(exemplar.filtered_attributes) for exemplar in point.exemplars] for point in points],
            pa.list_(STRING_MAP)),
        "Exemplars.TimeUnix": pa.array([[exemplar.time_ns for exemplar in point.exemplars] for point in points],
                                       pa.list_(TIMESTAMP)),
        "Exemplars.Value": pa.array([[exemplar.value for exemplar in point.exemplars] for point in points],
                                    pa.list_(pa.float64())),
        "Exemplars.SpanId": pa.array([[exemplar.span_id for exemplar in point.exemplars] for point in points],
                                     pa.list_(pa.string())),
        "Exemplars.TraceId": pa.array([[exemplar.trace_id for exemplar in point.exemplars] for point in points],
                                      pa.list_(pa.string())),
    }


def _flags(points: list[DecodedMetricPoint]) -> pa.Array:
    return integer_array([point.flags for point in points], pa.uint32())


def _temporality(points: list[DecodedMetricPoint]) -> pa.Array:
    return integer_array([point.aggregation_temporality for point in points], pa.int32())


def _counts(values: Iterable[list[int]]) -> pa.Array:
    return pa.array([[max(0, count) for count in counts] for counts in values], pa.list_(pa.uint64()))


def metric_table(kind: str, points: list[DecodedMetricPoint]) -> pa.Table:
    columns = _common(points)
    if kind in (SUM, GAUGE):
        columns["Value"] = pa.array([point.value for point in points], pa.float64())
        columns["Flags"] = _flags(points)
        columns.update(_exemplars(points))
        if kind == SUM:
            columns["AggregationTemporality"] = _temporality(points)
            columns["IsMonotonic"] = pa.array([point.is_monotonic for point in points], pa.bool_())
        return pa.table(columns)
    columns["Count"] = integer_array([point.count for point in points], pa.uint64())
    columns["Sum"] = pa.array([point.sum for point in points], pa.float64())
    if kind == SUMMARY:
        columns["ValueAtQuantiles.Quantile"] = pa.array(
            [[quantile for quantile, _ in point.quantiles] for point in points], pa.list_(pa.float64()))
        columns["ValueAtQuantiles.Value"] = pa.array(
            [[value for _, value in point.quantiles] for point in points], pa.list_(pa.float64()))
        columns["Flags"] = _flags(points)
        return pa.table(columns)
    if kind == HISTOGRAM:
        columns["BucketCounts"] = _counts(point.bucket_counts for point in points)
        columns["ExplicitBounds"] = pa.array([point.explicit_bounds for point in points], pa.list_(pa.float64()))
    elif kind == EXPONENTIAL_HISTOGRAM:
        columns["Scale"] = integer_array([point.scale for point in points], pa.int32())
        columns["ZeroCount"] = integer_array([point.zero_count for point in points], pa.uint64())
        columns["PositiveOffset"] = integer_array([point.positive_offset for point in points], pa.int32())
        columns["PositiveBucketCounts"] = _counts(point.positive_bucket_counts for point in points)
        columns["NegativeOffset"] = integer_array([point.negative_offset for point in points], pa.int32())
        columns["NegativeBucketCounts"] = _counts(point.negative_bucket_counts for point in points)
    columns.update(_exemplars(points))
    columns["Flags"] = _flags(points)
    columns["Min"] = pa.array([point.minimum for point in points], pa.float64())
    columns["Max"] = pa.array([point.maximum for point in points], pa.float64())
    columns["AggregationTemporality"] = _temporality(points)
    return pa.table(columns)


def metric_tables(points: Iterable[DecodedMetricPoint]) -> dict[str, pa.Table]:
    """The non-empty ``otel_metrics_*`` tables of ``points``, by table name."""
    by_kind: dict[str, list[DecodedMetricPoint]] = {}
    for point in points:
        by_kind.setdefault(point.kind, []).append(point)
    return {METRIC_TABLES[kind]: metric_table(kind, by_kind[kind]) for kind in KINDS if kind in by_kind}
