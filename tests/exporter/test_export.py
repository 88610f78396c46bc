"""configure() end to end: the real OTLP exporters against real gRPC and HTTP receivers."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import SpanLimits

from promptprism.exporter import configure

PROTOCOLS = ["grpc", "http/protobuf"]


@pytest.fixture(params=PROTOCOLS)
def protocol(request):
    return request.param


@pytest.fixture
def receiver(protocol, request):
    """The receiver matching the protocol under test."""
    return request.getfixturevalue("grpc_receiver" if protocol == "grpc" else "http_receiver")


@pytest.fixture
def tracings():
    """Shut down every configured provider, so no batch thread outlives its test."""
    started = []
    yield started
    for tracing in started:
        tracing.shutdown()


def configure_for_test(tracings, **overrides):
    tracing = configure(set_global=False, **overrides)
    tracings.append(tracing)
    return tracing


def record_prompt_span(tracer, name: str, blocks: int, content: str = "") -> int:
    with tracer.start_as_current_span(name) as span:
        span.set_attribute("promptprism.prompt.block_count", blocks)
        for index in range(blocks):
            attributes = {
                "promptprism.block.index": index,
                "promptprism.block.name": f"block-{index}",
                "promptprism.block.sha256": "0" * 64,
            }
            if content:
                attributes["promptprism.block.content"] = content
            span.add_event("promptprism.prompt.block", attributes)
    return span.get_span_context().span_id


def attributes_of(key_values) -> dict:
    """OTLP KeyValues as a plain dict of their scalar values."""
    plain = {}
    for item in key_values:
        kind = item.value.WhichOneof("value")
        plain[item.key] = getattr(item.value, kind) if kind else None
    return plain


def test_environment_drives_endpoint_headers_resource_and_a_1000_event_span_arrives_whole(
    clean_environment, protocol, receiver, tracings
):
    clean_environment.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    clean_environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    clean_environment.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20token-1,x-tenant=acme")
    clean_environment.setenv("OTEL_SERVICE_NAME", "checkout")
    clean_environment.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,team=prompts")
    tracing = configure_for_test(tracings)

    span_id = record_prompt_span(tracing.get_tracer("promptprism.test"), "chat", blocks=1000)
    assert tracing.force_flush()

    (export,) = receiver.exports
    assert export.metadata["authorization"] == "Bearer token-1"
    assert export.metadata["x-tenant"] == "acme"
    resource = attributes_of(export.request.resource_spans[0].resource.attributes)
    assert resource["service.name"] == "checkout"
    assert resource["deployment.environment"] == "test"
    assert resource["team"] == "prompts"
    (span,) = receiver.spans()
    assert int.from_bytes(span.span_id, "big") == span_id
    assert span.dropped_events_count == 0
    assert len(span.events) == 1000
    assert [attributes_of(event.attributes)["promptprism.block.index"] for event in span.events] == list(range(1000))


def test_with_the_sdk_default_limits_the_receiver_sees_dropped_events(clean_environment, grpc_receiver, tracings):
    """The control for the test above: dropped events would be visible there."""
    tracing = configure_for_test(
        tracings, protocol="grpc", endpoint=grpc_receiver.endpoint, span_limits=SpanLimits(max_events=128)
    )
    record_prompt_span(tracing.get_tracer("promptprism.test"), "chat", blocks=1000)
    assert tracing.force_flush()

    (span,) = grpc_receiver.spans()
    assert len(span.events) == 128
    assert span.dropped_events_count == 872
    # The SDK keeps the newest events: the first blocks are the ones lost
    # (README "Instrumenting an application", span limits).
    assert attributes_of(span.events[0].attributes)["promptprism.block.index"] == 872


def test_a_batch_over_the_bound_is_split_and_every_span_arrives_once(clean_environment, protocol, receiver, tracings):
    bound = 256 * 1024
    tracing = configure_for_test(
        tracings, protocol=protocol, endpoint=receiver.endpoint, max_request_bytes=bound, timeout=2
    )
    tracer = tracing.get_tracer("promptprism.test")
    # 60 spans of ~40 KB: ~2.4 MB, more than twice the receiver's 1 MiB limit.
    sent = [record_prompt_span(tracer, f"chat {number}", blocks=20, content="x" * 2000) for number in range(60)]
    assert tracing.force_flush()

    assert len(receiver.exports) >= 10
    assert all(export.request_bytes <= bound for export in receiver.exports)
    received = [int.from_bytes(span.span_id, "big") for span in receiver.spans()]
    assert sorted(received) == sorted(sent)
    assert len(set(received)) == len(received)
    assert tracing.span_exporter.statistics.failed_requests == 0


def test_without_splitting_the_same_batch_is_refused(clean_environment, protocol, receiver, tracings):
    """The control for the test above: the receiver's limit is real."""
    tracing = configure_for_test(
        tracings, protocol=protocol, endpoint=receiver.endpoint, max_request_bytes=64 * 1024 * 1024, timeout=1
    )
    tracer = tracing.get_tracer("promptprism.test")
    for number in range(60):
        record_prompt_span(tracer, f"chat {number}", blocks=20, content="x" * 2000)
    tracing.force_flush()

    assert receiver.spans() == []
    assert tracing.span_exporter.statistics.failed_spans == 60


def test_a_single_span_over_the_bound_is_sent_alone_not_dropped(clean_environment, protocol, receiver, tracings):
    tracing = configure_for_test(tracings, protocol=protocol, endpoint=receiver.endpoint, max_request_bytes=64 * 1024)
    tracer = tracing.get_tracer("promptprism.test")
    small_before = record_prompt_span(tracer, "small", blocks=2)
    big = record_prompt_span(tracer, "big", blocks=10, content="y" * 20_000)  # ~200 KB
    small_after = record_prompt_span(tracer, "small", blocks=2)
    assert tracing.force_flush()

    exported = [[int.from_bytes(span.span_id, "big") for span in export.spans()] for export in receiver.exports]
    assert [big] in exported
    assert sorted(sum(exported, [])) == sorted([small_before, big, small_after])
    assert tracing.span_exporter.statistics.oversized_spans == 1


def test_grpc_gzip_from_the_environment_compresses_on_the_wire(clean_environment, grpc_receiver, relay_to, tracings):
    port = int(grpc_receiver.endpoint.rsplit(":", 1)[1])
    sizes = {}
    for compression in ("gzip", "none"):
        relay = relay_to(port)
        clean_environment.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
        tracing = configure_for_test(tracings, protocol="grpc", endpoint=f"http://127.0.0.1:{relay.port}")
        record_prompt_span(tracing.get_tracer("promptprism.test"), "chat", blocks=1, content="a" * 500_000)
        assert tracing.force_flush()
        tracing.shutdown()
        sizes[compression] = relay.client_bytes
    assert len(grpc_receiver.spans()) == 2
    assert sizes["none"] > 500_000
    assert sizes["gzip"] < 50_000


def test_http_gzip_from_the_environment_sets_content_encoding(clean_environment, http_receiver, tracings):
    clean_environment.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
    clean_environment.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{http_receiver.endpoint}/v1/traces")
    tracing = configure_for_test(tracings, protocol="http/protobuf")
    record_prompt_span(tracing.get_tracer("promptprism.test"), "chat", blocks=1, content="a" * 500_000)
    assert tracing.force_flush()

    (export,) = http_receiver.exports
    assert export.metadata["content-encoding"] == "gzip"
    assert export.request_bytes > 500_000
    assert export.wire_bytes < 50_000
