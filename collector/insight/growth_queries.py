"""Growth queries: which part of the system prompt grew, over time and against the previous period.

Every byte of every system prompt is attributed to a part (its block, or one
``(unmapped)`` part), so the parts of a request always add up to its
prompt; grouped by block name, layer, stability, service, model or process.
"""

from __future__ import annotations

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

GROWTH_ATTRIBUTION = InsightQuery(
    name="growth_attribution",
    title="Growth attribution: this period against the one before",
    description="Bytes per request of each part in the selected period and in the period of the same "
    "length before it; contribution_pct is the part's share of the change of the whole prompt, "
    "so the contributions add up to the prompt's change_pct.",
    panel="table",
    sql=f"""
WITH
    {{{{from}}}} AS period_start,
    parts AS ({_with_window(_PROMPT_PARTS, _COMPARISON_WINDOW)}),
    totals AS (
        SELECT
            uniqExactIf(request_id, started_at >= period_start) AS current_requests,
            uniqExactIf(request_id, started_at < period_start) AS previous_requests
        FROM ({_with_window(_PROMPT_REQUESTS, _COMPARISON_WINDOW)})
    ),
    previous_prompt AS (
        SELECT sumIf(size, started_at < period_start) AS previous_bytes FROM parts
    )
SELECT
    series,
    round(if(previous_requests = 0, 0, previous_sum / previous_requests), 1) AS previous_bytes,
    round(if(current_requests = 0, 0, current_sum / current_requests), 1) AS current_bytes,
    round(current_bytes - previous_bytes, 1) AS delta_bytes,
    round(delta_bytes / {BYTES_PER_TOKEN}, 1) AS delta_tokens,
    if(previous_bytes = 0, NULL, round(100 * delta_bytes / previous_bytes, 2)) AS change_pct,
    if(previous_prompt_per_request = 0, NULL,
       round(100 * delta_bytes / previous_prompt_per_request, 2)) AS contribution_pct,
    previous_requests,
    current_requests
FROM (
    SELECT
        {_SERIES} AS series,
        sumIf(size, started_at >= period_start) AS current_sum,
        sumIf(size, started_at < period_start) AS previous_sum
    FROM parts
    GROUP BY series
) AS per_series
CROSS JOIN (
    SELECT current_requests, previous_requests,
           if(previous_requests = 0, 0, previous_bytes / previous_requests) AS previous_prompt_per_request
    FROM totals CROSS JOIN previous_prompt
) AS whole
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
    max(current_requests) AS current_requests
FROM ({GROWTH_ATTRIBUTION.sql})
""",
    params=GROWTH_ATTRIBUTION.params,
)
