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
from promptprism.collector.write import rows
from promptprism.collector.write.rows import build_tables, in_todays_layout, merge_tables

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


def inputs(records: list[RequestRecord]) -> pa.Table:
    """The document inputs of ``records`` (what an INSERT named before the workers built documents)."""
    items = {record.request_id: found for record in records if (found := rows.content_items(record))}
    return rows.request_docs_table(records, rows.requests_table(records), items)


@st.composite
def tables(draw) -> pa.Table:
    count = draw(st.integers(1, 12))
    return inputs([draw(records(number)) for number in range(1, count + 1)])


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
    table = inputs(records)
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


COMPILED = documents._compiled_documents
needs_the_extension = pytest.mark.skipif(COMPILED is None, reason="the compiled document builder is not built here")


@needs_the_extension
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(table=tables(), cut=st.integers(0, 3), chunks=st.integers(1, 3))
def test_the_compiled_builder_gives_the_definitions_documents(table, cut, chunks):
    """On whole tables, on slices (Arrow offsets into every buffer) and on tables of several chunks."""
    table = table.slice(min(cut, table.num_rows - 1))
    if chunks > 1 and table.num_rows > 1:
        middle = table.num_rows // 2
        table = pa.concat_tables([table.slice(0, middle), table.slice(middle)])
    built = COMPILED(table)
    assert built is not None
    assert built.to_pylist() == [document.decode() for document in documents.documents_python(table)]


@needs_the_extension
def test_the_compiled_builder_hands_back_what_it_does_not_read():
    records = [RequestRecord(trace_id=f"{n:032x}", request_id=f"{n:016x}", started_at_ns=NOW_NS,
                             input_messages='["a"]') for n in (1, 2)]
    table = inputs(records)
    assert COMPILED(table) is not None
    # a content key of another length than 16 bytes, and a column of another Arrow type
    odd_key = table.set_column(table.column_names.index("input_messages_keys"), "input_messages_keys",
                               pa.array([[b"ABC"], [b"x" * 40]], pa.list_(pa.binary())))
    assert COMPILED(odd_key) is None
    assert documents.document_array(odd_key).to_pylist() == [d.decode() for d in documents.documents_python(odd_key)]
    assert json.loads(documents.documents_python(odd_key)[0])["content_refs"]["input_messages_keys"] == ["abc"]
    wide = table.set_column(table.column_names.index("attempt"), "attempt", pa.array([1, 2], pa.decimal128(5)))
    assert COMPILED(wide) is None


def test_the_rows_the_store_keeps_are_the_ones_it_made_from_the_inputs(store):
    """``document_rows`` (keys, merged-span count, document) stored as they are equal the rows the
    store made from the inputs; ``document_inputs`` gives the inputs back."""
    records = [RequestRecord(trace_id=f"{n:032x}", request_id=f"{n:016x}", started_at_ns=NOW_NS + n,
                             conversation_id="c" if n % 2 else "", merged_span_ids=["aa"] * n,
                             input_messages='[{"role": "user", "content": "hi"}]' if n == 2 else "")
               for n in (1, 2, 3)]
    table = inputs(records)
    made = documents.document_rows(table)
    assert made.column_names == list(documents.DOCUMENT_ROW_COLUMNS)
    query = ("SELECT thread, request_id, merged_spans, doc FROM {db:Identifier}.request_docs "
             "ORDER BY request_id")
    store.insert("request_docs", table)
    from_inputs = store.query(query, {"db": store.database})
    store.execute(f"TRUNCATE TABLE {store.database}.request_docs")
    store.insert("request_docs", made)
    assert store.query(query, {"db": store.database}) == from_inputs
    assert [row["merged_spans"] for row in from_inputs] == [1, 2, 3]
    assert [row["thread"] for row in from_inputs] == ["c", f"{2:032x}", "c"]
    assert documents.document_inputs(made).equals(table)


def test_a_spool_file_of_document_inputs_groups_with_todays_rows():
    """A spool file written before the workers built documents holds the inputs: it is laid out
    as today's rows, with the documents the store would have made."""
    older = inputs([RequestRecord(trace_id=f"{1:032x}", request_id=f"{1:016x}", started_at_ns=NOW_NS)])
    today = build_tables([], [RequestRecord(trace_id=f"{2:032x}", request_id=f"{2:016x}", started_at_ns=NOW_NS)])
    converted = in_todays_layout({"request_docs": older})["request_docs"]
    assert converted.equals(documents.document_rows(older))
    merged = merge_tables([today, rows.TableSet({"request_docs": converted})]).tables["request_docs"]
    assert merged.column("request_id").to_pylist() == [f"{2:016x}", f"{1:016x}"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(table=tables())
def test_document_inputs_is_the_inverse_of_document_rows(table):
    temperatures = table.column("temperature").to_pylist()
    finite = pa.array([value if value is not None and math.isfinite(value) else None for value in temperatures],
                      pa.float64())  # NaN and the infinities are null in a document
    table = table.set_column(table.column_names.index("temperature"), "temperature", finite)
    assert documents.document_inputs(documents.document_rows(table)).equals(table)


def test_inputs_an_older_collector_did_not_lay_out_are_filled_as_the_store_fills_them(store):
    """A spool file of a collector older than a field lacks its input: the document holds the value
    the store gives an input an INSERT does not name (NULL, else the type's zero)."""
    records = [RequestRecord(trace_id=f"{n:032x}", request_id=f"{n:016x}", started_at_ns=NOW_NS + n,
                             temperature=0.5, reasoning_effort="high", input_tokens=7, tools=[
                                 ToolDefinition(0, "search", 3, "ab" * 32)]) for n in (1, 2)]
    older = inputs(records).drop_columns(["temperature", "reasoning_effort", "input_tokens", "tool_names",
                                          "attributes", "mapped", "attempt"])
    made = documents.document_rows(older)
    assert made.column("doc").to_pylist() == [document.decode() for document in store_documents(store, older)]
    document = json.loads(made.column("doc")[0].as_py())
    assert (document["temperature"], document["reasoning_effort"], document["input_tokens"]) == (None, "", None)
    assert (document["tool_names"], document["attributes"], document["mapped"]) == ([], {}, False)
    assert document["tool_sizes"] == [3]  # what the older file had stays


def test_without_the_compiled_builder_the_store_packs_the_documents(store, monkeypatch):
    """No C compiler at install: the write path leaves the documents to the store (the definition costs
    ~10× the store's DEFAULT), and a spool file of documents, written while the builder was there, is
    laid out as inputs again; the store keeps the same rows either way."""
    records = [RequestRecord(trace_id=f"{n:032x}", request_id=f"{n:016x}", started_at_ns=NOW_NS + n,
                             temperature=0.25 * n, input_messages='["hi"]' if n == 1 else "") for n in (1, 2)]
    built = build_tables([], records).tables["request_docs"]  # with the builder: documents
    monkeypatch.setattr(documents, "_compiled_documents", None)
    left = build_tables([], records).tables["request_docs"]
    assert "doc" not in left.column_names and left.equals(inputs(records))
    spooled = in_todays_layout({"request_docs": built})["request_docs"]
    assert "doc" not in spooled.column_names
    merged = merge_tables([rows.TableSet({"request_docs": spooled}), rows.TableSet({"request_docs": left})])
    query = "SELECT request_id, merged_spans, doc FROM {db:Identifier}.request_docs ORDER BY request_id"
    store.insert("request_docs", merged.tables["request_docs"])
    from_inputs = store.query(query, {"db": store.database})
    store.execute(f"TRUNCATE TABLE {store.database}.request_docs")
    store.insert("request_docs", built)
    expected = store.query(query, {"db": store.database})
    assert len(expected) == 2 and from_inputs == [row for row in expected for _ in range(2)]  # both copies alike
