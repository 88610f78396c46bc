"""Reassembly's compiled block checks (write/_blocks.pyx) against the pure-Python definition.

Property-tested on generated block maps: valid ones, and ones broken in every
way ``validate_blocks_python`` tells apart (a missing or mistyped key, out of
order or repeated indexes, ranges that overlap, leave gaps or run past the
prompt, empty blocks, content that does not match its hash or splits a
character, redacted content, upper-case digests, 64-bit overflow, dropped
events). Whenever the compiled pass answers (it hands unusual values back
with None) its answer must equal the definition's, ``repr`` for ``repr``.
Without the extension the comparisons skip (under CI=true a missing build
fails).
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptprism.collector.otlp import traces
from promptprism.collector.otlp.model import SpanEvent
from promptprism.collector.write import reassemble
from promptprism.wire import names
from support import IN_CI

from ..collector_harness import prompt_export
from ..test_slotted import block_map as slotted_block_map

COMPILED = reassemble._compiled_validate_blocks
needs_the_extension = pytest.mark.skipif(
    COMPILED is None, reason="the compiled block checks are not built here (make .venv/.installed builds them)")


@pytest.mark.skipif(COMPILED is not None or not IN_CI, reason="built, or not under CI")
def test_under_ci_the_compiled_block_checks_are_built():
    assert COMPILED is not None, "setup.py did not build promptprism.collector.write._blocks"


TEXTS = st.text(alphabet=st.sampled_from("ab é€😀\ufffd\n"), min_size=0, max_size=6)
# A value put where a block field belongs: the right kind, or any other.
ODD_VALUES = st.sampled_from([None, True, False, 1.5, "7", b"7", -1, 0, 2**63, -2**63 - 1, 2**64, [1], {"a": 1}])
KEYS = (names.BLOCK_INDEX, names.BLOCK_START, names.BLOCK_END, names.BLOCK_SIZE, names.BLOCK_NAME,
        names.BLOCK_LAYER, names.BLOCK_SOURCE, names.BLOCK_SHA256, names.BLOCK_CONTENT, names.BLOCK_STABILITY,
        names.BLOCK_REDACTED)


@st.composite
def block_maps(draw):
    texts = draw(st.lists(TEXTS, max_size=6))
    with_content = draw(st.booleans())
    events, position, whole = [], 0, hashlib.sha256()
    for index, text in enumerate(texts):
        data = text.encode("utf-8")
        whole.update(data)
        attributes = {
            names.BLOCK_INDEX: index, names.BLOCK_NAME: f"b{index}", names.BLOCK_LAYER: "memory",
            names.BLOCK_STABILITY: draw(st.sampled_from(["static", "session", "turn", "other", 3])),
            names.BLOCK_SOURCE: "template:t", names.BLOCK_START: position, names.BLOCK_END: position + len(data),
            names.BLOCK_SIZE: len(data), names.BLOCK_SHA256: hashlib.sha256(data).hexdigest(),
        }
        if with_content:
            attributes[names.BLOCK_CONTENT] = text
        if draw(st.integers(0, 4)) == 0:
            attributes[names.BLOCK_REDACTED] = draw(st.sampled_from([True, False, "true", 1]))
        position += len(data)
        events.append(SpanEvent(0, names.EVENT_PROMPT_BLOCK, attributes))
    attributes = {names.PROMPT_BYTES: position, names.PROMPT_BLOCK_COUNT: len(events),
                  names.PROMPT_SHA256: whole.hexdigest()}
    dropped = 0
    # Break it, or not, in one to three ways.
    for _ in range(draw(st.integers(0, 3))):
        how = draw(st.integers(0, 12))
        if how == 0 and events:  # a key missing or of another kind
            event = draw(st.sampled_from(events))
            key = draw(st.sampled_from(KEYS))
            if draw(st.booleans()):
                event.attributes.pop(key, None)
            else:
                event.attributes[key] = draw(ODD_VALUES)
        elif how == 1 and events:  # a range moved by a little
            event = draw(st.sampled_from(events))
            key = draw(st.sampled_from([names.BLOCK_START, names.BLOCK_END, names.BLOCK_SIZE, names.BLOCK_INDEX]))
            value = event.attributes.get(key)
            if type(value) is int:
                event.attributes[key] = value + draw(st.sampled_from([-1, 1, 2**62]))
        elif how == 2:
            events = draw(st.permutations(events))
        elif how == 3 and events:  # a repeated event
            events = events + [draw(st.sampled_from(events))]
        elif how == 4 and events:  # content that is not the text hashed
            event = draw(st.sampled_from(events))
            event.attributes[names.BLOCK_CONTENT] = draw(st.sampled_from(["x", "\ufffdab", "ab\ufffd", "\ud800", ""]))
        elif how == 5 and events:  # an upper-case digest (accepted), or a short one
            event = draw(st.sampled_from(events))
            digest = event.attributes.get(names.BLOCK_SHA256)
            if isinstance(digest, str):
                event.attributes[names.BLOCK_SHA256] = draw(st.sampled_from([digest.upper(), digest[:-1], digest + "0",
                                                                            digest[:-1] + "g", digest[:-1] + "K",
                                                                            digest[:-1] + "\u00e9", digest[:-1] + "\U0001d7d9"]))
        elif how == 6:
            attributes[names.PROMPT_BYTES] = draw(ODD_VALUES | st.integers(-2, position + 2))
        elif how == 7:
            attributes[names.PROMPT_BLOCK_COUNT] = draw(ODD_VALUES | st.integers(-1, len(events) + 1))
        elif how == 8:
            attributes[names.PROMPT_SHA256] = draw(st.sampled_from(["", "00" * 32, whole.hexdigest().upper(), 5]))
        elif how == 9:
            dropped = draw(st.sampled_from([1, 2**64, -1]))
        elif how == 10 and events:  # an empty block inserted
            event = draw(st.sampled_from(events))
            start = event.attributes.get(names.BLOCK_START)
            event.attributes[names.BLOCK_END] = start
            event.attributes[names.BLOCK_SIZE] = 0
        elif how == 11 and events:  # an index of 2**63 or more
            event = draw(st.sampled_from(events))
            event.attributes[names.BLOCK_INDEX] = draw(st.sampled_from([2**63, 2**70, -2**63]))
        elif how == 12:
            attributes[names.PROMPT_BYTES] = 2**64 + position
    return attributes, events, dropped


SETTINGS = settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@needs_the_extension
@SETTINGS
@given(block_maps())
def test_the_compiled_checks_answer_as_the_definition(case):
    attributes, events, dropped = case
    expected = reassemble.validate_blocks_python(attributes, events, dropped)
    answer = COMPILED(attributes, events, dropped)
    if answer is not None:  # None: handed back, the definition answers
        assert repr(answer) == repr(expected)
    # Again, now that the texts that matched their digests are remembered as checked (and those of
    # earlier examples: short strs are often the same object): the same answer.
    assert repr(reassemble.validate_blocks(attributes, events, dropped)) == repr(expected)


@needs_the_extension
def test_a_valid_map_is_answered_by_the_compiled_pass():
    """The usual shape is not handed back: a map that checks out, and one that does not."""
    text = "Émile aime le thé."
    data = text.encode("utf-8")
    event = SpanEvent(0, names.EVENT_PROMPT_BLOCK, {
        names.BLOCK_INDEX: 0, names.BLOCK_NAME: "b", names.BLOCK_LAYER: "memory", names.BLOCK_STABILITY: "turn",
        names.BLOCK_SOURCE: "s", names.BLOCK_START: 0, names.BLOCK_END: len(data), names.BLOCK_SIZE: len(data),
        names.BLOCK_SHA256: hashlib.sha256(data).hexdigest(), names.BLOCK_CONTENT: text})
    attributes = {names.PROMPT_BYTES: len(data), names.PROMPT_BLOCK_COUNT: 1,
                  names.PROMPT_SHA256: hashlib.sha256(data).hexdigest()}
    blocks, reason = COMPILED(attributes, [event], 0)
    assert reason == "" and [(b.index, b.content, b.size) for b in blocks] == [(0, text, len(data))]
    attributes[names.PROMPT_SHA256] = "0" * 64
    assert COMPILED(attributes, [event], 0) == ([], names.UNMAPPED_HASH_MISMATCH)


@needs_the_extension
def test_a_text_checked_once_is_trusted_again_only_with_the_same_size_and_digest():
    """A static block's text recurs in every request of an export as one str (the walk's
    ``Texts``): its digest is checked once (``_blocks.verified``), not in every request. The same
    str declared with another digest or size is checked again and fails, and reassembly lets go
    of what it remembered when the export is done."""
    from promptprism.collector.write import _blocks

    text = "Émile aime le thé. " * 30
    data = text.encode("utf-8")

    def block_map(digest: str, size: int):
        event = SpanEvent(0, names.EVENT_PROMPT_BLOCK, {
            names.BLOCK_INDEX: 0, names.BLOCK_NAME: "b", names.BLOCK_LAYER: "identity",
            names.BLOCK_STABILITY: "static", names.BLOCK_SOURCE: "template:t", names.BLOCK_START: 0,
            names.BLOCK_END: size, names.BLOCK_SIZE: size, names.BLOCK_SHA256: digest, names.BLOCK_CONTENT: text})
        return {names.PROMPT_BYTES: size, names.PROMPT_BLOCK_COUNT: 1}, [event], 0

    right = hashlib.sha256(data).hexdigest()
    wrong = hashlib.sha256(data + b"!").hexdigest()
    _blocks.forget_verified()
    assert _blocks.verified_count() == 0
    blocks, reason = COMPILED(*block_map(right, len(data)))
    assert reason == "" and blocks[0].content is text
    assert _blocks.verified_count() == 1
    for digest, size in ((right, len(data)), (wrong, len(data)), (right, len(data) + 1), (right, len(data) - 1)):
        case = block_map(digest, size)
        expected = reassemble.validate_blocks_python(*case)
        hashed = _blocks.hashed_count()
        assert repr(COMPILED(*case)) == repr(expected)
        assert (expected[1] == "") == (digest == right and size == len(data))
        # Hashed again only when its digest was not the one it matched (a wrong size fails first).
        assert _blocks.hashed_count() - hashed == (1 if digest == wrong else 0)
    assert _blocks.verified_count() == 1  # only the text with the digest it matched

    spans = traces.decode_protobuf(prompt_export()).spans
    records, _ = reassemble.reassemble(spans)
    assert records and all(record.mapped for record in records)
    assert _blocks.verified_count() == 0


@needs_the_extension
def test_requests_sharing_their_first_blocks_hash_only_what_follows_for_the_whole_prompt():
    """The whole prompt's digest is checked from the state after the longest prefix of block texts
    kept before in the export (``_blocks.prefixes``): a request whose first blocks are another's
    hashes only the rest, and a wrong whole-prompt digest after a shared prefix is still found.
    Only prefixes of texts that recur in the export are kept: a text seen for the first time ends
    what is kept of its prompt."""
    from promptprism.collector.write import _blocks

    static, session = "Tu es Émile. " * 40, "Session: thé. " * 20
    turns = ["Bonjour ?", "Au revoir !"]

    def block_map(texts: list[str], prompt_sha256: str | None = None):
        attributes, events = slotted_block_map(texts)
        if prompt_sha256 is not None:
            attributes[names.PROMPT_SHA256] = prompt_sha256
        return attributes, events, 0

    def hashed_for(texts: list[str], prompt_sha256: str | None = None, reason: str = "") -> int:
        """Bytes the whole-prompt digest hashed for this map, checked to answer as the definition."""
        case = block_map(texts, prompt_sha256)
        before = _blocks.whole_hashed_bytes()
        answer = COMPILED(*case)
        assert repr(answer) == repr(reassemble.validate_blocks_python(*case)) and answer[1] == reason
        return _blocks.whole_hashed_bytes() - before

    def size(*texts: str) -> int:
        return len("".join(texts).encode("utf-8"))

    _blocks.forget_verified()
    # Texts seen for the first time: hashed, nothing kept (no other request has them yet).
    assert hashed_for([static, session, turns[0]]) == size(static, session, turns[0])
    assert _blocks.kept_prefix_count() == 0
    # The same texts again: they recur, so their prefixes are kept as they are hashed.
    assert hashed_for([static, session, turns[0]]) == size(static, session, turns[0])
    assert _blocks.kept_prefix_count() == 3
    # Another turn after the kept prefix: only the turn is hashed, and a first-seen text is not kept.
    assert hashed_for([static, session, turns[1]]) == size(turns[1])
    assert _blocks.kept_prefix_count() == 3
    # A wrong whole-prompt digest after a kept prefix is still found (the turn recurs now: kept).
    assert hashed_for([static, session, turns[1]], "0" * 64, names.UNMAPPED_HASH_MISMATCH) == size(turns[1])
    assert _blocks.kept_prefix_count() == 4
    assert hashed_for([static, session, turns[1]]) == 0
    # The same texts in another order are another prompt: hashed from its first block that differs.
    assert hashed_for([session, static, turns[0]]) == size(session, static, turns[0])
    # A prompt that is a prefix of one kept: no hashing, and still its own digest.
    assert hashed_for([static, session]) == 0
    assert hashed_for([static, session], hashlib.sha256(static.encode()).hexdigest(),
                      names.UNMAPPED_HASH_MISMATCH) == 0
    _blocks.forget_verified()  # what reassembly does when an export is done: nothing kept, hashed again
    assert _blocks.kept_prefix_count() == 0
    assert hashed_for([static, session]) == size(static, session)


@needs_the_extension
def test_a_block_event_read_once_is_one_block_and_still_checked_where_it_stands():
    """The walk hands out one dict for block event attributes that recur byte for byte (``_walk``):
    the Block is made once in the export (``_blocks.parsed``) and shared by the requests that have
    that event. Where it stands in each map is still checked — its index, its range within the
    prompt, the tiling — so a map that places it wrongly fails as the definition says; reassembly
    lets go of what was read."""
    from promptprism.collector.write import _blocks

    texts = ["Tu es Émile. " * 20, "Session: thé. ", "Bonjour ?"]
    attributes, events = slotted_block_map(texts)

    def answer(case_attributes: dict, case_events: list, reason: str):
        result = COMPILED(case_attributes, case_events, 0)
        assert repr(result) == repr(reassemble.validate_blocks_python(case_attributes, case_events, 0))
        assert result[1] == reason
        return result[0]

    _blocks.forget_verified()
    first = answer(attributes, events, "")
    assert _blocks.parsed_count() == 3
    # Another request with the same first two events (the same dicts) and a turn of its own.
    other_attributes, other_events = slotted_block_map(texts[:2] + ["Au revoir !"])
    shared = events[:2] + other_events[2:]
    second = answer(other_attributes, shared, "")
    assert second[0] is first[0] and second[1] is first[1] and second[2] is not first[2]
    assert _blocks.parsed_count() == 4
    # The same events out of place.
    prompt_bytes = attributes[names.PROMPT_BYTES]
    for case_events, prompt, reason in (
            (events[1:2], prompt_bytes, names.UNMAPPED_BAD_ATTRIBUTES),  # index 1 where 0 belongs
            ([events[0], events[0]], prompt_bytes, names.UNMAPPED_BAD_ATTRIBUTES),  # index 0 twice
            (events[::-1], prompt_bytes, ""),  # sorted back by index: the map itself
            (events[:2] + events[:1], prompt_bytes, names.UNMAPPED_BAD_ATTRIBUTES),
            (events, prompt_bytes - 1, names.UNMAPPED_BAD_RANGE),  # the last block past the prompt
            (events[:2], prompt_bytes, names.UNMAPPED_NOT_TILING)):  # the prompt is longer than its blocks
        answer({**attributes, names.PROMPT_BYTES: prompt, names.PROMPT_BLOCK_COUNT: len(case_events)},
               case_events, reason)
    records, _ = reassemble.reassemble(traces.decode_protobuf(prompt_export()).spans)
    assert records and all(record.mapped for record in records)
    assert _blocks.parsed_count() == 0
