"""OTLP/gRPC under stalled and unauthenticated calls (issue 14, must fix 1).

Eight ``Export`` streams that announce a 1,000,000-byte message, send 50
bytes of it and stall used to take every worker thread, so valid exports —
with the right token too — ran into their deadline. The calls are held open
from the test itself, on loopback.
"""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2

from promptprism.collector.receive import grpc as receive_grpc
from support import wait_until

from ..collector_harness import PARTS, assert_exact_map, emit_prompt, exporter, grpc_export, prompt_export, \
    running_collector, tracer_for
from .stalled_clients import StalledGrpcCall

TOKEN = "s3cret"
WITH_TOKEN = (("authorization", f"Bearer {TOKEN}"),)
STALLED_CALLS = 8


def _export_with_token(store, collector) -> None:
    provider, tracer = tracer_for(exporter(collector, "grpc", headers={"authorization": f"Bearer {TOKEN}"}))
    _, request_id = emit_prompt(tracer, PARTS)
    provider.shutdown()
    assert_exact_map(store, request_id, PARTS)


def test_unauthenticated_stalled_calls_are_refused_before_their_message_and_block_nothing(store, tmp_path):
    with running_collector(store, tmp_path, ingest_token=TOKEN) as collector:
        endpoint = collector.endpoints()["otlp_grpc"]
        stalled = [StalledGrpcCall(endpoint) for _ in range(STALLED_CALLS)]
        try:
            # Answered although their message never arrives: the token is checked first.
            assert [call.status() for call in stalled] == [grpc.StatusCode.UNAUTHENTICATED.value[0]] * STALLED_CALLS
            assert collector.grpc.holding == 0
            _export_with_token(store, collector)
        finally:
            for call in stalled:
                call.close()


def test_stalled_calls_with_the_token_leave_room_for_valid_exports(store, tmp_path):
    with running_collector(store, tmp_path, ingest_token=TOKEN) as collector:
        endpoint = collector.endpoints()["otlp_grpc"]
        stalled = [StalledGrpcCall(endpoint, metadata=WITH_TOKEN) for _ in range(STALLED_CALLS)]
        try:
            wait_until(lambda: collector.grpc.holding == STALLED_CALLS, message="the stalled calls were not admitted")
            _export_with_token(store, collector)
            response, call = grpc_export(collector, prompt_export(), metadata=WITH_TOKEN)
            assert call.code() == grpc.StatusCode.OK
        finally:
            for call in stalled:
                call.close()


def test_a_full_receiver_answers_unavailable_with_retry_info(store, tmp_path, monkeypatch):
    monkeypatch.setattr(receive_grpc, "MAX_HOLDING_CALLS", 2)
    with running_collector(store, tmp_path, ingest_token=TOKEN) as collector:
        endpoint = collector.endpoints()["otlp_grpc"]
        stalled = [StalledGrpcCall(endpoint, metadata=WITH_TOKEN) for _ in range(2)]
        try:
            wait_until(lambda: collector.grpc.holding == 2, message="the stalled calls were not admitted")
            with pytest.raises(grpc.RpcError) as refused:
                grpc_export(collector, prompt_export(), metadata=WITH_TOKEN)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            retry = error_details_pb2.RetryInfo.FromString(
                dict(refused.value.trailing_metadata())["google.rpc.retryinfo-bin"])
            assert retry.retry_delay.seconds >= 1
        finally:
            for call in stalled:
                call.close()
        wait_until(lambda: collector.grpc.holding == 0, message="closed calls kept their places")
        _export_with_token(store, collector)


def test_a_message_that_does_not_arrive_in_time_is_answered_retryable(store, tmp_path, monkeypatch):
    monkeypatch.setattr(receive_grpc, "MESSAGE_ARRIVAL_TIMEOUT_SECONDS", 0.2)
    with running_collector(store, tmp_path, ingest_token=TOKEN) as collector:
        call = StalledGrpcCall(collector.endpoints()["otlp_grpc"], metadata=WITH_TOKEN)
        try:
            assert call.status() == grpc.StatusCode.UNAVAILABLE.value[0]
        finally:
            call.close()
        wait_until(lambda: collector.grpc.holding == 0, message="the timed-out call kept its place")
        _export_with_token(store, collector)
