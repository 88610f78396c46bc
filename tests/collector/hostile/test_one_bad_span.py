"""One bad span must not take its neighbours (issue 14, must fix 4: the OTLP decoder decodes span by
span with partial success and bounds nesting depth, collector/otlp/): 99 good spans and one bad one
over OTLP/JSON through a real collector store the 99 and reject the one."""

from __future__ import annotations

import json

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..collector_harness import count_rows, prompt_export, running_collector

GOOD_SPANS = 99
# Nesting a JSON parser refuses before any span is decoded (the document as a whole): a clear 400.
JSON_PARSER_DEPTH = 500


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


def _nested(depth: int) -> str:
    """An OTLP/JSON AnyValue nested ``depth`` arrays deep, as text (json.dumps would recurse too deep)."""
    return '{"arrayValue": {"values": [' * depth + '{"stringValue": "leaf"}' + "]}}" * depth


@pytest.mark.parametrize("depth", [120, 1000])
def test_a_deeply_nested_value_rejects_only_its_span(store, tmp_path, depth):
    document = _export_with_a_bad_neighbour()
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][-1]["attributes"].append(
        {"key": "deep", "value": "DEEP"})
    body = json.dumps(document).replace('"DEEP"', _nested(depth))
    with running_collector(store, tmp_path, ingest_workers=0) as collector:
        answer = httpx.post(collector.endpoints()["otlp_http"] + "/v1/traces", timeout=60,
                            content=body, headers={"Content-Type": "application/json"})
        if depth > JSON_PARSER_DEPTH:  # past the JSON parser's own bound the document is refused whole: 400
            assert answer.status_code == 400, answer.text
            return
        assert answer.status_code == 200
        assert int(answer.json()["partialSuccess"]["rejectedSpans"]) == 1
        assert count_rows(store, "otel_traces") == GOOD_SPANS


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
