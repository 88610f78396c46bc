"""Property tests: for arbitrary templates and values the map tiles the exact text.

The text is compared with what plain Jinja2 (no finalize hook) renders for the
same template and values, so the segmented render can never change a prompt.
"""

from __future__ import annotations

import jinja2
from hypothesis import given, settings
from hypothesis import strategies as st

from promptprism.instrumentation._segments import SENTINEL, block, inline
from promptprism.instrumentation._templates import prompt_environment, render_segmented, render_string
from promptprism.wire import names

PLAIN = jinja2.Environment(keep_trailing_newline=True, autoescape=False)
PLAIN_ESCAPING = jinja2.Environment(keep_trailing_newline=True, autoescape=True)
ESCAPING = prompt_environment(autoescape=True)

VARIABLES = ("alpha", "beta", "gamma", "delta")

# Literal template text: anything but "{" (which could open Jinja syntax);
# multi-byte characters, newlines and private-use characters included.
literal_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="{}%#"), max_size=12)

value_text = st.one_of(
    st.text(max_size=10),
    st.just(""),
    st.sampled_from(["é", "日本語", "🙂🙂", "\ue000", "\x1e", "\x1f\x1e", "a\r\nb", "\x00", "<b>&'\"", "plain"]),
    # Values that look like (or are) sentinels.
    st.sampled_from([SENTINEL, f"x{SENTINEL}alpha{SENTINEL}y", f"{SENTINEL}beta{SENTINEL}{SENTINEL}",
                     SENTINEL[:-1], SENTINEL[1:], SENTINEL * 3]),
)


@st.composite
def template_pieces(draw):
    pieces = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["text", "value", "filtered", "length", "conditional"]))
        variable = draw(st.sampled_from(VARIABLES))
        if kind == "text":
            pieces.append(draw(literal_text))
        elif kind == "value":
            pieces.append("{{ %s }}" % variable)
        elif kind == "filtered":
            pieces.append("{{ %s|upper }}" % variable)
        elif kind == "length":
            pieces.append("{{ %s|length }}" % variable)
        else:
            pieces.append("{%% if %s %%}[{{ %s }}]{%% endif %%}" % (variable, variable))
    return "".join(pieces)


@st.composite
def declared_values(draw):
    values = []
    for name in VARIABLES:
        text = draw(value_text)
        if draw(st.booleans()):
            values.append(inline(name, text, stability=draw(st.sampled_from(names.STABILITIES))))
        else:
            values.append(block(name, text, layer=f"layer_{name}", stability=draw(st.sampled_from(names.STABILITIES)),
                                source=f"source:{name}"))
    return values


@settings(max_examples=300, deadline=None)
@given(source=template_pieces(), values=declared_values())
def test_blocks_tile_the_exact_text(source, values):
    prompt = render_string(source, values, name="property")
    expected = PLAIN.from_string(source).render({value.name: value.text for value in values})

    assert prompt.text == expected
    encoded = expected.encode("utf-8")
    assert prompt.byte_length == len(encoded)

    collided = any(SENTINEL in value.text for value in values)
    if collided:
        assert not prompt.mapped
        assert prompt.unmapped_reason == names.UNMAPPED_SENTINEL_COLLISION
        assert prompt.blocks == ()
        return

    assert prompt.mapped, prompt.unmapped_reason
    position = 0
    for index, current in enumerate(prompt.blocks):
        assert current.index == index
        assert current.start == position
        assert current.end > current.start
        assert encoded[current.start:current.end] == current.content.encode("utf-8")
        position = current.end
    assert position == len(encoded)
    assert (len(prompt.blocks) == 0) == (len(encoded) == 0)

    # Every block that is not prose is exactly one declared (non-inline) value.
    by_name = {value.name: value for value in values}
    for current in prompt.blocks:
        if current.layer == names.LAYER_TEMPLATE:
            continue
        declared = by_name[current.name]
        assert not declared.inline
        assert current.content == declared.text
        assert current.layer == declared.layer
        assert current.stability == declared.stability
        assert current.source == declared.source
    # Prose never sits next to prose: adjacent runs merge.
    for previous, following in zip(prompt.blocks, prompt.blocks[1:]):
        assert not (previous.layer == following.layer == names.LAYER_TEMPLATE)

    # Each unfiltered output of a non-empty block value is one block, in order.
    expected_value_blocks = []
    for piece_variable, shown in _unfiltered_outputs(source, by_name):
        if shown and by_name[piece_variable].text and not by_name[piece_variable].inline:
            expected_value_blocks.append(piece_variable)
    assert [current.name for current in prompt.blocks if current.layer != names.LAYER_TEMPLATE] \
        == expected_value_blocks


def _unfiltered_outputs(source, by_name):
    """(variable, rendered?) for each plain ``{{ variable }}`` in ``source``, in order."""
    outputs = []
    position = 0
    while True:
        plain = source.find("{{ ", position)
        conditional = source.find("{% if ", position)
        if plain == -1 and conditional == -1:
            return outputs
        if conditional != -1 and (plain == -1 or conditional < plain):
            variable = source[conditional + 6:].split(" ", 1)[0]
            end = source.index("{% endif %}", conditional)
            outputs.append((variable, bool(by_name[variable].text)))
            position = end + len("{% endif %}")
            continue
        expression = source[plain + 3:source.index(" }}", plain)]
        if "|" not in expression:
            outputs.append((expression, True))
        position = plain + 3


@settings(max_examples=100, deadline=None)
@given(source=template_pieces(), values=declared_values())
def test_prose_stability_is_the_least_stable_of_template_and_inline_values(source, values):
    prompt = render_string(source, values, name="property", stability=names.STABILITY_STATIC)
    if not prompt.mapped:
        return
    rank = {stability: position for position, stability in enumerate(names.STABILITIES)}
    inline_stabilities = [value.stability for value in values if value.inline]
    for current in prompt.blocks:
        if current.layer == names.LAYER_TEMPLATE:
            # Never more stable than the template, never less stable than the least stable inline value.
            assert rank[current.stability] >= rank[names.STABILITY_STATIC]
            assert rank[current.stability] <= max([rank[s] for s in inline_stabilities], default=0)


@st.composite
def captured_templates(draw):
    """Templates that capture output ({% set %} blocks, macros) and filter or test it."""
    pieces = []
    for number in range(draw(st.integers(1, 4))):
        inner = draw(template_pieces())
        name = f"captured_{number}"
        if draw(st.booleans()):
            pieces.append("{%% set %s %%}%s{%% endset %%}" % (name, inner))
            use = name
        else:
            pieces.append("{%% macro %s() %%}%s{%% endmacro %%}" % (name, inner))
            use = f"{name}()"
        shown = draw(st.sampled_from(["{{ %s }}", "{{ %s|upper }}", "{{ %s|trim }}", "{{ %s|center(30) }}",
                                      "{{ %s|length }}", "{{ %s|wordwrap(5) }}", "{{ %s|indent(2, True) }}",
                                      "{% if %s %}<{{ %s }}>{% endif %}", "{{ %s|truncate(8, True, '') }}"]))
        pieces.append(shown.replace("%s", use))
        pieces.append(draw(literal_text))
    return "".join(pieces)


@settings(max_examples=200, deadline=None)
@given(source=captured_templates(), values=declared_values())
def test_captured_and_filtered_output_keeps_the_exact_text(source, values):
    prompt = render_string(source, values, name="property")
    assert prompt.text == PLAIN.from_string(source).render({value.name: value.text for value in values})
    if prompt.mapped:
        encoded = prompt.text.encode("utf-8")
        position = 0
        for current in prompt.blocks:
            assert current.start == position < current.end
            assert encoded[current.start:current.end] == current.content.encode("utf-8")
            position = current.end
        assert position == len(encoded)
    else:
        assert prompt.unmapped_reason in (names.UNMAPPED_SENTINEL_COLLISION, names.UNMAPPED_RENDER_ERROR)


@settings(max_examples=200, deadline=None)
@given(source=st.one_of(template_pieces(), captured_templates()), values=declared_values())
def test_escaping_environments_keep_the_exact_text(source, values):
    # An escaping output escapes a value's marked form, sentinels included: the
    # split on the process sentinel refuses it whenever escaping changed a
    # value's text, and the text must then still be Jinja2's, escaped.
    prompt = render_segmented(ESCAPING.from_string(source), values)
    assert prompt.text == PLAIN_ESCAPING.from_string(source).render({value.name: value.text for value in values})
    if any(SENTINEL in value.text for value in values):
        assert prompt.unmapped_reason == names.UNMAPPED_SENTINEL_COLLISION
    elif not prompt.mapped:
        assert prompt.unmapped_reason == names.UNMAPPED_RENDER_ERROR
    else:
        assert "".join(current.content for current in prompt.blocks) == prompt.text
