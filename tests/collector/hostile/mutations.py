"""Fuzz cases for the OTLP receivers, from a fixed seed: valid exports mutated at the field level,
their bytes flipped, truncated or replaced by random bytes, and OTLP/JSON with wrong shapes."""

from __future__ import annotations

import json
import random

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

# Deep enough to reach the decoder's nesting paths, under the depth bound of
# issue 14 item 4 (the decoder's own tests cover what lies beyond it).
MAX_FUZZ_NESTING = 16
EXTREME_INTEGERS = (0, 1, -1, 2**31 - 1, -(2**31), 2**53 + 1, 2**63 - 1, -(2**63))
EXTREME_TIMES = (0, 1, 2**63 - 1, 2**64 - 1, 4_102_444_800_000_000_000)  # … year 2100


def _text(rng: random.Random) -> str:
    alphabet = "aZ09 \t\n\\'\"%_{}<>&;\u00e9\u65e5\U0001f375\u200b\x00\x7f"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))


def _value(rng: random.Random, depth: int = 0) -> AnyValue:
    kind = rng.randrange(7 if depth < MAX_FUZZ_NESTING else 5)
    if kind == 0:
        return AnyValue(string_value=_text(rng))
    if kind == 1:
        return AnyValue(int_value=rng.choice(EXTREME_INTEGERS))
    if kind == 2:
        return AnyValue(double_value=rng.choice((0.0, -0.0, 1e308, -1e308, float("inf"), float("nan"))))
    if kind == 3:
        return AnyValue(bool_value=rng.random() < 0.5)
    if kind == 4:
        return AnyValue(bytes_value=rng.randbytes(rng.randint(0, 16)))
    if kind == 5:
        value = AnyValue()
        value.array_value.values.extend(_value(rng, depth + 1) for _ in range(rng.randint(0, 3)))
        return value
    value = AnyValue()
    value.kvlist_value.values.extend(KeyValue(key=_text(rng), value=_value(rng, depth + 1))
                                     for _ in range(rng.randint(0, 3)))
    return value


def _mutate_attribute(rng: random.Random, attributes) -> None:
    if attributes and rng.random() < 0.7:
        attribute = rng.choice(attributes)
        attribute.value.CopyFrom(_value(rng))  # a known key with a value of another kind or range
    else:
        attributes.add(key=_text(rng), value=_value(rng))


def field_mutation(base: ExportTraceServiceRequest, rng: random.Random) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.CopyFrom(base)
    resource_spans = request.resource_spans[0]
    span = resource_spans.scope_spans[0].spans[0]
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(12)
        if choice == 0:
            span.trace_id = rng.randbytes(rng.choice((0, 1, 8, 15, 16, 17, 32)))
        elif choice == 1:
            span.span_id = rng.randbytes(rng.choice((0, 4, 7, 8, 9, 16)))
        elif choice == 2:
            span.start_time_unix_nano = rng.choice(EXTREME_TIMES)
            span.end_time_unix_nano = rng.choice(EXTREME_TIMES)
        elif choice == 3:
            _mutate_attribute(rng, span.attributes)
        elif choice == 4 and span.events:
            _mutate_attribute(rng, rng.choice(span.events).attributes)
        elif choice == 5 and span.events:
            del span.events[rng.randrange(len(span.events))]
        elif choice == 6 and span.events:
            span.events.append(rng.choice(span.events))  # a block twice
        elif choice == 7:
            _mutate_attribute(rng, resource_spans.resource.attributes)
        elif choice == 8:
            span.name = _text(rng)
            span.kind = rng.choice((0, 1, 2, 3, 99))
        elif choice == 9:
            copies = rng.randint(2, 20)
            spans = resource_spans.scope_spans[0].spans
            spans.extend([spans[0]] * copies)  # the same span many times in one export
        elif choice == 10:
            span.dropped_events_count = rng.choice((0, 1, 2**32 - 1))
            span.status.code = rng.choice((0, 1, 2, 7))
        else:
            for event in span.events:
                event.time_unix_nano = rng.choice(EXTREME_TIMES)
    return request


def byte_mutation(payload: bytes, rng: random.Random) -> bytes:
    choice = rng.randrange(4)
    if choice == 0:
        return rng.randbytes(rng.randint(0, 256))
    if choice == 1:
        return payload[:rng.randrange(len(payload) + 1)]
    data = bytearray(payload)
    for _ in range(rng.randint(1, 8)):
        position = rng.randrange(len(data))
        data[position] = rng.randrange(256) if choice == 2 else data[position] ^ (1 << rng.randrange(8))
    return bytes(data)


def json_mutation(base: ExportTraceServiceRequest, rng: random.Random) -> bytes:
    document = json_format.MessageToDict(field_mutation(base, rng))
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    wrong = rng.choice((None, 12, -1, "x", [], {}, [1, "a"], {"stringValue": 3}, "\ud800", 1e400, True))
    choice = rng.randrange(5)
    if choice == 0:
        span[rng.choice(("traceId", "spanId", "name", "startTimeUnixNano", "events", "attributes", "kind"))] = wrong
    elif choice == 1 and span.get("attributes"):
        rng.choice(span["attributes"])["value"] = wrong if isinstance(wrong, dict) else {"intValue": wrong}
    elif choice == 2:
        document["resourceSpans"][0][rng.choice(("resource", "scopeSpans", "schemaUrl"))] = wrong
    elif choice == 3:
        return rng.randbytes(rng.randint(0, 64))
    else:
        text = json.dumps(document)
        cut = rng.randrange(len(text) + 1)
        return text[:cut].encode("utf-8", "surrogatepass")
    return json.dumps(document, allow_nan=True).encode("utf-8", "surrogatepass")
