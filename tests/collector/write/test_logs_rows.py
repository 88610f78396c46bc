"""logs + rows: GenAI content events vs other records, their columns, and the store."""

from __future__ import annotations

import json

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

from promptprism.collector.otlp.logs import decode_protobuf
from promptprism.collector.conventions.events import is_genai_content_event
from promptprism.collector.write.genai_events import split_logs
from promptprism.collector.write.rows import build_tables, merge_tables
from promptprism.collector.write.convert import ENCODING_PROTOBUF, convert_logs
from promptprism.collector.write.sink import open_sink
from promptprism.wire import names

from ..log_samples import OPENAI_V2_EVENTS, SPAN_ID, SYSTEM_PROMPT, TRACE_ID, WARNING, logs_payload, sdk_log_records


def test_genai_content_event_names():
    for name in (names.EVENT_SYSTEM_MESSAGE, names.EVENT_USER_MESSAGE, names.EVENT_ASSISTANT_MESSAGE,
                 names.EVENT_TOOL_MESSAGE, names.EVENT_CHOICE, names.EVENT_INFERENCE_DETAILS,
                 "gen_ai.developer.message"):
        assert is_genai_content_event(name), name
    for name in ("", "gen_ai.message", "gen_ai.a.b.message", "app.user.message", "gen_ai.choice.extra"):
        assert not is_genai_content_event(name), name


def test_split_keeps_genai_events_with_span_context_and_the_rest_as_logs():
    split = split_logs(decode_protobuf(logs_payload(extra=[WARNING])).records)
    assert [event.event_name for event in split.genai_events] == [name for name, _ in OPENAI_V2_EVENTS]
    assert [record.body for record in split.log_records] == ["disk almost full"]
    first = split.genai_events[0]
    assert (first.trace_id, first.span_id, first.sequence) == (f"{TRACE_ID:032x}", f"{SPAN_ID:016x}", 0)
    assert json.loads(first.body_json) == {"content": SYSTEM_PROMPT}
    assert json.loads(first.attributes_json) == {names.GEN_AI_SYSTEM: "openai"}
    # Two user messages with the same text are still two records.
    assert len({event.record_sha256 for event in split.genai_events}) == len(OPENAI_V2_EVENTS)


def test_event_identity_is_a_function_of_the_record():
    payload = logs_payload()
    first, again = (split_logs(decode_protobuf(payload).records) for _ in range(2))
    assert [event.record_sha256 for event in first.genai_events] == \
        [event.record_sha256 for event in again.genai_events]


def test_genai_event_without_span_context_is_an_ordinary_log_and_counted():
    split = split_logs(decode_protobuf(logs_payload(span_id=0)).records)
    assert split.genai_events == [] and split.unjoinable_genai_events == len(OPENAI_V2_EVENTS)
    assert len(split.log_records) == len(OPENAI_V2_EVENTS)


def test_otel_logs_columns_follow_the_clickhouse_exporter():
    split = split_logs(decode_protobuf(logs_payload(span_id=0, extra=[WARNING])).records)
    table = build_tables([], [], log_records=split.log_records).tables["otel_logs"]
    rows = table.to_pylist()
    system, warning = rows[0], rows[-1]
    # Body.AsString(): a map as Go's JSON (keys sorted, HTML-safe escapes), a string as it is.
    assert system["Body"] == json.dumps({"content": SYSTEM_PROMPT}, separators=(",", ":")) \
        .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    assert system["EventName"] == names.EVENT_SYSTEM_MESSAGE and system["TraceId"] == ""
    assert warning["Body"] == "disk almost full" and warning["SeverityNumber"] == 13
    assert warning["SeverityText"] == "WARN" and dict(warning["LogAttributes"]) == {"code.lineno": "42"}
    assert dict(warning["ResourceAttributes"])["service.name"] == "chat-app"
    assert warning["ServiceName"] == "chat-app" and warning["ScopeName"] == "opentelemetry.instrumentation.openai_v2"


def test_sink_stores_both_tables_once_even_when_the_batch_is_resent(store, tmp_path):
    records = sdk_log_records(extra=[WARNING])
    export = convert_logs(encode_logs(records).SerializeToString(), ENCODING_PROTOBUF)
    # The same GenAI records, without the warning, in another export (another token).
    events_only = convert_logs(encode_logs(records[:-1]).SerializeToString(), ENCODING_PROTOBUF)
    assert events_only.dedup_token != export.dedup_token
    sink = open_sink(store, data_dir=str(tmp_path))
    try:
        for _ in range(3):  # the exporter retried after a lost answer
            sink.accept(export)
        # FINAL still collapses the records the second export repeats.
        sink.accept(events_only)
        stats = sink.stats()
    finally:
        sink.close()
    events = store.query(f"SELECT event_name, sequence FROM {store.database}.genai_events FINAL "
                         "ORDER BY timestamp, sequence")
    assert [row["event_name"] for row in events] == [name for name, _ in OPENAI_V2_EVENTS]
    logs = store.query(f"SELECT Body, TimestampTime FROM {store.database}.otel_logs")
    assert [row["Body"] for row in logs] == ["disk almost full"]
    assert stats["genai_events_stored"] == 2 * len(OPENAI_V2_EVENTS) and stats["log_records_stored"] == 1
    assert stats["batches_duplicate"] == 2


def test_a_group_with_traces_and_logs_merges_per_table():
    split = split_logs(decode_protobuf(logs_payload(extra=[WARNING])).records)
    logs_part = build_tables([], [], genai_events=split.genai_events, log_records=split.log_records)
    traces_part = build_tables([], [])
    merged = merge_tables([traces_part, logs_part])
    assert merged.genai_events == len(OPENAI_V2_EVENTS) and merged.log_records == 1
    assert [name for name, _ in merged.non_empty()] == ["genai_events", "otel_logs"]
