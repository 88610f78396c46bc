"""Decoded log records → GenAI content events and ordinary log records. Pure.

A GenAI content event (``conventions.events.is_genai_content_event``) with a
span id becomes a ``GenAIEvent``: its body and attributes as JSON text, its
identity, and what it contributes to its request (``conventions.events``),
computed here, once. It is stored in ``genai_events`` and joined to its
request at read time (``read.events``, the ``event_prompts`` view) — the
receiver never waits for the other half, which may arrive earlier, later,
or at another replica.

Tool definitions an event carries (``conventions.tools.event_tool_definitions``:
OpenLIT sends them only in its operation-details record) become rows of the
``tools`` table under the event's span id, and ``calls.CallMemory`` (in the
collector process) joins them to their request record — by the event's
response id first, since on a stream OpenLIT's record carries the parent
span's id — so that they count in its ``tools_count``.

Every other log record, and a GenAI event without span context (it cannot
be joined to anything), goes to ``otel_logs`` unchanged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Iterable

from ..conventions import json_text
from ..conventions.events import contribute, is_genai_content_event
from ...wire import names
from ..conventions.tools import event_tool_definitions
from ..otlp.model import DecodedLogRecord
from ..record import GenAIEvent, RequestRecord


@dataclass(slots=True)
class SplitLogs:
    genai_events: list[GenAIEvent] = field(default_factory=list)
    log_records: list[DecodedLogRecord] = field(default_factory=list)
    # GenAI content events without a span id: stored as ordinary logs, counted.
    unjoinable_genai_events: int = 0
    # The tool definitions of events, each under its span's request id (only trace_id,
    # request_id, started_at_ns, service, tools and the response id are set: rows of `tools`,
    # not requests; calls.CallMemory joins them to their request, by response id first:
    # on a stream, OpenLIT's record carries the parent span's id).
    tool_owners: list[RequestRecord] = field(default_factory=list)


def genai_event(record: DecodedLogRecord) -> GenAIEvent:
    body_json = "" if record.body is None else json_text(record.body)
    attributes_json = json_text(record.attributes) if record.attributes else ""
    identity = json_text([record.time_ns, record.observed_time_ns, record.trace_id, record.span_id,
                          record.event_name, body_json, attributes_json])
    event = GenAIEvent(
        time_ns=record.time_ns,
        trace_id=record.trace_id,
        span_id=record.span_id,
        sequence=record.sequence,
        event_name=record.event_name,
        service=record.service,
        scope_name=record.scope_name,
        body_json=body_json,
        attributes_json=attributes_json,
        record_sha256=hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest(),
    )
    contribute(event)
    return event


def split_logs(records: Iterable[DecodedLogRecord]) -> SplitLogs:
    split = SplitLogs()
    for record in records:
        if not is_genai_content_event(record.event_name):
            split.log_records.append(record)
        elif not record.span_id:
            split.unjoinable_genai_events += 1
            split.log_records.append(record)
        else:
            split.genai_events.append(genai_event(record))
            tools = event_tool_definitions(record.event_name, record.body, record.attributes)
            if tools:
                response_id = record.attributes.get(names.GEN_AI_RESPONSE_ID)
                split.tool_owners.append(RequestRecord(
                    trace_id=record.trace_id, request_id=record.span_id, started_at_ns=record.time_ns,
                    service=record.service, tools=tools,
                    response_id=response_id if isinstance(response_id, str) else ""))
    return split
