"""Named queries over the GenAI metrics other instrumentations export (``otel_metrics_histogram``).

OpenLLMetry, OpenLIT and the official GenAI instrumentations send
``gen_ai.client.token.usage`` (tokens per call, ``gen_ai.token.type`` =
``input`` / ``output``) and ``gen_ai.client.operation.duration`` (seconds)
as histograms, stored as the OpenTelemetry Collector ClickHouse exporter
lays them out (migration 011). Most send cumulative points: each point
holds the running count and sum since its series started
(``StartTimeUnix``), so what a time bucket adds is the difference to the
previous point of the same series (a delta point is its own increase). The
panels show nothing until an application exports these metrics.
"""

from __future__ import annotations

from .named_query import InsightQuery

# One row per histogram point of ``metric``, with the increase of its count and
# sum since the previous point of its series, and the columns {{filters}} reads.
# The model is the response model when the instrumentation reports one.
_INCREASES = """
    SELECT point_time, service, model, token_type, process_kind,
           if(temporality = 1, point_count, greatest(0, point_count - lagInFrame(point_count, 1, 0) OVER series)) AS count_increase,
           if(temporality = 1, point_sum, greatest(0, point_sum - lagInFrame(point_sum, 1, 0) OVER series)) AS sum_increase
    FROM (
        SELECT toDateTime(TimeUnix) AS point_time, TimeUnix AS point_time_ns, ServiceName AS service,
               if(Attributes['gen_ai.response.model'] != '', Attributes['gen_ai.response.model'],
                  Attributes['gen_ai.request.model']) AS model,
               Attributes['gen_ai.token.type'] AS token_type, '' AS process_kind,
               toInt64(Count) AS point_count, Sum AS point_sum, AggregationTemporality AS temporality,
               cityHash64(ServiceName, ScopeName, Attributes, StartTimeUnix, ResourceAttributes) AS series_key
        FROM {{db}}.otel_metrics_histogram
        WHERE MetricName = '%(metric)s'
    )
    WINDOW series AS (PARTITION BY series_key ORDER BY point_time_ns ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
"""

GENAI_TOKEN_USAGE = InsightQuery(
    name="genai_token_usage",
    title="Tokens reported by GenAI instrumentations (gen_ai.client.token.usage)",
    description="Per time bucket, model and token type: the tokens other instrumentations' metrics "
    "(OpenLLMetry, OpenLIT, the official GenAI instrumentations) counted, from otel_metrics_histogram.",
    panel="timeseries",
    sql=f"""
SELECT
    {{{{bucket:point_time}}}} AS time,
    concat(model, ' ', token_type) AS series,
    sum(sum_increase) AS tokens
FROM ({_INCREASES % {"metric": "gen_ai.client.token.usage"}})
WHERE {{{{time_filter:point_time}}}} AND {{{{filters}}}}
GROUP BY time, series
ORDER BY time, series
""",
    params=("since", "until", "bucket_seconds", "service", "model", "process"),
)

GENAI_OPERATION_DURATION = InsightQuery(
    name="genai_operation_duration",
    title="Average GenAI call duration (gen_ai.client.operation.duration)",
    description="Per time bucket and model: the average duration, in seconds, of the calls other "
    "instrumentations' metrics timed, and how many there were.",
    panel="timeseries",
    sql=f"""
SELECT
    {{{{bucket:point_time}}}} AS time,
    model,
    round(sum(sum_increase) / greatest(sum(count_increase), 1), 3) AS average_seconds,
    sum(count_increase) AS calls
FROM ({_INCREASES % {"metric": "gen_ai.client.operation.duration"}})
WHERE {{{{time_filter:point_time}}}} AND {{{{filters}}}}
GROUP BY time, model
HAVING calls > 0
ORDER BY time, model
""",
    params=("since", "until", "bucket_seconds", "service", "model", "process"),
)
