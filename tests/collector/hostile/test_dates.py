"""Spans dated outside the retention window are stored as sent but counted apart in /metrics (issue 14)."""

from __future__ import annotations

import time

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from promptprism.collector.read import lookups
from support import metric_value

from ..collector_harness import PARTS, grpc_export, prompt_export, running_collector

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


DAY_NS = 86_400 * 10**9
DATE_DAYS = 1 << 16  # ClickHouse's Date: days since 1970 in a UInt16, to 2149-06-06


@pytest.mark.clickhouse  # 24.8 too: its embedded store always inserted through the file
def test_a_span_dated_past_clickhouse_dates_has_its_text_where_the_read_side_looks(store, tmp_path):
    """ClickHouse's toDate wraps a time past 2149-06-06 around its range; the text of such a span is
    filed under that same day, so the read side (which looks text up by toDate(started_at)) finds it.
    65,536 days from now wraps to today. The Arrow stream input the embedded store inserts through
    refuses an out-of-range day (error 321); Python() stored it as 2149-06-06, where no read looks."""
    payload = _dated((time.time_ns() // DAY_NS + DATE_DAYS) * DAY_NS + 3_600 * 10**9)
    request_id = ExportTraceServiceRequest.FromString(payload).resource_spans[0].scope_spans[0].spans[0].span_id.hex()
    with running_collector(store, tmp_path) as collector:
        _, call = grpc_export(collector, payload)
        assert call.code() == grpc.StatusCode.OK
    shown = lookups.request(store, request_id)
    assert [block["content"] for block in shown["prompt"]["blocks"]] == [text for *_, text in PARTS]
    (row,) = store.query(f"SELECT toString(toDate(started_at)) AS day FROM {store.database}.requests "
                         f"WHERE request_id = {{id:String}}", {"id": request_id})
    days = store.query(f"SELECT DISTINCT toString(day) AS day FROM {store.database}.contents")
    assert days == [row]


@pytest.mark.clickhouse  # 24.8 too: its embedded store always inserted through the file
def test_a_span_dated_at_the_end_of_int64_nanoseconds_is_taken(store, tmp_path):
    """The latest start OTLP's SDKs can give (2262-04-11) is past every ClickHouse Date: still an OK,
    never a refusal of the whole batch (the fuzz test found it as a 500)."""
    with running_collector(store, tmp_path) as collector:
        _, call = grpc_export(collector, _dated(2**63 - 10**9))
        assert call.code() == grpc.StatusCode.OK
        stored = store.query(f"SELECT count() AS n FROM {store.database}.contents")
    assert stored == [{"n": len(PARTS)}]
