"""Requests whose content arrived as OTLP log events, written and read back.

The span another instrumentation sends when content goes as logs
(``span_record``), the events written the way the logs path writes them
(``write_events``), and the prompt as the API (``api_prompt``) and the SQL
views (``view_prompt``) serve it. Shared by the event-prompt, backfill and
dashboard tests.
"""

from __future__ import annotations

from promptprism.collector.otlp.logs import decode_protobuf
from promptprism.collector.otlp.model import DecodedSpan
from promptprism.collector.read import lookups
from promptprism.collector.write.genai_events import split_logs
from promptprism.collector.write.reassemble import build_record
from promptprism.wire import names

from .log_samples import logs_payload
from .write_path_samples import write_records

SERVICE = "openai-v2-app"


def span_record(trace_id: int, span_id: int, started_at_ns: int, *, service: str = SERVICE, span_sha256: str = "",
                **extra):
    """The request span another instrumentation sends when content goes as logs: no content on it."""
    attributes = {names.GEN_AI_OPERATION_NAME: "chat", names.GEN_AI_SYSTEM: "openai",
                  names.GEN_AI_REQUEST_MODEL: "gpt-test", **extra}
    if span_sha256:
        attributes[names.PROMPT_SHA256] = span_sha256
    return build_record(DecodedSpan(f"{trace_id:032x}", f"{span_id:016x}", "", "", "chat gpt-test", "Client",
                                    started_at_ns, started_at_ns + 10**9, "Unset", "", service, {},
                                    "opentelemetry.instrumentation.openai_v2", "", attributes, [], []))


def genai_events(payload: bytes) -> list:
    return split_logs(decode_protobuf(payload).records).genai_events


def write_events(store, events, trace_id: int, span_id: int, **options) -> bytes:
    """Write the events as the logs path does; return the export payload."""
    payload = logs_payload(events, trace_id=trace_id, span_id=span_id, **options)
    write_records(store, [], genai_events=genai_events(payload))
    return payload


def api_prompt(store, span_id: int) -> dict:
    return lookups.request(store, f"{span_id:016x}")["prompt"]


BLOCK_FIELDS = ("index", "name", "layer", "stability", "source", "start", "end", "size", "sha256")


def view_prompt(store, span_id: int) -> tuple[dict, list[dict]]:
    request_id = f"{span_id:016x}"
    [row] = store.query(
        "SELECT prompt_bytes, prompt_sha256, block_count, prompt_from_events FROM {db:Identifier}.prompt_requests "
        "WHERE request_id = {request_id:String}", {"db": store.database, "request_id": request_id})
    blocks = store.query(
        "SELECT `index`, name, layer, stability, source, start, `end`, size, sha256 "
        "FROM {db:Identifier}.prompt_blocks WHERE request_id = {request_id:String} ORDER BY `index`",
        {"db": store.database, "request_id": request_id})
    return row, blocks
