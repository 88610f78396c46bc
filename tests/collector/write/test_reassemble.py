"""reassemble: decoded spans → request records, checked byte for byte."""

from __future__ import annotations

import json

import pytest

from promptprism.collector.otlp.model import SpanEvent
from promptprism.collector.record import Block
from promptprism.collector.write.reassemble import reassemble
from promptprism.wire import names
from promptprism.collector.write.documents import document_inputs

from ..prompt_spans import block_events, decoded_span, prompt_attributes, sha

PARTS = [
    ("identity", "identity", "static", "Tu es Émile, l'assistant. "),
    ("intro", "template", "static", "Mémoire : "),
    ("memory", "memory", "session", "aime le thé 🍵"),
    ("outro", "template", "turn", "\nRéponds en français."),
]


def one(span):
    records, unmapped = reassemble([span])
    assert len(records) == 1
    return records[0], unmapped


def mapped_span(parts=PARTS, *, content=True, mutate=None, **extra):
    prompt, events = block_events(parts, content=content)
    attributes = prompt_attributes(prompt, len(events), **extra)
    if mutate:
        mutate(attributes, events)
    return decoded_span(attributes, events)


def test_valid_map_with_multibyte_content_is_exact():
    record, unmapped = one(mapped_span())
    assert unmapped == {}
    assert record.mapped and record.unmapped_reason == ""
    prompt = "".join(text for *_, text in PARTS).encode("utf-8")
    assert record.prompt_bytes == len(prompt) and record.prompt_sha256 == sha(prompt)
    assert [(b.start, b.end) for b in record.blocks] == [(0, 27), (27, 38), (38, 55), (55, 78)]
    for block, (name, layer, stability, text) in zip(record.blocks, PARTS):
        assert prompt[block.start:block.end] == text.encode("utf-8")
        assert (block.name, block.layer, block.stability, block.content) == (name, layer, stability, text)
        assert block.size == block.end - block.start and block.sha256 == sha(text)
        assert block.source == f"template:{name}"
    assert record.blocks[2] == Block(2, "memory", "memory", "session", "template:memory", 38, 55, 17,
                                     sha("aime le thé 🍵"), "aime le thé 🍵")


def test_map_without_content_is_validated_structurally():
    record, _ = one(mapped_span(content=False))
    assert record.mapped and all(block.content is None for block in record.blocks)


def test_span_record_fields():
    record, _ = one(mapped_span(**{
        names.GEN_AI_CONVERSATION_ID: "conv-1", names.MESSAGE_ID: "m-9", names.PROCESS_KIND: "channel",
        names.ATTEMPT: 2, names.RUN_MODE: "batch", names.GEN_AI_USAGE_INPUT_TOKENS: 1200,
        names.GEN_AI_USAGE_OUTPUT_TOKENS: 30, names.REQUEST_DIALECT: names.DIALECT_CHAT_COMPLETIONS,
        names.REQUEST_BYTES_SYSTEM: 100, names.REQUEST_BYTES_FRAMING: 7, names.REQUEST_HEADROOM_TOKENS: -5,
        names.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"], names.PROMPT_TEMPLATE_NAME: "support",
        names.PROMPT_TEMPLATE_ORIGIN: names.ORIGIN_SCOPE, "http.status_code": 200, "custom.flag": True,
        names.REQUEST_REASONING_BUDGET_TOKENS: 2048,
    }))
    assert (record.trace_id, record.request_id, record.service) == (
        "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "shop-bot")
    assert record.duration_ns == 250_000_000 and record.started_at_ns == 1_700_000_000_000_000_000
    assert (record.operation, record.provider, record.model) == ("chat", "openai", "gpt-4o")
    assert (record.conversation_id, record.message_id, record.process_kind) == ("conv-1", "m-9", "channel")
    assert (record.attempt, record.run_mode, record.headroom_tokens) == (2, "batch", -5)
    assert (record.input_tokens, record.output_tokens, record.cache_read_tokens) == (1200, 30, None)
    assert (record.dialect, record.bytes_system, record.bytes_framing) == ("chat-completions", 100, 7)
    assert record.finish_reasons == ["stop"]
    assert (record.template_name, record.template_origin, record.declared_block_count) == ("support", "scope", 4)
    assert record.schema_version == 1
    # Everything not on a field is kept as text; fields and content are not duplicated.
    assert record.attributes == {"http.status_code": "200", "custom.flag": "true",
                                 names.REQUEST_REASONING_BUDGET_TOKENS: "2048"}
    assert record.resource_attributes == {"service.name": "shop-bot"}


# --- each kind of bad map ----------------------------------------------------


def _set(index, key, value):
    def mutate(attributes, events):
        events[index][key] = value
    return mutate


BAD_MAPS = {
    "gap": (lambda a, e: (e[1].update({names.BLOCK_START: 28, names.BLOCK_SIZE: 10})), names.UNMAPPED_NOT_TILING),
    "overlap": (lambda a, e: (e[1].update({names.BLOCK_START: 26, names.BLOCK_SIZE: 12})), names.UNMAPPED_NOT_TILING),
    "first_not_at_zero": (lambda a, e: e[0].update({names.BLOCK_START: 1, names.BLOCK_SIZE: 26}), names.UNMAPPED_NOT_TILING),
    "short_of_prompt": (lambda a, e: a.update({names.PROMPT_BYTES: 79}), names.UNMAPPED_NOT_TILING),
    "beyond_prompt": (lambda a, e: a.update({names.PROMPT_BYTES: 70}), names.UNMAPPED_BAD_RANGE),
    "size_wrong": (_set(2, names.BLOCK_SIZE, 16), names.UNMAPPED_BAD_RANGE),
    "end_before_start": (lambda a, e: e[0].update({names.BLOCK_END: -1}), names.UNMAPPED_BAD_RANGE),
    "empty_block": (lambda a, e: (e.insert(2, {**e[2], names.BLOCK_END: 38, names.BLOCK_SIZE: 0}),
                                  [event.update({names.BLOCK_INDEX: i}) for i, event in enumerate(e)],
                                  a.update({names.PROMPT_BLOCK_COUNT: 5})), names.UNMAPPED_EMPTY_BLOCK),
    "hash_mismatch": (_set(1, names.BLOCK_SHA256, sha("something else")), names.UNMAPPED_HASH_MISMATCH),
    "content_not_matching": (_set(1, names.BLOCK_CONTENT, "Memoire  : "), names.UNMAPPED_HASH_MISMATCH),
    "prompt_hash_mismatch": (lambda a, e: a.update({names.PROMPT_SHA256: sha("other")}), names.UNMAPPED_HASH_MISMATCH),
    "fewer_events": (lambda a, e: e.pop(), names.UNMAPPED_INCOMPLETE),
    "more_events": (lambda a, e: a.update({names.PROMPT_BLOCK_COUNT: 3}), names.UNMAPPED_BAD_ATTRIBUTES),
    "missing_field": (lambda a, e: e[0].pop(names.BLOCK_LAYER), names.UNMAPPED_BAD_ATTRIBUTES),
    "mistyped_field": (_set(0, names.BLOCK_START, "0"), names.UNMAPPED_BAD_ATTRIBUTES),
    "bool_is_not_int": (_set(0, names.BLOCK_INDEX, False), names.UNMAPPED_BAD_ATTRIBUTES),
    "sha_not_hex": (_set(0, names.BLOCK_SHA256, "z" * 64), names.UNMAPPED_BAD_ATTRIBUTES),
    "duplicate_index": (_set(1, names.BLOCK_INDEX, 0), names.UNMAPPED_BAD_ATTRIBUTES),
    "no_block_count": (lambda a, e: a.pop(names.PROMPT_BLOCK_COUNT), names.UNMAPPED_BAD_ATTRIBUTES),
}


@pytest.mark.parametrize("case", sorted(BAD_MAPS))
def test_bad_maps_are_unmapped_with_reason(case):
    mutate, reason = BAD_MAPS[case]
    record, unmapped = one(mapped_span(mutate=mutate))
    assert (record.mapped, record.unmapped_reason) == (False, reason)
    assert unmapped == {reason: 1}


def test_bad_map_keeps_the_captured_system_prompt_as_one_block():
    prompt = "".join(text for *_, text in PARTS)
    record, _ = one(mapped_span(mutate=_set(1, names.BLOCK_SHA256, sha("x")),
                                **{names.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps([{"type": "text", "content": prompt}])}))
    assert not record.mapped
    assert [(b.name, b.start, b.end, b.content) for b in record.blocks] == [("system", 0, 78, prompt)]


def test_utf8_boundary_inside_a_character():
    # "thé" = 74 68 c3 a9: a boundary after byte 3 splits é. A lenient
    # decoder leaves U+FFFD on both sides; sizes and hashes are of the real bytes.
    data = "thé au lait".encode("utf-8")
    first, second = data[:3], data[3:]
    events = []
    for index, (start, piece) in enumerate(((0, first), (3, second))):
        events.append({
            names.BLOCK_INDEX: index, names.BLOCK_NAME: f"b{index}", names.BLOCK_LAYER: "memory",
            names.BLOCK_STABILITY: "turn", names.BLOCK_SOURCE: "s", names.BLOCK_START: start,
            names.BLOCK_END: start + len(piece), names.BLOCK_SIZE: len(piece), names.BLOCK_SHA256: sha(piece),
            names.BLOCK_CONTENT: piece.decode("utf-8", "replace"),
        })
    record, unmapped = one(decoded_span(prompt_attributes("thé au lait", 2), events))
    assert record.unmapped_reason == names.UNMAPPED_UTF8_BOUNDARY and unmapped == {names.UNMAPPED_UTF8_BOUNDARY: 1}


def test_dropped_events_make_the_map_incomplete_even_when_counts_agree():
    prompt, events = block_events(PARTS)
    span = decoded_span(prompt_attributes(prompt, 4), events, dropped_events=3)
    record, _ = one(span)
    assert record.unmapped_reason == names.UNMAPPED_INCOMPLETE


def test_redacted_content_skips_the_hash_check():
    def redact(attributes, events):
        events[2][names.BLOCK_CONTENT] = "[redacted]"
        events[2][names.BLOCK_REDACTED] = True
    record, _ = one(mapped_span(mutate=redact))
    assert record.mapped and record.blocks[2].content == "[redacted]" and record.blocks[2].sha256 == sha("aime le thé 🍵")


def test_unknown_stability_is_stored_as_unknown():
    record, _ = one(mapped_span(mutate=_set(3, names.BLOCK_STABILITY, "hourly")))
    assert record.mapped and record.blocks[3].stability == names.STABILITY_UNKNOWN


def test_events_out_of_order_are_sorted_by_index():
    record, _ = one(mapped_span(mutate=lambda a, e: e.reverse()))
    assert record.mapped and [b.index for b in record.blocks] == [0, 1, 2, 3]


def test_instrumentation_declared_unmapped():
    prompt, _ = block_events(PARTS)
    attributes = prompt_attributes(prompt, 0, **{names.PROMPT_MAPPED: False,
                                                 names.PROMPT_UNMAPPED_REASON: names.UNMAPPED_SENTINEL_COLLISION})
    record, unmapped = one(decoded_span(attributes))
    assert (record.mapped, record.unmapped_reason) == (False, names.UNMAPPED_SENTINEL_COLLISION)
    assert record.blocks == [] and unmapped == {names.UNMAPPED_SENTINEL_COLLISION: 1}


def test_empty_prompt_is_a_valid_empty_map():
    record, _ = one(decoded_span(prompt_attributes("", 0)))
    assert record.mapped and record.blocks == [] and record.prompt_bytes == 0


def test_tools_from_tool_definition_events():
    tool = '{"name":"lookup","parameters":{}}'
    span = mapped_span()
    span.events.append(SpanEvent(5, names.EVENT_TOOL_DEFINITION, {
        names.TOOL_NAME: "lookup", names.TOOL_SIZE: len(tool), names.TOOL_SHA256: sha(tool), names.TOOL_CONTENT: tool}))
    span.events.append(SpanEvent(6, names.EVENT_TOOL_DEFINITION, {names.TOOL_NAME: "search", names.TOOL_SIZE: 10,
                                                                   names.TOOL_SHA256: sha("x")}))
    record, _ = one(span)
    assert record.mapped
    assert [(t.index, t.name, t.size, t.content) for t in record.tools] == [
        (0, "lookup", len(tool), tool), (1, "search", 10, None)]


def test_one_bad_span_does_not_affect_its_neighbours():
    good = mapped_span()
    bad = mapped_span(mutate=_set(0, names.BLOCK_SIZE, 3))
    bad.span_id = "1111111111111111"
    plain = decoded_span({"http.method": "GET"}, span_id="2222222222222222")
    records, unmapped = reassemble([good, bad, plain])
    assert [(r.request_id, r.mapped) for r in records] == [("00f067aa0ba902b7", True), ("1111111111111111", False)]
    assert unmapped == {names.UNMAPPED_BAD_RANGE: 1}


# --- other GenAI instrumentations -------------------------------------------

SYSTEM = "You are a helpful assistant. Réponds brièvement."


def other_span(**attributes):
    base = {names.GEN_AI_OPERATION_NAME: "chat", names.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
            names.GEN_AI_USAGE_INPUT_TOKENS: 42, names.GEN_AI_USAGE_OUTPUT_TOKENS: 7}
    base.update(attributes)
    return decoded_span(base)


def assert_one_system_block(record, source):
    data = SYSTEM.encode("utf-8")
    assert (record.mapped, record.unmapped_reason) == (False, names.UNMAPPED_NO_BLOCKS)
    assert (record.prompt_bytes, record.prompt_sha256) == (len(data), sha(data))
    assert [(b.index, b.start, b.end, b.size, b.sha256, b.content, b.source) for b in record.blocks] == [
        (0, 0, len(data), len(data), sha(data), SYSTEM, source)]


def test_semconv_system_instructions_as_json_string():
    record, unmapped = one(other_span(**{
        names.GEN_AI_PROVIDER_NAME: "openai",
        names.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps([{"type": "text", "content": SYSTEM}])}))
    assert_one_system_block(record, names.GEN_AI_SYSTEM_INSTRUCTIONS)
    assert (record.model, record.provider, record.input_tokens, record.output_tokens) == ("gpt-4o-mini", "openai", 42, 7)
    assert unmapped == {names.UNMAPPED_NO_BLOCKS: 1}


def test_semconv_system_instructions_structured():
    record, _ = one(other_span(**{names.GEN_AI_SYSTEM_INSTRUCTIONS: [{"type": "text", "content": SYSTEM}]}))
    assert_one_system_block(record, names.GEN_AI_SYSTEM_INSTRUCTIONS)
    assert json.loads(record.system_instructions) == [{"type": "text", "content": SYSTEM}]


@pytest.mark.parametrize("structured", [False, True])
def test_system_message_inside_input_messages(structured):
    messages = [{"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
                {"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
    value = messages if structured else json.dumps(messages)
    record, _ = one(other_span(**{names.GEN_AI_SYSTEM: "openai", names.GEN_AI_INPUT_MESSAGES: value}))
    assert_one_system_block(record, names.GEN_AI_INPUT_MESSAGES)
    assert record.provider == "openai" and json.loads(record.input_messages) == messages
    assert names.GEN_AI_INPUT_MESSAGES not in record.attributes


def test_legacy_flattened_prompt_attributes():
    record, _ = one(other_span(**{
        names.GEN_AI_SYSTEM: "anthropic", "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": SYSTEM,
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "hello",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "hi!",
        names.GEN_AI_USAGE_PROMPT_TOKENS: 99}))
    assert_one_system_block(record, "gen_ai.prompt.N.content")
    assert record.provider == "anthropic" and record.input_tokens == 42  # current name wins over the old one
    assert json.loads(record.input_messages) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hello"}]
    assert json.loads(record.output_messages) == [{"role": "assistant", "content": "hi!"}]
    assert not any(key.startswith("gen_ai.prompt.") for key in record.attributes)


def test_genai_span_without_content_has_no_blocks():
    record, _ = one(other_span(**{names.GEN_AI_USAGE_INPUT_TOKENS: "17"}))
    assert record.unmapped_reason == names.UNMAPPED_NO_BLOCKS and record.blocks == []
    assert record.input_tokens == 17 and record.prompt_bytes == 0


def test_spans_that_are_not_llm_requests_make_no_record():
    tool = decoded_span({names.GEN_AI_OPERATION_NAME: names.OPERATION_EXECUTE_TOOL, "gen_ai.tool.name": "x"})
    plain = decoded_span({"http.route": "/api"})
    assert reassemble([tool, plain]) == ([], {})


# Values whose text the record's own stringify and the otel_traces one used to spell apart.
ODD_VALUES = {
    "small": 1.5e-07, "big": 1e21, "negative zero": -0.0, "whole": 2.0,
    "map": {"z": 1, "a": "<b>&", "m": [0.5, None]},
    "escapes": ["tab\t", "quote\"", "line\u2028", "é"],
    "bytes": b"\x00\x01\xff", "nested": [[1, [2.5e-7, True]], {"k": b"\x02"}], "flag": False,
}


def test_requests_attributes_hold_the_text_otel_traces_holds():
    from promptprism.collector.write.rows import build_tables

    span = other_span(**ODD_VALUES)
    span.resource_attributes.update(ODD_VALUES)
    records, _ = reassemble([span])
    tables = build_tables([span], records)
    [request] = document_inputs(tables.tables["request_docs"]).to_pylist()  # the attributes are in its document (051)
    [trace] = tables.tables["otel_traces"].to_pylist()
    assert dict(request["attributes"]) == {key: value for key, value in trace["SpanAttributes"]
                                           if key in ODD_VALUES}
    assert dict(request["resource_attributes"]) == dict(trace["ResourceAttributes"])
    assert dict(request["attributes"])["small"] == "1.5e-7"  # Go's encoding/json, as pdata AsString
    assert dict(request["attributes"])["map"] == '{"a":"\\u003cb\\u003e\\u0026","m":[0.5,null],"z":1}'
    assert dict(request["attributes"])["bytes"] == "AAH/"


def test_system_text_with_a_lone_surrogate_escape_gives_no_block_and_the_batch_still_lays_out():
    """JSON text may escape half a character (``\\ud800``): no UTF-8 bytes to
    measure or store, so no whole-prompt block, and the neighbours' rows are built."""
    from promptprism.collector.write.rows import build_tables

    broken = other_span(**{names.GEN_AI_SYSTEM_INSTRUCTIONS: '[{"type": "text", "content": "a\\ud800b"}]'})
    fine = decoded_span(dict(other_span(**{names.GEN_AI_SYSTEM_INSTRUCTIONS: SYSTEM}).attributes), span_id="00f067aa0ba902b8")
    records, _ = reassemble([broken, fine])
    assert records[0].blocks == [] and records[0].prompt_bytes == 0
    assert_one_system_block(records[1], names.GEN_AI_SYSTEM_INSTRUCTIONS)
    tables = build_tables([broken, fine], records)
    assert tables.requests == 2
