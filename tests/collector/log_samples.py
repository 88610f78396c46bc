"""OTLP log payloads for the logs tests, built with the real SDK and encoder.

``openai_v2_*`` reproduce what opentelemetry-instrumentation-openai-v2 2.4b0
sends for one chat request (seen with its in-memory exporters): content as
log records in the older mode, as span attributes in the latest one.
"""

from __future__ import annotations

import json

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from promptprism.wire import names

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN_ID = 0x00F067AA0BA902B7
SYSTEM_PROMPT = "You are Prism.\nBe brief. Answer in <b>metric</b> units & cite sources."
ANSWER = "Four."

# (event name, body) as the instrumentation emits them, in order.
OPENAI_V2_EVENTS = (
    (names.EVENT_SYSTEM_MESSAGE, {"content": SYSTEM_PROMPT}),
    (names.EVENT_USER_MESSAGE, {"content": "hi"}),
    (names.EVENT_ASSISTANT_MESSAGE, {"content": "hello"}),
    (names.EVENT_USER_MESSAGE, {"content": "what is 2+2?"}),
    (names.EVENT_CHOICE, {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ANSWER}}),
)

# The same request with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and SPAN_ONLY.
OPENAI_V2_SPAN_INPUT = json.dumps([
    {"role": "system", "parts": [{"content": SYSTEM_PROMPT, "type": "text"}]},
    {"role": "user", "parts": [{"content": "hi", "type": "text"}]},
    {"role": "assistant", "parts": [{"content": "hello", "type": "text"}]},
    {"role": "user", "parts": [{"content": "what is 2+2?", "type": "text"}]},
], separators=(",", ":"))
OPENAI_V2_SPAN_OUTPUT = json.dumps([
    {"role": "assistant", "parts": [{"content": ANSWER, "type": "text"}], "finish_reason": "stop"},
], separators=(",", ":"))


def span_context(trace_id: int = TRACE_ID, span_id: int = SPAN_ID):
    return set_span_in_context(NonRecordingSpan(SpanContext(trace_id, span_id, is_remote=False,
                                                            trace_flags=TraceFlags(1))))


def sdk_log_records(events=OPENAI_V2_EVENTS, *, trace_id: int = TRACE_ID, span_id: int = SPAN_ID,
                    service: str = "chat-app", extra=()):
    """Log records as the SDK hands them to an exporter. ``events``: (name, body) or
    (name, body, attributes); ``extra``: (name, body, severity) outside GenAI."""
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": service}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("opentelemetry.instrumentation.openai_v2", "2.4b0")
    context = span_context(trace_id, span_id) if span_id else None
    for event_name, body, *attributes in events:
        logger.emit(LogRecord(event_name=event_name, body=body,
                              attributes=attributes[0] if attributes else {names.GEN_AI_SYSTEM: "openai"},
                              context=context))
    for text, body, severity in extra:
        logger.emit(LogRecord(body=body, severity_text=text, severity_number=severity,
                              attributes={"code.lineno": 42}, context=context))
    provider.shutdown()
    return exporter.get_finished_logs()


def logs_payload(*args, **kwargs) -> bytes:
    return encode_logs(sdk_log_records(*args, **kwargs)).SerializeToString()


WARNING = ("WARN", "disk almost full", SeverityNumber.WARN)
