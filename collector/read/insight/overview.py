"""The overview page's charts and tables, worked out for ``overview.html``. Pure, no I/O.

Charts are inline SVG drawn by the template from the geometry computed here
(no script, no CDN), on a fixed view box that scales to the page width, so
a narrow window shrinks them instead of scrolling sideways. Axes use round
tick values with their unit, the top tick and every label stay inside the
view box, and each series' colour comes from ``palette``: a layer is the same
colour here, in the inspector and in Grafana, whatever the filter.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping

from ..formatting import byte_size
from ..palette import layer_color

WIDTH = 720
HEIGHT = 240
LEFT = 72  # room for "1,000.5 KiB"
RIGHT = 16
TOP = 12  # the top tick's label is centred on its line: half a line of room
BOTTOM = 34  # x labels
TICKS = 4
X_LABELS_MAX = 6
# More series than this in one stacked chart is unreadable: the rest are summed.
SERIES_SHOWN = 10
OTHER = "(other)"
# Contribution bars: the name column, and room for a "+100.0 %" label at either end.
NAME_WIDTH = 150
LABEL_ROOM = 64
ROW_HEIGHT = 24

BROKEN_COLOR = "#d1495b"
KEPT_COLOR = "#3f9b5a"
GROWTH_COLOR = BROKEN_COLOR
SHRINK_COLOR = KEPT_COLOR


def nice_ticks(maximum: float, count: int = TICKS) -> list[float]:
    """``count`` + 1 round tick values from 0 to at least ``maximum`` (steps of 1, 2, 2.5 or 5 × 10ⁿ)."""
    maximum = maximum if maximum > 0 else 1.0
    raw = maximum / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(factor * magnitude for factor in (1, 2, 2.5, 5, 10) if factor * magnitude * count >= maximum * 0.999999)
    return [round(step * index, 10) for index in range(count + 1)]


def tick_label(value: float, unit: str, step: float) -> str:
    if unit == "B":
        return byte_size(int(round(value)))
    # Enough decimals to tell the ticks apart: 0.25 needs two, 0.2 one, 5 none.
    digits = 0 if step >= 1 else next(places for places in range(1, 6) if abs(round(step, places) - step) < 1e-9)
    text = f"{value:,.{digits}f}"
    return f"{text} %" if unit == "%" else text


def value_label(value: float, unit: str) -> str:
    if unit == "B":
        return byte_size(int(round(value)))
    return f"{value:,.1f} %" if unit == "%" else f"{value:,.0f}"


def _time_label(text: str, bucket_seconds: int) -> str:
    # "2025-01-31 12:00:00" → "01-31" for day buckets, "01-31 12:00" below a day
    text = str(text)
    if len(text) < 16:
        return text
    return text[5:10] if bucket_seconds >= 86400 else text[5:16]


def _axes(maximum: float, unit: str) -> tuple[list[float], list[dict[str, Any]], float]:
    # Byte axes step in KiB or MiB once they reach them, so that the labels are exact.
    scale = next((size for size in (1024 * 1024, 1024) if unit == "B" and maximum >= size * 1000 / 1024), 1)
    ticks = [value * scale for value in nice_ticks(maximum / scale)]
    top = ticks[-1]
    step = ticks[1] - ticks[0]
    plot = HEIGHT - TOP - BOTTOM
    y_ticks = [{"y": round(TOP + plot - plot * value / top, 1), "label": tick_label(value, unit, step)}
               for value in ticks]
    return ticks, y_ticks, top


def _x_labels(times: list[str], x_of: Callable[[int], float], bucket_seconds: int) -> list[dict[str, Any]]:
    if not times:
        return []
    every = max(1, math.ceil(len(times) / X_LABELS_MAX))
    positions = list(range(0, len(times), every))
    labels = []
    for position in positions:
        x = x_of(position)
        # Keep the label's text inside the view box at both ends.
        anchor = "start" if x < LEFT + 30 else "end" if x > WIDTH - RIGHT - 30 else "middle"
        labels.append({"x": round(x, 1), "label": _time_label(times[position], bucket_seconds), "anchor": anchor})
    return labels


def _frame(unit: str, maximum: float) -> dict[str, Any]:
    _, y_ticks, top = _axes(maximum, unit)
    return {"width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT, "top": TOP,
            "bottom": HEIGHT - BOTTOM, "y_ticks": y_ticks, "scale_top": top}


def stacked_bars(rows: list[Mapping[str, Any]], *, series_key: str, value_key: str, unit: str, bucket_seconds: int,
                 color: Callable[[str], str] = layer_color) -> dict[str, Any] | None:
    """Stacked bars per time bucket from long rows (time, series, value); None without data."""
    if not rows:
        return None
    totals: dict[str, float] = {}
    for row in rows:
        totals[str(row[series_key])] = totals.get(str(row[series_key]), 0) + float(row[value_key] or 0)
    ranked = sorted(totals, key=lambda name: (-totals[name], name))
    shown = ranked[:SERIES_SHOWN]
    names = shown + ([OTHER] if len(ranked) > SERIES_SHOWN else [])
    times = sorted({str(row["time"]) for row in rows})
    stacks: dict[str, dict[str, float]] = {time_text: {} for time_text in times}
    for row in rows:
        name = str(row[series_key]) if str(row[series_key]) in shown else OTHER
        stacks[str(row["time"])][name] = stacks[str(row["time"])].get(name, 0) + float(row[value_key] or 0)
    chart = _frame(unit, max(sum(stack.values()) for stack in stacks.values()))
    plot = chart["bottom"] - TOP
    slot = (chart["right"] - LEFT) / len(times)
    width = max(slot * 0.8, 1.0)
    bars = []
    for position, time_text in enumerate(times):
        x = LEFT + position * slot + (slot - width) / 2
        y = float(chart["bottom"])
        for name in names:
            value = stacks[time_text].get(name, 0)
            if value <= 0:
                continue
            height = plot * value / chart["scale_top"]
            y -= height
            bars.append({"x": round(x, 1), "y": round(y, 1), "width": round(width, 1), "height": round(height, 1),
                         "color": color(name) if name != OTHER else layer_color(""),
                         "title": f"{_time_label(time_text, 0)} {name}: {value_label(value, unit)}"})
    chart.update(kind="bars", bars=bars, x_labels=_x_labels(times, lambda p: LEFT + p * slot + slot / 2, bucket_seconds),
                 legend=[{"name": name, "color": color(name) if name != OTHER else layer_color("")} for name in names])
    return chart


def lines(rows: list[Mapping[str, Any]], *, series_key: str, value_key: str, unit: str, bucket_seconds: int,
          color: Callable[[str], str] = layer_color) -> dict[str, Any] | None:
    if not rows:
        return None
    times = sorted({str(row["time"]) for row in rows})
    names = sorted({str(row[series_key]) for row in rows})[:SERIES_SHOWN]
    chart = _frame(unit, max(float(row[value_key] or 0) for row in rows))
    plot = chart["bottom"] - TOP
    step = (chart["right"] - LEFT) / max(len(times) - 1, 1)
    position_of = {time_text: position for position, time_text in enumerate(times)}

    def x_of(position: int) -> float:
        return LEFT + position * step if len(times) > 1 else (LEFT + chart["right"]) / 2

    series = []
    for name in names:
        points = [(x_of(position_of[str(row["time"])]),
                   chart["bottom"] - plot * min(float(row[value_key] or 0), chart["scale_top"]) / chart["scale_top"],
                   float(row[value_key] or 0), str(row["time"]))
                  for row in sorted(rows, key=lambda row: str(row["time"])) if str(row[series_key]) == name]
        series.append({"name": name, "color": color(name),
                       "points": " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in points),
                       "dots": [{"x": round(x, 1), "y": round(y, 1),
                                 "title": f"{_time_label(time_text, 0)} {name}: {value_label(value, unit)}"}
                                for x, y, value, time_text in points]})
    chart.update(kind="lines", series=series, x_labels=_x_labels(times, x_of, bucket_seconds),
                 legend=[{"name": line["name"], "color": line["color"]} for line in series])
    return chart


def contribution_bars(attribution: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Horizontal bars: each part's share of the prompt's change, in percentage points, labels inside the box."""
    rows = [row for row in attribution if row.get("contribution_pct")]
    if not rows:
        return None
    largest = max(abs(float(row["contribution_pct"])) for row in rows) or 1.0
    any_negative = any(float(row["contribution_pct"]) < 0 for row in rows)
    left_edge = NAME_WIDTH + (LABEL_ROOM if any_negative else 8)
    right_edge = WIDTH - LABEL_ROOM
    middle = (left_edge + right_edge) / 2 if any_negative else left_edge
    half = (right_edge - middle)
    bars = []
    for position, row in enumerate(rows):
        value = float(row["contribution_pct"])
        width = max(half * abs(value) / largest, 1.0)
        x = middle if value >= 0 else middle - width
        y = position * ROW_HEIGHT
        bars.append({"name": str(row["series"]), "name_y": y + 16, "x": round(x, 1), "y": y + 5,
                     "width": round(width, 1), "height": ROW_HEIGHT - 10,
                     "color": GROWTH_COLOR if value > 0 else SHRINK_COLOR,
                     "label": f"{value:+.1f} %", "label_x": round(x + width + 4 if value >= 0 else x - 4, 1),
                     "anchor": "start" if value >= 0 else "end"})
    return {"width": WIDTH, "height": ROW_HEIGHT * len(rows), "middle": round(middle, 1), "name_x": NAME_WIDTH - 6,
            "bars": bars}


def cache_rows(series: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Follow-up requests per bucket split into those that broke the cache and those that kept it."""
    rows = []
    for row in series:
        rows.append({"time": row["time"], "series": "cache broken", "value": row["breaks"]})
        rows.append({"time": row["time"], "series": "prefix kept", "value": row["follow_ups"] - row["breaks"]})
    return rows


def cache_color(name: str) -> str:
    return BROKEN_COLOR if name == "cache broken" else KEPT_COLOR


def verdict_rows(requests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per-request cache verdicts with their inputs; a missing provider figure is said, not zeroed."""
    return [{**row, "reported": "not reported" if row.get("cache_read_tokens") is None
             else f"{row['cache_read_tokens']:,}", "changed": row.get("changed_block") or "–"}
            for row in requests if row.get("has_previous")]


__all__ = ["cache_color", "cache_rows", "contribution_bars", "lines", "nice_ticks", "stacked_bars", "tick_label",
           "verdict_rows"]
