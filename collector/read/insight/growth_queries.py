"""Growth queries: which part of the system prompt grew, over time and against the previous period.

Every byte of every system prompt is attributed to a part (its block, or one
``(unmapped)`` part), so the parts of a request always add up to its
prompt; grouped by block name, layer, stability, service, model or process.
"""

from __future__ import annotations

from ..lineage import LINEAGE_KEY_SQL
from . import hours
from .named_query import BYTES_PER_TOKEN, InsightQuery

# Breakdowns the growth queries accept, mapped to the column they group by.
DIMENSIONS = {
    "name": "name",
    "layer": "layer",
    "stability": "stability",
    "service": "service",
    "model": "model",
    "process": "process_kind",
}


# Every byte of every system prompt, attributed to a part: its block for
# mapped prompts, one "(unmapped)" part for prompts sent without a map, so the
# parts of a request always add up to its prompt_bytes.
_PROMPT_PARTS = """
    SELECT started_at, request_id, service, model, process_kind,
           toString(name) AS name, toString(layer) AS layer, toString(stability) AS stability,
           size
    FROM {{db}}.blocks
    WHERE {{window}} AND {{filters}}
      -- blocks of mapped requests (the one block prompt_blocks adds for a prompt sent as log
      -- events is an unmapped request's), found by the sorting key's prefix
      AND (service, toStartOfHour(started_at), request_id)
          IN (SELECT service, toStartOfHour(started_at), request_id FROM {{db}}.requests WHERE mapped AND {{window}})
    -- `blocks` is a view of the documents (migration 050): a block of a request stored twice, once
    -- per copy of its document, counts once
    LIMIT 1 BY request_id, `index`
    UNION ALL
    SELECT started_at, request_id, service, model, process_kind,
           '(unmapped)', '(unmapped)', '(unmapped)', prompt_bytes
    FROM {{db}}.prompt_requests
    WHERE {{window}} AND {{filters}} AND NOT mapped AND prompt_bytes > 0
"""

# Requests that carry a system prompt: the denominator of "bytes per request".
_PROMPT_REQUESTS = """
    SELECT started_at, request_id
    FROM {{db}}.prompt_requests
    WHERE {{window}} AND {{filters}} AND (mapped OR prompt_bytes > 0)
"""

_SERIES = """multiIf(
        {{dimension}} = 'layer', layer,
        {{dimension}} = 'stability', stability,
        {{dimension}} = 'service', toString(service),
        {{dimension}} = 'model', toString(model),
        {{dimension}} = 'process', toString(process_kind),
        name)"""


def _with_window(sql: str, window: str) -> str:
    return sql.replace("{{window}}", window)


def _with(ctes: list[str]) -> str:
    """A WITH clause of ``ctes`` (none: nothing)."""
    return "WITH\n    " + ",\n    ".join(ctes) + "\n" if ctes else ""


# The same series over a rollup's columns (LowCardinality there).
_ROLLUP_SERIES = (_SERIES.replace("layer,", "toString(layer),").replace("stability,", "toString(stability),")
                  .replace("        name)", "        toString(name))"))

_SERIES_RAW_WINDOW = "{{time_filter:started_at}} AND "


def _growth_series(plan: hours.Plan) -> str:
    """Whole hours from the hourly rollups (hours.py), the rest from raw rows."""
    ctes = plan.ctes(hours.INSIDE_WINDOW, hours.HOUR_BUCKETS)
    raw_window = _SERIES_RAW_WINDOW + plan.not_rolled("started_at")
    parts = plan.union(
        f"""SELECT {{{{bucket:hour}}}} AS time, {_ROLLUP_SERIES} AS series, sum(bytes) AS series_bytes
        FROM {{{{db}}}}.prompt_parts_hourly
        WHERE {plan.rolled if plan.rollups else ""} AND {{{{filters}}}}
        GROUP BY time, series""",
        f"""SELECT {{{{bucket:started_at}}}} AS time, {_SERIES} AS series, sum(size) AS series_bytes
        FROM ({_with_window(_PROMPT_PARTS, raw_window)})
        GROUP BY time, series""")
    requests = plan.union(
        f"""SELECT {{{{bucket:hour}}}} AS time, sum(requests) AS bucket_requests
        FROM {{{{db}}}}.prompt_requests_hourly
        WHERE {plan.rolled if plan.rollups else ""} AND {{{{filters}}}}
        GROUP BY time""",
        f"""SELECT {{{{bucket:started_at}}}} AS time, uniqExact(request_id) AS bucket_requests
        FROM ({_with_window(_PROMPT_REQUESTS, raw_window)})
        GROUP BY time""")
    return f"""
{_with(ctes)}SELECT
    parts_per_bucket.time AS time,
    parts_per_bucket.series AS series,
    round(parts_per_bucket.bytes / requests_per_bucket.requests, 1) AS bytes_per_request
FROM (
    SELECT time, series, sum(series_bytes) AS bytes
    FROM (
        {parts}
    )
    GROUP BY time, series
) AS parts_per_bucket
INNER JOIN (
    SELECT time, sum(bucket_requests) AS requests
    FROM (
        {requests}
    )
    GROUP BY time
) AS requests_per_bucket USING (time)
ORDER BY time, series
"""


GROWTH_SERIES = InsightQuery(
    name="growth_series",
    title="Prompt bytes per request by ${dimension}",
    description="Average system-prompt bytes per request in each time bucket, split by block name, "
    "layer, stability, service, model or process kind; the parts of a bucket add up to its average prompt.",
    panel="timeseries",
    sql=_growth_series(hours.Lookup()),
    build=_growth_series,
    params=("since", "until", "bucket_seconds", "dimension", "service", "model", "process"),
)

# The window of the growth comparison: the selected period and the period of
# the same length just before it.
_COMPARISON_WINDOW = (
    "started_at >= {{from}} - ({{to}} - {{from}}) AND started_at <= {{to}}"
)


# The columns a part is named by in raw rows and in the rollups, per breakdown.
_RAW_PARTS = {"name": "name", "layer": "layer", "stability": "stability", "service": "toString(service)",
              "model": "toString(model)", "process": "toString(process_kind)"}
_ROLLUP_PARTS = {**_RAW_PARTS, "name": "toString(name)", "layer": "toString(layer)",
                 "stability": "toString(stability)"}


def _growth_attribution(plan: hours.Plan, breakdowns: tuple[str, ...] = ()) -> str:
    """Whole hours of each period from the hourly rollups (hours.py), the rest
    from raw rows: per lineage, its requests and its bytes per part in each
    period. ClickHouse evaluates a CTE again wherever it is referenced: the
    raw ones are small (the edges of the periods), and the totals are scalar
    subqueries that run once.

    ``breakdowns`` (the read side only): several breakdowns in one query, each
    row with its ``breakdown``, each breakdown's rows as the query by that
    ``dimension`` gives them (the overview shows growth by name and by layer:
    one query planned instead of two).
    """
    if breakdowns:
        def parts(columns: dict[str, str]) -> str:
            listed = ", ".join(f"tuple('{breakdown}', {columns[breakdown]})" for breakdown in breakdowns)
            return f"arrayJoin([{listed}]) AS part"
        raw_series, rollup_series, part, named_part = parts(_RAW_PARTS), parts(_ROLLUP_PARTS), "part", \
            "part.1 AS breakdown, part.2 AS series"
        keys, named, partition, first = "breakdown, series", "breakdown = 'name'", "PARTITION BY breakdown", "breakdown, "
    else:
        raw_series, rollup_series, part, named_part = f"{_SERIES} AS series", f"{_ROLLUP_SERIES} AS series", \
            "series", "series"
        keys, named, partition, first = "series", "{{dimension}} = 'name'", "", ""
    ctes = plan.ctes(hours.INSIDE_PERIODS, periods=True)
    raw_window = _COMPARISON_WINDOW + " AND " + plan.not_rolled_in_periods("started_at")
    lineage_counts = plan.union(
        f"""SELECT lineage_key AS lineage, sumIf(requests, hour >= period_start) AS current_count,
                   sumIf(requests, hour < period_start) AS previous_count
            FROM {{{{db}}}}.prompt_requests_hourly
            WHERE {plan.rolled} AND {{{{filters}}}}
            GROUP BY lineage""",
        """SELECT lineage, uniqExactIf(request_id, current) AS current_count,
                   uniqExactIf(request_id, NOT current) AS previous_count
            FROM raw_requests
            GROUP BY lineage""")
    part_bytes = plan.union(
        f"""SELECT lineage_key AS lineage, {rollup_series}, toString(layer) AS part_layer,
                   sumIf(bytes, hour >= period_start) AS current_bytes,
                   sumIf(bytes, hour < period_start) AS previous_bytes
            FROM {{{{db}}}}.prompt_parts_hourly
            WHERE {plan.rolled} AND {{{{filters}}}} AND lineage_key IN (SELECT lineage FROM matched)
            GROUP BY lineage, {part}, part_layer""",
        f"""SELECT lineage, {raw_series}, layer AS part_layer,
                   sumIf(size, current) AS current_bytes, sumIf(size, NOT current) AS previous_bytes
            FROM ({_with_window(_PROMPT_PARTS, raw_window)}) AS raw_parts
            INNER JOIN (SELECT request_id, current, lineage FROM raw_requests) AS raw_lineages USING (request_id)
            GROUP BY lineage, {part}, part_layer""")
    return f"""
WITH
    {{{{from}}}} AS period_start,
    {"".join(cte + "," + chr(10) + "    " for cte in ctes)}raw_requests AS (
        SELECT request_id, started_at >= period_start AS current, {LINEAGE_KEY_SQL} AS lineage
        FROM {{{{db}}}}.prompt_requests
        WHERE {raw_window} AND {{{{filters}}}} AND (mapped OR prompt_bytes > 0)
    ),
    lineages AS (
        SELECT lineage, sum(current_count) AS lineage_current, sum(previous_count) AS lineage_previous
        FROM (
            {lineage_counts}
        )
        GROUP BY lineage
    ),
    matched AS (
        SELECT lineage, lineage_current, lineage_previous FROM lineages
        WHERE lineage_current > 0 AND lineage_previous > 0
    ),
    part_sums AS (
        SELECT lineage, {named_part}, part_layer, sum(current_bytes) AS lineage_current_sum,
               sum(previous_bytes) AS lineage_previous_sum
        FROM (
            {part_bytes}
        )
        GROUP BY lineage, {part}, part_layer
    ),
    per_series AS (
        SELECT
            {keys},
            -- the layers of a block name (by other dimensions: empty)
            if({named}, arrayStringConcat(arraySort(groupUniqArray(part_layer)), ', '), '') AS layers,
            sum(lineage_current_sum) AS current_sum,
            sum(lineage_previous_sum * lineage_current / lineage_previous) AS previous_sum
        FROM part_sums INNER JOIN matched USING (lineage)
        GROUP BY {keys}
    ),
    -- one scalar subquery over lineages (a CTE is planned again wherever it is referenced);
    -- assumeNotNull: ClickHouse 24.8 types a scalar subquery Nullable
    (SELECT (countIf(lineage_current > 0 AND lineage_previous > 0),
             sumIf(lineage_current, lineage_current > 0 AND lineage_previous > 0),
             sumIf(lineage_previous, lineage_current > 0 AND lineage_previous > 0),
             sum(lineage_current + lineage_previous)) FROM lineages) AS compared
SELECT
    {first}series,
    layers,
    round(if(current_requests = 0, 0, previous_sum / current_requests), 1) AS previous_bytes,
    round(if(current_requests = 0, 0, current_sum / current_requests), 1) AS current_bytes,
    round(current_bytes - previous_bytes, 1) AS delta_bytes,
    round(delta_bytes / {BYTES_PER_TOKEN}, 1) AS delta_tokens,
    if(previous_bytes = 0, NULL, round(100 * delta_bytes / previous_bytes, 2)) AS change_pct,
    if(previous_total = 0, NULL,
       round(100 * delta_bytes / (previous_total / current_requests), 2)) AS contribution_pct,
    assumeNotNull(compared.3) AS previous_requests,
    assumeNotNull(compared.2) AS current_requests,
    assumeNotNull(compared.1) AS lineages_compared,
    assumeNotNull(compared.4) - current_requests - previous_requests AS requests_not_compared
FROM (SELECT *, sum(previous_sum) OVER ({partition}) AS previous_total FROM per_series)
ORDER BY {first}abs(delta_bytes) DESC, series
"""


# Growth is compared within lineages (collector/read/lineage.py): a part's bytes per
# request in the current period against the same lineage's in the previous
# period, so a shift in traffic between services or models is not growth. Only
# lineages with requests in both periods are compared; each weighs as many
# requests as it had in the current period, so current_bytes is the plain
# average of the compared current requests and previous_bytes what the same
# traffic sent the period before.
GROWTH_ATTRIBUTION = InsightQuery(
    name="growth_attribution",
    title="Growth attribution: this period against the one before",
    description="Bytes per request of each part in the selected period and in the period of the same "
    "length before it, compared within each lineage (same conversation, service, provider, model and "
    "process kind; without a conversation, trace and process) that has requests in both; "
    "contribution_pct is the part's share of the change of the whole prompt, so the contributions add "
    "up to the prompt's change_pct.",
    panel="table",
    sql=_growth_attribution(hours.Lookup()),
    build=_growth_attribution,
    params=("since", "until", "dimension", "service", "model", "process"),
)


# The read side's growth by block name and by layer at once (the overview page; not a panel).
GROWTH_ATTRIBUTION_BY_NAME_AND_LAYER = InsightQuery(
    name="growth_attribution_by_name_and_layer",
    title="Growth attribution by name and by layer",
    description="growth_attribution by name and by layer, each row with its breakdown.",
    panel="none",
    sql=_growth_attribution(hours.Lookup(), ("name", "layer")),
    build=lambda plan: _growth_attribution(plan, ("name", "layer")),
    params=("since", "until", "service", "model", "process"),
)


def _growth_total(plan: hours.Plan) -> str:
    return f"""
SELECT
    round(sum(previous_bytes), 1) AS previous_bytes,
    round(sum(current_bytes), 1) AS current_bytes,
    round(current_bytes - previous_bytes, 1) AS delta_bytes,
    round(delta_bytes / {BYTES_PER_TOKEN}, 1) AS delta_tokens,
    if(previous_bytes = 0, NULL, round(100 * delta_bytes / previous_bytes, 2)) AS change_pct,
    max(previous_requests) AS previous_requests,
    max(current_requests) AS current_requests,
    max(lineages_compared) AS lineages_compared
FROM ({_growth_attribution(plan)})
"""


GROWTH_TOTAL = InsightQuery(
    name="growth_total",
    title="Prompt change against the previous period",
    description="Average system-prompt bytes per request, this period against the one before.",
    panel="stat",
    sql=_growth_total(hours.Lookup()),
    build=_growth_total,
    params=GROWTH_ATTRIBUTION.params,
)

# --- the API's default window (STORE only; Grafana has its own time picker) ---------

# The first and last request with a system prompt (within a window, when one is
# selected): without since/until the growth comparison is placed inside the data that exists.
GROWTH_RANGE = InsightQuery(
    name="growth_range",
    title="Requests with a system prompt: first and last",
    description="The time range the growth comparison can use.",
    panel="none",
    sql="""
SELECT
    count() AS requests,
    toInt64(toUnixTimestamp(min(started_at))) AS first_second,
    toInt64(toUnixTimestamp(max(started_at))) AS last_second
FROM {{db}}.prompt_requests
WHERE {{time_filter:started_at}} AND {{filters}} AND (mapped OR prompt_bytes > 0)
""",
    params=("since", "until", "service", "model", "process"),
)

# Requests with a system prompt in each period of a comparison, whether or not
# their lineage has requests in both: says why an attribution came back empty.
GROWTH_PERIOD_REQUESTS = InsightQuery(
    name="growth_period_requests",
    title="Requests with a system prompt per period",
    description="Requests in the selected period and in the one before it.",
    panel="none",
    sql=f"""
SELECT
    countIf(started_at >= {{{{from}}}}) AS current_requests,
    countIf(started_at < {{{{from}}}}) AS previous_requests
FROM {{{{db}}}}.prompt_requests
WHERE {_COMPARISON_WINDOW} AND {{{{filters}}}} AND (mapped OR prompt_bytes > 0)
""",
    params=("since", "until", "service", "model", "process"),
)
