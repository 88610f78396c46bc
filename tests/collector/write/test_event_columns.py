"""otel_traces' event columns: the compiled pass (write/_strings.pyx) against the definition.

``rows.event_columns`` lays out every span event's time, name and attribute map
(a block event's text, digest, layer, source, byte range and stability
left out where the request's document holds its block map, tool text where
``contents`` holds it) in one C pass when
the extension is built; ``rows.event_columns_python`` is the definition. On
generated events — every value kind, the block and tool names and keys that
trigger leaving text out, values the C pass hands back (ints past 64 bits,
lone surrogates, times past int64) — both give equal columns, or the compiled
pass hands the spans back and the definition answers (or fails) alone.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptprism.collector.otlp.model import DecodedSpan, SpanEvent
from promptprism.collector.write import rows
from promptprism.wire import names
from support import IN_CI

from ..collector_harness import prompt_export

COMPILED = rows._compiled_event_columns
needs_the_extension = pytest.mark.skipif(COMPILED is None, reason="the compiled event columns are not built here")


@pytest.mark.skipif(COMPILED is not None or not IN_CI, reason="built, or not under CI")
def test_under_ci_the_compiled_event_columns_are_built():
    assert COMPILED is not None, "setup.py did not build promptprism.collector.write._strings"


KEYS = st.sampled_from([names.BLOCK_CONTENT, names.BLOCK_SHA256, names.TOOL_CONTENT, names.TOOL_SHA256,
                        names.BLOCK_INDEX, names.BLOCK_NAME, names.BLOCK_LAYER, names.BLOCK_STABILITY,
                        names.BLOCK_SOURCE, names.BLOCK_START, names.BLOCK_END, names.BLOCK_SIZE,
                        names.BLOCK_REDACTED, "a", ""]) \
    | st.text(max_size=6)
# A stability the document holds as sent, and others (reassembly files them as `unknown`).
STABILITY_VALUES = st.sampled_from([*names.STABILITIES, names.STABILITY_UNKNOWN, "Static", "", 1])
USUAL_VALUES = st.one_of(st.text(max_size=8), st.integers(-2**63, 2**63 - 1), st.booleans(), st.floats(),
                         st.lists(st.integers(), max_size=2), st.just(""),
                         STABILITY_VALUES)
ODD_VALUES = st.one_of(st.integers(-2**70, 2**70), st.none(), st.binary(max_size=4),
                       st.dictionaries(st.text(max_size=2), st.integers(), max_size=2), st.just("\ud800"))
EVENT_NAMES = st.sampled_from([names.EVENT_PROMPT_BLOCK, names.EVENT_TOOL_DEFINITION, "other", ""]) | st.text(max_size=4)


@st.composite
def events(draw) -> SpanEvent:
    """A usual event (block and tool events with their text among them), now and then an odd value or time."""
    attributes = draw(st.dictionaries(KEYS, USUAL_VALUES, max_size=6))
    kind = draw(st.integers(0, 3))
    if kind == 0:  # a block event with its text, mostly with its digest
        name, attributes[names.BLOCK_CONTENT] = names.EVENT_PROMPT_BLOCK, draw(st.text(max_size=8))
        if draw(st.integers(0, 3)):
            attributes[names.BLOCK_SHA256] = draw(st.sampled_from(["cd" * 32, "", 7]))
        if draw(st.integers(0, 3)):
            attributes[names.BLOCK_STABILITY] = draw(STABILITY_VALUES)
    elif kind == 1:  # a tool event with its text, hashed or not
        name, attributes[names.TOOL_CONTENT] = names.EVENT_TOOL_DEFINITION, draw(USUAL_VALUES)
        attributes[names.TOOL_SHA256] = draw(st.sampled_from(["ab" * 32, "", 7]))
    else:
        name = draw(EVENT_NAMES)
    if draw(st.integers(0, 9)) == 0:
        attributes[draw(KEYS)] = draw(ODD_VALUES)
    time = draw(st.integers(0, 2**63 - 1)) if draw(st.integers(0, 19)) else 2**64 - 1
    return SpanEvent(time, name, attributes)


EVENTS = events()


def span(events: list[SpanEvent]) -> DecodedSpan:
    return DecodedSpan("01" * 16, "02" * 8, "", "", "s", "Client", 0, 1, "Unset", "", "svc", {}, "", "", {}, events, [])


SPANS = st.lists(st.tuples(st.lists(EVENTS, max_size=4), st.integers(0, 3)), max_size=5)


def compiled_columns(spans, drops):
    """The compiled pass with the arguments ``rows.event_columns`` gives it (None: handed back)."""
    return COMPILED(spans, drops, names.EVENT_PROMPT_BLOCK, rows.BLOCK_HELD, names.BLOCK_STABILITY,
                    frozenset(names.STABILITIES), names.EVENT_TOOL_DEFINITION, names.TOOL_CONTENT,
                    names.TOOL_SHA256, rows.otel_attribute_string)


def definition_or_error(spans, drops):
    try:
        return rows.event_columns_python(spans, drops)
    except Exception as error:  # noqa: BLE001 - the compiled pass hands such spans back
        return type(error)


@needs_the_extension
@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(SPANS)
def test_compiled_event_columns_equal_the_definition(generated):
    spans, drops = [span(events) for events, _ in generated], [drop for _, drop in generated]
    expected = definition_or_error(spans, drops)
    answer = compiled_columns(spans, drops)
    if answer is not None:  # None: handed back to the definition
        assert isinstance(expected, tuple)
        for compiled, defined in zip(answer, expected):
            assert compiled.type == defined.type and compiled.equals(defined)
    if isinstance(expected, tuple):
        for chosen, defined in zip(rows.event_columns(spans, drops), expected):
            assert chosen.equals(defined)


@needs_the_extension
def test_a_prompt_export_takes_the_compiled_pass_and_leaves_out_what_the_document_holds(monkeypatch):
    from promptprism.collector.otlp.traces import decode_protobuf
    from promptprism.collector.write.reassemble import reassemble

    decoded = decode_protobuf(prompt_export())
    records, _ = reassemble(decoded.spans)
    drops = [rows.DROP_BLOCK_MAP | rows.DROP_TOOL_TEXT] * len(decoded.spans)
    assert compiled_columns(decoded.spans, drops) is not None
    compiled = rows.otel_traces_table(decoded.spans, records)
    monkeypatch.setattr(rows, "_compiled_event_columns", None)
    assert compiled.equals(rows.otel_traces_table(decoded.spans, records))
    attributes = [dict(pairs) for pairs in compiled.column("Events.Attributes").to_pylist()[0]]
    # What the request's document holds is left out; the index that points there and the name stay.
    assert attributes and all(not pairs.keys() & rows.BLOCK_HELD and names.BLOCK_STABILITY not in pairs
                              for pairs in attributes)
    assert all(names.BLOCK_INDEX in pairs and names.BLOCK_NAME in pairs for pairs in attributes)
    assert {names.BLOCK_CONTENT, names.BLOCK_LAYER, names.BLOCK_START} <= rows.BLOCK_HELD
    assert compiled.column("Events.Attributes").type == pa.list_(pa.map_(pa.dictionary(pa.int32(), pa.string()), pa.string()))


@st.composite
def spans_sharing_attributes(draw):
    """Spans whose events share attribute dicts, as the walk hands out one dict for attributes that
    recur byte for byte: the same dict under another event name, in spans of another ``drops``."""
    pool = draw(st.lists(EVENTS, min_size=1, max_size=4))
    generated = []
    for _ in range(draw(st.integers(1, 5))):
        chosen = draw(st.lists(st.tuples(st.integers(0, len(pool) - 1), st.booleans()), max_size=5))
        span_events = [SpanEvent(draw(st.integers(0, 2**40)), pool[at].name if same_name else draw(EVENT_NAMES),
                                 pool[at].attributes) for at, same_name in chosen]
        generated.append((span_events, draw(st.integers(0, 3))))
    return generated


@needs_the_extension
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spans_sharing_attributes())
def test_events_sharing_their_attributes_give_the_definition_s_columns(generated):
    """A dict written once is copied for the next event that has it, only with the same name and
    ``drops`` (which decide what is left out): the columns are still the definition's."""
    spans, drops = [span(events) for events, _ in generated], [drop for _, drop in generated]
    expected = definition_or_error(spans, drops)
    answer = compiled_columns(spans, drops)
    if answer is not None:
        assert isinstance(expected, tuple)
        for compiled, defined in zip(answer, expected):
            assert compiled.type == defined.type and compiled.equals(defined)


@needs_the_extension
def test_a_prompt_export_s_recurring_block_events_are_laid_out_as_the_definition_does():
    """The usual export: static blocks' events share their dicts across requests (the walk), and
    the compiled columns equal the definition's."""
    from promptprism.collector.otlp.traces import decode_protobuf
    from promptprism.collector.write.reassemble import reassemble

    payload = prompt_export()
    decoded = decode_protobuf(payload)
    spans = decoded.spans * 3  # the same requests again: every event's dict recurs
    # The second copy's events are written as the first's (copied); the third's leave nothing out.
    drops = [rows.DROP_BLOCK_MAP | rows.DROP_TOOL_TEXT] * (2 * len(decoded.spans)) + [0] * len(decoded.spans)
    reassemble(decoded.spans)
    answer = compiled_columns(spans, drops)
    assert answer is not None
    for compiled, defined in zip(answer, rows.event_columns_python(spans, drops)):
        compiled.validate(full=True)  # offsets that only read right (not ascending) are not
        assert compiled.equals(defined)
