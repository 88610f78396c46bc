"""A 1,000-block prompt through the real OTLP gRPC exporter to a real gRPC server, whole."""

from __future__ import annotations

import hashlib
import threading
from concurrent import futures

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from promptprism.instrumentation import (
    ToolSpec,
    block,
    configure_content_capture,
    inline,
    prompt_tracer_provider,
    record_llm_request,
    render_string,
)
from promptprism.wire import names

BLOCK_COUNT = 1000
# Prompt spans are far above gRPC's 4 MiB default once decompressed
# (README "The collector", PROMPTPRISM_RECEIVE_LIMIT_BYTES).
RECEIVE_LIMIT_BYTES = 64 * 1024 * 1024


class RecordingTraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self):
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.received = threading.Event()

    def Export(self, request, context):
        self.requests.append(request)
        self.received.set()
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
def trace_server(port):
    service = RecordingTraceService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                         options=[("grpc.max_receive_message_length", RECEIVE_LIMIT_BYTES)])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(service, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    yield service
    server.stop(grace=None)


def attribute_value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(attribute_value(item) for item in any_value.array_value.values)
    return getattr(any_value, kind)


def attributes_of(item):
    return {attribute.key: attribute_value(attribute.value) for attribute in item.attributes}


def test_thousand_block_prompt_arrives_whole(trace_server, port):
    configure_content_capture(True)
    # Every value its own block between prose; multi-byte text so offsets are bytes, not characters.
    source = "".join(f"\n§{number} {{{{ v{number} }}}}" for number in range(BLOCK_COUNT // 2))
    values = [block(f"v{number}", f"välue {number} ✓", layer="knowledge", stability="turn", source=f"doc:{number}")
              for number in range(BLOCK_COUNT // 2)]
    prompt = render_string(source, values, name="big")
    assert prompt.mapped and len(prompt.blocks) == BLOCK_COUNT

    provider = prompt_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True)))
    tools = [ToolSpec(f"tool_{number}", f'{{"name":"tool_{number}"}}') for number in range(20)]
    with record_llm_request(provider="anthropic", model="claude-x", prompt=prompt, tools=tools,
                            dialect=names.DIALECT_ANTHROPIC_MESSAGES, tracer_provider=provider,
                            conversation_id="conv-7", process_kind="worker", run_mode="batch", attempt=1) as call:
        call.set_response(input_tokens=9000, output_tokens=12, cache_read_tokens=8000, cache_creation_tokens=100)
    provider.shutdown()

    assert trace_server.received.wait(10)
    spans = [span for request in trace_server.requests for resource in request.resource_spans
             for scope in resource.scope_spans for span in scope.spans]
    assert len(spans) == 1
    span = spans[0]
    assert span.name == "chat claude-x"
    assert span.dropped_events_count == 0 and span.dropped_attributes_count == 0

    encoded = prompt.text.encode()
    attributes = attributes_of(span)
    assert attributes[names.SCHEMA_VERSION_ATTR] == names.SCHEMA_VERSION
    assert attributes[names.PROMPT_BLOCK_COUNT] == BLOCK_COUNT
    assert attributes[names.PROMPT_BYTES] == len(encoded)
    assert attributes[names.PROMPT_SHA256] == hashlib.sha256(encoded).hexdigest()
    assert attributes[names.PROMPT_MAPPED] is True
    assert attributes[names.PROMPT_TEMPLATE_NAME] == "big"
    assert attributes[names.PROMPT_TEMPLATE_ORIGIN] == names.ORIGIN_BUILTIN
    assert attributes[names.REQUEST_DIALECT] == names.DIALECT_ANTHROPIC_MESSAGES
    assert attributes[names.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 8000
    assert attributes[names.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 100
    assert attributes[names.GEN_AI_CONVERSATION_ID] == "conv-7"
    assert attributes[names.ATTEMPT] == 1 and attributes[names.RUN_MODE] == "batch"

    block_events = [event for event in span.events if event.name == names.EVENT_PROMPT_BLOCK]
    tool_events = [event for event in span.events if event.name == names.EVENT_TOOL_DEFINITION]
    assert len(span.events) == BLOCK_COUNT + len(tools)
    assert len(block_events) == BLOCK_COUNT
    rebuilt = b""
    for expected, event in zip(prompt.blocks, block_events):
        received = attributes_of(event)
        assert received == {
            names.BLOCK_INDEX: expected.index,
            names.BLOCK_NAME: expected.name,
            names.BLOCK_LAYER: expected.layer,
            names.BLOCK_STABILITY: expected.stability,
            names.BLOCK_SOURCE: expected.source,
            names.BLOCK_START: expected.start,
            names.BLOCK_END: expected.end,
            names.BLOCK_SIZE: expected.end - expected.start,
            names.BLOCK_SHA256: hashlib.sha256(encoded[expected.start:expected.end]).hexdigest(),
            names.BLOCK_CONTENT: encoded[expected.start:expected.end].decode(),
        }
        rebuilt += received[names.BLOCK_CONTENT].encode()
    assert rebuilt == encoded
    assert [attributes_of(event) for event in tool_events] == [
        {names.TOOL_NAME: tool.name, names.TOOL_SIZE: len(tool.definition.encode()),
         names.TOOL_SHA256: hashlib.sha256(tool.definition.encode()).hexdigest(), names.TOOL_CONTENT: tool.definition}
        for tool in tools
    ]
