"""One bad span (or log record) never takes its neighbours, over real gRPC and OTLP/HTTP (issue 14).

99 good items and one the parser refuses on its own: the 99 are stored, the
bad one is answered through OTLP partial success with a reason, never a
400/500 for the whole export; and what a client sends wrong is logged at a
bounded rate.
"""

from __future__ import annotations

import logging

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from .. import bad_items
from ..bad_items import BAD_POSITION, GOOD, SERVICE
from ..collector_harness import count_rows, running_collector

LOGS_EXPORT_PATH = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
TRACES_EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def collector(store, tmp_path):
    with running_collector(store, tmp_path) as running:
        yield running


def grpc_call(collector, path, response_type, payload):
    target = collector.endpoints()["otlp_grpc"].removeprefix("http://")
    with grpc.insecure_channel(target, options=[("grpc.max_send_message_length", -1)]) as channel:
        call = channel.unary_unary(path, request_serializer=None, response_deserializer=response_type.FromString)
        return call(payload, timeout=60)


def http_post(collector, path, payload, media_type):
    return httpx.post(collector.endpoints()["otlp_http"] + path, content=payload,
                      headers={"Content-Type": media_type}, timeout=60)


def stored_spans(store) -> set[str]:
    rows = store.query(f"SELECT SpanName FROM {store.database}.otel_traces WHERE ServiceName = {{s:String}}",
                       {"s": SERVICE})
    return {row["SpanName"] for row in rows}


def expected_names(prefix: str) -> set[str]:
    return {f"{prefix} {number}" for number in range(GOOD + 1) if number != BAD_POSITION}


@pytest.mark.parametrize("transport", ["grpc", "http"])
@pytest.mark.parametrize("kind", ["invalid_utf8", "nested_120", "nested_1000"])
def test_protobuf_spans(store, collector, transport, kind):
    payload = bad_items.traces_protobuf(kind)
    if transport == "grpc":
        response = grpc_call(collector, TRACES_EXPORT_PATH, ExportTraceServiceResponse, payload)
    else:
        answer = http_post(collector, "/v1/traces", payload, "application/x-protobuf")
        assert answer.status_code == 200
        response = ExportTraceServiceResponse.FromString(answer.content)
    assert response.partial_success.rejected_spans == 1
    assert f"span {BAD_POSITION}: " in response.partial_success.error_message
    assert stored_spans(store) == expected_names("chat")


@pytest.mark.parametrize("kind", ["lone_surrogate", "nested_120"])
def test_json_spans(store, collector, kind):
    answer = http_post(collector, "/v1/traces", bad_items.traces_json(kind), "application/json")
    assert answer.status_code == 200
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and f"span {BAD_POSITION}: " in partial["errorMessage"]
    assert stored_spans(store) == expected_names("chat")


def test_json_too_deep_to_read_is_a_400_not_a_500(store, collector):
    answer = http_post(collector, "/v1/traces", bad_items.deep_json_traces(1000), "application/json")
    assert answer.status_code == 400 and "nested too deeply" in answer.json()["message"]
    assert stored_spans(store) == set()


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_log_records(store, collector, transport):
    if transport == "grpc":
        response = grpc_call(collector, LOGS_EXPORT_PATH, ExportLogsServiceResponse,
                             bad_items.logs_protobuf("invalid_utf8"))
        rejected, message = response.partial_success.rejected_log_records, response.partial_success.error_message
    else:
        answer = http_post(collector, "/v1/logs", bad_items.logs_json("lone_surrogate"), "application/json")
        assert answer.status_code == 200
        rejected = int(answer.json()["partialSuccess"]["rejectedLogRecords"])
        message = answer.json()["partialSuccess"]["errorMessage"]
    assert rejected == 1 and f"log record {BAD_POSITION}: " in message
    assert count_rows(store, "otel_logs", "ServiceName = {s:String}", {"s": SERVICE}) == GOOD


def test_client_errors_are_logged_at_a_bounded_rate(store, collector, caplog):
    caplog.set_level(logging.WARNING, logger="promptprism")
    payloads = [bad_items.traces_protobuf("invalid_utf8", now=1_800_000_000_000_000_000 + number)
                for number in range(5)]
    for payload in payloads:
        response = grpc_call(collector, TRACES_EXPORT_PATH, ExportTraceServiceResponse, payload)
        assert response.partial_success.rejected_spans == 1
    for _ in range(5):
        assert http_post(collector, "/v1/traces", b"\xff\xff\xff", "application/x-protobuf").status_code == 400
    warnings = [record for record in caplog.records if record.levelno >= logging.WARNING]
    # One line about rejected spans and one about malformed payloads, each within the rate limit's interval.
    assert 1 <= len(warnings) <= 2, [record.getMessage() for record in warnings]
    assert all("\xff" not in record.getMessage() for record in warnings)
