"""Decoded log records → GenAI content events and ordinary log records. Pure.

Other GenAI instrumentations (opentelemetry-instrumentation-openai-v2 and
the util-genai family) send prompt content as log records carrying their
span's trace and span ids: ``gen_ai.<role>.message`` and ``gen_ai.choice``
(older conventions), ``gen_ai.client.inference.operation.details`` (newer).
Those become ``GenAIEvent``s, stored in ``genai_events`` and joined to their
request at read time (``read.events``) — the receiver never waits for the other
half, which may arrive earlier, later, or at another replica.

Every other log record, and a GenAI event without span context (it cannot
be joined to anything), goes to ``otel_logs`` unchanged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Iterable

from ...wire import names
from ..otlp.model import DecodedLogRecord
from ..record import GenAIEvent
from ..conventions._convention import json_text

_WHOLE_EVENT_NAMES = frozenset({names.EVENT_CHOICE, names.EVENT_INFERENCE_DETAILS})


def is_genai_content_event(event_name: str) -> bool:
    """A GenAI content event: gen_ai.<role>.message, gen_ai.choice, or the newer operation details."""
    if event_name in _WHOLE_EVENT_NAMES:
        return True
    if not (event_name.startswith(names.EVENT_MESSAGE_PREFIX) and event_name.endswith(names.EVENT_MESSAGE_SUFFIX)):
        return False
    role = event_name[len(names.EVENT_MESSAGE_PREFIX):-len(names.EVENT_MESSAGE_SUFFIX)]
    return bool(role) and "." not in role  # gen_ai.system.message, not gen_ai.a.b.message


@dataclass(slots=True)
class SplitLogs:
    genai_events: list[GenAIEvent] = field(default_factory=list)
    log_records: list[DecodedLogRecord] = field(default_factory=list)
    # GenAI content events without a span id: stored as ordinary logs, counted.
    unjoinable_genai_events: int = 0


def genai_event(record: DecodedLogRecord) -> GenAIEvent:
    body_json = "" if record.body is None else json_text(record.body)
    attributes_json = json_text(record.attributes) if record.attributes else ""
    identity = json_text([record.time_ns, record.observed_time_ns, record.trace_id, record.span_id,
                        record.event_name, body_json, attributes_json])
    return GenAIEvent(
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
    return split
