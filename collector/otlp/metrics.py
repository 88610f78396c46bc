"""OTLP metric payloads (protobuf or OTLP/JSON) → ``DecodedMetricPoint`` objects.

Pure conversion, no I/O, as ``traces`` and ``logs``. Every data point of a
sum, gauge, histogram, exponential histogram or summary becomes one point;
a metric with no data (OTLP allows it) adds nothing. A payload that is not
OTLP raises ``MalformedPayload``. A data point is never rejected: metrics
have no ids to validate, and values out of range are clamped by the layout
(``write.metric_rows``).
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from ._parse import (
    MAX_TIME_NS,
    SERVICE_NAME,
    MalformedPayload,
    decode_attributes,
    hex_ids_to_base64,
    json_items,
    load_json_object,
    parse_json_document,
    parse_protobuf_request,
)
from .model import DecodedMetricPoint, MetricExemplar

SUM, GAUGE, HISTOGRAM, EXPONENTIAL_HISTOGRAM, SUMMARY = (
    "sum", "gauge", "histogram", "exponential_histogram", "summary")
KINDS = (SUM, GAUGE, HISTOGRAM, EXPONENTIAL_HISTOGRAM, SUMMARY)
_EXEMPLAR_ID_KEYS = (("traceId", "trace_id"), ("spanId", "span_id"))


@dataclass(slots=True)
class MetricDecodeResult:
    points: list[DecodedMetricPoint]
    rejected_data_points: int = 0  # always 0 today: see the module docstring
    error_message: str = ""


def parse_protobuf(payload: bytes) -> ExportMetricsServiceRequest:
    return parse_protobuf_request(payload, ExportMetricsServiceRequest)


def parse_json(payload: bytes) -> ExportMetricsServiceRequest:
    """OTLP/JSON, with the exemplars' trace and span ids in hex (as in traces)."""
    document = load_json_object(payload)
    for resource_metrics in json_items(document, "resourceMetrics", "resource_metrics"):
        for scope_metrics in json_items(resource_metrics, "scopeMetrics", "scope_metrics"):
            for metric in json_items(scope_metrics, "metrics", "metrics"):
                if not isinstance(metric, dict):
                    continue
                for kind in ("sum", "gauge", "histogram", "exponentialHistogram", "exponential_histogram",
                             "summary"):
                    data = metric.get(kind)
                    for point in json_items(data, "dataPoints", "data_points"):
                        for exemplar in json_items(point, "exemplars", "exemplars"):
                            hex_ids_to_base64(exemplar, _EXEMPLAR_ID_KEYS, "")
    return parse_json_document(document, ExportMetricsServiceRequest)


def _time(value: int) -> int:
    return min(value, MAX_TIME_NS)


def _exemplars(point) -> list[MetricExemplar]:
    return [MetricExemplar(_time(exemplar.time_unix_nano),
                           exemplar.as_double if exemplar.WhichOneof("value") == "as_double" else float(exemplar.as_int),
                           exemplar.span_id.hex(), exemplar.trace_id.hex(),
                           decode_attributes(exemplar.filtered_attributes)) for exemplar in point.exemplars]


def _number(point) -> float:
    return point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)


def decode_request(request: ExportMetricsServiceRequest) -> MetricDecodeResult:
    points: list[DecodedMetricPoint] = []
    for resource_metrics in request.resource_metrics:
        resource_attributes = decode_attributes(resource_metrics.resource.attributes)
        service = resource_attributes.get(SERVICE_NAME)
        service = service if isinstance(service, str) else ""
        for scope_metrics in resource_metrics.scope_metrics:
            scope = scope_metrics.scope
            shared = dict(service=service, resource_attributes=resource_attributes,
                          resource_schema_url=resource_metrics.schema_url, scope_name=scope.name,
                          scope_version=scope.version, scope_attributes=decode_attributes(scope.attributes),
                          scope_dropped_attributes_count=scope.dropped_attributes_count,
                          scope_schema_url=scope_metrics.schema_url)
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind is None:
                    continue
                data = getattr(metric, kind)
                for point in data.data_points:
                    decoded = DecodedMetricPoint(
                        kind=kind, **shared, name=metric.name, description=metric.description, unit=metric.unit,
                        attributes=decode_attributes(point.attributes), start_time_ns=_time(point.start_time_unix_nano),
                        time_ns=_time(point.time_unix_nano), flags=point.flags)
                    if kind != SUMMARY:
                        decoded.exemplars = _exemplars(point)
                    if kind in (SUM, GAUGE):
                        decoded.value = _number(point)
                    if kind == SUM:
                        decoded.is_monotonic = data.is_monotonic
                    if kind in (SUM, HISTOGRAM, EXPONENTIAL_HISTOGRAM):
                        decoded.aggregation_temporality = data.aggregation_temporality
                    if kind in (HISTOGRAM, EXPONENTIAL_HISTOGRAM, SUMMARY):
                        decoded.count, decoded.sum = point.count, point.sum
                    if kind in (HISTOGRAM, EXPONENTIAL_HISTOGRAM):
                        decoded.minimum = point.min if point.HasField("min") else 0.0
                        decoded.maximum = point.max if point.HasField("max") else 0.0
                    if kind == HISTOGRAM:
                        decoded.bucket_counts = list(point.bucket_counts)
                        decoded.explicit_bounds = list(point.explicit_bounds)
                    elif kind == EXPONENTIAL_HISTOGRAM:
                        decoded.scale, decoded.zero_count = point.scale, point.zero_count
                        decoded.positive_offset = point.positive.offset
                        decoded.positive_bucket_counts = list(point.positive.bucket_counts)
                        decoded.negative_offset = point.negative.offset
                        decoded.negative_bucket_counts = list(point.negative.bucket_counts)
                    elif kind == SUMMARY:
                        decoded.quantiles = [(quantile.quantile, quantile.value) for quantile in point.quantile_values]
                    points.append(decoded)
    return MetricDecodeResult(points)


def decode_protobuf(payload: bytes) -> MetricDecodeResult:
    return decode_request(parse_protobuf(payload))


def decode_json(payload: bytes) -> MetricDecodeResult:
    return decode_request(parse_json(payload))


__all__ = ["KINDS", "MalformedPayload", "MetricDecodeResult", "decode_json", "decode_protobuf", "decode_request"]
