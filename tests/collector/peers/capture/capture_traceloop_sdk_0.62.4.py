"""OpenLLMetry through traceloop-sdk 0.62.4 (venvs/openllmetry-sdk): Traceloop.init() pointed at the capture
server the documented way (TRACELOOP_BASE_URL = the OTLP/HTTP base), all installed instrumentations on.

Non-LLM spans: @workflow / @task spans (traceloop.span.kind, traceloop.entity.input/output JSON),
association properties as the conversation id. anthropic 2.x's own spans stay on (default): the
workflow_anthropic run is the OpenLLMetry + SDK duplicate case as users get it.
"""
import os

import peerlib

os.environ["TRACELOOP_BASE_URL"] = peerlib.env("OTEL_EXPORTER_OTLP_ENDPOINT")
from traceloop.sdk import Traceloop  # noqa: E402
from traceloop.sdk.decorators import task, workflow  # noqa: E402

Traceloop.init(app_name="capture-traceloop-sdk", telemetry_enabled=False, disable_batch=True)
Traceloop.set_association_properties({"conversation_id": "conv-traceloop-1", "user_id": "user-7"})


@task(name="run_tool")
def run_tool(name: str, arguments: str) -> str:
    return peerlib.TOOL_RESULT


@task(name="fetch_doc")
def fetch_doc() -> dict:
    return peerlib.fetch_fixture()


@workflow(name="plan_trip")
def plan_trip() -> str:
    fetch_doc()
    return peerlib.chat_tool_loop(peerlib.openai_client(), run_tool)


@workflow(name="plan_trip_anthropic")
def plan_trip_anthropic() -> str:
    fetch_doc()
    return peerlib.messages(peerlib.anthropic_client())


def finish(body):
    def scenario():
        body()
        from opentelemetry import trace
        trace.get_tracer_provider().force_flush()
        trace.get_tracer_provider().shutdown()
    return scenario


peerlib.run({"workflow": finish(plan_trip), "workflow_anthropic": finish(plan_trip_anthropic)})
