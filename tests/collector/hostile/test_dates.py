"""Spans dated outside the retention window are stored as sent but counted apart in /metrics (issue 14)."""

from __future__ import annotations

import time

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from support import metric_value

from ..collector_harness import grpc_export, prompt_export, running_collector

YEAR_2100_NS = 4_102_444_800 * 10**9


def _dated(start_ns: int) -> bytes:
    request = ExportTraceServiceRequest.FromString(prompt_export())
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.start_time_unix_nano, span.end_time_unix_nano = start_ns, start_ns + 1_000_000
    return request.SerializeToString()


def test_spans_outside_retention_are_counted_apart(store, tmp_path):
    with running_collector(store, tmp_path, retention_days=30) as collector:
        for start in (0, time.time_ns() - 31 * 86_400 * 10**9, YEAR_2100_NS, time.time_ns()):
            grpc_export(collector, _dated(start))
        text = httpx.get(collector.endpoints()["ui"] + "/metrics").text
    name = "promptprism_collector_spans_outside_retention_total"
    assert metric_value(text, name, when="past") == 2
    assert metric_value(text, name, when="future") == 1
    assert metric_value(text, "promptprism_collector_spans_received_total") == 4
