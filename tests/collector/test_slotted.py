"""Objects the compiled ingest passes make and read at their slots (collector/_slotted.h, _slotted.py).

The walk makes each ``SpanEvent``, and the block checks each ``Block``, by
storing its fields at their slots' offsets instead of calling the
dataclass's ``__init__``; the checks and the columns read fields there too.
Those objects must be the class's own in every way that shows: equal, of
the exact type, tracked by the cyclic GC, with every reference counted (no
leak, nothing freed early). And a class that is not plain enough for it must
be refused, so that the passes go through the class instead.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import sys
import tracemalloc

import pytest

from promptprism.collector._slotted import slot_descriptors
from promptprism.collector.otlp.model import SpanEvent
from promptprism.collector.otlp.traces import compiled_walk
from promptprism.collector.record import Block
from promptprism.collector.write import reassemble, rows
from promptprism.wire import names
from support import IN_CI
from .collector_harness import PARTS, prompt_export

EVENT_FIELDS = ("time_ns", "name", "attributes")
BLOCK_FIELDS = ("index", "name", "layer", "stability", "source", "start", "end", "size", "sha256", "content",
                "redacted")


def test_the_two_classes_are_plain_enough():
    assert [descriptor.__name__ for descriptor in slot_descriptors(SpanEvent, EVENT_FIELDS)] == list(EVENT_FIELDS)
    assert [descriptor.__name__ for descriptor in slot_descriptors(Block, BLOCK_FIELDS)] == list(BLOCK_FIELDS)


@dataclasses.dataclass(slots=True)
class Plain:
    a: int
    b: str = ""


@dataclasses.dataclass(slots=True)
class WithPostInit:
    a: int

    def __post_init__(self):
        self.a += 1


@dataclasses.dataclass(slots=True)
class WithoutInitField:
    a: int
    b: list = dataclasses.field(init=False, default_factory=list)


@dataclasses.dataclass
class WithoutSlots:
    a: int


@dataclasses.dataclass(slots=True)
class Derived(Plain):
    c: int = 0


class NotADataclass:
    __slots__ = ("a",)


class Meta(type):
    pass


@dataclasses.dataclass(slots=True)
class WithMetaclass(metaclass=Meta):
    a: int


@dataclasses.dataclass(slots=True)
class WithNew:
    a: int

    def __new__(cls, *arguments):
        return object.__new__(cls)


@pytest.mark.parametrize("cls, fields", [
    (WithPostInit, ("a",)), (WithoutInitField, ("a", "b")), (WithoutSlots, ("a",)), (Derived, ("a", "b", "c")),
    (NotADataclass, ("a",)), (WithMetaclass, ("a",)), (WithNew, ("a",)),
    (Plain, ("b", "a")), (Plain, ("a",)), (Plain, ("a", "b", "c")), (SpanEvent, ("time_ns", "attributes", "name")),
])
def test_a_class_made_otherwise_is_refused(cls, fields):
    """Not plain, or the fields not named in __init__'s order: the passes call the class."""
    assert slot_descriptors(cls, fields) is None


def test_a_plain_class_is_accepted():
    assert slot_descriptors(Plain, ("a", "b")) == (Plain.__dict__["a"], Plain.__dict__["b"])


# --- the extensions --------------------------------------------------------------------------

try:
    from promptprism.collector.write import _blocks, _strings
except ImportError:  # not built here
    _blocks = _strings = None
try:
    from promptprism.collector.otlp import _walk
except ImportError:
    _walk = None
BUILT = _blocks is not None and _strings is not None and _walk is not None
needs_the_extensions = pytest.mark.skipif(not BUILT, reason="the compiled passes are not built here")


@pytest.mark.skipif(BUILT or not IN_CI, reason="built, or not under CI")
def test_under_ci_the_compiled_passes_are_built():
    assert BUILT, "setup.py did not build the walk, the block checks and the string columns"


@needs_the_extensions
def test_the_compiled_passes_make_and_read_at_the_slots():
    """Built, they use the slots: a fallback to the class would pass every other test, only slower."""
    assert _walk.EVENTS_MADE_AT_SLOTS
    assert _blocks.BLOCKS_MADE_AT_SLOTS and _blocks.EVENTS_READ_AT_SLOTS
    assert _strings.FIELDS_READ_AT_SLOTS


def block_map(texts: list[str]) -> tuple[dict, list[SpanEvent]]:
    events, position, whole = [], 0, hashlib.sha256()
    for index, text in enumerate(texts):
        data = text.encode("utf-8")
        whole.update(data)
        events.append(SpanEvent(7, names.EVENT_PROMPT_BLOCK, {
            names.BLOCK_INDEX: index, names.BLOCK_NAME: f"b{index}", names.BLOCK_LAYER: "memory",
            names.BLOCK_STABILITY: "turn", names.BLOCK_SOURCE: "template:t", names.BLOCK_START: position,
            names.BLOCK_END: position + len(data), names.BLOCK_SIZE: len(data),
            names.BLOCK_SHA256: hashlib.sha256(data).hexdigest(), names.BLOCK_CONTENT: text}))
        position += len(data)
    return {names.PROMPT_BYTES: position, names.PROMPT_BLOCK_COUNT: len(events),
            names.PROMPT_SHA256: whole.hexdigest()}, events


@needs_the_extensions
def test_blocks_made_at_the_slots_are_the_class_s_own():
    attributes, events = block_map(["Émile ", "aime le ", "thé."])
    blocks, reason = _blocks.validate_blocks(attributes, events, 0)
    expected, _ = reassemble.validate_blocks_python(attributes, events, 0)
    assert reason == "" and blocks == expected
    for block, event in zip(blocks, events):
        assert type(block) is Block and gc.is_tracked(block)
        assert dataclasses.astuple(block) == dataclasses.astuple(Block(
            *(event.attributes[key] for key in (names.BLOCK_INDEX, names.BLOCK_NAME, names.BLOCK_LAYER,
                                                 names.BLOCK_STABILITY, names.BLOCK_SOURCE, names.BLOCK_START,
                                                 names.BLOCK_END, names.BLOCK_SIZE, names.BLOCK_SHA256,
                                                 names.BLOCK_CONTENT)), False))
        block.layer = "changed"  # a slot like any other: writable, read back
        assert block.layer == "changed"


@needs_the_extensions
def test_every_reference_is_counted():
    """Each value a block holds is referenced once more while the block lives, and no more after."""
    texts = [f"text {n} é" for n in range(5)]
    attributes, events = block_map(texts)
    # Objects of this test's own (small ints and interned names are shared with everything else).
    values = [event.attributes[key] for event in events
              for key in (names.BLOCK_NAME, names.BLOCK_SHA256, names.BLOCK_CONTENT)]
    _blocks.forget_verified()  # what earlier checks in this process remembered
    before = [sys.getrefcount(value) for value in values]
    blocks, reason = _blocks.validate_blocks(attributes, events, 0)
    assert reason == ""
    # The export's checked texts and their digests are held until its reassembly is done.
    assert _blocks.verified_count() == len(texts)
    _blocks.forget_verified()
    held = [sys.getrefcount(value) for value in values]
    assert [after - first for first, after in zip(before, held)] == [1] * len(values)
    columns = rows.block_columns(blocks)  # read at the slots
    assert columns["name"].to_pylist() == [f"b{n}" for n in range(5)]
    del blocks, columns
    assert [sys.getrefcount(value) for value in values] == before


@needs_the_extensions
def test_events_made_at_the_slots_are_the_class_s_own_and_nothing_leaks():
    payload = prompt_export(PARTS * 100)
    spans = compiled_walk(payload)
    events = [event for span in spans for event in span.events]
    assert events and all(type(event) is SpanEvent and gc.is_tracked(event) for event in events)
    assert all(type(event.time_ns) is int and type(event.name) is str and type(event.attributes) is dict
               for event in events)
    del spans, events

    def grown_by() -> int:
        gc.collect()
        tracemalloc.start()
        try:
            first, _ = tracemalloc.get_traced_memory()
            for _ in range(20):
                spans = compiled_walk(payload)
                rows.event_columns(spans, [0] * len(spans))
                del spans
            gc.collect()
            last, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return last - first

    grown = grown_by()
    # One event (~200 bytes with its dict) leaked per walk would be 20 of them.
    assert grown < 20 * 100, grown
