"""The compiled OTLP walk (otlp/_walk.pyx) against the pure-Python path it speeds up.

Property-tested on generated OTLP: whatever the payload, ``decode_protobuf``
with the compiled walk gives exactly what upb + ``decode_request`` give
(``repr`` equal, so NaN, -0.0 and bool-vs-int all count), and the tables
``convert`` lays out from it are equal cell for cell. Payloads include what
the walk leaves to the reference path (unknown fields, a singular message
given twice, invalid UTF-8, values nested to the bound, invalid ids).

Without the extension (a machine without Cython or a compiler) the
comparisons skip, and under CI=true a missing build is a failure; the
fallback itself is tested by importing the package with the extension hidden.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from promptprism.collector.otlp import MalformedPayload, traces
from promptprism.collector.otlp._parse import MAX_VALUE_DEPTH, parse_protobuf_items
from promptprism.collector.write.convert import convert_traces
from promptprism.collector.write.rows import BLOCK_ARRAYS
from promptprism.wire import names
from promptprism.collector.write.documents import document_inputs
from support import IN_CI

from ..bad_items import field, nested_value, varint
from ..collector_harness import prompt_export

COMPILED = traces.compiled_walk is not None
needs_the_extension = pytest.mark.skipif(
    not COMPILED, reason="the compiled OTLP walk is not built here (make .venv/.installed builds it)")


@pytest.mark.skipif(COMPILED or not IN_CI, reason="built, or not under CI")
def test_under_ci_the_compiled_walk_is_built():
    assert COMPILED, "setup.py did not build promptprism.collector.otlp._walk (Cython from PyPI + gcc)"

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def reference(payload: bytes):
    return traces.decode_request(*parse_protobuf_items(payload, ExportTraceServiceRequest, "span"))


def outcome(decode, payload: bytes) -> str:
    try:
        return repr(decode(payload))
    except MalformedPayload as error:
        return f"malformed: {error}"


# --- generated OTLP ------------------------------------------------------------------------

KEYS = st.sampled_from([names.BLOCK_INDEX, names.BLOCK_NAME, names.BLOCK_CONTENT, names.GEN_AI_REQUEST_MODEL,
                        "service.name", "a", ""]) | st.text(max_size=12)
SCALARS = st.one_of(
    st.builds(lambda text: AnyValue(string_value=text), st.text(max_size=24)),
    st.builds(lambda flag: AnyValue(bool_value=flag), st.booleans()),
    st.builds(lambda number: AnyValue(int_value=number), st.integers(-2**63, 2**63 - 1)),
    st.builds(lambda number: AnyValue(double_value=number), st.floats(allow_nan=True, allow_infinity=True)),
    st.builds(lambda data: AnyValue(bytes_value=data), st.binary(max_size=8)),
    st.just(AnyValue()),
)
VALUES = st.recursive(SCALARS, lambda children: st.one_of(
    st.lists(children, max_size=3).map(lambda values: AnyValue(array_value=ArrayValue(values=values))),
    st.lists(st.tuples(KEYS, children), max_size=3).map(lambda pairs: AnyValue(kvlist_value=KeyValueList(
        values=[KeyValue(key=key, value=value) for key, value in pairs])))), max_leaves=8)
ATTRIBUTES = st.lists(st.one_of(st.builds(KeyValue, key=KEYS, value=VALUES), st.builds(KeyValue, key=KEYS)),
                      max_size=5)
# Valid ids (never all zero) in generated requests, so most take the compiled walk; invalid ones come
# in EXTRAS and in links (which keep any id).
TRACE_IDS = st.binary(min_size=15, max_size=15).map(lambda tail: b"\x01" + tail)
SPAN_IDS = st.binary(min_size=7, max_size=7).map(lambda tail: b"\x01" + tail)
ANY_IDS = st.one_of(SPAN_IDS, TRACE_IDS, st.sampled_from([b"", b"\0" * 16, b"\1" * 9]))
TIMES = st.integers(0, 2**64 - 1)
UINT32 = st.integers(0, 2**32 - 1)

EVENTS = st.builds(Span.Event, time_unix_nano=TIMES, name=st.text(max_size=12), attributes=ATTRIBUTES,
                   dropped_attributes_count=UINT32)
LINKS = st.builds(Span.Link, trace_id=ANY_IDS, span_id=ANY_IDS, trace_state=st.text(max_size=8),
                  attributes=ATTRIBUTES, flags=UINT32)
SPANS = st.builds(
    Span, trace_id=TRACE_IDS, span_id=SPAN_IDS, parent_span_id=st.one_of(st.just(b""), SPAN_IDS),
    trace_state=st.text(max_size=8), name=st.text(max_size=16), kind=st.integers(-2, 8),
    start_time_unix_nano=TIMES, end_time_unix_nano=TIMES, attributes=ATTRIBUTES,
    events=st.lists(EVENTS, max_size=3), links=st.lists(LINKS, max_size=2),
    dropped_attributes_count=UINT32, dropped_events_count=UINT32, dropped_links_count=UINT32,
    status=st.builds(Status, code=st.integers(-1, 4), message=st.text(max_size=8)), flags=UINT32)
SCOPES = st.builds(ScopeSpans, scope=st.builds(InstrumentationScope, name=st.text(max_size=8),
                                               version=st.text(max_size=4), attributes=ATTRIBUTES),
                   spans=st.lists(SPANS, max_size=4), schema_url=st.text(max_size=4))
RESOURCES = st.builds(ResourceSpans, resource=st.builds(Resource, attributes=ATTRIBUTES),
                      scope_spans=st.lists(SCOPES, max_size=3), schema_url=st.text(max_size=4))
REQUESTS = st.builds(ExportTraceServiceRequest, resource_spans=st.lists(RESOURCES, max_size=3))

# Appended to a serialized span: what the walk must leave to the reference path, and some it handles.
DEEP = nested_value(MAX_VALUE_DEPTH + 1)
EXTRAS = st.sampled_from([
    b"",
    field(15, Status(code=2).SerializeToString()),  # a second status: proto merges it
    varint(99 << 3) + varint(7),  # an unknown field
    field(5, b"bad \xff name"),  # invalid UTF-8
    varint(5 << 3) + varint(1),  # name with the wrong wire type
    field(9, field(1, b"deep") + field(2, DEEP)),  # a value past the bound
    field(9, field(1, b"at bound") + field(2, nested_value(MAX_VALUE_DEPTH))),
    field(3, b"second trace state"),  # a scalar given twice: last wins
    varint(6 << 3) + varint(2**64 - 1),  # a negative kind, as a 10-byte varint
    field(2, b"\0" * 8),  # an all-zero span id: rejected with a reason
    field(4, b"\1" * 3),  # a parent id of the wrong length
    field(9, field(1, b"k") + field(2, field(1, b"one")) + field(2, field(1, b"two"))),  # KeyValue.value twice
])


@st.composite
def payloads(draw) -> bytes:
    request = draw(REQUESTS)
    payload = request.SerializeToString()
    extra = draw(EXTRAS)
    if draw(st.booleans()):  # one more resource holding a span with the extra bytes
        span = draw(SPANS).SerializeToString() + extra
        payload += field(1, field(2, field(2, span)))
    return payload


@needs_the_extension
@SETTINGS
@given(payloads())
def test_the_compiled_walk_decodes_exactly_as_the_reference(payload):
    assert outcome(traces.decode_protobuf, payload) == outcome(reference, payload)


@needs_the_extension
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(payloads())
def test_the_tables_are_identical(payload):
    compiled, pure = convert_or_none(payload), convert_or_none(payload, pure_python=True)
    assert (compiled is None) == (pure is None)
    if compiled is not None:
        assert_same_tables(compiled, pure)


def convert_or_none(payload: bytes, *, pure_python: bool = False):
    walk = traces.compiled_walk
    if pure_python:
        traces.compiled_walk = None
    try:
        return convert_traces(payload, "protobuf")
    except MalformedPayload:
        return None
    finally:
        traces.compiled_walk = walk


def assert_same_tables(compiled, pure):
    assert compiled.tables.tables.keys() == pure.tables.tables.keys()
    for name, table in compiled.tables.tables.items():
        assert table.equals(pure.tables.tables[name]), name
    assert (compiled.received, compiled.rejected, compiled.error_message, compiled.requests,
            compiled.mapped_blocks, compiled.unmapped_reasons) == (
        pure.received, pure.rejected, pure.error_message, pure.requests, pure.mapped_blocks, pure.unmapped_reasons)


@needs_the_extension
def test_a_real_prompt_export_takes_the_compiled_walk_and_gives_the_same_tables(monkeypatch):
    payload = prompt_export()
    assert traces.compiled_walk(payload) is not None  # the usual shape: no fallback
    compiled = convert_traces(payload, "protobuf")
    monkeypatch.setattr(traces, "compiled_walk", None)
    assert_same_tables(compiled, convert_traces(payload, "protobuf"))


def test_the_package_works_without_the_extension(tmp_path):
    """The extensions hidden from import (the walk, the block checks, the string columns, the documents): the
    pure-Python paths decode the same spans and lay out the same tables."""
    payload_path = tmp_path / "export.bin"
    payload_path.write_bytes(prompt_export())
    script = textwrap.dedent(f"""
        import sys
        from importlib.abc import MetaPathFinder

        class Hide(MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name in ("promptprism.collector.otlp._walk", "promptprism.collector.write._blocks",
                            "promptprism.collector.write._strings", "promptprism.collector.write._documents"):
                    raise ImportError("hidden")
                return None

        sys.meta_path.insert(0, Hide())
        from promptprism.collector.otlp import traces
        from promptprism.collector.write import _columns, documents, reassemble
        from promptprism.collector.write.convert import convert_traces
        from promptprism.collector.write.documents import document_inputs
        from promptprism.collector.write.rows import BLOCK_ARRAYS
        assert traces.compiled_walk is None
        assert reassemble._compiled_validate_blocks is None and _columns._compiled_string_array is None
        assert documents._compiled_documents is None
        converted = convert_traces(open({str(payload_path)!r}, "rb").read(), "protobuf")
        print(converted.received, converted.requests, converted.mapped_blocks)
        print(repr(traces.decode_protobuf(open({str(payload_path)!r}, "rb").read())))
        print(converted.tables.tables["otel_traces"].to_pydict())
        print(converted.tables.tables["request_docs"].select(list(BLOCK_ARRAYS)).to_pydict())  # the inputs (below)
        print(converted.tables.tables["request_docs"].column_names)
        print(document_inputs(documents.document_rows(converted.tables.tables["request_docs"])).to_pydict())
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    counts, decoded, spans_table, block_arrays, layout, request_docs = run.stdout.splitlines()[:6]
    converted = convert_traces(payload_path.read_bytes(), "protobuf")
    assert counts == f"{converted.received} {converted.requests} {converted.mapped_blocks}" == "1 1 3"
    assert decoded == repr(traces.decode_protobuf(payload_path.read_bytes()))
    assert spans_table == str(converted.tables.tables["otel_traces"].to_pydict())
    # the blocks as the request's document holds them (rows.block_columns, compiled or not)
    assert block_arrays == str(document_inputs(converted.tables.tables["request_docs"]).select(list(BLOCK_ARRAYS)).to_pydict())
    # without the compiled builder the documents are left to the store (its inputs are inserted);
    # the definition makes the same documents
    assert "doc" not in layout and "block_names" in layout
    assert request_docs == str(document_inputs(converted.tables.tables["request_docs"]).to_pydict())


@SETTINGS
@given(payloads())
def test_a_payload_read_where_it_lies_decodes_as_its_bytes(payload):
    """Workers decode a traces payload from a view of their shared-memory slot, not a copy."""
    assert outcome(traces.decode_protobuf, memoryview(payload)) == outcome(traces.decode_protobuf, payload)


@needs_the_extension
@pytest.mark.skipif(not (3, 11) <= sys.version_info[:2] <= (3, 13), reason="the UTF-8 form is kept on CPython 3.11-3.13")
def test_a_long_non_ascii_value_keeps_the_utf8_bytes_it_was_decoded_from():
    """A captured text is hashed and laid out as UTF-8 again downstream: the walk hands it over
    with its UTF-8 form already made (as CPython caches it), from the payload's own bytes."""
    import hashlib

    import pyarrow as pa

    long_text = "Émile aime le thé — 🍵. " * 20  # non-ASCII, well over the 256-byte threshold
    short_text = "thé"
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="chat", start_time_unix_nano=1,
                end_time_unix_nano=2, attributes=[KeyValue(key="long", value=AnyValue(string_value=long_text)),
                                                  KeyValue(key="short", value=AnyValue(string_value=short_text)),
                                                  KeyValue(key="ascii", value=AnyValue(string_value="a" * 300))])
    payload = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])
    decoded = traces.compiled_walk(payload.SerializeToString())
    assert decoded is not None
    attributes = decoded[0].attributes
    kept, short, ascii_text = attributes["long"], attributes["short"], attributes["ascii"]
    assert (kept, short, ascii_text) == (long_text, short_text, "a" * 300)

    def fresh(text: str) -> str:  # an equal str that never had its UTF-8 form made
        return "".join(list(text))

    encoded = long_text.encode("utf-8")
    # str.__sizeof__ counts a kept UTF-8 form; a short value and an ASCII one keep none.
    assert sys.getsizeof(kept) == sys.getsizeof(fresh(long_text)) + len(encoded) + 1
    assert sys.getsizeof(short) == sys.getsizeof(fresh(short_text))
    assert sys.getsizeof(ascii_text) == sys.getsizeof(fresh("a" * 300))
    # …and it is that text's UTF-8, wherever it is read from.
    assert kept.encode("utf-8") == encoded
    assert pa.array([kept], pa.string()).buffers()[2].to_pybytes() == encoded
    assert hashlib.sha256(kept.encode()).hexdigest() == hashlib.sha256(encoded).hexdigest()


@needs_the_extension
def test_a_short_value_that_recurs_is_one_str_and_values_that_share_a_slot_stay_apart():
    """Block names, layers and sources recur in every request: the walk makes one str per export
    for the same short bytes (``Texts``). Values that land in the same slot are each decoded as
    themselves, and one nested in an array is never shared."""
    from promptprism.wire import names

    payload = ExportTraceServiceRequest.FromString(prompt_export())
    scope_spans = payload.resource_spans[0].scope_spans[0]
    scope_spans.spans.extend([scope_spans.spans[0], scope_spans.spans[0]])  # the same request thrice
    third = scope_spans.spans[2]
    nested = AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="memory")]))
    third.attributes.extend([KeyValue(key="nested", value=nested)])
    # Many distinct short values: with 512 slots, some share one.
    values = [f"v{number}" for number in range(3000)]
    third.attributes.extend(KeyValue(key=f"k{n}", value=AnyValue(string_value=value))
                            for n, value in enumerate(values))
    first, second, third = traces.compiled_walk(payload.SerializeToString())
    layers = [event.attributes[names.BLOCK_LAYER] for span in (first, second) for event in span.events]
    memory = [layer for layer in layers if layer == "memory"]
    assert len(memory) >= 2 and all(layer is memory[0] for layer in memory)
    assert first.attributes[names.GEN_AI_REQUEST_MODEL] is second.attributes[names.GEN_AI_REQUEST_MODEL]
    assert [third.attributes[f"k{n}"] for n in range(len(values))] == values
    assert third.attributes["nested"] == ["memory"] and third.attributes["nested"][0] is not memory[0]
    serialized = payload.SerializeToString()
    assert outcome(traces.decode_protobuf, serialized) == outcome(reference, serialized)


@needs_the_extension
def test_a_long_value_that_recurs_is_one_str_and_long_values_that_differ_stay_apart():
    """A static block's text recurs in every request of an export: the walk makes one str for the
    same long bytes (``Texts.long_text``), which keeps its UTF-8 form. Long values that differ in
    one byte, or that land in the same slot (2,000 of them in 1,024 slots), are each decoded as
    themselves; one nested in an array is never shared."""
    static = "Émile aime le thé — 🍵. " * 40
    ascii_text = "You are a careful assistant. " * 20
    # Same length, one digit apart in the middle: only the bytes tell them apart.
    near = [f"{'a' * 150}{number:04d}{'b' * 150}" for number in range(2000)]
    spans = []
    for number in range(3):
        attributes = [KeyValue(key="static", value=AnyValue(string_value=static)),
                      KeyValue(key="ascii", value=AnyValue(string_value=ascii_text))]
        if number == 2:
            attributes += [KeyValue(key=f"near{n}", value=AnyValue(string_value=value)) for n, value in enumerate(near)]
            attributes.append(KeyValue(key="nested", value=AnyValue(array_value=ArrayValue(
                values=[AnyValue(string_value=static)]))))
        spans.append(Span(trace_id=b"\x01" * 16, span_id=bytes([1 + number]) * 8, name="chat", start_time_unix_nano=1,
                          end_time_unix_nano=2, attributes=attributes,
                          events=[Span.Event(name=names.EVENT_PROMPT_BLOCK, attributes=[
                              KeyValue(key=names.BLOCK_CONTENT, value=AnyValue(string_value=static))])]))
    payload = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    serialized = payload.SerializeToString()
    first, second, third = traces.compiled_walk(serialized)
    # (The third span's event comes after its 2,000 values, which may have taken the slot.)
    statics = [span.attributes["static"] for span in (first, second, third)]
    statics += [span.events[0].attributes[names.BLOCK_CONTENT] for span in (first, second)]
    assert statics[0] == static and all(value is statics[0] for value in statics)
    assert third.events[0].attributes[names.BLOCK_CONTENT] == static
    assert first.attributes["ascii"] == ascii_text and first.attributes["ascii"] is third.attributes["ascii"]
    assert [third.attributes[f"near{n}"] for n in range(len(near))] == near
    assert third.attributes["nested"] == [static] and third.attributes["nested"][0] is not statics[0]
    if (3, 11) <= sys.version_info[:2] <= (3, 13):  # the shared str still carries its UTF-8 form
        assert sys.getsizeof(statics[0]) == sys.getsizeof("".join(list(static))) + len(static.encode()) + 1
    assert outcome(traces.decode_protobuf, serialized) == outcome(reference, serialized)


@needs_the_extension
def test_an_event_whose_attributes_recur_is_one_dict_and_events_that_differ_stay_apart():
    """A static block's event carries the same attribute bytes in every request of an export: the
    walk hands out the dict it decoded the first time (``Context.event_attributes``), each event
    keeping its own time. Events one digit apart, or landing in the same slot (2,000 of them in
    1,024 slots), are each decoded as themselves; attributes split by another field (the name
    between two of them) are read apart; an event without attributes gets its own empty dict."""

    def block_event(time: int, index: int, start: int, *, content: str | None = None) -> Span.Event:
        attributes = [KeyValue(key=names.BLOCK_INDEX, value=AnyValue(int_value=index)),
                      KeyValue(key=names.BLOCK_LAYER, value=AnyValue(string_value="identity")),
                      KeyValue(key=names.BLOCK_START, value=AnyValue(int_value=start))]
        if content is not None:
            attributes.append(KeyValue(key=names.BLOCK_CONTENT, value=AnyValue(string_value=content)))
        return Span.Event(time_unix_nano=time, name=names.EVENT_PROMPT_BLOCK, attributes=attributes)

    static = "Tu es Émile. " * 30
    spans = [Span(trace_id=b"\x01" * 16, span_id=bytes([1 + number]) * 8, name="chat", start_time_unix_nano=1,
                  end_time_unix_nano=2, events=[block_event(10 + number, 0, 0, content=static),
                                                block_event(20 + number, 1, 390 + number), Span.Event(name="bare")])
             for number in range(3)]
    # Same length, one digit apart: only the bytes tell them apart.
    spans[2].events.extend(block_event(5, 2, 0, content=f"{'a' * 40}{number:04d}") for number in range(2000))
    split = (field(3, KeyValue(key="first", value=AnyValue(int_value=1)).SerializeToString())
             + field(2, b"split") + field(3, KeyValue(key="second", value=AnyValue(int_value=2)).SerializeToString()))
    payload = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    serialized = payload.SerializeToString()
    serialized += field(1, field(2, field(2, Span(
        trace_id=b"\x02" * 16, span_id=b"\x09" * 8, name="chat").SerializeToString() + field(11, split))))
    first, second, third, fourth = traces.compiled_walk(serialized)
    assert first.events[0].attributes is second.events[0].attributes is third.events[0].attributes
    assert [span.events[0].time_ns for span in (first, second, third)] == [10, 11, 12]
    assert first.events[0].attributes[names.BLOCK_CONTENT] == static
    # The second block starts one byte further in each request: its own dict each time.
    assert [span.events[1].attributes[names.BLOCK_START] for span in (first, second, third)] == [390, 391, 392]
    assert first.events[1].attributes is not second.events[1].attributes
    assert first.events[2].attributes == {} and first.events[2].attributes is not second.events[2].attributes
    assert [event.attributes[names.BLOCK_CONTENT] for event in third.events[3:]] == [
        f"{'a' * 40}{number:04d}" for number in range(2000)]
    assert fourth.events[0].name == "split" and fourth.events[0].attributes == {"first": 1, "second": 2}
    assert outcome(traces.decode_protobuf, serialized) == outcome(reference, serialized)
