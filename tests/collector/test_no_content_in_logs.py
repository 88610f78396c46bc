"""The collector never logs prompt content (security standard).

Every path that logs — accepted spans, bad block maps (counted and warned),
malformed OTLP/HTTP and gRPC payloads, OTLP logs — is driven with a marker in
the captured text, and the marker must not appear in any log record at any
level.
"""

from __future__ import annotations

import gzip
import json
import logging

import grpc
import httpx

from promptprism.wire import names

from .collector_harness import emit_prompt, exporter, running_collector, stored_request, tracer_for

MARKER = "SECRET-PROMPT-MARKER-7f3a"


def _corrupt_hash(attributes, events):
    events[1][names.BLOCK_SHA256] = "0" * 64  # → unmapped, hash_mismatch (warned)


def test_no_prompt_content_reaches_the_logs(store, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, every level
    parts = [("identity", "identity", "static", f"You are {MARKER}. "),
             ("memory", "memory", "session", f"remember {MARKER}")]
    with running_collector(store, tmp_path) as collector:
        provider, tracer = tracer_for(exporter(collector, "grpc"))
        extra = {names.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "parts": [{"type": "text", "content": MARKER}]}])}
        _, good = emit_prompt(tracer, parts, extra=extra)
        _, bad = emit_prompt(tracer, parts, mutate=_corrupt_hash)
        provider.shutdown()

        endpoint = collector.endpoints()["otlp_http"]
        malformed = [
            # a string where each endpoint expects a list (unknown keys are ignored by OTLP)
            (json.dumps({"resourceSpans": MARKER, "resourceLogs": MARKER}).encode(), "application/json", None),
            (MARKER.encode() * 10, "application/x-protobuf", None),
            (MARKER.encode(), "application/x-protobuf", "gzip"),  # not gzip at all
            (gzip.compress(b'{"resourceLogs": [{"' + MARKER.encode() + b'": 1}] '), "application/json", "gzip"),
        ]
        statuses = []
        for body, content_type, encoding in malformed:
            headers = {"Content-Type": content_type}
            if encoding:
                headers["Content-Encoding"] = encoding
            for path in ("/v1/traces", "/v1/logs"):
                statuses.append(httpx.post(endpoint + path, content=body, headers=headers, timeout=30).status_code)

        target = collector.endpoints()["otlp_grpc"].removeprefix("http://")
        with grpc.insecure_channel(target) as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                         request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw)
            try:
                export(MARKER.encode() * 5, timeout=30)
                grpc_code = grpc.StatusCode.OK
            except grpc.RpcError as error:
                grpc_code = error.code()

        assert stored_request(store, good)["mapped"] is True
        assert stored_request(store, bad)["unmapped_reason"] == names.UNMAPPED_HASH_MISMATCH

    assert statuses and all(status == 400 for status in statuses), statuses
    assert grpc_code == grpc.StatusCode.INVALID_ARGUMENT
    assert caplog.records, "the collector logged nothing at all: the test would prove nothing"
    leaked = [record.getMessage() for record in caplog.records if MARKER in record.getMessage()]
    assert leaked == []
