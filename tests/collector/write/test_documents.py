"""Request documents built in the workers (write/documents.py) against the store's own.

Migration 048's ``doc`` DEFAULT is what a document is: the store packs the
row's inputs with ``toJSONString``. ``documents.documents_python`` must give the
same bytes for the same inputs, on ClickHouse 24.8 and 26.x, for requests with
hostile text (control characters, quotes, slashes, U+2028, emoji), floats at
every edge of their layout, 64-bit and NULL integers, maps, tools, blocks and
captured content; the compiled builder (``_documents.pyx``) must give the
definition's column, or hand the table back. The field list is checked
against the DEFAULT's own tuple type, so a field added to one and not the
other fails here.
"""

from __future__ import annotations

import json
import math
import re
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptprism.collector.record import Block, RequestRecord, ToolDefinition
from promptprism.collector.write import documents
from promptprism.collector.write.rows import build_tables

pytestmark = pytest.mark.clickhouse  # on ClickHouse 24.8 too (tests/conftest.py)

HOSTILE = st.text(st.one_of(st.characters(max_codepoint=0x7F), st.sampled_from("é\u2028\u2029😀/\"\\\x00\x1f\x7f\u0085")),
                  max_size=12)
NAMES = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=8)
FLOATS = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0.0, -0.0, 1e21, 1e20, 1e-6, 1e-7, 5e-324, 1.7976931348623157e308, 0.1 + 0.2,
                                    123456789.125, 1.5e-7, 2.5e25, 1e16, 123456789012345680000.0, 0.7, 100.0]))
TOKENS = st.one_of(st.none(), st.integers(-2**63, 2**63 - 1))
NOW_NS = time.time_ns() // 1_000_000_000 * 1_000_000_000  # within the store's retention
HEX = st.text("0123456789abcdef", min_size=64, max_size=64)


@st.composite
def records(draw, number: int) -> RequestRecord:
    record = RequestRecord(trace_id=f"{number:032x}", request_id=f"{number:016x}",
                           started_at_ns=NOW_NS + number * 1_000_000)
    for name in ("parent_span_id", "span_name", "status_message", "service", "model", "response_id",
                 "conversation_id", "message_id", "run_id", "record_id", "prompt_sha256", "unmapped_reason",
                 "template_name", "reasoning_effort"):
        setattr(record, name, draw(HOSTILE))
    record.duration_ns = draw(st.integers(0, 2**64 - 1))
    record.attempt = draw(st.integers(-2**31, 2**31 - 1))
    record.schema_version = draw(st.integers(0, 2**16 - 1))
    record.prompt_bytes = draw(st.integers(0, 2**64 - 1))
    record.headroom_tokens = draw(st.integers(-2**63, 2**63 - 1))
    record.mapped = draw(st.booleans())
    record.temperature = draw(FLOATS)
    record.input_tokens, record.output_tokens = draw(TOKENS), draw(TOKENS)
    record.cache_read_tokens = draw(TOKENS)
    record.finish_reasons = draw(st.lists(HOSTILE, max_size=3))
    record.merged_span_ids = draw(st.lists(NAMES, max_size=2))
    record.attributes = draw(st.dictionaries(HOSTILE, HOSTILE, max_size=3))
    record.resource_attributes = draw(st.dictionaries(NAMES, HOSTILE, max_size=2))
    texts = draw(st.lists(HOSTILE.filter(bool), max_size=4))
    position = 0
    for index, text in enumerate(texts):
        size = len(text.encode())
        record.blocks.append(Block(index, draw(NAMES), draw(NAMES), "static", draw(HOSTILE), position,
                                   position + size, size, draw(HEX), draw(st.sampled_from([text, None])),
                                   draw(st.booleans())))
        position += size
    record.tools = [ToolDefinition(index, draw(HOSTILE), draw(st.integers(0, 2**64 - 1)), draw(HEX),
                                   draw(st.one_of(st.none(), HOSTILE)), draw(st.booleans()))
                    for index in range(draw(st.integers(0, 2)))]
    content = draw(st.sampled_from(["", "x"]))
    if content:
        messages = draw(st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                                        "content": HOSTILE}), max_size=3))
        record.input_messages = json.dumps(messages)
        record.system_instructions = draw(st.sampled_from(["", "plain text", '{"a": "b", "c": 1}']))
        record.template_variables = draw(st.sampled_from(["", '{"who": "Émile", "n": 2}']))
    return record


@st.composite
def tables(draw) -> pa.Table:
    count = draw(st.integers(1, 12))
    return build_tables([], [draw(records(number)) for number in range(1, count + 1)]).tables["request_docs"]


def store_documents(store, table: pa.Table) -> list[bytes]:
    """What the store's DEFAULT makes of ``table``'s inputs, by request id in the table's order."""
    store.execute(f"TRUNCATE TABLE {store.database}.request_docs")
    store.insert("request_docs", table)
    rows = store.query("SELECT request_id, doc FROM {db:Identifier}.request_docs", {"db": store.database})
    by_id = {row["request_id"]: row["doc"] for row in rows}
    return [by_id[request_id].encode() for request_id in table.column("request_id").to_pylist()]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(table=tables())
def test_the_definition_gives_the_stores_documents_byte_for_byte(store, table):
    assert documents.documents_python(table) == store_documents(store, table)


def test_floats_at_every_edge_of_their_layout_are_spelled_as_the_store_spells_them(store):
    values = [0.0, -0.0, 1e21, 1e20, 9.999999999999999e20, 1e-6, 1e-7, 9.99e-7, 5e-324, 2.2250738585072014e-308,
              1.7976931348623157e308, 0.1 + 0.2, 123456789.125, -1.5e-7, 2.5e25, 1e16, 1.2345678901234567e-5,
              math.nan, math.inf, -math.inf, 1.0, -123.0, 0.5, 33.333333333333336]
    records = [RequestRecord(trace_id=f"{n:032x}", request_id=f"{n:016x}", started_at_ns=NOW_NS,
                             temperature=value) for n, value in enumerate(values, 1)]
    table = build_tables([], records).tables["request_docs"]
    assert documents.documents_python(table) == store_documents(store, table)
    assert [json.loads(document)["temperature"] for document in documents.documents_python(table)[:3]] == [
        0, 0, 1e21]


def test_the_document_fields_are_the_defaults_tuple(store):
    """The builder's fields and types are those of the ``doc`` DEFAULT's tuple, in its order."""
    [default] = store.query("SELECT default_expression AS expression FROM system.columns WHERE database = "
                            "{db:String} AND table = 'request_docs' AND name = 'doc'", {"db": store.database})
    [content_refs] = store.query("SELECT default_expression AS expression FROM system.columns WHERE database = "
                                 "{db:String} AND table = 'request_docs' AND name = 'content_refs'",
                                 {"db": store.database})

    def tuple_type(expression: str) -> list[tuple[str, str]]:
        found = re.findall(r"'Tuple\((.*?)\)'", expression)
        assert len(found) == 1, expression
        fields, depth, current = [], 0, ""
        for character in found[0] + ",":
            if character == "," and depth == 0:
                name, _, kind = current.strip().partition(" ")
                fields.append((name, kind))
                current = ""
                continue
            depth += (character == "(") - (character == ")")
            current += character
        return fields

    def unwrapped(kind: str) -> str:  # the DEFAULT casts LowCardinality away: the same JSON
        return kind.replace("LowCardinality(String)", "String")

    assert tuple_type(default["expression"]) == [(column.name, unwrapped(column.type))
                                                 for column in documents.DOCUMENT_COLUMNS]
    assert tuple_type(content_refs["expression"]) == [(column.name, unwrapped(column.type))
                                                      for column in documents.CONTENT_REF_COLUMNS]
