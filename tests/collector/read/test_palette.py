"""One colour per layer name: named layers and the unmapped part have fixed hues; any other
name a hue derived from it alone, never one a named layer could be taken for."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from promptprism.collector.read.palette import (
    DERIVED_HUE_DISTANCE,
    FIXED_HUES,
    GREENS,
    LAYER_HUES,
    UNMAPPED_LAYER,
    layer_color,
    layer_hue,
    layer_style,
)
from promptprism.collector.read.insight.grafana import layer_color_overrides


def distance(a: int, b: int) -> int:
    return min((a - b) % 360, (b - a) % 360)


@given(st.text(min_size=1).filter(lambda name: name not in FIXED_HUES and name != "template"))
def test_a_derived_hue_stays_clear_of_every_fixed_one(name):
    hue = layer_hue(name)
    assert 0 <= hue < 360
    assert min(distance(hue, fixed) for fixed in FIXED_HUES.values()) >= DERIVED_HUE_DISTANCE
    assert hue not in GREENS  # where "skills" is, and 20 degrees do not show
    assert layer_hue(name) == hue and layer_color(name) == layer_color(name)


def test_the_unmapped_part_has_a_hue_of_its_own():
    assert layer_hue(UNMAPPED_LAYER) == FIXED_HUES[UNMAPPED_LAYER]
    assert all(distance(layer_hue(UNMAPPED_LAYER), hue) >= DERIVED_HUE_DISTANCE for hue in LAYER_HUES.values())
    # the names the demo's templates use beside it ("task" was 4 degrees from it before)
    assert all(distance(layer_hue(UNMAPPED_LAYER), layer_hue(name)) >= DERIVED_HUE_DISTANCE
               for name in ("task", "examples", "history", "context"))
    assert f"--hue: {FIXED_HUES[UNMAPPED_LAYER]};" in layer_style(UNMAPPED_LAYER)


def test_the_dashboard_colours_every_fixed_hue_as_the_pages_do():
    colours = {override["matcher"]["options"]: override["properties"][0]["value"]["fixedColor"]
               for override in layer_color_overrides()}
    assert colours[r"^(.* )?\(unmapped\)$"] == layer_color(UNMAPPED_LAYER)
    assert len(colours) == len(FIXED_HUES) + 1  # and the template's grey
