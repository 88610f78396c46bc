"""Export outcomes → protocol answers: the one status table both receivers use.

``ANSWERS`` maps each ``write.ingest.ExportOutcome`` kind to its gRPC status
code, its OTLP/HTTP status and ``google.rpc`` code, and the outcome label
``/metrics`` counts (README, "Receiving"). ``export_response`` is the one
builder of the OTLP response with its partial success, for traces and logs
alike; OTLP/HTTP sends it as protobuf or as its proto3 JSON.

- ok / partial: gRPC OK / HTTP 200, the response carries the partial success;
- malformed: INVALID_ARGUMENT / 400;
- too large: RESOURCE_EXHAUSTED / 413;
- retry: UNAVAILABLE with RetryInfo (as a status detail and in the
  ``google.rpc.retryinfo-bin`` trailer, which the Python exporter reads) /
  503 with Retry-After (the Python HTTP exporter does not retry 429);
- refused: INTERNAL / 500; unauthenticated: UNAUTHENTICATED / 401 with
  ``WWW-Authenticate: Bearer``; unsupported (a Content-Type or
  Content-Encoding OTLP/HTTP does not define): 415.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import grpc
from google.protobuf import json_format
from google.protobuf.any_pb2 import Any as AnyMessage
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from .. import metrics as outcomes
from ..metrics import Metrics
from ..write import ingest
from ..write.ingest import ExportOutcome

RETRY_INFO_TRAILER = "google.rpc.retryinfo-bin"  # the only place the Python exporter looks
STATUS_DETAILS_TRAILER = "grpc-status-details-bin"  # google.rpc.Status, the gRPC richer-error model
PROTOBUF_TYPE = "application/x-protobuf"
JSON_TYPE = "application/json"


@dataclass(frozen=True, slots=True)
class Answer:
    grpc_code: grpc.StatusCode
    http_status: int
    rpc_code: int  # google.rpc.Code in an OTLP/HTTP error body
    metric: str | None  # the exports_total outcome label; None: not counted


ANSWERS: dict[str, Answer] = {
    ingest.OK: Answer(grpc.StatusCode.OK, 200, code_pb2.OK, outcomes.OUTCOME_OK),
    ingest.PARTIAL: Answer(grpc.StatusCode.OK, 200, code_pb2.OK, outcomes.OUTCOME_PARTIAL),
    ingest.MALFORMED: Answer(grpc.StatusCode.INVALID_ARGUMENT, 400, code_pb2.INVALID_ARGUMENT,
                             outcomes.OUTCOME_MALFORMED),
    ingest.TOO_LARGE: Answer(grpc.StatusCode.RESOURCE_EXHAUSTED, 413, code_pb2.RESOURCE_EXHAUSTED,
                             outcomes.OUTCOME_TOO_LARGE),
    ingest.RETRY: Answer(grpc.StatusCode.UNAVAILABLE, 503, code_pb2.UNAVAILABLE, outcomes.OUTCOME_BACKPRESSURE),
    ingest.REFUSED: Answer(grpc.StatusCode.INTERNAL, 500, code_pb2.INTERNAL, outcomes.OUTCOME_ERROR),
    ingest.UNAUTHENTICATED: Answer(grpc.StatusCode.UNAUTHENTICATED, 401, code_pb2.UNAUTHENTICATED,
                                   outcomes.OUTCOME_UNAUTHENTICATED),
    ingest.UNSUPPORTED: Answer(grpc.StatusCode.INVALID_ARGUMENT, 415, code_pb2.INVALID_ARGUMENT, None),
}

# The OTLP response of each signal, and its partial success's count of rejected items.
_RESPONSES: dict[str, tuple[type[Message], str]] = {
    ingest.KIND_TRACES: (ExportTraceServiceResponse, "rejected_spans"),
    ingest.KIND_LOGS: (ExportLogsServiceResponse, "rejected_log_records"),
    ingest.KIND_METRICS: (ExportMetricsServiceResponse, "rejected_data_points"),
}


def record(metrics: Metrics, transport: str, outcome: ExportOutcome) -> None:
    """Count the answer in ``exports_total`` (and the payload bytes it carried)."""
    metric = ANSWERS[outcome.kind].metric
    if metric is not None:
        metrics.export_finished(transport, metric, outcome.payload_bytes)


def export_response(outcome: ExportOutcome) -> Message:
    """The OTLP ``Export…ServiceResponse`` of a stored export, with its partial success."""
    response_type, rejected_field = _RESPONSES[outcome.signal]
    response = response_type()
    if outcome.rejected:
        setattr(response.partial_success, rejected_field, outcome.rejected)
        response.partial_success.error_message = outcome.message
    return response


# --- gRPC ---------------------------------------------------------------------------------


def retry_trailers(message: str, retry_after_seconds: float) -> tuple[tuple[str, bytes], ...]:
    """RetryInfo in both places a client may look for it."""
    retry_info = error_details_pb2.RetryInfo()
    whole = int(retry_after_seconds)
    retry_info.retry_delay.seconds = whole
    retry_info.retry_delay.nanos = int((retry_after_seconds - whole) * 1e9)
    detail = AnyMessage()
    detail.Pack(retry_info)
    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message, details=[detail])
    return ((RETRY_INFO_TRAILER, retry_info.SerializeToString()),
            (STATUS_DETAILS_TRAILER, status.SerializeToString()))


async def grpc_answer(outcome: ExportOutcome, context: grpc.aio.ServicerContext, metrics: Metrics,
                      transport: str) -> Message:
    """The response of a stored export; any other outcome aborts the call with its status."""
    record(metrics, transport, outcome)
    answer = ANSWERS[outcome.kind]
    if answer.grpc_code is grpc.StatusCode.OK:
        return export_response(outcome)
    if outcome.kind == ingest.RETRY:
        context.set_trailing_metadata(retry_trailers(outcome.message, outcome.retry_after_seconds))
    await context.abort(answer.grpc_code, outcome.message)
    raise AssertionError("context.abort returns only by raising")  # pragma: no cover


# --- OTLP/HTTP ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    status: int
    body: bytes
    media_type: str
    headers: dict[str, str]


def http_answer(outcome: ExportOutcome, encoding: str, metrics: Metrics, transport: str) -> HttpAnswer:
    """Status, body (the response or a ``google.rpc.Status``, in the request's encoding) and headers."""
    record(metrics, transport, outcome)
    answer = ANSWERS[outcome.kind]
    as_json = encoding == ingest.ENCODING_JSON
    media_type = JSON_TYPE if as_json else PROTOBUF_TYPE
    if answer.http_status == 200:
        response = export_response(outcome)
        body = json.dumps(json_format.MessageToDict(response)).encode() if as_json else response.SerializeToString()
        return HttpAnswer(200, body, media_type, {})
    if as_json:
        body = json.dumps({"code": answer.rpc_code, "message": outcome.message}).encode()
    else:
        body = status_pb2.Status(code=answer.rpc_code, message=outcome.message).SerializeToString()
    headers = {}
    if outcome.kind == ingest.RETRY:
        headers["Retry-After"] = str(max(1, math.ceil(outcome.retry_after_seconds)))
    elif outcome.kind == ingest.UNAUTHENTICATED:
        headers["WWW-Authenticate"] = "Bearer"
    return HttpAnswer(answer.http_status, body, media_type, headers)
