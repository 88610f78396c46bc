"""The Grafana dashboard, built from the named insight queries.

``python -m promptprism.collector.read.insight.grafana`` writes
``grafana/dashboards/promptprism.json``; a test checks that the committed
file equals what this module builds, so a query changed in ``queries`` cannot
silently drift from its panel.

Panels use the official ClickHouse data source (``grafana-clickhouse-datasource``,
v4 query model: ``editorType: sql``, ``rawSql``, ``format`` 0 = time series,
1 = table, 3 = trace). The data source itself is a dashboard variable, so one
dashboard serves every provisioned ClickHouse.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from ..palette import FIXED_HUES, TEMPLATE_LAYER, layer_color
from .named_query import grafana_selection
from .queries import (CACHE_BREAKS_BY_BLOCK, CACHE_MISORDERED, CACHE_SERIES, GENAI_OPERATION_DURATION,
                      GENAI_TOKEN_USAGE, GRAFANA, GROWTH_ATTRIBUTION, GROWTH_SERIES, GROWTH_TOTAL, HEADROOM_REQUESTS,
                      HEADROOM_SERIES, REQUESTS_TABLE, InsightQuery)

PLUGIN_ID = "grafana-clickhouse-datasource"
DATASOURCE = {"type": PLUGIN_ID, "uid": "${datasource}"}
DASHBOARD_UID = "promptprism-overview"
DEFAULT_DATABASE = "promptprism"
DEFAULT_INSPECTOR_URL = "http://127.0.0.1:4380"

# sqlutil.FormatQueryOption values the plugin's backend reads from `format`.
FORMAT_TIME_SERIES = 0
FORMAT_TABLE = 1
FORMAT_TRACE = 3

# The trace view of one trace over the exporter-schema table (column names
# as the plugin's README gives them for the Trace format).
TRACE_VIEW_SQL = """SELECT
    TraceId AS traceID, SpanId AS spanID, ParentSpanId AS parentSpanID,
    ServiceName AS serviceName, SpanName AS operationName,
    Timestamp AS startTime, Duration / 1000000 AS duration,
    arrayMap(key -> map('key', key, 'value', SpanAttributes[key]), mapKeys(SpanAttributes)) AS tags,
    arrayMap(key -> map('key', key, 'value', ResourceAttributes[key]), mapKeys(ResourceAttributes)) AS serviceTags
FROM ${database}.otel_traces
WHERE TraceId = decodeURLComponent('${__value.raw:percentencode}')
ORDER BY startTime ASC"""


# The trace view opens in Explore through an internal data link: Grafana
# interpolates the query and builds the Explore URL itself (JSON, then
# percent-encoded), so no value is pasted into a URL or into JSON here. The
# clicked value reaches the SQL percent-encoded (only letters, digits, -_.~
# and %XX) inside a literal that ClickHouse decodes: a quote, a backslash
# (trailing too), `$$` or a newline in it cannot end the literal
# (tests/grafana/test_dashboards.py runs the rendered SQL with such values).
# Internal links name their data source by uid (Grafana does not interpolate
# it): the provisioned one (grafana/provisioning/datasources/clickhouse.yaml).
PROVISIONED_DATASOURCE = {"type": PLUGIN_ID, "uid": "promptprism-clickhouse"}


def _explore_trace_link() -> dict[str, Any]:
    return {
        "title": "Trace view (otel_traces)", "url": "", "targetBlank": True,
        "internal": {
            "datasourceUid": PROVISIONED_DATASOURCE["uid"], "datasourceName": "promptprism ClickHouse",
            "query": {"refId": "A", "datasource": PROVISIONED_DATASOURCE, "editorType": "sql",
                      "queryType": "traces", "format": FORMAT_TRACE, "rawSql": TRACE_VIEW_SQL},
        },
    }


TRACE_LINKS = [
    {"title": "Open in the promptprism inspector", "url": "${inspector_url}/trace/${__value.raw:percentencode}", "targetBlank": True},
    _explore_trace_link(),
]

# Units per column name; Grafana's unit ids.
UNITS = {
    "bytes_per_request": "decbytes", "previous_bytes": "decbytes", "current_bytes": "decbytes",
    "delta_bytes": "decbytes", "prompt_bytes": "decbytes", "prefix_bytes": "decbytes",
    "bytes_rewritten": "decbytes", "uncacheable_bytes": "decbytes", "rewritten_bytes": "decbytes",
    "expected_prefix_bytes": "decbytes", "tools_bytes": "decbytes",
    "change_pct": "percent", "contribution_pct": "percent", "max_used_pct": "percent",
    "avg_used_pct": "percent", "used_pct": "percent", "duration_ms": "ms", "average_seconds": "s",
}


def layer_color_overrides() -> list[dict[str, Any]]:
    """A fixed colour per known layer (palette.layer_color, as the inspector and the overview draw it).

    A time series split by a string column is named by its value, alone or after
    the value column's name, so the matcher takes either; other names keep
    Grafana's palette (the plugin has no way to colour a name it has not seen)."""
    return [
        {"matcher": {"id": "byRegexp", "options": f"^(.* )?{re.escape(layer)}$"},
         "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": layer_color(layer)}}]}
        for layer in (*FIXED_HUES, TEMPLATE_LAYER)
    ]


def _field_overrides(columns: list[str], links_on_trace_id: bool) -> list[dict[str, Any]]:
    overrides = [
        {"matcher": {"id": "byName", "options": column},
         "properties": [{"id": "unit", "value": UNITS[column]}]}
        for column in columns if column in UNITS
    ]
    if links_on_trace_id:
        for column in ("trace_id", "example_trace_id"):
            overrides.append({"matcher": {"id": "byName", "options": column},
                              "properties": [{"id": "links", "value": TRACE_LINKS}]})
    return overrides


# Time series served by the hourly rollups (migration 024) when a bucket holds whole hours.
HOURLY_ROLLUP_SERIES = frozenset({"growth_series", "cache_series"})


def panel(panel_id: int, query: InsightQuery, grid: tuple[int, int, int, int], *, unit: str = "short",
          columns: list[str] = (), title: str | None = None, layer_colors: bool = False) -> dict[str, Any]:
    x, y, width, height = grid
    kind = query.panel
    target = {
        "refId": "A",
        "datasource": DATASOURCE,
        "editorType": "sql",
        "format": FORMAT_TIME_SERIES if kind == "timeseries" else FORMAT_TABLE,
        "queryType": "timeseries" if kind == "timeseries" else "table",
        "rawSql": query.render(GRAFANA),
        # Which named query this is: tests and readers can trace it back.
        "meta": {"promptprism_query": query.name},
    }
    result: dict[str, Any] = {
        "id": panel_id,
        "type": kind,
        "title": title or query.title,
        "description": query.description,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": width, "h": height},
        "targets": [target],
        "fieldConfig": {"defaults": {"unit": unit, "decimals": 1}, "overrides": _field_overrides(list(columns), True)},
        "options": {},
    }
    if layer_colors:
        result["fieldConfig"]["overrides"].extend(layer_color_overrides())
    if query.name in HOURLY_ROLLUP_SERIES:
        # buckets of whole hours: the hourly rollups serve them (finer ones read raw rows)
        result["interval"] = "1h"
    if kind == "timeseries":
        result["fieldConfig"]["defaults"]["custom"] = {"drawStyle": "line", "lineWidth": 2, "fillOpacity": 10,
                                                       "stacking": {"mode": "none", "group": "A"}}
        result["options"] = {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull", "max"]},
                             "tooltip": {"mode": "multi", "sort": "desc"}}
    elif kind == "stat":
        result["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "/^(change_pct|delta_bytes|delta_tokens)$/"},
                             "colorMode": "value", "graphMode": "none", "textMode": "value_and_name"}
        result["fieldConfig"]["overrides"].append(
            {"matcher": {"id": "byName", "options": "delta_tokens"}, "properties": [{"id": "unit", "value": "short"}]})
    else:
        result["options"] = {"showHeader": True, "cellHeight": "sm"}
    return result


def row(panel_id: int, title: str, y: int) -> dict[str, Any]:
    return {"id": panel_id, "type": "row", "title": title, "collapsed": False,
            "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []}


def _query_variable(name: str, label: str, column: str, where: str) -> dict[str, Any]:
    sql = (f"SELECT DISTINCT toString({column}) FROM ${{database}}.requests "
           f"WHERE $__timeFilter(started_at) AND {where} ORDER BY 1")
    return {
        "name": name, "label": label, "type": "query", "datasource": DATASOURCE,
        "query": sql, "definition": sql, "refresh": 2, "includeAll": True, "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "options": [], "sort": 1,
    }


def templating() -> list[dict[str, Any]]:
    dimensions = "name,layer,stability,service,model,process"
    return [
        {"name": "datasource", "label": "ClickHouse", "type": "datasource", "query": PLUGIN_ID,
         "current": {}, "regex": "", "refresh": 1},
        {"name": "database", "label": "database", "type": "constant", "query": DEFAULT_DATABASE, "hide": 2},
        {"name": "inspector_url", "label": "inspector URL", "type": "textbox", "query": DEFAULT_INSPECTOR_URL,
         "current": {"text": DEFAULT_INSPECTOR_URL, "value": DEFAULT_INSPECTOR_URL}},
        _query_variable("service", "service", "service", "1 = 1"),
        _query_variable("model", "model", "model",
                        grafana_selection("service", "service")),
        _query_variable("process", "process kind", "process_kind",
                        grafana_selection("service", "service")),
        {"name": "dimension", "label": "growth by", "type": "custom", "query": dimensions,
         "current": {"text": "layer", "value": "layer"},
         "options": [{"text": value, "value": value, "selected": value == "layer"} for value in dimensions.split(",")]},
    ]


def build_dashboard() -> dict[str, Any]:
    panels = [
        row(1, "Prompt growth", 0),
        panel(2, GROWTH_SERIES, (0, 1, 16, 9), unit="decbytes", columns=["bytes_per_request"], layer_colors=True),
        panel(3, GROWTH_TOTAL, (16, 1, 8, 9), unit="decbytes", columns=["change_pct"]),
        panel(4, GROWTH_ATTRIBUTION, (0, 10, 24, 8), columns=[
            "previous_bytes", "current_bytes", "delta_bytes", "change_pct", "contribution_pct"]),
        row(5, "Cache breaks", 18),
        panel(6, CACHE_SERIES, (0, 19, 12, 8)),
        panel(7, CACHE_BREAKS_BY_BLOCK, (12, 19, 12, 8), columns=["bytes_rewritten"]),
        panel(8, CACHE_MISORDERED, (0, 27, 24, 6), columns=["uncacheable_bytes"]),
        row(9, "Context headroom", 33),
        panel(10, HEADROOM_SERIES, (0, 34, 12, 8), unit="percent", columns=["max_used_pct", "avg_used_pct"]),
        panel(11, HEADROOM_REQUESTS, (12, 34, 12, 8), columns=["used_pct"]),
        row(12, "Requests", 42),
        panel(13, REQUESTS_TABLE, (0, 43, 24, 10), columns=["prompt_bytes", "duration_ms"]),
        # Only when an application's own instrumentation exports the GenAI metrics (otel_metrics_*).
        row(14, "GenAI metrics from other instrumentations", 53),
        panel(15, GENAI_TOKEN_USAGE, (0, 54, 12, 8)),
        panel(16, GENAI_OPERATION_DURATION, (12, 54, 12, 8), columns=["average_seconds"]),
    ]
    return {
        "uid": DASHBOARD_UID,
        "title": "promptprism — prompt growth, cache breaks, headroom",
        "description": "Generated by `python -m promptprism.collector.read.insight.grafana` from the named insight "
                       "queries; edit those, not this file.",
        "tags": ["promptprism", "llm", "opentelemetry"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-7d", "to": "now"},
        "timepicker": {},
        "timezone": "utc",
        "graphTooltip": 1,
        "annotations": {"list": []},
        "links": [{"title": "promptprism overview", "type": "link", "url": "${inspector_url}/overview",
                   "targetBlank": True}],
        "templating": {"list": templating()},
        "panels": panels,
    }


def render_json() -> str:
    return json.dumps(build_dashboard(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    target = Path(argv[0] if argv else "grafana/dashboards/promptprism.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_json(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
