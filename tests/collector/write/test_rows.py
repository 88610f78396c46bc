"""rows: records and spans → exact table columns (pure, no store)."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from promptprism.collector.otlp.model import SpanEvent
from promptprism.collector.record import Block, RequestRecord
from promptprism.collector.write import rows
from promptprism.collector.write.reassemble import reassemble
from promptprism.collector.write.rows import (
    BLOCK_ARRAYS,
    TABLES,
    build_tables,
    contents_table,
    merge_tables,
    otel_attribute_string,
    otel_traces_table,
    request_docs_table,
    requests_table,
    tools_table,
)

from promptprism.wire import names
from promptprism.collector.write.documents import document_inputs

from ..prompt_spans import block_events, decoded_span, prompt_attributes
from ..write_path_samples import BASE_NS, SYSTEM_PARTS, make_request, sha


@pytest.mark.parametrize("value, expected", [
    ("text", "text"),
    (True, "true"),
    (False, "false"),
    (42, "42"),
    (-7, "-7"),
    (0.5, "0.5"),
    (1.0, "1"),  # Go writes the shortest form, no ".0"
    (-0.0, "-0"),
    (1e20, "100000000000000000000"),
    (1e21, "1e+21"),
    (2.5e-6, "0.0000025"),
    (1.5e-7, "1.5e-7"),  # Go trims the exponent's leading zero
    (1e-10, "1e-10"),
    (float("nan"), "json: unsupported value: NaN"),
    (b"\x00\x01hi", "AAFoaQ=="),  # bytes: standard base64
    (None, ""),
    (["a", 1, 2.0, True, None], '["a",1,2,true,null]'),
    ({"b": 1, "a": {"z": "<&>"}}, '{"a":{"z":"\\u003c\\u0026\\u003e"},"b":1}'),  # keys sorted, HTML-safe
    (["tab\there", "é", "\x01"], '["tab\\there","é","\\u0001"]'),
    ([float("inf")], ""),  # json.Marshal fails, AsString returns ""
])
def test_attribute_values_are_stringified_like_the_clickhouse_exporter(value, expected):
    assert otel_attribute_string(value) == expected


def test_request_row_carries_every_record_field():
    span, record = make_request(3, started_at_ns=BASE_NS)
    record.finish_reasons = ["stop"]
    record.cache_read_tokens = None
    record.duration_ns = -5  # a broken clock: stored as 0, not a failed batch
    row = requests_table([record]).to_pylist()[0]
    assert row["started_at"] == dt.datetime(2026, 3, 2, 10, 0, tzinfo=dt.timezone.utc)
    assert row["trace_id"] == f"{4:032x}" and row["request_id"] == f"{4:016x}"
    assert row["duration_ns"] == 0
    assert row["block_count"] == 4 and row["declared_block_count"] == 4
    assert row["finish_reasons"] == ["stop"]
    assert row["input_tokens"] == 43 and row["cache_read_tokens"] is None
    assert row["mapped"] is True and row["schema_version"] == 1
    assert row["attributes"] == [("ratio", "0.5")]
    schema = requests_table([record]).schema
    assert schema.field("started_at").type == pa.timestamp("ns", tz="UTC")
    assert schema.field("input_tokens").type == pa.int64()


def test_block_arrays_and_tool_rows_follow_the_record():
    _, record = make_request(0, started_at_ns=BASE_NS)
    (document,) = request_docs_table([record], requests_table([record]), {}).to_pylist()
    blocks = [dict(zip(BLOCK_ARRAYS.values(), values))
              for values in zip(*(document[array] for array in BLOCK_ARRAYS))]
    assert [(b["index"], b["name"], b["layer"], b["stability"], b["start"], b["end"], b["size"]) for b in blocks] == [
        (0, "identity", "identity", "static", 0, 36, 36),
        (1, "rules", "instructions", "static", 36, 66, 30),
        (2, "memory", "memory", "session", 66, 97, 31),
        (3, "question", "state", "turn", 97, 118, 21),  # "Turn 0: what is 2+0?\n"
    ]
    assert blocks[0]["sha256"] == sha(SYSTEM_PARTS[0][3])
    assert document["request_id"] == record.request_id
    assert "content" not in BLOCK_ARRAYS.values()  # text lives in `contents`
    tools = tools_table([record]).to_pylist()
    assert [(t["index"], t["name"], t["size"]) for t in tools] == [(0, "search", 33)]  # len('{"name":"search","parameters":{}}')


def test_contents_once_per_day_and_hash_skipping_known_keys():
    day = BASE_NS // (86_400 * 10**9)
    records = [make_request(n, started_at_ns=BASE_NS + n)[1] for n in range(3)]
    table, keys = contents_table(records)
    # 3 shared blocks + 3 distinct questions + 1 tool, each once
    assert table.num_rows == 7 and len(keys) == 7
    assert {k[0] for k in keys} == {day}
    # keyed by the first 16 bytes of the text's sha256, raw (migration 040)
    row = [r for r in table.to_pylist() if r["sha256"] == bytes.fromhex(sha(SYSTEM_PARTS[0][3]))[:16]][0]
    assert row == {"day": dt.date(2026, 3, 2), "sha256": bytes.fromhex(sha(SYSTEM_PARTS[0][3]))[:16], "size": 36,
                   "content": SYSTEM_PARTS[0][3]}
    assert (day, sha(SYSTEM_PARTS[0][3])) in keys  # the keys the sink remembers: hex digests
    known = {(day, sha(text)) for *_, text in SYSTEM_PARTS}
    table, keys = contents_table(records, known)
    assert table.num_rows == 4 and not known & set(keys)
    # The next day the same text is stored again: the TTL drops whole days.
    tomorrow = make_request(0, started_at_ns=BASE_NS + 86_400 * 10**9)[1]
    _, keys = contents_table([tomorrow], known)
    assert (day + 1, sha(SYSTEM_PARTS[0][3])) in keys


def test_content_not_captured_writes_no_content_rows():
    _, record = make_request(0, started_at_ns=BASE_NS, content=False)
    table, keys = contents_table([record])
    assert table.num_rows == 0 and keys == []


def test_otel_traces_row_has_the_exporter_columns_and_values():
    span, _ = make_request(1, started_at_ns=BASE_NS)
    table = otel_traces_table([span])
    assert table.column_names == [
        "Timestamp", "TraceId", "SpanId", "ParentSpanId", "TraceState", "SpanName", "SpanKind", "ServiceName",
        "ResourceAttributes", "ScopeName", "ScopeVersion", "SpanAttributes", "Duration", "StatusCode",
        "StatusMessage", "Events.Timestamp", "Events.Name", "Events.Attributes", "Links.TraceId",
        "Links.SpanId", "Links.TraceState", "Links.Attributes"]
    row = table.to_pylist()[0]
    assert row["Duration"] == 250_000_000
    assert row["SpanKind"] == "Client" and row["StatusCode"] == "Ok"
    assert row["ResourceAttributes"] == [("service.name", "chat-app"), ("host.cores", "2")]
    assert row["SpanAttributes"] == [("gen_ai.request.model", "gpt-test"), ("gen_ai.usage.input_tokens", "41"),
                                     ("promptprism.prompt.mapped", "true"), ("ratio", "0.5")]
    assert row["Events.Name"] == ["promptprism.prompt.block"] * 4
    assert row["Events.Attributes"][1][:2] == [("promptprism.block.index", "1"), ("promptprism.block.name", "rules")]
    assert row["Links.TraceId"] == ["a" * 32] and row["Links.Attributes"] == [[("kind", "retry")]]


def test_build_and_merge_keep_shared_content_once():
    pairs = [make_request(n, started_at_ns=BASE_NS + n) for n in range(4)]
    first = build_tables([p[0] for p in pairs[:2]], [p[1] for p in pairs[:2]])
    second = build_tables([p[0] for p in pairs[2:]], [p[1] for p in pairs[2:]])
    merged = merge_tables([first, second])
    # their tools are on their rows, their blocks in their documents
    assert [name for name, _ in merged.non_empty()] == [name for name in TABLES if name != "tools"]
    assert [len(names) for names in document_inputs(merged.tables["request_docs"]).column("tool_names").to_pylist()] == [1, 1, 1, 1]
    assert "tool_names" not in merged.tables["requests"].column_names  # in the documents only (migration 051)
    assert merged.spans == 4 and merged.requests == 4
    assert merged.tables["requests"].num_rows == 4 == merged.tables["request_docs"].num_rows
    assert [len(names) for names in document_inputs(merged.tables["request_docs"]).column("block_names").to_pylist()] == [4, 4, 4, 4]
    # both halves carried the three shared blocks and the tool: kept once
    assert merged.tables["contents"].num_rows == 8 == len(merged.content_keys)
    assert len(set(merged.tables["contents"].column("sha256").to_pylist())) == 8


def test_empty_input_gives_empty_tables():
    tables = build_tables([], [])
    assert tables.non_empty() == [] and tables.spans == 0


def test_records_without_blocks_still_give_a_request_row():
    record = RequestRecord(trace_id="f" * 32, request_id="e" * 16, started_at_ns=BASE_NS, mapped=False,
                           unmapped_reason="no_blocks", blocks=[Block(0, "x", "l", "static", "s", 0, 1, 1, "", "x")])
    tables = build_tables([], [record])
    assert tables.tables["requests"].num_rows == 1
    assert tables.tables["contents"].num_rows == 0  # no hash, no content row


def _prompt_span_with_tool(*, bad_hash: bool = False):
    parts = [("identity", "identity", "static", "Tu es Émile. "), ("memory", "memory", "session", "aime le thé 🍵")]
    prompt, events = block_events(parts)
    if bad_hash:
        events[1][names.BLOCK_SHA256] = "0" * 64
    span = decoded_span(prompt_attributes(prompt, len(events)), events)
    tool = '{"name":"lookup","parameters":{}}'
    span.events.append(SpanEvent(5, names.EVENT_TOOL_DEFINITION, {
        names.TOOL_NAME: "lookup", names.TOOL_SIZE: len(tool), names.TOOL_SHA256: sha(tool),
        names.TOOL_CONTENT: tool}))
    return span, [text for *_, text in parts], tool


def test_a_request_span_leaves_the_digests_its_document_holds_out_of_otel_traces():
    span, _, _ = _prompt_span_with_tool()
    body, catalog = "AB" * 32, "cd" * 32  # the body's digest sent in capitals: the same digest
    span.attributes.update({names.REQUEST_BODY_SHA256: body, names.REQUEST_TOOLS_CATALOG_SHA256: catalog,
                            "app.sha256": "ef" * 32})
    records, _ = reassemble([span])
    tables = build_tables([span], records)
    attributes = [dict(pairs) for pairs in tables.tables["otel_traces"].column("SpanAttributes").to_pylist()]
    left_out = {names.PROMPT_SHA256, names.REQUEST_BODY_SHA256, names.REQUEST_TOOLS_CATALOG_SHA256}
    assert not left_out & set(attributes[0])
    assert attributes[0]["app.sha256"] == "ef" * 32 and attributes[0][names.PROMPT_BYTES]
    # …which the request's document is packed from
    documents = document_inputs(tables.tables["request_docs"])
    assert documents.column("body_sha256")[0].as_py().lower() == body.lower()
    assert documents.column("tools_catalog_sha256")[0].as_py() == catalog
    assert documents.column("prompt_sha256")[0].as_py() == span.attributes[names.PROMPT_SHA256]


def test_a_digest_that_is_not_the_documents_stays_in_otel_traces():
    span, _, _ = _prompt_span_with_tool()
    records, _ = reassemble([span])
    records[0].body_sha256 = "12" * 32  # the record holds another value than the span sent
    span.attributes[names.REQUEST_BODY_SHA256] = "34" * 32
    tables = build_tables([span], records)
    [attributes] = [dict(pairs) for pairs in tables.tables["otel_traces"].column("SpanAttributes").to_pylist()]
    assert attributes[names.REQUEST_BODY_SHA256] == "34" * 32
    assert names.PROMPT_SHA256 not in attributes


def test_block_and_tool_text_is_in_contents_once_and_not_in_otel_traces():
    span, texts, tool = _prompt_span_with_tool()
    records, _ = reassemble([span])
    assert records[0].mapped
    tables = build_tables([span], records)
    stored = tables.tables["contents"].column("content").to_pylist()
    assert sorted(stored) == sorted([*texts, tool])  # each text once
    events = tables.tables["otel_traces"].column("Events.Attributes").to_pylist()[0]
    flat = [(key, value) for attributes in events for key, value in attributes]
    assert not {"promptprism.block.content", "promptprism.tool.content"} & {key for key, _ in flat}
    assert not set(texts + [tool]) & {value for _, value in flat}
    # A block event keeps its place in the map; its digest, as its text, is in the request's document,
    # which points at the text in `contents` (one place each); the tool event still points there itself.
    assert "promptprism.block.sha256" not in {key for key, _ in flat}
    block_shas = document_inputs(tables.tables["request_docs"]).column("block_sha256").to_pylist()[0]
    assert block_shas == [sha(text) for text in texts]
    tool_shas = [value for key, value in flat if key == "promptprism.tool.sha256"]
    assert [bytes.fromhex(value)[:16] for value in [*block_shas, *tool_shas]] == \
        tables.tables["contents"].column("sha256").to_pylist()
    assert [key for key, _ in events[0]][:2] == ["promptprism.block.index", "promptprism.block.name"]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled-when-built", "definition"])
def test_a_mapped_span_s_block_events_keep_only_what_its_document_does_not_hold(compiled, monkeypatch):
    """The document holds each block's layer, stability, source, byte range, digest and text: the
    span's block events keep the index that points there, the name the trace view shows, and
    whatever else they carry; a stability reassembly files as `unknown` stays as it was sent."""
    if not compiled:
        monkeypatch.setattr(rows, "_compiled_event_columns", None)
    parts = [("identity", "identity", "static", "Tu es Émile. "),
             ("memory", "memory", "volatile", "aime le thé 🍵"), ("tail", "template", "turn", "\n")]
    prompt, events = block_events(parts)
    events[0]["app.note"] = "kept"
    events[2][names.BLOCK_REDACTED] = True
    span = decoded_span(prompt_attributes(prompt, len(events)), events)
    records, _ = reassemble([span])
    assert records[0].mapped
    tables = build_tables([span], records)
    stored = [dict(pairs) for pairs in tables.tables["otel_traces"].column("Events.Attributes").to_pylist()[0]]
    assert stored == [
        {names.BLOCK_INDEX: "0", names.BLOCK_NAME: "identity", "app.note": "kept"},
        {names.BLOCK_INDEX: "1", names.BLOCK_NAME: "memory", names.BLOCK_STABILITY: "volatile"},
        {names.BLOCK_INDEX: "2", names.BLOCK_NAME: "tail", names.BLOCK_REDACTED: "true"},
    ]
    # …and the document has every value left out, as it was sent.
    document = document_inputs(tables.tables["request_docs"]).to_pylist()[0]
    sent = [(attributes[names.BLOCK_LAYER], attributes[names.BLOCK_SOURCE], attributes[names.BLOCK_START],
             attributes[names.BLOCK_END], attributes[names.BLOCK_SIZE]) for attributes in events]
    assert list(zip(document["block_layers"], document["block_sources"], document["block_starts"],
                    document["block_ends"], document["block_sizes"])) == sent
    assert document["block_stabilities"] == ["static", "unknown", "turn"]


def test_unmapped_block_text_stays_in_otel_traces_where_it_is_the_only_copy():
    span, texts, tool = _prompt_span_with_tool(bad_hash=True)
    records, _ = reassemble([span])
    assert not records[0].mapped  # hash mismatch: the blocks are not stored
    tables = build_tables([span], records)
    events = tables.tables["otel_traces"].column("Events.Attributes").to_pylist()[0]
    contents = [dict(attributes).get("promptprism.block.content") for attributes in events[:2]]
    assert contents == texts
    assert [dict(attributes)[names.BLOCK_LAYER] for attributes in events[:2]] == ["identity", "memory"]
    assert "promptprism.tool.content" not in dict(events[2])  # the tool text is in `contents`
    assert tables.tables["contents"].column("content").to_pylist() == [tool]


def test_otel_traces_without_records_keeps_every_attribute():
    span, texts, _ = _prompt_span_with_tool()
    events = otel_traces_table([span]).column("Events.Attributes").to_pylist()[0]
    assert [dict(attributes)["promptprism.block.content"] for attributes in events[:2]] == texts


def test_integers_beyond_a_request_column_are_clamped_not_a_failed_batch():
    span, record = make_request(3, started_at_ns=BASE_NS)
    record.attempt = 3_000_000_000  # Int32
    record.schema_version = 70_000  # UInt16
    record.tools_count = 5_000_000_000  # UInt32
    record.bytes_total = 10**30  # UInt64 (a string attribute may hold any number)
    record.input_tokens = -(10**30)  # Nullable(Int64)
    row = requests_table([record]).to_pylist()[0]
    assert (row["attempt"], row["schema_version"], row["tools_count"]) == (2**31 - 1, 2**16 - 1, 2**32 - 1)
    assert (row["bytes_total"], row["input_tokens"]) == (2**64 - 1, -(2**63))


# --- content fields stored content-addressed (migration 021) -----------------

def _conversation_turns(turns: int) -> list:
    from promptprism.collector.record import RequestRecord

    history, records = [], []
    for turn in range(turns):
        history = history + [{"role": "user", "parts": [{"type": "text", "content": f"question {turn} é"}]}]
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {turn}"}]}]
        # the answer with its finish_reason, then (next turn) in the history without it: one item
        output = [{**answer[0], "finish_reason": "stop"}]
        records.append(RequestRecord(
            trace_id=f"{turn + 1:032x}", request_id=f"{turn + 1:016x}", started_at_ns=BASE_NS + turn,
            conversation_id="conv-1", input_messages=json.dumps(history), output_messages=json.dumps(output),
            template_variables=json.dumps({"user": "Ada", "limits": {"max": 3}}),
            system_instructions="not json at all"))
        history = history + answer
    return records


def test_a_conversation_stores_each_message_once_and_every_request_points_to_its_history():
    from promptprism.collector.read import content

    records = _conversation_turns(5)
    tables = build_tables([], records)
    texts = tables.tables["contents"].to_pylist()
    # 5 questions + 5 answers + the two variable values + the instructions: each once
    assert len(texts) == 13
    references = document_inputs(tables.tables["request_docs"]).to_pylist()
    assert [len(row["input_messages_keys"]) for row in references] == [1, 3, 5, 7, 9]
    assert {row["conversation_id"] for row in references} == {"conv-1"}
    stored = {(str(row["day"]), row["sha256"]): row["content"] for row in texts}
    for record, reference in zip(records, references):
        reference = {**reference, "content_day": str(texts[0]["day"])}
        for field in ("input_messages", "output_messages", "template_variables", "system_instructions"):
            joined = content.joined_text(reference, field, stored)
            original = getattr(record, field)
            if field == "system_instructions":
                assert joined == original
            else:
                assert json.loads(joined) == json.loads(original)


def test_a_string_template_variable_shares_the_row_of_the_block_it_fills():
    _, record = make_request(0, started_at_ns=BASE_NS)
    record.template_variables = json.dumps({"rules": SYSTEM_PARTS[1][3]})
    tables = build_tables([], [record])
    [reference] = document_inputs(tables.tables["request_docs"]).to_pylist()
    assert reference["template_variables_keys"] == [bytes.fromhex(sha(SYSTEM_PARTS[1][3]))[:16]]
    assert reference["template_variables_raw"] == [1]
    assert tables.tables["contents"].num_rows == 5  # the four blocks' and the tool's text, nothing more


def test_otel_traces_names_the_content_attributes_it_does_not_repeat():
    span, record = make_request(1, started_at_ns=BASE_NS)
    messages = json.dumps([{"role": "user", "content": "hello"}])
    span.attributes["gen_ai.input.messages"] = messages
    record.input_messages = messages
    [row] = otel_traces_table([span], [record]).to_pylist()
    attributes = dict(row["SpanAttributes"])
    assert "gen_ai.input.messages" not in attributes
    assert attributes["promptprism.content.moved"] == "gen_ai.input.messages"
    # without a record storing it (not a request, or content not captured) the span keeps it
    [row] = otel_traces_table([span]).to_pylist()
    assert dict(row["SpanAttributes"])["gen_ai.input.messages"] == messages
