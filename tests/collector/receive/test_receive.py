"""The receivers end to end: real OTel SDK exporters → a real collector → the store."""

from __future__ import annotations

import gzip
import json
import time

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.exporter import Compression as GrpcCompression
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SpanExportResult

from promptprism.wire import names
from support import metric_value

from ..collector_harness import (
    PARTS,
    assert_exact_map,
    count_rows,
    emit_prompt,
    exporter,
    grpc_export,
    prompt_export,
    running_collector,
    stored_blocks,
    stored_request,
    tracer_for,
)
from ..otlp_samples import otlp_json
from ..prompt_spans import sha


@pytest.fixture
def collector(store, tmp_path):
    with running_collector(store, tmp_path) as running:
        yield running


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_exact_block_map_with_multibyte_content(store, collector, protocol):
    provider, tracer = tracer_for(exporter(collector, protocol))
    trace_id, request_id = emit_prompt(tracer, PARTS)
    provider.shutdown()
    assert_exact_map(store, request_id, PARTS)
    record = stored_request(store, request_id)
    assert (record["trace_id"], record["service"], record["model"]) == (trace_id, "receive-test", "gpt-4o")
    assert count_rows(store, "otel_traces", "SpanId = {id:String}", {"id": request_id}) == 1


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_gzip(store, collector, protocol):
    compression = GrpcCompression.Gzip if protocol == "grpc" else HttpCompression.Gzip
    provider, tracer = tracer_for(exporter(collector, protocol, compression=compression))
    _, request_id = emit_prompt(tracer, PARTS)
    provider.shutdown()
    assert_exact_map(store, request_id, PARTS)


def test_a_thousand_blocks(store, collector):
    parts = [(f"skill_{index}", "skills", "static", f"Compétence n°{index} : {'é' * (index % 7)}.\n")
             for index in range(1000)]
    provider, tracer = tracer_for(exporter(collector, "grpc"))
    _, request_id = emit_prompt(tracer, parts)
    provider.shutdown()
    assert_exact_map(store, request_id, parts)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_ten_mib_prompt(store, collector, protocol):
    big = "Mémoire 🍵 " * 760_000  # 14 bytes × 760,000: just over 10 MiB of UTF-8
    parts = [("identity", "identity", "static", "Tu es Émile. "), ("memory", "memory", "session", big)]
    big_size = len(big.encode("utf-8"))
    assert big_size > 10 * 1024 * 1024
    provider, tracer = tracer_for(exporter(collector, protocol))
    _, request_id = emit_prompt(tracer, parts)
    provider.shutdown()
    record = stored_request(store, request_id)
    assert record["mapped"] and record["prompt_bytes"] == len("".join(p[3] for p in parts).encode("utf-8"))
    blocks = stored_blocks(store, request_id)
    assert blocks[1]["size"] == len(big.encode("utf-8"))
    assert sha(blocks[1]["content"]) == sha(big)  # (not ==: a failure would print 10 MiB)


def _set(index, key, value):
    return lambda attributes, events: events[index].update({key: value})


BAD_MAPS = [
    ("gap", lambda a, e: e[1].update({names.BLOCK_START: e[1][names.BLOCK_START] + 1,
                                      names.BLOCK_SIZE: e[1][names.BLOCK_SIZE] - 1}), names.UNMAPPED_NOT_TILING),
    ("beyond", lambda a, e: a.update({names.PROMPT_BYTES: a[names.PROMPT_BYTES] - 1}), names.UNMAPPED_BAD_RANGE),
    ("size", _set(0, names.BLOCK_SIZE, 3), names.UNMAPPED_BAD_RANGE),
    ("empty", lambda a, e: (e.append({**e[-1], names.BLOCK_INDEX: 3, names.BLOCK_START: e[-1][names.BLOCK_END],
                                      names.BLOCK_SIZE: 0}), a.update({names.PROMPT_BLOCK_COUNT: 4})),
     names.UNMAPPED_EMPTY_BLOCK),
    ("hash", _set(1, names.BLOCK_SHA256, sha("not this")), names.UNMAPPED_HASH_MISMATCH),
    ("split_character", _set(1, names.BLOCK_CONTENT, "Le client aime le th\ufffd"), names.UNMAPPED_UTF8_BOUNDARY),
    ("fewer_events", lambda a, e: e.pop(), names.UNMAPPED_INCOMPLETE),
    ("missing_field", lambda a, e: e[2].pop(names.BLOCK_SHA256), names.UNMAPPED_BAD_ATTRIBUTES),
]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_each_bad_map_is_stored_unmapped_with_its_reason(store, collector, protocol):
    provider, tracer = tracer_for(exporter(collector, protocol))
    sent = {case: emit_prompt(tracer, PARTS, mutate=mutate)[1] for case, mutate, _ in BAD_MAPS}
    _, good = emit_prompt(tracer, PARTS)
    provider.shutdown()
    for case, _, reason in BAD_MAPS:
        record = stored_request(store, sent[case])
        assert (case, record["mapped"], record["unmapped_reason"]) == (case, False, reason)
        assert stored_blocks(store, sent[case]) == [], case  # never a wrong map
    assert_exact_map(store, good, PARTS)
    metrics = httpx.get(collector.endpoints()["ui"] + "/metrics").text
    assert metric_value(metrics, "promptprism_collector_unmapped_total", reason="bad_range") == 2


def test_events_dropped_by_sdk_limits_are_incomplete(store, collector):
    parts = [(f"b{index}", "memory", "turn", f"bloc {index}. ") for index in range(20)]
    provider, tracer = tracer_for(exporter(collector, "grpc"), max_events=10)  # the SDK keeps the newest 10
    _, request_id = emit_prompt(tracer, parts)
    provider.shutdown()
    assert stored_request(store, request_id)["unmapped_reason"] == names.UNMAPPED_INCOMPLETE


def test_otlp_json_and_partial_success(store, collector):
    document = json.loads(otlp_json())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["attributes"] = [{"key": names.GEN_AI_REQUEST_MODEL, "value": {"stringValue": "claude"}},
                              {"key": names.GEN_AI_SYSTEM_INSTRUCTIONS, "value": {"stringValue": "Sois bref."}}]
    spans[0]["events"] = []  # another instrumentation: no promptprism events
    now = time.time_ns()  # inside the tables' TTL
    spans[0].update(startTimeUnixNano=str(now), endTimeUnixNano=str(now + 1000))
    spans.append({**spans[0], "spanId": "zz", "name": "broken"})
    url = collector.endpoints()["otlp_http"] + "/v1/traces"
    answer = httpx.post(url, content=json.dumps(document), headers={"Content-Type": "application/json"})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    assert answer.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert "invalid span_id" in answer.json()["partialSuccess"]["errorMessage"]
    record = stored_request(store, "00f067aa0ba902b7")
    assert (record["model"], record["unmapped_reason"], record["prompt_bytes"]) == ("claude", "no_blocks", 10)
    # gzip'ed JSON too
    spans.pop()
    spans[0]["spanId"] = "00f067aa0ba902b8"
    answer = httpx.post(url, content=gzip.compress(json.dumps(document).encode()),
                        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert answer.status_code == 200 and answer.json() == {}
    assert stored_request(store, "00f067aa0ba902b8")["model"] == "claude"


def test_resend_is_not_duplicated(store, collector):
    payload = prompt_export()
    request_id = ExportTraceServiceRequest.FromString(payload).resource_spans[0].scope_spans[0].spans[0].span_id.hex()
    for _ in range(3):
        grpc_export(collector, payload)
        assert httpx.post(collector.endpoints()["otlp_http"] + "/v1/traces", content=payload,
                          headers={"Content-Type": "application/x-protobuf"}).status_code == 200
    where, params = "request_id = {id:String}", {"id": request_id}
    assert count_rows(store, "requests", where, params) == 1  # raw rows, not only under FINAL
    assert count_rows(store, "request_docs", where, params) == 1
    # `blocks` is a view of the documents' block arrays (migration 050): every stored copy's blocks
    assert count_rows(store, "blocks", where, params) == len(PARTS)
    assert count_rows(store, "otel_traces", "SpanId = {id:String}", params) == 1


@pytest.mark.parametrize("garbage", [b"\xff\xff\xff\xff\xff", b"\x0a\x7fshort", b"not protobuf at all \x00\x01"])
def test_garbage_is_refused_and_the_collector_keeps_serving(store, collector, garbage):
    with pytest.raises(grpc.RpcError) as refused:
        grpc_export(collector, garbage)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    url = collector.endpoints()["otlp_http"] + "/v1/traces"
    assert httpx.post(url, content=garbage, headers={"Content-Type": "application/x-protobuf"}).status_code == 400
    assert httpx.post(url, content=garbage, headers={"Content-Type": "application/json"}).status_code == 400
    assert httpx.post(url, content=b"\x1f\x8b broken gzip", headers={
        "Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}).status_code == 400
    provider, tracer = tracer_for(exporter(collector, "grpc"))
    _, request_id = emit_prompt(tracer, PARTS)
    provider.shutdown()
    assert_exact_map(store, request_id, PARTS)


def test_wrong_method_type_and_path(collector):
    base = collector.endpoints()["otlp_http"]
    assert httpx.get(base + "/v1/traces").status_code == 405
    assert httpx.post(base + "/v1/profiles", content=b"").status_code == 404
    assert httpx.post(base + "/v1/metrics", content=b"").status_code == 415  # served (OTLP metrics), no type
    assert httpx.post(base + "/v1/traces", content=b"", headers={"Content-Type": "text/plain"}).status_code == 415


def test_the_otlp_http_root_says_where_the_inspector_is(store, tmp_path):
    """GET / on the OTLP/HTTP port names the service and its inspector (promptprism demo links there);
    with an ingest token it answers only with the token."""
    with running_collector(store, tmp_path, ingest_token="s3cret") as collector:
        base = collector.endpoints()["otlp_http"]
        assert httpx.get(base + "/").status_code == 401
        assert httpx.get(base + "/", headers={"Authorization": "Bearer wrong"}).status_code == 401
        about = httpx.get(base + "/", headers={"Authorization": "Bearer s3cret"})
        assert about.status_code == 200
        assert about.json() == {"service": "promptprism collector", "otlp": ["/v1/traces", "/v1/logs", "/v1/metrics"],
                                "inspector": collector.endpoints()["ui"]}
        assert httpx.get(collector.endpoints()["ui"] + "/healthz").status_code == 200


def test_oversized_requests(store, tmp_path):
    limit = 256 * 1024
    with running_collector(store, tmp_path, receive_limit_bytes=limit) as collector:
        payload = prompt_export([("big", "memory", "turn", "x" * (limit + 1))])
        with pytest.raises(grpc.RpcError) as refused:
            grpc_export(collector, payload)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        url = collector.endpoints()["otlp_http"] + "/v1/traces"
        headers = {"Content-Type": "application/x-protobuf"}
        assert httpx.post(url, content=payload, headers=headers).status_code == 413
        # Small on the wire, too big once decompressed.
        bomb = gzip.compress(payload)
        assert len(bomb) < limit
        assert httpx.post(url, content=bomb, headers={**headers, "Content-Encoding": "gzip"}).status_code == 413
        # Chunked, without a Content-Length.
        assert httpx.post(url, content=iter([payload[:1000], payload[1000:]]), headers=headers).status_code == 413
        # Under the limit still goes through.
        assert httpx.post(url, content=prompt_export(), headers=headers).status_code == 200
        assert count_rows(store, "requests") == 1


def test_ingest_token(store, tmp_path):
    with running_collector(store, tmp_path, ingest_token="s3cret") as collector:
        for protocol in ("grpc", "http"):
            provider, tracer = tracer_for(exporter(collector, protocol, headers={"authorization": "Bearer wrong"}))
            emit_prompt(tracer, PARTS)
            provider.shutdown()
        assert count_rows(store, "requests") == 0
        payload = prompt_export()
        with pytest.raises(grpc.RpcError) as refused:
            grpc_export(collector, payload)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        url = collector.endpoints()["otlp_http"] + "/v1/traces"
        assert httpx.post(url, content=payload, headers={"Content-Type": "application/x-protobuf"}).status_code == 401
        sent = []
        for protocol in ("grpc", "http"):
            span_exporter = exporter(collector, protocol, headers={"authorization": "Bearer s3cret"})
            provider, tracer = tracer_for(span_exporter)
            sent.append(emit_prompt(tracer, PARTS)[1])
            provider.shutdown()
        for request_id in sent:
            assert_exact_map(store, request_id, PARTS)


def test_exporter_result_is_success_only_when_stored(store, collector):
    span_exporter = exporter(collector, "grpc")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider, tracer = tracer_for(memory)
    _, request_id = emit_prompt(tracer, PARTS)
    provider.shutdown()
    assert span_exporter.export(memory.get_finished_spans()) == SpanExportResult.SUCCESS
    assert stored_request(store, request_id) is not None
