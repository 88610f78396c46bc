"""One colour per layer name, everywhere: the inspector, the overview and the Grafana dashboard.

A layer's colour depends on its name only, never on which layers a page or
a filter happens to show, so ``memory`` is the same orange on every page, at
every filter and in every run. The layers the block model names have fixed
hues, and so has the part the overview and the dashboard show for prompts
sent without a block map (``(unmapped)``); any other name gets a hue derived
from its sha256, among the hues at least ``DERIVED_HUE_DISTANCE`` degrees
from every fixed one and outside the greens (``GREENS``), so it never passes
for a named layer. The template's own prose (layer ``template``) is grey,
so injected values stand out. Pure, standard library only.
"""

from __future__ import annotations

import colorsys
import hashlib

LAYER_HUES = {
    "identity": 215,
    "instructions": 265,
    "skills": 150,
    "memory": 32,
    "knowledge": 190,
    "state": 330,
    "tools": 95,
}
TEMPLATE_LAYER = "template"
# The whole prompt of a request sent without a block map, as one part (insight.growth_queries).
UNMAPPED_LAYER = "(unmapped)"
FIXED_HUES = {**LAYER_HUES, UNMAPPED_LAYER: 0}
# How far a derived hue stays from every fixed one (degrees on the colour wheel).
DERIVED_HUE_DISTANCE = 20
# The swatch colour (bars, lines, Grafana series): saturation and lightness in %.
SATURATION = 62
GREY_SATURATION = 8
GREY_HUE = 220
LIGHTNESS = 55


def _distance(a: int, b: int) -> int:
    return min((a - b) % 360, (b - a) % 360)


# Greens: at this saturation and lightness the eye tells hues apart here far
# less than elsewhere (a derived 118 passed for "skills", 150), so none is derived there.
GREENS = range(96, 176)
# The hues a derived one may take.
DERIVED_HUES = tuple(hue for hue in range(360) if hue not in GREENS
                     and all(_distance(hue, fixed) >= DERIVED_HUE_DISTANCE for fixed in FIXED_HUES.values()))


def layer_hue(layer: str) -> int:
    if layer in FIXED_HUES:
        return FIXED_HUES[layer]
    return DERIVED_HUES[int(hashlib.sha256(layer.encode("utf-8")).hexdigest()[:4], 16) % len(DERIVED_HUES)]


def is_grey(layer: str) -> bool:
    return layer == TEMPLATE_LAYER or not layer


def layer_style(layer: str) -> str:
    """Inline CSS custom properties for a layer's colour (numbers only, never captured text)."""
    if is_grey(layer):
        return f"--hue: {GREY_HUE}; --saturation: {GREY_SATURATION}%"
    return f"--hue: {layer_hue(layer)}; --saturation: {SATURATION}%"


def layer_color(layer: str) -> str:
    """The layer's swatch colour as ``#rrggbb`` (the CSS ``hsl(hue saturation 55%)`` the inspector draws)."""
    hue, saturation = (GREY_HUE, GREY_SATURATION) if is_grey(layer) else (layer_hue(layer), SATURATION)
    red, green, blue = colorsys.hls_to_rgb(hue / 360, LIGHTNESS / 100, saturation / 100)
    return "#" + "".join(f"{round(channel * 255):02x}" for channel in (red, green, blue))


__all__ = ["FIXED_HUES", "LAYER_HUES", "TEMPLATE_LAYER", "UNMAPPED_LAYER", "layer_color", "layer_hue", "layer_style"]
