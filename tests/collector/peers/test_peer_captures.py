"""Other instrumentations' real exports, replayed into a real collector over gRPC and HTTP as they
travelled, become complete request records: model, provider, operation, input/output/cache-read/
cache-write tokens, system prompt bytes and text, messages, response, tools and finish reasons as the
provider received and answered them; non-LLM spans make no request; one provider call is one request.

What a peer itself never sends (README, "Other instrumentations": its losses) is listed here per peer,
so that everything else is asserted.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from promptprism.collector.read import lookups

from ..collector_harness import running_collector, stored_blocks, stored_requests
from .peer_captures import Call, Scenario, peers, replay, scenarios

# Peers whose failed calls export no LLM span at all (the JS instrumentations never end it).
NO_SPAN_ON_ERROR = {"openinference-openai-js-4.2.7", "traceloop-openai-js-0.27.0"}
# Peers that never send tool definitions.
NO_TOOLS = {"anthropic-sdk-2.15.0", "openai-v2-2.4b0"}
# OpenLIT sends them only in its operation-details log record, even with content capture off; on a
# stream that record carries the parent span's id, not the request's (joined by its response id).
TOOLS_IN_LOGS = {"openlit-1.45.0"}
# Peers that report no cache reads.
NO_CACHE_READ = {"openai-v2-2.4b0", "traceloop-openai-js-0.27.0"}
# Peers that report no cache writes (OpenAI has none to report).
NO_CACHE_WRITE = {"openai-v2-2.4b0", "traceloop-openai-js-0.27.0"}
# Streams without usage (the JS instrumentations).
NO_STREAM_USAGE = {"openinference-openai-js-4.2.7", "traceloop-openai-js-0.27.0"}
# Scenarios whose calls carry no finish reason on the span.
NO_FINISH_REASON = {"openinference-openai-0.1.66/responses", "openinference-openai-js-4.2.7/responses",
                    "openllmetry-anthropic-0.62.4/events_messages_stream"}
# OpenLLMetry adds message_start's output token to message_delta's on Anthropic streams.
OUTPUT_TOKENS_PLUS_ONE = {"openllmetry-anthropic-0.62.4/dup_with_sdk_spans_stream",
                          "openllmetry-anthropic-0.62.4/events_messages_stream"}
# OpenLIT leaves the assistant's tool-call message out of the tool round trip's history.
MISSING_MESSAGES = {("openlit-1.45.0/openai_chat_tool_call", 1): 1}


def has_content(scenario: Scenario) -> bool:
    """The span carries the prompt and messages (content capture on, sent on the span)."""
    name, peer = scenario.name, scenario.peer
    if "content_off" in name or name.startswith("events_") or name == "dup_events_with_sdk_spans":
        return False
    if peer == "anthropic-sdk-2.15.0":
        return name.endswith("_content")
    if scenario.key == "traceloop-openai-js-0.27.0/responses":  # drops the instructions
        return False
    if peer == "openlit-1.45.0" and name.endswith("_error"):  # a failed call's span keeps the model at most
        return False
    return True


def sends_tools(scenario: Scenario, call: Call) -> bool:
    if scenario.peer in TOOLS_IN_LOGS:
        return (any(export.signal == "logs" for export in scenario.exports)
                and not call.failed and call.path != "/v1/responses")  # none for the Responses API
    if scenario.peer in NO_TOOLS or not has_content(scenario):
        return False
    return scenario.key != "traceloop-openai-js-0.27.0/responses"  # drops the tools


# traceloop-sdk's disable_batch=True exports every span alone: the SDK's span of the call and
# OpenLLMetry's arrive in separate exports, merged by the collector's memory of stored calls.
SEPARATE_EXPORTS = {"openllmetry-traceloop-sdk-0.62.4/workflow_anthropic_dup"}


def expected_records(scenario: Scenario) -> list[Call]:
    return [call for call in scenario.calls if not (call.failed and scenario.peer in NO_SPAN_ON_ERROR)]


def stored_records(store, scenario: Scenario) -> list[dict]:
    return stored_requests(store, "has(splitByChar(',', {ids:String}), trace_id)",
                           {"ids": ",".join(sorted(scenario.trace_ids()))})


def stored_tools(store, request_id: str) -> list[dict]:
    """The request's tools as the API serves them: from its row (migration 046), else rows of `tools`."""
    return [{"name": tool["name"], "size": tool["size"], "sha256": tool["sha256"]}
            for tool in lookups.request(store, request_id)["tools"]]


def check_record(store, scenario: Scenario, index: int, call: Call, record: dict) -> list[str]:
    """What differs between a stored record and the call it describes."""
    problems = []

    def expect(what, stored, wanted):
        if stored != wanted:
            problems.append(f"{scenario.key}[{index}] {what}: stored {stored!r}, expected {wanted!r}")

    expect("model", record["model"], call.model)
    expect("provider", record["provider"], call.provider)
    expect("operation", record["operation"], "chat")
    expect("status", record["status_code"] == "Error", call.failed)
    stream = bool(call.body.get("stream"))
    if not call.failed:
        for name, wanted in call.usage.items():
            stored = record[name]
            if name == "output_tokens" and scenario.key in OUTPUT_TOKENS_PLUS_ONE:
                wanted += 1
            reported = stored is not None
            required = name in ("input_tokens", "output_tokens") and not (stream and scenario.peer in NO_STREAM_USAGE)
            if name == "cache_read_tokens":  # a zero is often left out
                required = wanted > 0 and scenario.peer not in NO_CACHE_READ
            if name == "cache_creation_tokens":
                required = wanted > 0 and scenario.peer not in NO_CACHE_WRITE
            if required or reported:
                expect(name, stored, wanted)
        if scenario.key not in NO_FINISH_REASON and not (stream and scenario.peer in NO_STREAM_USAGE):
            expect("finish reasons present", bool(record["finish_reasons"]), True)
    if has_content(scenario):
        system = call.system_text.encode("utf-8")
        expect("prompt bytes", record["prompt_bytes"], len(system))
        expect("prompt sha256", record["prompt_sha256"], hashlib.sha256(system).hexdigest())
        blocks = stored_blocks(store, record["request_id"])
        expect("prompt text", "".join(block["content"] or "" for block in blocks), call.system_text)
        messages = [message for message in json.loads(record["input_messages"] or "[]")
                    if message.get("role") not in ("system", "developer")]
        missing = MISSING_MESSAGES.get((scenario.key, index), 0)
        expect("messages", len(messages), call.conversation_messages - missing)
        if not call.failed:
            outputs = json.loads(record["output_messages"] or "[]")
            parts = [part for output in outputs for part in output.get("parts", [])]
            text = "".join(part.get("content", "") for part in parts if part.get("type", "text") == "text")
            expect("response text", text or None, call.answer_text)
            expect("response tool call", any(part.get("type") == "tool_call" for part in parts), call.tool_call)
    else:
        expect("prompt bytes without content", record["prompt_bytes"], 0)
    tools = stored_tools(store, record["request_id"])
    if sends_tools(scenario, call):
        expect("tools", [tool["name"] for tool in tools], call.tool_names)
        expect("tools_count", record["tools_count"], len(call.tool_names))
        for tool in tools:
            if tool["size"] <= 0 or len(tool["sha256"]) != 64:
                problems.append(f"{scenario.key}[{index}] tool {tool['name']} not measured")
    return problems


@pytest.mark.parametrize("peer", peers())
def test_a_peers_exports_become_complete_request_records(store, tmp_path, peer):
    cases = scenarios(peer)
    assert cases, peer
    problems = []
    with running_collector(store, tmp_path) as running:
        for scenario in cases:
            answers = replay(scenario, running.endpoints(), signals=("traces", "logs"))
            assert set(answers) <= {200, "OK"}, (scenario.key, answers)
    for scenario in cases:
        records, calls = stored_records(store, scenario), expected_records(scenario)
        if len(records) != len(calls):  # non-LLM spans made a request, or one call made two
            problems.append(f"{scenario.key}: {len(records)} requests stored for {len(calls)} provider calls "
                            f"({[record['span_name'] for record in records]})")
            continue
        for index, (call, record) in enumerate(zip(calls, records)):
            problems += check_record(store, scenario, index, call, record)
    assert problems == []


def test_the_checks_can_fail(store, tmp_path):
    """A record that lost its cache read or its system prompt is reported, not waved through."""
    scenario = next(case for case in scenarios("openinference-anthropic-3.1.0") if case.name == "cache")
    with running_collector(store, tmp_path) as running:
        replay(scenario, running.endpoints())
    record = dict(stored_records(store, scenario)[1])
    assert check_record(store, scenario, 1, scenario.calls[1], record) == []
    record["cache_read_tokens"], record["prompt_bytes"], record["model"] = None, 3, "other"
    problems = check_record(store, scenario, 1, scenario.calls[1], record)
    assert {problem.split("] ")[1].split(":")[0] for problem in problems} == {
        "cache_read_tokens", "prompt bytes", "model"}


def test_one_provider_call_traced_twice_is_one_request_counted_once(store, tmp_path):
    """The anthropic SDK's own spans beside OpenInference (parent/child) and OpenLLMetry (siblings,
    same response id; in events mode without one): one request per call, tokens counted once."""
    duplicated = [case for case in scenarios() if "dup" in case.name]
    assert {case.peer for case in duplicated} == {"openinference-anthropic-3.1.0", "openllmetry-anthropic-0.62.4",
                                                  "openllmetry-traceloop-sdk-0.62.4"}
    assert any(len([export for export in case.exports if export.signal == "traces"]) > 1
               for case in duplicated if case.key in SEPARATE_EXPORTS)
    with running_collector(store, tmp_path) as running:
        for scenario in duplicated:
            replay(scenario, running.endpoints())
    for scenario in duplicated:
        records = stored_records(store, scenario)
        spans = store.query(f"SELECT SpanId, ScopeName FROM {store.database}.otel_traces "
                            "WHERE has(splitByChar(',', {ids:String}), TraceId)",
                            {"ids": ",".join(sorted(scenario.trace_ids()))})
        sdk_spans = {row["SpanId"] for row in spans if row["ScopeName"] == "com.anthropic.sdk.python"}
        assert len(records) == len(scenario.calls) and sdk_spans, scenario.key
        if scenario.key in SEPARATE_EXPORTS:
            # The SDK's span ends first and is stored first: its record takes the later span in, under its own
            # identity (so the stored row is replaced), with the instrumentation's fields where they are richer.
            assert {record["request_id"] for record in records} == sdk_spans, scenario.key
            assert all(len(record["merged_span_ids"]) == 1 and record["input_messages"] for record in records)
        else:
            assert {span for record in records for span in record["merged_span_ids"]} == sdk_spans, scenario.key
            assert all(record["scope_name"] != "com.anthropic.sdk.python" for record in records), scenario.key
        # Counted once: the sum over stored requests is the provider's own count.
        assert sum(record["input_tokens"] for record in records) == sum(
            call.usage["input_tokens"] for call in scenario.calls), scenario.key
        # The merged record keeps what only the SDK's span had (cache writes, the stop reason).
        for record, call in zip(records, scenario.calls):
            assert record["cache_creation_tokens"] == call.usage["cache_creation_tokens"], scenario.key
            assert record["response_id"].startswith("msg_"), scenario.key


def test_peers_metrics_are_stored_where_the_clickhouse_exporter_puts_them(store, tmp_path):
    """OpenLIT's default metrics export (HTTP, or gRPC when asked), OpenLLMetry's and openai-v2's:
    accepted (no 404 / UNIMPLEMENTED for the application to log) and queryable in otel_metrics_*."""
    with_metrics = [case for case in scenarios() if any(export.signal == "metrics" for export in case.exports)]
    assert {case.peer for case in with_metrics} >= {"openlit-1.45.0", "openllmetry-openai-0.62.4", "openai-v2-2.4b0"}
    assert {export.transport for case in with_metrics for export in case.exports if export.signal == "metrics"} == {
        "grpc", "http"}
    with running_collector(store, tmp_path) as running:
        for scenario in with_metrics:
            assert set(replay(scenario, running.endpoints(), signals=("metrics",))) <= {200, "OK"}, scenario.key
    rows = store.query(
        f"SELECT ScopeName AS scope, sum(Count) AS points, sumIf(Sum, Attributes['gen_ai.token.type'] = 'input') "
        f"AS input FROM {store.database}.otel_metrics_histogram WHERE MetricName = 'gen_ai.client.token.usage' "
        "GROUP BY scope ORDER BY scope", None)
    scopes = {row["scope"] for row in rows}
    assert any(scope.startswith("openlit") for scope in scopes), scopes
    assert any("openai" in scope for scope in scopes if not scope.startswith("openlit")), scopes
    assert all(row["points"] > 0 and row["input"] > 0 for row in rows), rows
    durations = store.query(f"SELECT count() AS n FROM {store.database}.otel_metrics_histogram "
                            "WHERE MetricName = 'gen_ai.client.operation.duration'", None)
    assert durations[0]["n"] >= len(with_metrics)


def one_span_per_export(scenario: Scenario, reverse: bool) -> Scenario:
    """``scenario`` as an application exporting span by span would send it (SimpleSpanProcessor): every span of
    its traces exports alone, in the order they were exported, or reversed (the wrapper's span first)."""
    from dataclasses import replace

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    exports = []
    for export in scenario.exports:
        if export.signal != "traces":
            exports.append(export)
            continue
        assert export.content_type.endswith("proto") and export.content_encoding == "identity", scenario.key
        whole = ExportTraceServiceRequest.FromString(export.payload)
        singles = []
        for resource in whole.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    single = ExportTraceServiceRequest()
                    part = single.resource_spans.add(resource=resource.resource, schema_url=resource.schema_url)
                    part.scope_spans.add(scope=scope.scope, schema_url=scope.schema_url).spans.append(span)
                    singles.append(replace(export, payload=single.SerializeToString()))
        exports += reversed(singles) if reverse else singles
    return replace(scenario, exports=exports)


@pytest.mark.parametrize("reverse, workers", [(False, 1), (True, 0)])
def test_one_provider_call_in_two_exports_is_one_request_counted_once(store, tmp_path, reverse, workers):
    """The same captures, every span exported alone (in its order, and reversed): the collector merges the
    later span into the stored record by each rule (same response id: OpenLLMetry's sibling; parent and
    child: OpenInference's; overlapping siblings without a response id: OpenLLMetry's events mode)."""
    duplicated = [one_span_per_export(case, reverse) for case in scenarios()
                  if "dup" in case.name and case.key not in SEPARATE_EXPORTS]
    assert len(duplicated) == 6
    with running_collector(store, tmp_path, ingest_workers=workers) as running:
        for scenario in duplicated:
            assert set(replay(scenario, running.endpoints())) <= {200, "OK"}, scenario.key
    for scenario in duplicated:
        records = stored_records(store, scenario)
        spans = store.query(f"SELECT SpanId, ScopeName FROM {store.database}.otel_traces "
                            "WHERE has(splitByChar(',', {ids:String}), TraceId)",
                            {"ids": ",".join(sorted(scenario.trace_ids()))})
        sdk_spans = {row["SpanId"] for row in spans if row["ScopeName"] == "com.anthropic.sdk.python"}
        assert len(records) == len(scenario.calls) and sdk_spans, scenario.key
        covered = {span for record in records for span in (record["request_id"], *record["merged_span_ids"])}
        assert sdk_spans <= covered and all(len(record["merged_span_ids"]) == 1 for record in records), scenario.key
        assert sum(record["input_tokens"] for record in records) == sum(
            call.usage["input_tokens"] for call in scenario.calls), scenario.key
        for index, (record, call) in enumerate(zip(records, scenario.calls)):
            assert record["cache_creation_tokens"] == call.usage["cache_creation_tokens"], scenario.key
            assert check_record(store, scenario, index, call, record) == []


# OpenLIT's runs with openlit.init() and nothing else that exported all three signals: HTTP/protobuf (its
# default) and gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc).
OPENLIT_DEFAULT_EXPORTS = ("openai_chat", "anthropic_messages", "openai_chat_grpc")


def test_openlits_default_export_is_accepted_whole_and_makes_complete_records(store, tmp_path):
    """OpenLIT with its defaults sends traces, log records and metrics to one endpoint, in whatever order its
    three providers flush. Every export is answered 200 / OK (anything else, its exporters log as an error),
    each call is one complete request record, its log records are stored, and its token metrics are
    queryable in otel_metrics_histogram with the counts the record has."""
    cases = [case for case in scenarios("openlit-1.45.0") if case.name in OPENLIT_DEFAULT_EXPORTS]
    assert len(cases) == len(OPENLIT_DEFAULT_EXPORTS)
    for scenario in cases:
        assert {export.signal for export in scenario.exports} == {"traces", "logs", "metrics"}, scenario.key
    with running_collector(store, tmp_path) as running:
        for scenario in cases:
            answers = replay(scenario, running.endpoints())  # every signal, in the order they travelled
            assert answers and set(answers) <= {200, "OK"}, (scenario.key, answers)
    for scenario in cases:
        records, calls = stored_records(store, scenario), expected_records(scenario)
        assert len(records) == len(calls) == 1, scenario.key
        assert check_record(store, scenario, 0, calls[0], records[0]) == [], scenario.key
        events = store.query(f"SELECT count() AS n FROM {store.database}.genai_events "
                             "WHERE has(splitByChar(',', {ids:String}), trace_id)",
                             {"ids": ",".join(sorted(scenario.trace_ids()))})[0]["n"]
        assert events == scenario.log_records() > 0, scenario.key
    # Each run is its own process: its cumulative histogram is that run's call. OpenLIT's Anthropic input
    # count leaves the cache out, as on its span; nothing was cached here.
    points = store.query(
        f"SELECT Attributes['gen_ai.request.model'] AS model, Attributes['gen_ai.token.type'] AS type, "
        f"max(Sum) AS tokens FROM {store.database}.otel_metrics_histogram "
        "WHERE MetricName = 'gen_ai.client.token.usage' AND ScopeName LIKE 'openlit%' "
        "GROUP BY model, type, ResourceAttributes ORDER BY model, type", None)
    assert len(points) == 2 * len(cases)
    for scenario in cases:
        record = stored_records(store, scenario)[0]
        assert record["cache_read_tokens"] in (None, 0) and record["cache_creation_tokens"] in (None, 0)
        assert {(point["type"], point["tokens"]) for point in points if point["model"] == record["model"]} >= {
            ("input", record["input_tokens"]), ("output", record["output_tokens"])}, scenario.key
