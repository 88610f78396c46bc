"""GenAI metric points as an instrumented application exports them: cumulative histograms of
``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration`` over the scenario week."""

from __future__ import annotations

from promptprism.collector.otlp.model import DecodedMetricPoint
from promptprism.collector.write.metric_rows import metric_tables

HOUR_NS = 3600 * 10**9
CUMULATIVE = 2  # OTLP's AggregationTemporality


def genai_metric_points(service: str, model: str, now_ns: int, hours: int = 6 * 24, step_hours: int = 6):
    """One series per metric (and token type), started a week ago, a point every ``step_hours``:
    10 calls per step, 800 input and 60 output tokens and 1.5 s each."""
    start = now_ns - hours * HOUR_NS
    points = []
    for step in range(1, hours // step_hours + 1):
        calls = 10 * step
        time_ns = start + step * step_hours * HOUR_NS
        common = dict(service=service, resource_attributes={"service.name": service}, resource_schema_url="",
                      scope_name="opentelemetry.instrumentation.openai.v1", scope_version="0.62.4",
                      scope_attributes={}, scope_dropped_attributes_count=0, scope_schema_url="",
                      start_time_ns=start, time_ns=time_ns, aggregation_temporality=CUMULATIVE)
        for token_type, per_call in (("input", 800), ("output", 60)):
            points.append(DecodedMetricPoint(
                kind="histogram", **common, name="gen_ai.client.token.usage", description="", unit="token",
                attributes={"gen_ai.response.model": model, "gen_ai.token.type": token_type},
                count=calls, sum=float(calls * per_call)))
        points.append(DecodedMetricPoint(
            kind="histogram", **common, name="gen_ai.client.operation.duration", description="", unit="s",
            attributes={"gen_ai.response.model": model}, count=calls, sum=1.5 * calls))
    return points


def write_genai_metrics(store, points) -> None:
    for table, columns in metric_tables(points).items():
        store.insert(table, columns)
