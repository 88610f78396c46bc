"""Fuzzed OTLP on both transports (issue 14): no 5xx / INTERNAL, no crash, and a valid export
still round-trips afterwards. Bounded: a fixed seed and a fixed number of cases."""

from __future__ import annotations

import random

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ..collector_harness import EXPORT_PATH, PARTS, assert_exact_map, emit_prompt, exporter, prompt_export, \
    running_collector, tracer_for
from .mutations import byte_mutation, field_mutation, json_mutation

SEED = 20261201
HTTP_CASES = 1500  # protobuf field mutations, byte mutations and OTLP/JSON, a third each
GRPC_CASES = 1000  # protobuf field and byte mutations, half each
# Codes a hostile payload may get: refused as malformed or too large, or told to retry.
# Never INTERNAL, UNKNOWN (a handler crashed) or DATA_LOSS.
GRPC_ALLOWED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}


def _cases(count: int, rng: random.Random, base: ExportTraceServiceRequest, payload: bytes, *, json_too: bool):
    for number in range(count):
        kind = number % (3 if json_too else 2)
        if kind == 0:
            yield "protobuf field", "application/x-protobuf", field_mutation(base, rng).SerializeToString()
        elif kind == 1:
            yield "protobuf bytes", "application/x-protobuf", byte_mutation(payload, rng)
        else:
            yield "json", "application/json", json_mutation(base, rng)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # 2,500 exports through a real collector on 2 shared cores
def test_fuzzed_exports_never_get_a_server_error(store, tmp_path):
    rng = random.Random(SEED)
    payload = prompt_export()
    base = ExportTraceServiceRequest.FromString(payload)
    failures = []
    with running_collector(store, tmp_path, ingest_workers=0) as collector:
        endpoints = collector.endpoints()
        with httpx.Client(base_url=endpoints["otlp_http"], timeout=60) as client:
            for number, (kind, media_type, body) in enumerate(_cases(HTTP_CASES, rng, base, payload, json_too=True)):
                answer = client.post("/v1/traces", content=body, headers={"Content-Type": media_type})
                if answer.status_code >= 500:
                    failures.append(("http", number, kind, answer.status_code, answer.text[:200]))
        target = endpoints["otlp_grpc"].removeprefix("http://")
        with grpc.insecure_channel(target, options=[("grpc.max_send_message_length", -1)]) as channel:
            call = channel.unary_unary(EXPORT_PATH, request_serializer=None,
                                       response_deserializer=ExportTraceServiceResponse.FromString)
            for number, (kind, _, body) in enumerate(_cases(GRPC_CASES, rng, base, payload, json_too=False)):
                try:
                    call(body, timeout=60)
                except grpc.RpcError as error:
                    if error.code() not in GRPC_ALLOWED:
                        failures.append(("grpc", number, kind, error.code().name, (error.details() or "")[:200]))
        assert failures == [], f"{len(failures)} server errors, first: {failures[:5]}"
        for protocol in ("grpc", "http"):  # the collector still takes valid exports
            provider, tracer = tracer_for(exporter(collector, protocol))
            _, request_id = emit_prompt(tracer, PARTS)
            provider.shutdown()
            assert_exact_map(store, request_id, PARTS)
