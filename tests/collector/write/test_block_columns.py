"""blocks' own columns: the compiled pass (write/_strings.pyx) against the definition.

``rows.block_columns`` lays out each block's index, name, layer, stability,
source, offsets, sha256, content key and redaction flag in one C pass when the
extension is built; ``rows.block_columns_python`` is the definition. On
generated blocks — integers out of their column's range or past 64 bits,
values of other types, redacted text, a ``Block`` subclass — both give equal
columns, or the compiled pass hands the blocks back and the definition answers
(or fails) alone.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptprism.collector.record import Block
from promptprism.collector.write import rows

COMPILED = rows._compiled_block_columns
needs_the_extension = pytest.mark.skipif(COMPILED is None, reason="the compiled block columns are not built here")


class OtherBlock(Block):
    __slots__ = ()


USUAL_INTEGERS = st.integers(0, 2**32 - 1)
ODD_INTEGERS = st.one_of(st.integers(0, 2**64 - 1), st.integers(-2**70, 2**70),
                         st.sampled_from([2**32, 2**63, 2**64 - 1, 2**64, -1]), st.booleans(), st.none(), st.floats(0, 10))
USUAL_TEXTS = st.one_of(st.text(max_size=8), st.just("Émile 😀"))
ODD_TEXTS = st.one_of(st.just("\ud800"), st.none(), st.integers(0, 9))
FIELDS = ("index", "name", "layer", "stability", "source", "start", "end", "size", "sha256", "content", "redacted")


@st.composite
def blocks(draw) -> Block:
    """A usual block, and now and then one field of another kind or out of range."""
    values = {name: draw(USUAL_INTEGERS if name in ("index", "start", "end", "size") else USUAL_TEXTS)
              for name in FIELDS[:9]}
    values["content"] = draw(st.one_of(st.none(), USUAL_TEXTS))
    values["redacted"] = draw(st.booleans())
    if draw(st.integers(0, 3)) == 0:
        odd = draw(st.sampled_from(FIELDS))
        values[odd] = draw(ODD_INTEGERS if odd in ("index", "start", "end", "size", "redacted") else ODD_TEXTS)
    return draw(st.sampled_from([Block, Block, Block, OtherBlock]))(**values)


BLOCKS = blocks()


def definition_or_error(blocks):
    try:
        return rows.block_columns_python(blocks)
    except Exception as error:  # noqa: BLE001 - the compiled pass hands such blocks back
        return type(error)


@needs_the_extension
@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(BLOCKS, max_size=6))
def test_compiled_block_columns_equal_the_definition(blocks):
    expected = definition_or_error(blocks)
    answer = COMPILED(blocks, Block, rows.content_sha256_column)
    if answer is not None:  # None: handed back to the definition
        assert isinstance(expected, dict) and answer.keys() == expected.keys()
        for name, column in answer.items():
            assert column.type == expected[name].type and column.equals(expected[name]), name
    if isinstance(expected, dict):
        chosen = rows.block_columns(blocks)
        assert all(chosen[name].equals(column) for name, column in expected.items())


@needs_the_extension
def test_usual_blocks_take_the_compiled_pass():
    blocks = [Block(0, "intro", "template", "static", "template:t", 0, 5, 5, "ab" * 32, "hello"),
              Block(1, "memory", "memory", "session", "var:m", 5, 9, 4, "cd" * 32, "x", redacted=True)]
    answer = COMPILED(blocks, Block, rows.content_sha256_column)
    assert answer is not None
    assert answer["content_sha256"].to_pylist() == ["", rows.content_sha256(blocks[1])]
    assert {name: column.to_pylist() for name, column in answer.items()} == {
        name: column.to_pylist() for name, column in rows.block_columns_python(blocks).items()}
