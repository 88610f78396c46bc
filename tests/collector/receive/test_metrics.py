"""OTLP metrics: ``MetricsService/Export`` on gRPC and ``POST /v1/metrics`` on HTTP, from the real
OpenTelemetry SDK exporters, stored in the OpenTelemetry Collector ClickHouse exporter's
``otel_metrics_*`` tables, with the same auth, status codes and idempotence as traces."""

from __future__ import annotations

import urllib.error
import urllib.request

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource

from ..collector_harness import count_rows, running_collector

METRICS_GRPC_PATH = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
# The OpenTelemetry Collector ClickHouse exporter's columns, in its order (sqltemplates/metrics_*_table.sql).
COMMON = ["ResourceAttributes", "ResourceSchemaUrl", "ScopeName", "ScopeVersion", "ScopeAttributes",
          "ScopeDroppedAttrCount", "ScopeSchemaUrl", "ServiceName", "MetricName", "MetricDescription", "MetricUnit",
          "Attributes", "StartTimeUnix", "TimeUnix"]
EXEMPLARS = ["Exemplars.FilteredAttributes", "Exemplars.TimeUnix", "Exemplars.Value", "Exemplars.SpanId",
             "Exemplars.TraceId"]
EXPORTER_COLUMNS = {
    "otel_metrics_sum": COMMON + ["Value", "Flags", *EXEMPLARS, "AggregationTemporality", "IsMonotonic"],
    "otel_metrics_gauge": COMMON + ["Value", "Flags", *EXEMPLARS],
    "otel_metrics_histogram": COMMON + ["Count", "Sum", "BucketCounts", "ExplicitBounds", *EXEMPLARS, "Flags",
                                        "Min", "Max", "AggregationTemporality"],
    "otel_metrics_exponential_histogram": COMMON + [
        "Count", "Sum", "Scale", "ZeroCount", "PositiveOffset", "PositiveBucketCounts", "NegativeOffset",
        "NegativeBucketCounts", *EXEMPLARS, "Flags", "Min", "Max", "AggregationTemporality"],
    "otel_metrics_summary": COMMON + ["Count", "Sum", "ValueAtQuantiles.Quantile", "ValueAtQuantiles.Value",
                                      "Flags"],
}


def test_the_tables_have_the_exporters_columns_partitions_and_ttl(store):
    for table, columns in EXPORTER_COLUMNS.items():
        described = store.query("DESCRIBE TABLE {db:Identifier}.{table:Identifier}",
                                {"db": store.database, "table": table})
        assert [row["name"] for row in described] == columns, table
        create = store.query("SHOW CREATE TABLE {db:Identifier}.{table:Identifier}",
                             {"db": store.database, "table": table})[0]["statement"]
        assert "PARTITION BY toDate(TimeUnix)" in create and "TTL toDateTime(TimeUnix) + toIntervalDay(" in create


def record_metrics(exporter, service: str) -> MetricExportResult:
    """A counter, an up-down counter, a gauge, a histogram and an exponential histogram, exported once."""
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
    provider = MeterProvider(resource=Resource.create({"service.name": service}), metric_readers=[reader],
                             views=[View(instrument_name="latency.exponential",
                                         aggregation=ExponentialBucketHistogramAggregation())])
    meter = provider.get_meter("metrics-test", "1.0")
    meter.create_counter("gen_ai.client.token.count", unit="{token}").add(7, {"gen_ai.token.type": "input"})
    meter.create_up_down_counter("queue.depth").add(-2)
    meter.create_gauge("temperature").set(21.5)
    histogram = meter.create_histogram("gen_ai.client.operation.duration", unit="s")
    for value in (0.2, 0.4, 3.0):
        histogram.record(value, {"gen_ai.operation.name": "chat"})
    meter.create_histogram("latency.exponential").record(12.0)
    provider.shutdown()  # collects and exports once
    return reader


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_sdk_metrics_over_grpc_and_http_land_in_the_metric_tables(store, tmp_path, protocol):
    service = f"metrics-{protocol}"
    with running_collector(store, tmp_path) as running:
        endpoints = running.endpoints()
        if protocol == "grpc":
            exporter = GrpcMetricExporter(endpoint=endpoints["otlp_grpc"], insecure=True, timeout=30)
        else:
            exporter = HttpMetricExporter(endpoint=endpoints["otlp_http"] + "/v1/metrics", timeout=30)
        results = []
        original = exporter.export

        def export(metrics_data, *args, **kwargs):
            results.append(original(metrics_data, *args, **kwargs))
            return results[-1]

        exporter.export = export
        record_metrics(exporter, service)
    assert results and all(result is MetricExportResult.SUCCESS for result in results)
    where, params = "ServiceName = {service:String}", {"service": service}
    sums = store.query(f"SELECT MetricName, Value, IsMonotonic, AggregationTemporality, Attributes, MetricUnit "
                       f"FROM {store.database}.otel_metrics_sum WHERE {where} ORDER BY MetricName", params)
    assert [(row["MetricName"], row["Value"], row["IsMonotonic"]) for row in sums] == [
        ("gen_ai.client.token.count", 7.0, True), ("queue.depth", -2.0, False)]
    assert sums[0]["Attributes"] == {"gen_ai.token.type": "input"} and sums[0]["MetricUnit"] == "{token}"
    assert sums[0]["AggregationTemporality"] == 2  # cumulative, OTLP's enum as the exporter stores it
    gauges = store.query(f"SELECT Value FROM {store.database}.otel_metrics_gauge WHERE {where}", params)
    assert [row["Value"] for row in gauges] == [21.5]
    histogram = store.query(
        f"SELECT Count, Sum, Min, Max, BucketCounts, ExplicitBounds, ScopeName, ScopeVersion "
        f"FROM {store.database}.otel_metrics_histogram WHERE {where}", params)[0]
    assert (histogram["Count"], round(histogram["Sum"], 6), histogram["Min"], histogram["Max"]) == (3, 3.6, 0.2, 3.0)
    assert sum(histogram["BucketCounts"]) == 3 and len(histogram["BucketCounts"]) == len(histogram["ExplicitBounds"]) + 1
    assert (histogram["ScopeName"], histogram["ScopeVersion"]) == ("metrics-test", "1.0")
    exponential = store.query(f"SELECT Count, Sum, PositiveBucketCounts FROM {store.database}."
                              f"otel_metrics_exponential_histogram WHERE {where}", params)[0]
    assert (exponential["Count"], exponential["Sum"], sum(exponential["PositiveBucketCounts"])) == (1, 12.0, 1)


def summary_export(service: str) -> bytes:
    """A summary (no SDK emits one any more; the OTLP model still has it), built as protobuf."""
    request = ExportMetricsServiceRequest()
    resource = request.resource_metrics.add()
    resource.resource.attributes.add(key="service.name").value.string_value = service
    metric = resource.scope_metrics.add().metrics.add(name="rpc.latency", unit="ms")
    point = metric.summary.data_points.add(count=4, sum=10.0, time_unix_nano=1_796_000_000_000_000_000)
    point.quantile_values.add(quantile=0.5, value=2.0)
    point.quantile_values.add(quantile=0.99, value=4.0)
    return request.SerializeToString()


def test_summaries_auth_malformed_payloads_and_resent_batches(store, tmp_path):
    with running_collector(store, tmp_path, ingest_token="s3cret") as running:
        endpoints = running.endpoints()
        url = endpoints["otlp_http"] + "/v1/metrics"
        payload = summary_export("summary-service")

        def post(body: bytes, **headers) -> int:
            request = urllib.request.Request(url, data=body, method="POST", headers={
                "Content-Type": "application/x-protobuf", **headers})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status
            except urllib.error.HTTPError as error:
                return error.code

        assert post(payload) == 401
        assert post(b"\x0a\xff\xff", Authorization="Bearer s3cret") == 400
        assert post(payload, Authorization="Bearer s3cret") == 200
        assert post(payload, Authorization="Bearer s3cret") == 200  # re-sent after a timeout: stored once
        target = endpoints["otlp_grpc"].removeprefix("http://")
        with grpc.insecure_channel(target) as channel:
            call = channel.unary_unary(METRICS_GRPC_PATH, request_serializer=None, response_deserializer=None)
            with pytest.raises(grpc.RpcError) as refused:
                call(payload, timeout=30)
            assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
            _, answer = call.with_call(payload, metadata=(("authorization", "Bearer s3cret"),), timeout=30)
            assert answer.code() is grpc.StatusCode.OK
    rows = store.query(f"SELECT Count, Sum, ValueAtQuantiles.Quantile AS quantiles, ValueAtQuantiles.Value AS values "
                       f"FROM {store.database}.otel_metrics_summary", None)
    assert rows == [{"Count": 4, "Sum": 10.0, "quantiles": [0.5, 0.99], "values": [2.0, 4.0]}]
    assert count_rows(store, "otel_metrics_summary") == 1
