"""The named insight queries: one SQL text, two renderings.

Each query is written once with a handful of ``{{slot}}`` placeholders and
rendered for one of two front doors:

* ``STORE`` — the collector's API (and through it the CLI and the overview
  page): every value is a bound ClickHouse parameter (``{name:Type}``), the
  database too (``{db:Identifier}``).
* ``GRAFANA`` — the dashboards: the slots become the official ClickHouse
  plugin's macros (``$__timeFilter``, ``$__timeInterval``,
  ``$__conditionalAll`` …) and dashboard variables (``${database}``,
  ``${service:queryparam}`` …, see ``named_query.grafana_selection``).

So a panel, an API answer and a CLI line are the same SQL by construction;
``grafana.py`` builds the dashboard JSON from these objects and a test
checks the committed JSON against it.

Queries read the views ``prompt_requests`` and ``prompt_blocks`` (migrations
004, 008, 022), not the ``requests`` and ``blocks`` tables: the views fill in
the system prompt of a request whose content arrived as OTLP log events, as
the one unmapped block the API serves for it, so no query needs to know which
way a prompt travelled. They read the tables without FINAL (022): a copy of a
batch re-sent under another deduplication token may count twice until its
parts merge. Token counts are estimates at
``BYTES_PER_TOKEN``.
"""

from __future__ import annotations

from .cache_queries import CACHE_BREAKS_BY_BLOCK, CACHE_MISORDERED, CACHE_REQUESTS, CACHE_SERIES
from .growth_queries import (DIMENSIONS, GROWTH_ATTRIBUTION, GROWTH_ATTRIBUTION_BY_NAME_AND_LAYER,
                             GROWTH_PERIOD_REQUESTS, GROWTH_RANGE, GROWTH_SERIES, GROWTH_TOTAL)
from .metric_queries import GENAI_OPERATION_DURATION, GENAI_TOKEN_USAGE
from .named_query import BYTES_PER_TOKEN, GRAFANA, STORE, Dialect, InsightQuery

# The report, the routes and the Grafana generator import everything from
# here; the growth and cache groups live in their own modules.
__all__ = [
    "BYTES_PER_TOKEN", "DIMENSIONS", "GRAFANA", "QUERIES", "STORE", "Dialect", "InsightQuery",
    "GROWTH_SERIES", "GROWTH_ATTRIBUTION", "GROWTH_TOTAL", "GROWTH_RANGE", "GROWTH_PERIOD_REQUESTS",
    "GROWTH_ATTRIBUTION_BY_NAME_AND_LAYER",
    "CACHE_REQUESTS", "CACHE_BREAKS_BY_BLOCK", "CACHE_MISORDERED", "CACHE_SERIES",
    "HEADROOM_SERIES", "HEADROOM_REQUESTS", "REQUESTS_TABLE", "GENAI_TOKEN_USAGE", "GENAI_OPERATION_DURATION",
]


# --- context headroom ----------------------------------------------------------

# Only requests whose manifest knew the model's context window.
_HEADROOM_ROWS = """
    SELECT started_at, request_id, trace_id, service, model, process_kind,
           context_window, tokens_estimate, headroom_tokens,
           round(100 * tokens_estimate / context_window, 2) AS used_pct
    FROM {{db}}.prompt_requests
    WHERE {{time_filter:started_at}} AND {{filters}} AND context_window > 0
"""

HEADROOM_SERIES = InsightQuery(
    name="headroom_series",
    title="Context window used, by model",
    description="Per time bucket and model: the largest and the average share of the context window the "
    "request's estimated tokens used, and the smallest headroom left.",
    panel="timeseries",
    sql=f"""
SELECT
    {{{{bucket:started_at}}}} AS time,
    toString(model) AS model,
    max(used_pct) AS max_used_pct,
    round(avg(used_pct), 2) AS avg_used_pct,
    min(headroom_tokens) AS min_headroom_tokens
FROM ({_HEADROOM_ROWS})
GROUP BY time, model
ORDER BY time, model
""",
    params=("since", "until", "bucket_seconds", "service", "model", "process"),
)

HEADROOM_REQUESTS = InsightQuery(
    name="headroom_requests",
    title="Requests closest to the context limit",
    description="Requests using the largest share of their context window first (a 128k-token model "
    "with 10k left is tighter than a 1M-token model with 20k left): context window, estimated tokens, headroom.",
    panel="table",
    sql=f"""
SELECT
    started_at AS time, trace_id, request_id, service, model, process_kind,
    context_window, tokens_estimate, headroom_tokens, used_pct
FROM ({_HEADROOM_ROWS})
ORDER BY used_pct DESC, headroom_tokens ASC, time DESC
LIMIT {{{{limit}}}}
""",
    params=("since", "until", "service", "model", "process", "limit"),
)

# --- requests --------------------------------------------------------------------

REQUESTS_TABLE = InsightQuery(
    name="requests_table",
    title="Requests",
    description="Newest requests with their prompt size, tokens and cache use; the trace id opens the "
    "request in the inspector and the trace in Grafana's trace view.",
    panel="table",
    sql=f"""
SELECT
    started_at AS time, trace_id, request_id, service, model, process_kind, conversation_id,
    prompt_bytes, intDiv(prompt_bytes, {BYTES_PER_TOKEN}) AS prompt_tokens_estimate, block_count,
    mapped, unmapped_reason, input_tokens, output_tokens, cache_read_tokens, headroom_tokens,
    round(duration_ns / 1e6, 1) AS duration_ms
FROM {{{{db}}}}.prompt_requests
WHERE {{{{time_filter:started_at}}}} AND {{{{filters}}}}
ORDER BY time DESC
LIMIT {{{{limit}}}}
""",
    params=("since", "until", "service", "model", "process", "limit"),
)

# Every query here is a Grafana panel too; GROWTH_RANGE and GROWTH_PERIOD_REQUESTS
# only serve the API's choice of a default window, GROWTH_ATTRIBUTION_BY_NAME_AND_LAYER
# the overview page, and are not listed.
QUERIES: dict[str, InsightQuery] = {
    query.name: query
    for query in (
        GROWTH_SERIES, GROWTH_ATTRIBUTION, GROWTH_TOTAL,
        CACHE_REQUESTS, CACHE_BREAKS_BY_BLOCK, CACHE_MISORDERED, CACHE_SERIES,
        HEADROOM_SERIES, HEADROOM_REQUESTS,
        REQUESTS_TABLE,
        GENAI_TOKEN_USAGE, GENAI_OPERATION_DURATION,
    )
}
