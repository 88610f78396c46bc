"""resolve_settings: argument → traces variable → generic variable → default, strict validation."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import SpanLimits

from opentelemetry.util.re import parse_env_headers

from promptprism.exporter import (
    DEFAULT_MAX_REQUEST_BYTES,
    ConfigurationError,
    build_resource,
    configure,
    resolve_settings,
)
from promptprism.instrumentation import span_limits_for_prompts


def test_defaults_follow_the_specification():
    settings = resolve_settings({})
    assert settings.protocol == "http/protobuf"
    assert settings.endpoint == "http://localhost:4318/v1/traces"
    assert settings.headers == {}
    assert settings.compression == "none"
    assert settings.timeout_seconds == 10.0
    assert settings.max_request_bytes == DEFAULT_MAX_REQUEST_BYTES < 64 * 1024 * 1024


def test_grpc_default_endpoint():
    assert resolve_settings({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}).endpoint == "http://localhost:4317"


def test_base_endpoint_gets_the_traces_path_for_http_only():
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
    assert resolve_settings(environ).endpoint == "http://collector:4318/v1/traces"
    environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
    assert resolve_settings(environ).endpoint == "http://collector:4318/"


def test_traces_endpoint_is_used_as_is_and_beats_the_base_one():
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:9999/custom",
    }
    assert resolve_settings(environ).endpoint == "http://traces:9999/custom"


def test_arguments_beat_variables():
    environ = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:9999/custom",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_HEADERS": "a=from-env",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "3",
        "OTEL_SERVICE_NAME": "from-env",
    }
    settings = resolve_settings(
        environ,
        protocol="http/protobuf",
        endpoint="http://argument:4318",
        headers={"A": "from-argument"},
        compression="none",
        timeout=7,
        service_name="from-argument",
    )
    assert settings.protocol == "http/protobuf"
    assert settings.endpoint == "http://argument:4318/v1/traces"
    assert settings.headers == {"a": "from-argument"}
    assert settings.compression == "none"
    assert settings.timeout_seconds == 7
    assert settings.resource_attributes["service.name"] == "from-argument"


def test_traces_variables_beat_generic_ones():
    environ = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_HEADERS": "a=generic",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=traces",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "none",
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "GZIP",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "3",
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "4.5",
    }
    settings = resolve_settings(environ)
    assert settings.protocol == "grpc"
    # The traces variable replaces the generic one; it is not merged.
    assert settings.headers == {"b": "traces"}
    assert settings.compression == "gzip"
    assert settings.timeout_seconds == 4.5


def test_empty_variables_count_as_unset():
    environ = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "  ", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    assert resolve_settings(environ).protocol == "grpc"


def test_headers_are_percent_decoded_and_lowercased():
    settings = resolve_settings({"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20secret%3D, X-Tenant = a b ,"})
    assert settings.headers == {"authorization": "Bearer secret=", "x-tenant": "a b"}


def test_headers_read_as_opentelemetrys_parser_reads_them():
    text = "Authorization=Basic%20YWxhZGRpbjpvcGVuc2VzYW1l,X-Scope-OrgID=tenant%2F7,K=a=b"
    assert resolve_settings({"OTEL_EXPORTER_OTLP_HEADERS": text}).headers == dict(parse_env_headers(text, liberal=True))


def test_a_bad_header_entry_is_refused_without_echoing_its_value(caplog):
    with pytest.raises(ConfigurationError, match="OTEL_EXPORTER_OTLP_HEADERS: entry 2") as raised:
        resolve_settings({"OTEL_EXPORTER_OTLP_HEADERS": "a=1,Authorization: Bearer s3cret"})
    assert "s3cret" not in str(raised.value)
    assert "s3cret" not in caplog.text  # the parser's own warning (it quotes the entry) is muted


def test_resource_attributes_and_service_name(monkeypatch):
    # Resource.create reads these (the SDK's OTELResourceDetector), so they go in os.environ.
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,service.name=from-attributes,team=a%2Cb")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "checkout")
    attributes = build_resource(resolve_settings(resource_attributes={"team": "c"})).attributes
    assert attributes["deployment.environment"] == "prod"
    # OTEL_SERVICE_NAME wins over service.name in OTEL_RESOURCE_ATTRIBUTES (specification).
    assert attributes["service.name"] == "checkout"
    assert attributes["team"] == "c"  # the argument wins over the variable
    attributes = build_resource(resolve_settings(service_name="from-argument")).attributes
    assert (attributes["service.name"], attributes["team"]) == ("from-argument", "a,b")


def test_configure_builds_the_provider_on_that_resource(monkeypatch):
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "team=search")
    tracing = configure(set_global=False, service_name="checkout")
    try:
        attributes = tracing.tracer_provider.resource.attributes
        assert (attributes["service.name"], attributes["team"]) == ("checkout", "search")
    finally:
        tracing.shutdown()


def test_insecure_follows_scheme_unless_set_and_https_always_wins():
    assert resolve_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1"}).insecure is True
    assert resolve_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://a:1"}).insecure is False
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_INSECURE": "false"}
    assert resolve_settings(environ).insecure is False
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://a:1", "OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true"}
    assert resolve_settings(environ).insecure is False


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "http/json is not supported"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
        ({"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "zstd"}, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, "OTEL_EXPORTER_OTLP_TIMEOUT"),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "0"}, "OTEL_EXPORTER_OTLP_TIMEOUT"),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "nan"}, "OTEL_EXPORTER_OTLP_TIMEOUT"),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "no-equals-sign"}, "OTEL_EXPORTER_OTLP_HEADERS: entry 1 "),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "a=b,bad name=x"}, "OTEL_EXPORTER_OTLP_HEADERS: entry 2 .'bad name'.*valid header name"),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "a=line%0Abreak"}, "OTEL_EXPORTER_OTLP_HEADERS: the value of 'a' contains a line break"),
        ({"OTEL_EXPORTER_OTLP_INSECURE": "yes"}, "OTEL_EXPORTER_OTLP_INSECURE"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4317"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://a:port"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "a=b,team"}, "OTEL_RESOURCE_ATTRIBUTES: entry 2"),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "-5"}, "OTEL_BSP_MAX_QUEUE_SIZE"),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "20"}, "must not exceed"),
        ({"PROMPTPRISM_EXPORT_MAX_REQUEST_BYTES": "16MiB"}, "PROMPTPRISM_EXPORT_MAX_REQUEST_BYTES"),
    ],
)
def test_bad_values_fail_at_configure_time_naming_the_variable(environ, named):
    with pytest.raises(ConfigurationError, match=named):
        resolve_settings(environ)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ConfigurationError, match="argument max_request_bytes"):
        resolve_settings({}, max_request_bytes=0)
    with pytest.raises(ConfigurationError, match="argument compression"):
        resolve_settings({}, compression="brotli")
    with pytest.raises(ConfigurationError, match="argument headers: 'bad name' is not a valid header name"):
        resolve_settings({}, headers={"bad name": "x"})


def test_span_limits_are_the_instrumentations_prompt_limits():
    limits = resolve_settings({}).span_limits
    expected = span_limits_for_prompts()
    assert limits.max_events == expected.max_events >= 4096
    assert limits.max_event_attributes == expected.max_event_attributes >= 16
    assert limits.max_span_attributes == expected.max_span_attributes
    assert limits.max_attribute_length == expected.max_attribute_length
    assert limits.max_span_attribute_length == expected.max_span_attribute_length


def test_span_limit_variables_cannot_shrink_the_prompt_limits(monkeypatch):
    # SpanLimits reads os.environ itself, so the variables go there.
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "50")
    monkeypatch.setenv("OTEL_ATTRIBUTE_COUNT_LIMIT", "7")
    limits = resolve_settings({}).span_limits
    assert limits.max_events == span_limits_for_prompts().max_events
    assert limits.max_event_attributes == span_limits_for_prompts().max_event_attributes


def test_explicit_span_limits_argument_wins():
    limits = SpanLimits(max_events=3)
    assert resolve_settings({}, span_limits=limits).span_limits is limits


def test_importing_the_exporter_loads_only_opentelemetry_and_the_standard_library():
    probe = (
        "import sys, promptprism.exporter\n"
        "top = {name.split('.')[0] for name in sys.modules} - set(sys.stdlib_module_names)\n"
        "print(sorted(top))\n"
        "print('promptprism.instrumentation' in sys.modules)\n"
    )
    output = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    modules_line, instrumentation_line = output.strip().splitlines()
    loaded = set(ast.literal_eval(modules_line))
    # Packaging shims (editable-install finder, setuptools' distutils hack) are not imports of ours.
    loaded = {name for name in loaded if not name.startswith("_") and name != "__main__"}
    assert loaded <= {"opentelemetry", "promptprism", "typing_extensions"}
    assert instrumentation_line == "False"
