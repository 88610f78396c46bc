"""The inspector's overview page: growth, cache breaks and headroom as HTML
with the charts drawn as inline SVG on the server.

No script and no CDN: the page works offline and behind a strict CSP. All
text that came from applications (block names, services, models, ids) is
escaped; numbers are formatted here.
"""

from __future__ import annotations

from html import escape
from typing import Any, Iterable, Mapping
from urllib.parse import quote, urlencode

# Distinguishable colours for up to a dozen series; further series reuse them.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
           "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295")

CHART_WIDTH = 720
CHART_HEIGHT = 220
MARGIN_LEFT = 64
MARGIN_BOTTOM = 28
# More series than this in one stacked chart is unreadable: the rest are summed.
SERIES_SHOWN = 10

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d232a;max-width:1100px}
h1{font-size:20px} h2{font-size:16px;margin-top:32px;border-bottom:2px solid #1d232a}
table{border-collapse:collapse;margin:8px 0} td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left}
td.number,th.number{text-align:right;font-variant-numeric:tabular-nums}
.summary{font-weight:600} .legend span{margin-right:14px;white-space:nowrap}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
svg text{font-size:11px;fill:#555} form input{width:9em}
"""


def _color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _number(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _bucket_label(time_text: str) -> str:
    # "2025-01-31 12:00:00" → "01-31 12:00"
    return time_text[5:16] if len(time_text) >= 16 else time_text


def _axis(max_value: float, unit: str) -> str:
    lines = []
    plot_height = CHART_HEIGHT - MARGIN_BOTTOM
    for step in range(5):
        value = max_value * step / 4
        y = plot_height - plot_height * step / 4
        lines.append(f'<line x1="{MARGIN_LEFT}" x2="{CHART_WIDTH}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        lines.append(f'<text x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_number(value)}{escape(unit)}</text>')
    return "".join(lines)


def _legend(names: Iterable[str]) -> str:
    return '<p class="legend">' + "".join(
        f'<span><i style="background:{_color(index)}"></i>{escape(name)}</span>' for index, name in enumerate(names)
    ) + "</p>"


def stacked_bars(rows: list[Mapping[str, Any]], *, series_key: str, value_key: str, unit: str = "") -> str:
    """Stacked bars per time bucket from long rows (time, series, value)."""
    if not rows:
        return "<p>No data in this window.</p>"
    totals_by_series: dict[str, float] = {}
    for row in rows:
        totals_by_series[row[series_key]] = totals_by_series.get(row[series_key], 0) + row[value_key]
    ranked = sorted(totals_by_series, key=lambda name: -totals_by_series[name])
    shown = ranked[:SERIES_SHOWN]
    names = shown + (["(other)"] if len(ranked) > SERIES_SHOWN else [])
    times = sorted({row["time"] for row in rows})
    stacks: dict[str, dict[str, float]] = {time_text: {} for time_text in times}
    for row in rows:
        name = row[series_key] if row[series_key] in shown else "(other)"
        stacks[row["time"]][name] = stacks[row["time"]].get(name, 0) + row[value_key]
    max_total = max(sum(stack.values()) for stack in stacks.values()) or 1
    plot_height = CHART_HEIGHT - MARGIN_BOTTOM
    slot = (CHART_WIDTH - MARGIN_LEFT) / len(times)
    bar_width = max(slot * 0.8, 1)
    shapes = [_axis(max_total, unit)]
    for position, time_text in enumerate(times):
        x = MARGIN_LEFT + position * slot + (slot - bar_width) / 2
        y = plot_height
        for index, name in enumerate(names):
            value = stacks[time_text].get(name, 0)
            if not value:
                continue
            height = plot_height * value / max_total
            y -= height
            shapes.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_width:.1f}" height="{height:.1f}" '
                f'fill="{_color(index)}"><title>{escape(time_text)} {escape(name)}: {_number(value)}{escape(unit)}'
                f"</title></rect>"
            )
    for position in (0, len(times) - 1):
        x = MARGIN_LEFT + position * slot + slot / 2
        shapes.append(f'<text x="{x:.1f}" y="{CHART_HEIGHT - 8}" text-anchor="middle">'
                      f"{escape(_bucket_label(times[position]))}</text>")
    return (f'<svg role="img" width="{CHART_WIDTH}" height="{CHART_HEIGHT}" '
            f'viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}">{"".join(shapes)}</svg>{_legend(names)}')


def lines_chart(rows: list[Mapping[str, Any]], *, series_key: str, value_key: str, unit: str = "") -> str:
    if not rows:
        return "<p>No data in this window.</p>"
    times = sorted({row["time"] for row in rows})
    names = sorted({row[series_key] for row in rows})[:SERIES_SHOWN]
    max_value = max(row[value_key] for row in rows) or 1
    plot_height = CHART_HEIGHT - MARGIN_BOTTOM
    step = (CHART_WIDTH - MARGIN_LEFT) / max(len(times) - 1, 1)
    position_of = {time_text: position for position, time_text in enumerate(times)}
    shapes = [_axis(max_value, unit)]
    for index, name in enumerate(names):
        points = [
            (MARGIN_LEFT + position_of[row["time"]] * step, plot_height - plot_height * row[value_key] / max_value)
            for row in rows if row[series_key] == name
        ]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        shapes.append(f'<polyline points="{path}" fill="none" stroke="{_color(index)}" stroke-width="2"/>')
        shapes.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{_color(index)}"/>' for x, y in points)
    return (f'<svg role="img" width="{CHART_WIDTH}" height="{CHART_HEIGHT}" '
            f'viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}">{"".join(shapes)}</svg>{_legend(names)}')


def contribution_bars(attribution: list[Mapping[str, Any]]) -> str:
    """Horizontal bars: each part's share of the prompt's change, in percentage points."""
    rows = [row for row in attribution if row.get("contribution_pct")]
    if not rows:
        return "<p>No change against the previous period.</p>"
    largest = max(abs(row["contribution_pct"]) for row in rows) or 1
    row_height = 22
    middle = MARGIN_LEFT + 120 + (CHART_WIDTH - MARGIN_LEFT - 120) / 2
    half = (CHART_WIDTH - MARGIN_LEFT - 120) / 2 - 50
    shapes = [f'<line x1="{middle}" x2="{middle}" y1="0" y2="{row_height * len(rows)}" stroke="#999"/>']
    for position, row in enumerate(rows):
        value = row["contribution_pct"]
        width = half * abs(value) / largest
        x = middle if value >= 0 else middle - width
        y = position * row_height
        color = "#e15759" if value > 0 else "#59a14f"
        shapes.append(f'<text x="{MARGIN_LEFT + 110}" y="{y + 15}" text-anchor="end">{escape(str(row["series"]))}</text>')
        shapes.append(f'<rect x="{x:.1f}" y="{y + 4}" width="{max(width, 1):.1f}" height="{row_height - 8}" fill="{color}"/>')
        label_x = x + width + 4 if value >= 0 else x - 4
        anchor = "start" if value >= 0 else "end"
        shapes.append(f'<text x="{label_x:.1f}" y="{y + 15}" text-anchor="{anchor}">{value:+.1f} %</text>')
    height = row_height * len(rows)
    return f'<svg role="img" width="{CHART_WIDTH}" height="{height}" viewBox="0 0 {CHART_WIDTH} {height}">{"".join(shapes)}</svg>'


def _trace_link(trace_id: str) -> str:
    return f'<a href="/trace/{quote(trace_id, safe="")}">{escape(trace_id[:12])}…</a>' if trace_id else ""


def _table(rows: list[Mapping[str, Any]], columns: list[tuple[str, str]]) -> str:
    if not rows:
        return "<p>None.</p>"
    head = "".join(
        f'<th class="number">{escape(label)}</th>' if key.startswith("#") else f"<th>{escape(label)}</th>"
        for key, label in columns
    )
    body = []
    for row in rows:
        cells = []
        for key, _ in columns:
            if key == "example_trace_id" or key == "trace_id":
                cells.append(f"<td>{_trace_link(str(row.get(key) or ''))}</td>")
            elif key.startswith("#"):
                cells.append(f'<td class="number">{_number(row.get(key[1:]), 1 if key.endswith("pct") else 0)}</td>')
            else:
                cells.append(f"<td>{escape(str(row.get(key, '')))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _cache_rows(series: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Follow-up requests per bucket split into those that broke the cache and those that kept it."""
    rows = []
    for row in series:
        rows.append({"time": row["time"], "series": "cache broken", "value": row["breaks"]})
        rows.append({"time": row["time"], "series": "prefix kept", "value": row["follow_ups"] - row["breaks"]})
    return rows


def _filter_form(query: Mapping[str, str]) -> str:
    fields = []
    for name in ("since", "until", "service", "model", "process"):
        value = escape(query.get(name, ""), quote=True)
        fields.append(f'<label>{name} <input name="{name}" value="{value}"></label> ')
    return f'<form method="get" action="/overview">{"".join(fields)}<button>show</button></form>'


def _verdict_rows(requests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per-request cache verdicts with their inputs; a missing provider figure is said, not zeroed."""
    return [{**row, "reported": "not reported" if row.get("cache_read_tokens") is None
             else f"{row['cache_read_tokens']:,}", "changed": row.get("changed_block") or "–"}
            for row in requests if row.get("has_previous")]


def _periods(growth: Mapping[str, Any]) -> str:
    window, previous = growth["window"], growth["previous_window"]
    chosen = f" ({growth['window_basis']})" if growth.get("window_chosen") == "default" else ""
    return (f"{escape(window['since'])} – {escape(window['until'])} against "
            f"{escape(previous['since'])} – {escape(previous['until'])}{escape(chosen)}")


def render(*, growth: Mapping[str, Any], growth_by_layer: Mapping[str, Any], cache: Mapping[str, Any],
           headroom: Mapping[str, Any], query: Mapping[str, str]) -> str:
    links = {key: value for key, value in query.items() if value}
    api_query = ("?" + urlencode(links)) if links else ""
    cache_lines = "".join(f"<li>{escape(line)}</li>" for line in cache["summary"])
    cache_window = cache["window"]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>promptprism overview</title>
<style>{_STYLE}</style></head><body>
<p><a href="/">← requests</a></p>
<h1>promptprism overview</h1>
<p>Every comparison is made within a lineage: the same conversation, service, provider, model and process
kind (without a conversation id: the same trace and process).
JSON: <a href="/api/insight/growth{escape(api_query)}">growth</a>,
<a href="/api/insight/cache{escape(api_query)}">cache</a>,
<a href="/api/insight/headroom{escape(api_query)}">headroom</a>.</p>
{_filter_form(query)}

<h2>Prompt growth</h2>
<p id="growth-periods">Periods compared: {_periods(growth)}.</p>
<p class="summary" id="growth-summary">{escape(growth['summary'])}</p>
<p class="summary" id="growth-by-layer-summary">By layer: {escape(growth_by_layer['summary'])}</p>
<h3>Bytes per request by layer</h3>
{stacked_bars(growth_by_layer['series'], series_key='series', value_key='bytes_per_request', unit=' B')}
<h3>Which blocks account for the change (percentage points of the whole prompt)</h3>
{contribution_bars(growth['attribution'])}
{_table(list(growth['attribution']), [('series', 'block'), ('layers', 'layer'), ('#previous_bytes', 'previous B/request'),
        ('#current_bytes', 'current B/request'), ('#delta_bytes', 'Δ B'), ('#delta_tokens', 'Δ tokens'),
        ('#contribution_pct', 'share of change %')])}

<h2>Cache breaks</h2>
<p>{escape(cache_window['since'])} – {escape(cache_window['until'])}. Each request is compared with the previous
request of its lineage. The expected cacheable prefix is the request's tool definitions and its leading static and
session blocks; when the provider's reported cache read covers it, the cache held. When it falls short, the first
part (tools, then blocks in prompt order) that changed within that prefix broke the cache.</p>
<ul class="summary" id="cache-summary">{cache_lines}</ul>
{stacked_bars(_cache_rows(cache['series']), series_key='series', value_key='value')}
<h3>Turn blocks before stable blocks</h3>
{_table(list(cache['misordered']), [('block', 'turn block'), ('before_block', 'sits before'),
        ('#requests', 'requests'), ('#uncacheable_bytes', 'stable B after it'),
        ('#uncacheable_tokens', '≈ tokens'), ('example_trace_id', 'example')])}
<h3>Blocks that broke the cache</h3>
{_table(list(cache['by_block']), [('block', 'first changed block'), ('stability', 'stability'),
        ('#breaks', 'breaks'), ('#bytes_rewritten', 'B re-sent uncached'), ('#tokens_rewritten', '≈ tokens'),
        ('#expected_prefix_tokens', 'expected prefix ≈ tokens (avg)'),
        ('#reported_cache_read_tokens', 'reported cache read (avg)'), ('example_trace_id', 'example')])}
<h3 id="cache-verdicts">Newest verdicts and their inputs</h3>
{_table(_verdict_rows(cache['requests']), [('trace_id', 'trace'), ('service', 'service'), ('model', 'model'),
        ('verdict', 'verdict'), ('changed', 'first changed part'), ('#expected_prefix_bytes', 'expected prefix B'),
        ('#expected_prefix_tokens', '≈ tokens'), ('reported', 'reported cache read')])}

<h2>Context headroom</h2>
<p class="summary" id="headroom-summary">{escape(headroom['summary'])}</p>
{lines_chart(list(headroom['series']), series_key='model', value_key='max_used_pct', unit=' %')}
{_table(list(headroom['requests'])[:20], [('trace_id', 'trace'), ('model', 'model'),
        ('#context_window', 'window'), ('#tokens_estimate', 'tokens'), ('#headroom_tokens', 'headroom'),
        ('#used_pct', 'used %')])}
</body></html>
"""
