"""receive.answers: the one status table and the one partial-success builder, for both transports and signals."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from promptprism.collector.metrics import Metrics
from promptprism.collector.receive import answers
from promptprism.collector.write import ingest
from promptprism.collector.write.ingest import ExportOutcome

# (kind, gRPC code, HTTP status): README "Receiving"; ok and partial answer with the response itself.
TABLE = [
    (ingest.OK, grpc.StatusCode.OK, 200),
    (ingest.PARTIAL, grpc.StatusCode.OK, 200),
    (ingest.MALFORMED, grpc.StatusCode.INVALID_ARGUMENT, 400),
    (ingest.TOO_LARGE, grpc.StatusCode.RESOURCE_EXHAUSTED, 413),
    (ingest.RETRY, grpc.StatusCode.UNAVAILABLE, 503),
    (ingest.REFUSED, grpc.StatusCode.INTERNAL, 500),
    (ingest.UNAUTHENTICATED, grpc.StatusCode.UNAUTHENTICATED, 401),
    (ingest.UNSUPPORTED, grpc.StatusCode.INVALID_ARGUMENT, 415),
]


def test_every_outcome_has_one_row():
    assert {kind for kind, _, _ in TABLE} == set(answers.ANSWERS)
    for kind, code, status in TABLE:
        assert (answers.ANSWERS[kind].grpc_code, answers.ANSWERS[kind].http_status) == (code, status), kind


@pytest.mark.parametrize(("signal", "response_type", "field", "json_field"), [
    (ingest.KIND_TRACES, ExportTraceServiceResponse, "rejected_spans", "rejectedSpans"),
    (ingest.KIND_LOGS, ExportLogsServiceResponse, "rejected_log_records", "rejectedLogRecords"),
])
def test_partial_success_per_signal_in_protobuf_and_json(signal, response_type, field, json_field):
    partial = ExportOutcome(ingest.PARTIAL, signal, accepted=2, rejected=3, message="rejected 3: bad ids")
    response = answers.export_response(partial)
    assert type(response) is response_type
    assert getattr(response.partial_success, field) == 3 and response.partial_success.error_message == "rejected 3: bad ids"
    as_json = answers.http_answer(partial, ingest.ENCODING_JSON, Metrics(), "http")
    assert (as_json.status, as_json.media_type) == (200, answers.JSON_TYPE)
    assert json.loads(as_json.body) == {"partialSuccess": {json_field: "3", "errorMessage": "rejected 3: bad ids"}}
    as_protobuf = answers.http_answer(partial, ingest.ENCODING_PROTOBUF, Metrics(), "http")
    assert response_type.FromString(as_protobuf.body) == response
    # Everything stored: an empty response.
    ok = ExportOutcome(ingest.OK, signal, accepted=5)
    assert answers.export_response(ok) == response_type()
    assert json.loads(answers.http_answer(ok, ingest.ENCODING_JSON, Metrics(), "http").body) == {}


def test_http_errors_carry_a_status_body_and_their_headers():
    retry = ExportOutcome(ingest.RETRY, message="retry later: spool full", retry_after_seconds=4.2)
    found = answers.http_answer(retry, ingest.ENCODING_PROTOBUF, Metrics(), "http")
    assert (found.status, found.headers) == (503, {"Retry-After": "5"})
    assert status_pb2.Status.FromString(found.body) == status_pb2.Status(code=code_pb2.UNAVAILABLE,
                                                                          message="retry later: spool full")
    denied = answers.http_answer(ExportOutcome(ingest.UNAUTHENTICATED, message="no"), ingest.ENCODING_JSON,
                                 Metrics(), "http")
    assert (denied.status, denied.headers, json.loads(denied.body)) == (
        401, {"WWW-Authenticate": "Bearer"}, {"code": code_pb2.UNAUTHENTICATED, "message": "no"})


class AbortedCall(Exception):
    pass


class Context:
    """What grpc_answer uses of a grpc.ServicerContext."""

    def __init__(self):
        self.trailers = ()

    def set_trailing_metadata(self, trailers):
        self.trailers = trailers

    async def abort(self, code, message):
        raise AbortedCall(code, message)


def test_grpc_retry_carries_retry_info_in_both_places():
    context = Context()
    with pytest.raises(AbortedCall) as aborted:
        asyncio.run(answers.grpc_answer(
            ExportOutcome(ingest.RETRY, message="retry later: x", retry_after_seconds=1.5), context, Metrics(), "grpc"))
    assert aborted.value.args == (grpc.StatusCode.UNAVAILABLE, "retry later: x")
    trailers = dict(context.trailers)
    delay = error_details_pb2.RetryInfo.FromString(trailers[answers.RETRY_INFO_TRAILER]).retry_delay
    assert (delay.seconds, delay.nanos) == (1, 500_000_000)
    status = status_pb2.Status.FromString(trailers[answers.STATUS_DETAILS_TRAILER])
    assert status.code == code_pb2.UNAVAILABLE and status.details[0].Is(error_details_pb2.RetryInfo.DESCRIPTOR)


def test_answers_are_counted_once_by_outcome():
    metrics = Metrics()
    answers.http_answer(ExportOutcome(ingest.OK, payload_bytes=10), ingest.ENCODING_JSON, metrics, "http")
    answers.http_answer(ExportOutcome(ingest.UNSUPPORTED), ingest.ENCODING_JSON, metrics, "http")
    text = metrics.render()[0].decode()
    assert 'exports_total{outcome="ok",transport="http"} 1.0' in text
    assert "unsupported" not in text
