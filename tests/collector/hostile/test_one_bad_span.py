"""One bad span must not take its neighbours (issue 14, must fix 4: the OTLP decoder decodes span by
span with partial success and bounds nesting depth; that work lands in collector/otlp/). Until it
does these cases are expected to fail; they pass as soon as it lands (strict=False)."""

from __future__ import annotations

import json

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..collector_harness import count_rows, prompt_export, running_collector

NEEDS_ITEM_4 = pytest.mark.xfail(strict=False, reason="span-by-span decoding (issue 14 item 4, collector/otlp)")
GOOD_SPANS = 99


def _export_with_a_bad_neighbour() -> dict:
    document = json_format.MessageToDict(ExportTraceServiceRequest.FromString(prompt_export()))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    good = spans[0]
    spans.clear()
    for number in range(GOOD_SPANS + 1):
        span = json.loads(json.dumps(good))
        span["spanId"] = f"{number + 1:016x}"
        span["traceId"] = f"{number + 1:032x}"
        spans.append(span)
    return document


def _nested(depth: int) -> dict:
    value: dict = {"stringValue": "leaf"}
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


@NEEDS_ITEM_4
@pytest.mark.parametrize("depth", [120, 1000])
def test_a_deeply_nested_value_rejects_only_its_span(store, tmp_path, depth):
    document = _export_with_a_bad_neighbour()
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][-1]["attributes"].append(
        {"key": "deep", "value": _nested(depth)})
    with running_collector(store, tmp_path, ingest_workers=0) as collector:
        answer = httpx.post(collector.endpoints()["otlp_http"] + "/v1/traces", timeout=60,
                            content=json.dumps(document), headers={"Content-Type": "application/json"})
        assert answer.status_code == 200
        assert int(answer.json()["partialSuccess"]["rejectedSpans"]) == 1
        assert count_rows(store, "otel_traces") == GOOD_SPANS


@NEEDS_ITEM_4
def test_a_lone_surrogate_rejects_only_its_span(store, tmp_path):
    document = _export_with_a_bad_neighbour()
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][-1]["name"] = "\ud800"
    body = json.dumps(document, ensure_ascii=True)  # "\ud800" as a JSON escape, as a hostile client sends it
    with running_collector(store, tmp_path, ingest_workers=0) as collector:
        answer = httpx.post(collector.endpoints()["otlp_http"] + "/v1/traces", timeout=60, content=body,
                            headers={"Content-Type": "application/json"})
        assert answer.status_code == 200
        assert int(answer.json()["partialSuccess"]["rejectedSpans"]) == 1
        assert count_rows(store, "otel_traces") == GOOD_SPANS
