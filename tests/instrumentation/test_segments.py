"""Segmented rendering: the block model (README "The request span on the wire") on concrete prompts."""

from __future__ import annotations

import hashlib

import jinja2
import pytest

from promptprism.instrumentation import _segments as segments
from promptprism.instrumentation import render_string
from promptprism.instrumentation._segments import (
    SENTINEL,
    Block,
    PromptBuilder,
    block,
    build_prompt,
    inline,
    lookup_rendered,
    tiling_problem,
)
from promptprism.wire import names

PLAIN = jinja2.Environment(keep_trailing_newline=True)


def spans(prompt):
    return [(b.name, b.layer, b.stability, b.content) for b in prompt.blocks]


def test_each_value_is_its_own_block_between_prose_blocks():
    prompt = render_string(
        "Identity:\n{{ identity }}\nMemory:\n{{ memory }}\n",
        [block("identity", "I am Prism.", layer="identity", stability="static", source="config"),
         block("memory", "Likes tea.", layer="memory", stability="session", source="db:memory")],
        name="system",
    )
    assert prompt.text == "Identity:\nI am Prism.\nMemory:\nLikes tea.\n"
    assert spans(prompt) == [
        ("system", "template", "static", "Identity:\n"),
        ("identity", "identity", "static", "I am Prism."),
        ("system", "template", "static", "\nMemory:\n"),
        ("memory", "memory", "session", "Likes tea."),
        ("system", "template", "static", "\n"),
    ]
    assert prompt.blocks[1].source == "config"
    assert prompt.blocks[0].source == "template:system:builtin"
    assert prompt.template.name == "system" and prompt.template.origin == names.ORIGIN_BUILTIN


def test_utf8_byte_offsets_and_hashes():
    prompt = render_string("é{{ a }}🙂", [block("a", "日本", layer="knowledge")])
    encoded = prompt.text.encode()
    assert [(b.start, b.end) for b in prompt.blocks] == [(0, 2), (2, 8), (8, 12)]
    assert prompt.byte_length == len(encoded) == 12
    for current in prompt.blocks:
        assert encoded[current.start:current.end].decode() == current.content
        assert current.sha256 == hashlib.sha256(current.content.encode()).hexdigest()
        assert current.size == len(current.content.encode())
    assert prompt.sha256 == hashlib.sha256(encoded).hexdigest()


def test_inline_values_stay_in_prose_and_lower_its_stability():
    prompt = render_string(
        "Files live in {{ path }}. {{ rules }} Reply in {{ language }}.",
        [inline("path", "/srv/app", stability="session"),
         block("rules", "Be brief.", layer="instructions", stability="static"),
         inline("language", "French", stability="turn")],
    )
    assert spans(prompt) == [
        ("inline", "template", "session", "Files live in /srv/app. "),
        ("rules", "instructions", "static", "Be brief."),
        ("inline", "template", "turn", " Reply in French."),
    ]


def test_empty_values_produce_no_block_and_the_prose_around_them_merges():
    prompt = render_string("A{{ memory }}B{{ skills }}C", [block("memory", "", layer="memory"),
                                                            block("skills", "x", layer="skills")])
    assert spans(prompt) == [("inline", "template", "static", "AB"), ("skills", "skills", "turn", "x"),
                             ("inline", "template", "static", "C")]


def test_a_prompt_without_injections_is_one_block():
    prompt = render_string("You are helpful.", [], name="plain")
    assert spans(prompt) == [("plain", "template", "static", "You are helpful.")]
    assert prompt.mapped


def test_empty_prompt_has_no_blocks_and_is_mapped():
    prompt = render_string("{{ a }}", [block("a", "", layer="x")])
    assert prompt.text == "" and prompt.blocks == () and prompt.mapped


def test_filters_keep_plain_semantics_and_filtered_output_is_prose():
    source = "{{ memory|length }} {{ memory|upper }} {% if memory %}yes{% endif %} {{ memory }}"
    values = [block("memory", "tea", layer="memory")]
    prompt = render_string(source, values)
    assert prompt.text == PLAIN.from_string(source).render(memory="tea") == "3 TEA yes tea"
    assert spans(prompt) == [("inline", "template", "static", "3 TEA yes "), ("memory", "memory", "turn", "tea")]


def test_output_order_differs_from_evaluation_order():
    # {% set %} evaluates the second value first; the slot in the sentinel keeps them apart.
    source = "{% set later %}{{ b }}{% endset %}{{ a }}|{{ later }}"
    prompt = render_string(source, [block("a", "first", layer="one"), block("b", "second", layer="two")])
    assert prompt.text == "first|second"
    assert [(b.name, b.content) for b in prompt.blocks] == [("a", "first"), ("inline", "|"), ("b", "second")]


def test_a_value_containing_a_sentinel_is_unmapped_with_exact_text():
    hostile = f"before{SENTINEL}a{SENTINEL}injected{SENTINEL}after"
    source = "X {{ a }} Y {{ b }}"
    prompt = render_string(source, [block("a", hostile, layer="memory"), block("b", "ok", layer="other")])
    assert prompt.text == PLAIN.from_string(source).render(a=hostile, b="ok")
    assert not prompt.mapped
    assert prompt.unmapped_reason == names.UNMAPPED_SENTINEL_COLLISION
    assert prompt.blocks == ()


def test_a_value_with_lone_private_use_characters_is_mapped():
    prompt = render_string("{{ a }}", [block("a", "\ue000\ue001\ue002\ue003", layer="x")])
    assert prompt.mapped and prompt.blocks[0].content == "\ue000\ue001\ue002\ue003"


def test_builder_static_text_values_inline_and_sections():
    builder = PromptBuilder()
    builder.add_text("You are Prism. ")
    builder.add_value(inline("user", "Ada", stability="session"))
    builder.add_text("\n")
    builder.add_value(block("memory", "Ada likes tea.", layer="memory", stability="session"))
    builder.append_section("state", "\nTurn 3", layer="state", stability="turn")
    prompt = builder.build()
    assert prompt.text == "You are Prism. Ada\nAda likes tea.\nTurn 3"
    assert spans(prompt) == [
        ("template", "template", "session", "You are Prism. Ada\n"),
        ("memory", "memory", "session", "Ada likes tea."),
        ("state", "state", "turn", "\nTurn 3"),
    ]


def test_append_section_extends_the_map_of_a_rendered_prompt():
    rendered = render_string("Hello {{ a }}", [block("a", "world", layer="x")], name="greeting")
    extended = rendered.append_section("retrieved", "Doc 1", layer="knowledge", stability="turn", separator="\n\n")
    assert extended.text == "Hello world\n\nDoc 1"
    assert [(b.name, b.layer, b.content) for b in extended.blocks] == [
        ("greeting", "template", "Hello "), ("a", "x", "world"), ("greeting", "template", "\n\n"),
        ("retrieved", "knowledge", "Doc 1")]
    assert tiling_problem(extended.blocks, extended.byte_length) is None
    assert extended.template == rendered.template
    assert rendered.text == "Hello world"  # the original is unchanged
    assert lookup_rendered(extended.text) is extended


def test_append_to_unmapped_stays_unmapped_with_exact_text():
    rendered = render_string("{{ a }}", [block("a", SENTINEL, layer="x")])
    extended = rendered.append_section("more", "tail", layer="x")
    assert extended.text == SENTINEL + "tail"
    assert extended.unmapped_reason == names.UNMAPPED_SENTINEL_COLLISION


def test_tiling_problem_rejects_gaps_overlaps_empty_and_short_maps():
    def make(ranges):
        return [Block(i, "b", "x", "static", "", start, end, "") for i, (start, end) in enumerate(ranges)]

    assert tiling_problem(make([(0, 3), (3, 5)]), 5) is None
    assert tiling_problem(make([(0, 3), (4, 5)]), 5) == names.UNMAPPED_NOT_TILING
    assert tiling_problem(make([(0, 3), (2, 5)]), 5) == names.UNMAPPED_NOT_TILING
    assert tiling_problem(make([(0, 3), (3, 3), (3, 5)]), 5) == names.UNMAPPED_EMPTY_BLOCK
    assert tiling_problem(make([(0, 3)]), 5) == names.UNMAPPED_NOT_TILING
    assert tiling_problem([], 5) == names.UNMAPPED_NOT_TILING
    assert tiling_problem([], 0) is None


def test_malformed_sentinels_are_refused_not_guessed():
    values = {"a": block("a", "x", layer="one")}
    well_formed = f"{SENTINEL}a{SENTINEL}x{SENTINEL}!"
    assert [b.content for b in segments.split_marked(well_formed, values, template=None).blocks] == ["x", "!"]
    # A sentinel cut short, as a truncating filter over captured output could leave it.
    assert segments.split_marked(f"pre {SENTINEL}a{SENTINEL}x post", values, template=None) is None
    assert segments.split_marked(f"{SENTINEL}b{SENTINEL}x{SENTINEL}", values, template=None) is None
    # The text between the sentinels must be the declared value's text exactly.
    assert segments.split_marked(f"{SENTINEL}a{SENTINEL}y{SENTINEL}", values, template=None) is None


def test_filters_over_captured_output_see_its_exact_text_and_yield_prose():
    # A capture is a marked value: a filter works on its text without
    # sentinels (so the result is Jinja2's), and the result is prose.
    source = ("{% set captured %}<{{ a }}>{% endset %}{{ captured|truncate(5, True, '') }}|"
              "{{ captured|replace('x', 'y') }}|{{ captured|length }}|{{ captured }}")
    values = [block("a", "xxxxxxxxxxxx", layer="one")]
    prompt = render_string(source, values, name="t")
    assert prompt.text == PLAIN.from_string(source).render(a="xxxxxxxxxxxx")
    assert spans(prompt) == [("t", "template", "static", "<xxxx|<yyyyyyyyyyyy>|14|<"),
                             ("a", "one", "turn", "xxxxxxxxxxxx"), ("t", "template", "static", ">")]


def test_empty_capture_is_false_as_in_jinja2():
    source = "{% set captured %}{{ a }}{% endset %}{% if captured %}shown{% else %}empty{% endif %}"
    assert render_string(source, [block("a", "", layer="one")]).text == "empty"


def test_sentinels_that_do_not_survive_a_filter_fall_back_to_exact_unmapped_text():
    source = "{{ forged|truncate(15, True, '') }}"
    values = [block("a", "xxxxxxxxxxxx", layer="one")]
    # Only a value that reaches the output through a path promptprism does not
    # see (here: its marked form passed as undeclared context) can do this.
    context = {"forged": values[0].marked.wrapped}
    prompt = render_string(source, values, context=context)
    assert prompt.text == PLAIN.from_string(source).render(forged=values[0].marked.wrapped)
    assert prompt.unmapped_reason == names.UNMAPPED_RENDER_ERROR and prompt.blocks == ()


def spy_on_renders(compiled, value_names):
    """Record every render of ``compiled``: the sentinel in effect, the declared variables and the raw output.

    ``render_segmented`` renders only through ``root_render_func``; the output
    is recorded before any split or strip.
    """
    renders = []
    original = compiled.root_render_func

    def recording(context):
        output = "".join(original(context))
        renders.append((segments.render_sentinel.get(), {name: context.get(name) for name in value_names}, output))
        yield output

    compiled.root_render_func = recording
    return renders


def stripped(output, sentinel):
    parts = output.split(sentinel)
    del parts[1::3]
    return "".join(parts)


def test_a_collision_renders_only_through_the_marking_split_on_a_one_off_sentinel():
    from promptprism.instrumentation._templates import prompt_environment, render_segmented

    hostile = f"<{SENTINEL}b{SENTINEL}bee{SENTINEL}>"
    source = "{% set captured %}({{ b }}){% endset %}A {{ a }} B {{ b }} {{ captured }}"
    compiled = prompt_environment().from_string(source)
    renders = spy_on_renders(compiled, ["a", "b"])
    prompt = render_segmented(compiled, [block("a", hostile, layer="one"), inline("b", "bee")])

    assert prompt.text == PLAIN.from_string(source).render(a=hostile, b="bee")
    assert prompt.unmapped_reason == names.UNMAPPED_SENTINEL_COLLISION and prompt.blocks == ()
    # Known before rendering, so the one render there is uses the one-off sentinel, with every value marked.
    [(sentinel, variables, output)] = renders
    assert all(variable.__class__ is segments.MarkedValue for variable in variables.values())
    assert sentinel != SENTINEL and sentinel not in hostile
    # The application's text is that render's output split on the sentinel and stripped:
    # a, b, and b again inside the capture, whose marked form join_captured kept.
    assert output.split(sentinel)[1::3] == ["a", "b", "b"]
    assert stripped(output, sentinel) == prompt.text


def test_a_split_refused_on_the_process_sentinel_is_redone_on_a_one_off_sentinel():
    from promptprism.instrumentation._templates import prompt_environment, render_segmented

    # Escaping outputs escape the whole marked form: the text between the
    # sentinels is no longer the value's, so the first split refuses the render.
    source = "<p>{{ a }}</p>\n{% set captured %}[{{ a }}]{% endset %}{{ captured }} {{ b }}"
    values = [block("a", "Tom & <Jerry>", layer="one"), block("b", "plain", layer="two")]
    compiled = prompt_environment(autoescape=True).from_string(source)
    renders = spy_on_renders(compiled, ["a", "b"])
    prompt = render_segmented(compiled, values)

    assert prompt.text == jinja2.Environment(autoescape=True).from_string(source).render(
        a="Tom & <Jerry>", b="plain")
    assert prompt.unmapped_reason == names.UNMAPPED_RENDER_ERROR and prompt.blocks == ()
    [(first_sentinel, first_variables, _), (sentinel, variables, output)] = renders
    assert all(variable.__class__ is segments.MarkedValue
               for variable in (*first_variables.values(), *variables.values()))
    assert first_sentinel == SENTINEL and sentinel != SENTINEL
    assert output.count(sentinel) == 3 * 2 and stripped(output, sentinel) == prompt.text


def test_sentinels_taken_apart_even_on_a_one_off_sentinel_raise_instead_of_guessing_the_text():
    from promptprism.instrumentation._templates import TemplateError, prompt_environment, render_segmented

    environment = prompt_environment()
    # Only code that reads a marked value's internals can cut a sentinel short.
    environment.filters["clip"] = lambda text: getattr(text, "wrapped", text)[:-1]
    compiled = environment.from_string("Note: {{ a|clip }}")
    renders = spy_on_renders(compiled, ["a"])
    with pytest.raises(TemplateError, match="took apart the sentinels"):
        render_segmented(compiled, [block("a", "text", layer="one")])
    assert [sentinel == SENTINEL for sentinel, _, _ in renders] == [True, False]


def test_the_one_off_sentinel_occurs_in_no_string_of_the_variables(monkeypatch):
    nested = "deep \x0e0000000001\x0f text"
    looped = {"list": [("tuple", {"key": frozenset({nested})})]}
    looped["itself"] = looped
    drawn = iter(["\x0e0000000001\x0f", SENTINEL, "\x0e0000000002\x0f"])
    monkeypatch.setattr(segments, "_draw_sentinel", lambda: next(drawn))
    assert segments.one_off_sentinel(looped, "other") == "\x0e0000000002\x0f"

    # A render that needs one then strips only its own sentinel, leaving the context's text alone.
    drawn = iter(["\x0e0000000001\x0f", "\x0e0000000002\x0f"])
    source = "{{ a }} {% for item in items %}{{ item }}{% endfor %}"
    values = [block("a", SENTINEL, layer="one")]
    prompt = render_string(source, values, context={"items": [nested]})
    assert prompt.text == PLAIN.from_string(source).render(a=SENTINEL, items=[nested])
    assert prompt.unmapped_reason == names.UNMAPPED_SENTINEL_COLLISION


def test_builder_collision_text_comes_from_a_split_on_a_one_off_sentinel(monkeypatch):
    splits = []
    original = segments.strip_sentinels

    def recording(rendered, marked, sentinel, changed=None):
        splits.append((rendered, sentinel))
        return original(rendered, marked, sentinel, changed)

    monkeypatch.setattr(segments, "strip_sentinels", recording)
    prompt = build_prompt([f"static {SENTINEL} ", block("x", "value", layer="l")])
    assert prompt.text == f"static {SENTINEL} value"
    assert prompt.unmapped_reason == names.UNMAPPED_SENTINEL_COLLISION
    [(rendered, sentinel)] = splits
    assert sentinel != SENTINEL and rendered == f"static {SENTINEL} {sentinel}1{sentinel}value{sentinel}"


def test_builder_sections_may_share_a_name():
    prompt = build_prompt([block("doc", "one", layer="knowledge"), "\n", block("doc", "two", layer="knowledge")])
    assert [(b.name, b.content) for b in prompt.blocks] == [("doc", "one"), ("template", "\n"), ("doc", "two")]


def test_builder_value_with_sentinel_is_unmapped_with_exact_text():
    prompt = build_prompt(["a", block("x", SENTINEL, layer="l"), "b"])
    assert prompt.text == f"a{SENTINEL}b"
    assert prompt.unmapped_reason == names.UNMAPPED_SENTINEL_COLLISION


def test_lookup_rendered_finds_recent_prompts_and_forgets_beyond_the_bound():
    first = build_prompt(["first prompt ", block("v", "0", layer="x")])
    assert lookup_rendered("first prompt 0") is first
    assert lookup_rendered("never rendered") is None
    for number in range(segments.REGISTRY_CAPACITY):
        build_prompt([f"filler {number}"])
    assert lookup_rendered("first prompt 0") is None
    assert lookup_rendered(f"filler {segments.REGISTRY_CAPACITY - 1}") is not None
    assert len(segments._registry) <= segments.REGISTRY_CAPACITY


def test_stability_outside_the_vocabulary_is_stored_as_unknown():
    prompt = build_prompt([block("a", "x", layer="l", stability="forever")])
    assert prompt.blocks[0].stability == names.STABILITY_UNKNOWN


@pytest.mark.parametrize("filtered", [
    "{{ captured|upper }}", "{{ captured|lower }}", "{{ captured|title }}", "{{ captured|capitalize }}",
    "{{ captured|trim }}", "{{ captured|indent(2, True) }}", "{{ captured|wordwrap(8) }}", "{{ captured|center(40) }}",
])
def test_string_filters_over_captured_output_never_leak_sentinel_remnants(filtered):
    # A case or whitespace filter must not turn a sentinel into something the
    # split no longer recognises (which would leave stray characters in the text).
    source = "{% set captured %} Note: {{ a }} and {{ b }} {% endset %}" + filtered
    values = [block("a", "mixed Case text", layer="one"), inline("b", "x y", stability="turn")]
    prompt = render_string(source, values)
    assert prompt.text == PLAIN.from_string(source).render(a="mixed Case text", b="x y")
    assert SENTINEL not in prompt.text
    if prompt.mapped:  # a filter that left keys and texts alone keeps the map
        assert "".join(b.content for b in prompt.blocks) == prompt.text


def test_captured_output_and_macros_keep_their_blocks_when_unfiltered():
    source = ("{% macro section(title) %}## {{ title }}\n{{ caller() }}{% endmacro %}"
              "{% set remembered %}{{ memory }}{% endset %}"
              "{% call section('Memory') %}{{ remembered }}{% endcall %}\n{{ memory|default('none') }}")
    prompt = render_string(source, [block("memory", "Likes tea.", layer="memory")], name="system")
    assert prompt.text == PLAIN.from_string(source).render(memory="Likes tea.")
    assert spans(prompt) == [
        ("system", "template", "static", "## Memory\n"),
        ("memory", "memory", "turn", "Likes tea."),
        ("system", "template", "static", "\n"),
        ("memory", "memory", "turn", "Likes tea."),
    ]


def test_inlined_marking_matches_the_finalize_hook():
    # prompt_environment() compiles the hook's check into the template; an
    # environment that calls the hook must produce the same text and blocks.
    from promptprism.instrumentation._templates import render_segmented

    source = ("{{ a }}|{{ a|upper }}|{{ a|length }}|{{ a if flag else '' }}|{% for v in [a, b] %}<{{ v }}>{% endfor %}"
              "{{ b ~ '!' }}|{{ 42 }}|{{ none_value }}|{{ missing }}")
    values = [block("a", "Été", layer="one", stability="session"), inline("b", "bee")]
    context = {"flag": True, "none_value": None}
    calling = jinja2.Environment(keep_trailing_newline=True, autoescape=False, finalize=segments.finalize)
    inlined = render_string(source, values, context=context, name="t")
    called = render_segmented(calling.from_string(source), values, context=context,
                              template=segments.Template("t", names.ORIGIN_BUILTIN))
    assert inlined.text == called.text == PLAIN.from_string(source).render(a="Été", b="bee", **context)
    assert spans(inlined) == spans(called)
    assert [b.name for b in inlined.blocks].count("a") == 3


def test_block_offsets_are_utf8_bytes_when_only_some_pieces_are_ascii():
    prompt = render_string("ascii {{ a }} 日本 {{ b }} end", [block("a", "plain", layer="x"), block("b", "🙂é", layer="y")])
    encoded = prompt.text.encode("utf-8")
    assert [(b.start, b.end) for b in prompt.blocks] == [(0, 6), (6, 11), (11, 19), (19, 25), (25, 29)]
    assert all(encoded[b.start:b.end].decode("utf-8") == b.content for b in prompt.blocks)
    assert prompt.byte_length == len(encoded)


@pytest.mark.parametrize("is_async", [False, True])
def test_inheritance_super_and_include_keep_blocks_in_sync_and_async_environments(is_async):
    from promptprism.instrumentation._templates import prompt_environment, render_segmented

    sources = {"base.j2": "Head {% block body %}default{% endblock %} tail {{ a }}", "part.j2": "[{{ b }}]",
               "child.j2": '{% extends "base.j2" %}{% block body %}{{ super() }} + {{ b }} {% include "part.j2" %}'
                           "{% endblock %}"}
    loader = jinja2.DictLoader(sources)
    environment = prompt_environment(loader=loader, enable_async=is_async)
    values = [block("a", "AAA", layer="x"), block("b", "BBB", layer="y")]
    prompt = render_segmented(environment.get_template("child.j2"), values)
    assert prompt.text == jinja2.Environment(loader=loader).get_template("child.j2").render(a="AAA", b="BBB")
    assert [(b.name, b.content) for b in prompt.blocks] == [
        ("template", "Head default + "), ("b", "BBB"), ("template", " ["), ("b", "BBB"), ("template", "] tail "),
        ("a", "AAA")]


def test_a_value_with_a_lone_surrogate_renders_instead_of_raising():
    # os.fsdecode turns a non-UTF-8 file name byte into a lone surrogate; Jinja2
    # renders such a path fine, so promptprism must too (README: recording
    # never raises into the application). Bytes are counted as canonical.py counts them.
    path = "/data/report-\udcff.txt"
    for prompt in (render_string("Read {{ path }} then {{ memory }}.",
                                 [inline("path", path), block("memory", "tea \udcfe", layer="memory")]),
                   build_prompt(["Read ", block("path", path, layer="state"), "."])):
        assert "\udcff" in prompt.text and prompt.mapped
        encoded = prompt.text.encode("utf-8", "surrogatepass")
        assert prompt.byte_length == len(encoded)
        assert tiling_problem(prompt.blocks, prompt.byte_length) is None
        for part in prompt.blocks:
            assert encoded[part.start:part.end] == part.content.encode("utf-8", "surrogatepass")
            assert part.sha256 == hashlib.sha256(encoded[part.start:part.end]).hexdigest()
        assert prompt.sha256 == hashlib.sha256(encoded).hexdigest()
