"""Growth queries: which part of the system prompt grew, over time and against the previous period.

Every byte of every system prompt is attributed to a part (its block, or one
``(unmapped)`` part), so the parts of a request always add up to its
prompt; grouped by block name, layer, stability, service, model or process.
"""

from __future__ import annotations

from ..lineage import LINEAGE_SQL
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
    FROM {{db}}.prompt_blocks
    WHERE {{window}} AND {{filters}}
      AND request_id IN (SELECT request_id FROM {{db}}.prompt_requests WHERE mapped AND {{window}})
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


GROWTH_SERIES = InsightQuery(
    name="growth_series",
    title="Prompt bytes per request by ${dimension}",
    description="Average system-prompt bytes per request in each time bucket, split by block name, "
    "layer, stability, service, model or process kind; the parts of a bucket add up to its average prompt.",
    panel="timeseries",
    sql=f"""
WITH
    parts AS ({_with_window(_PROMPT_PARTS, "{{time_filter:started_at}}")}),
    requests_per_bucket AS (
        SELECT {{{{bucket:started_at}}}} AS time, uniqExact(request_id) AS requests
        FROM ({_with_window(_PROMPT_REQUESTS, "{{time_filter:started_at}}")})
        GROUP BY time
    )
SELECT
    parts_per_bucket.time AS time,
    parts_per_bucket.series AS series,
    round(parts_per_bucket.bytes / requests_per_bucket.requests, 1) AS bytes_per_request
FROM (
    SELECT {{{{bucket:started_at}}}} AS time, {_SERIES} AS series, sum(size) AS bytes
    FROM parts
    GROUP BY time, series
) AS parts_per_bucket
INNER JOIN requests_per_bucket USING (time)
ORDER BY time, series
""",
    params=("since", "until", "bucket_seconds", "dimension", "service", "model", "process"),
)

# The window of the growth comparison: the selected period and the period of
# the same length just before it.
_COMPARISON_WINDOW = (
    "started_at >= {{from}} - ({{to}} - {{from}}) AND started_at <= {{to}}"
)

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
    # Each source (the requests and their parts) is read once: ClickHouse
    # evaluates a CTE again wherever it is referenced, and the views behind
    # them apply FINAL. Lineage counts are window functions over the one
    # row per request; the totals, window functions over the result.
    sql=f"""
WITH
    {{{{from}}}} AS period_start,
    compared AS (
        SELECT request_id, started_at >= period_start AS current, {LINEAGE_SQL} AS lineage
        FROM {{{{db}}}}.prompt_requests
        WHERE {_COMPARISON_WINDOW} AND {{{{filters}}}} AND (mapped OR prompt_bytes > 0)
    ),
    parts AS ({_with_window(_PROMPT_PARTS, _COMPARISON_WINDOW)}),
    per_request AS (
        SELECT
            c.lineage AS lineage,
            c.current AS current,
            groupArrayIf(({_SERIES}, p.layer, p.size), p.request_id != '') AS request_parts
        FROM compared AS c
        LEFT JOIN parts AS p ON p.request_id = c.request_id
        GROUP BY c.lineage, c.request_id, c.current
    ),
    per_lineage AS (
        SELECT
            lineage, current, request_parts,
            countIf(current) OVER (PARTITION BY lineage) AS lineage_current,
            countIf(NOT current) OVER (PARTITION BY lineage) AS lineage_previous
        FROM per_request
    ),
    weighed AS (
        SELECT
            *,
            lineage_current > 0 AND lineage_previous > 0 AS matched,
            uniqExactIf(lineage, matched) OVER () AS lineages_compared,
            countIf(matched AND current) OVER () AS current_requests,
            countIf(matched AND NOT current) OVER () AS previous_requests,
            countIf(NOT matched) OVER () AS requests_not_compared
        FROM per_lineage
    ),
    per_series AS (
        SELECT
            part.1 AS series,
            -- the layers of a block name (by other dimensions: empty)
            if({{{{dimension}}}} = 'name', arrayStringConcat(arraySort(groupUniqArray(part.2)), ', '), '') AS layers,
            sumIf(part.3, current) AS current_sum,
            sumIf(part.3 * lineage_current / lineage_previous, NOT current) AS previous_sum,
            any(lineages_compared) AS lineages_compared,
            any(current_requests) AS current_requests,
            any(previous_requests) AS previous_requests,
            any(requests_not_compared) AS requests_not_compared
        FROM weighed
        ARRAY JOIN request_parts AS part
        WHERE matched
        GROUP BY series
    )
SELECT
    series,
    layers,
    round(if(current_requests = 0, 0, previous_sum / current_requests), 1) AS previous_bytes,
    round(if(current_requests = 0, 0, current_sum / current_requests), 1) AS current_bytes,
    round(current_bytes - previous_bytes, 1) AS delta_bytes,
    round(delta_bytes / {BYTES_PER_TOKEN}, 1) AS delta_tokens,
    if(previous_bytes = 0, NULL, round(100 * delta_bytes / previous_bytes, 2)) AS change_pct,
    if(sum(previous_sum) OVER () = 0, NULL,
       round(100 * delta_bytes / (sum(previous_sum) OVER () / current_requests), 2)) AS contribution_pct,
    previous_requests,
    current_requests,
    lineages_compared,
    requests_not_compared
FROM per_series
ORDER BY abs(delta_bytes) DESC, series
""",
    params=("since", "until", "dimension", "service", "model", "process"),
)

GROWTH_TOTAL = InsightQuery(
    name="growth_total",
    title="Prompt change against the previous period",
    description="Average system-prompt bytes per request, this period against the one before.",
    panel="stat",
    sql=f"""
SELECT
    round(sum(previous_bytes), 1) AS previous_bytes,
    round(sum(current_bytes), 1) AS current_bytes,
    round(current_bytes - previous_bytes, 1) AS delta_bytes,
    round(delta_bytes / {BYTES_PER_TOKEN}, 1) AS delta_tokens,
    if(previous_bytes = 0, NULL, round(100 * delta_bytes / previous_bytes, 2)) AS change_pct,
    max(previous_requests) AS previous_requests,
    max(current_requests) AS current_requests,
    max(lineages_compared) AS lineages_compared
FROM ({GROWTH_ATTRIBUTION.sql})
""",
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
