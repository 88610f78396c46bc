"""An OTLP/JSON traces export as other SDKs send it: hex ids, int64 as strings, structured values.

Shared by the decode, receive and worker tests.
"""

from __future__ import annotations

import json

from promptprism.wire import names


def otlp_json(span_overrides=None, *, snake=False) -> bytes:
    """One span with promptprism and GenAI attributes, a block event and a link; ``snake``: snake_case keys."""
    span = {
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
        "parentSpanId": "", "name": "chat", "kind": 3,
        "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000500000000",
        "attributes": [
            {"key": names.PROMPT_BYTES, "value": {"intValue": "9007199254740993"}},
            {"key": names.PROMPT_MAPPED, "value": {"boolValue": True}},
            {"key": names.GEN_AI_SYSTEM_INSTRUCTIONS, "value": {"arrayValue": {"values": [
                {"kvlistValue": {"values": [{"key": "type", "value": {"stringValue": "text"}},
                                            {"key": "content", "value": {"stringValue": "Be brief."}}]}}]}}},
            {"key": "temperature", "value": {"doubleValue": 0.5}},
            {"key": "blob", "value": {"bytesValue": "AAE="}},
        ],
        "events": [{"timeUnixNano": "1700000000000000001", "name": names.EVENT_PROMPT_BLOCK,
                    "attributes": [{"key": names.BLOCK_INDEX, "value": {"intValue": "0"}}]}],
        "links": [{"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331"}],
        "status": {"code": 1},
        "droppedEventsCount": 2,
        "someFutureField": {"ignored": True},
    }
    span.update(span_overrides or {})
    document = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "shop-bot"}}]},
        "scopeSpans": [{"scope": {"name": "scope-a", "version": "1"}, "spans": [span]}],
    }]}
    text = json.dumps(document)
    if snake:
        for camel, snake_name in (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"),
                                  ("traceId", "trace_id"), ("spanId", "span_id"), ("parentSpanId", "parent_span_id"),
                                  ("startTimeUnixNano", "start_time_unix_nano"), ("stringValue", "string_value")):
            text = text.replace(f'"{camel}"', f'"{snake_name}"')
    return text.encode()
