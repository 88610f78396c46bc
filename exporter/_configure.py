"""One call from the standard OTEL_* variables to a tracer provider that exports prompts whole.

Resolution order for every setting: the argument to :func:`configure`, then
the traces-specific variable (``OTEL_EXPORTER_OTLP_TRACES_*``), then the
generic one (``OTEL_EXPORTER_OTLP_*``), then the default. An empty variable
counts as unset (OpenTelemetry specification). Values are validated here, at
start-up; a bad one raises :class:`ConfigurationError` naming the variable.

:func:`resolve_settings` is pure (environment in, settings out) so it can be
tested without sockets; :func:`configure` builds the SDK objects from it.

Variable names come from ``opentelemetry.sdk.environment_variables`` so each
is spelled once, where the SDK defines it, and the values are read with
OpenTelemetry's own parsers: ``parse_env_headers`` for the headers, and
``Resource.create`` (the SDK's ``OTELResourceDetector``) for
``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME``.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlparse

from opentelemetry import trace
from opentelemetry.sdk.environment_variables import (
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
    OTEL_BSP_MAX_QUEUE_SIZE,
    OTEL_BSP_SCHEDULE_DELAY,
    OTEL_EXPORTER_OTLP_COMPRESSION,
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_HEADERS,
    OTEL_EXPORTER_OTLP_INSECURE,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TIMEOUT,
    OTEL_EXPORTER_OTLP_TRACES_COMPRESSION,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    OTEL_EXPORTER_OTLP_TRACES_INSECURE,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
    OTEL_RESOURCE_ATTRIBUTES,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.util.re import parse_env_headers

from ..wire.errors import ConfigurationError
from ._batching import DEFAULT_MAX_REQUEST_BYTES, SizeBoundedSpanExporter
from ._suppression import SuppressInstrumentationSpanExporter

# promptprism's own variable (README "Exporting"): the request byte bound,
# for deployments behind a proxy or collector with a tighter limit than ours.
PROMPTPRISM_EXPORT_MAX_REQUEST_BYTES = "PROMPTPRISM_EXPORT_MAX_REQUEST_BYTES"

PROTOCOL_GRPC = "grpc"
PROTOCOL_HTTP_PROTOBUF = "http/protobuf"
PROTOCOL_HTTP_JSON = "http/json"
PROTOCOLS = (PROTOCOL_GRPC, PROTOCOL_HTTP_PROTOBUF)
# The OpenTelemetry specification's default; promptprism's collector serves both.
DEFAULT_PROTOCOL = PROTOCOL_HTTP_PROTOBUF
DEFAULT_GRPC_ENDPOINT = "http://localhost:4317"
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318"
HTTP_TRACES_PATH = "v1/traces"

COMPRESSION_GZIP = "gzip"
COMPRESSION_NONE = "none"
COMPRESSIONS = (COMPRESSION_GZIP, COMPRESSION_NONE)
DEFAULT_COMPRESSION = COMPRESSION_NONE

# Seconds, as opentelemetry-python reads OTEL_EXPORTER_OTLP_TIMEOUT (the
# specification says milliseconds; applications already configured for the
# Python exporters set seconds, so we read what they mean). 10 s is the
# Python exporters' default: long enough for a 16 MiB request on a slow link.
DEFAULT_TIMEOUT_SECONDS = 10.0

# --- BatchSpanProcessor ---------------------------------------------------------
# 8,192 spans, 4x the SDK's 2,048: LLM apps are bursty (a batch run fans out
# hundreds of concurrent requests, each with client spans from other
# instrumentations) and the SDK drops spans in bursts past its queue (README "Exporting").
# At ~600 encoded spans/s per process that is ~14 s of backlog; a bigger queue
# mostly holds memory (~29 KiB per content-captured prompt span → ~240 MiB full).
DEFAULT_MAX_QUEUE_SIZE = 8192
# 512 spans, the SDK's default: ~15 MB for content-captured prompt spans
# (README "Exporting"), about one size-bounded request, so most batches go out whole
# and the splitter only handles the outliers.
DEFAULT_MAX_EXPORT_BATCH_SIZE = 512
# 1 s instead of the SDK's 5 s: people open the inspector right after a
# request to see what it sent; one export a second costs next to nothing.
DEFAULT_SCHEDULE_DELAY_MILLIS = 1000

# Span limits come from the instrumentation (span_limits_for_prompts): the
# library that writes the block events decides how many a span must hold
# (README "Instrumenting an application", span limits: never drop a block silently; the SDK's defaults keep the newest
# 128 events). They are explicit there, so OTEL_SPAN_*_LIMIT variables cannot
# shrink them; only the span_limits argument replaces them.

# RFC 9110 token characters: what a header name (and gRPC metadata key) may
# hold. Checked on the headers argument; parse_env_headers checks the variables.
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9a-z]+$")
# Where parse_env_headers logs an entry it skips (with its value, which may be
# a token): muted while we parse, because we refuse the entry ourselves.
_HEADER_PARSER_LOGGER = "opentelemetry.util.re"


@dataclass(frozen=True)
class ExportSettings:
    """Everything :func:`configure` needs, resolved and validated."""

    protocol: str
    # The URL handed to the exporter: for http/protobuf the full traces URL,
    # for gRPC a URL whose scheme selects TLS (the path is ignored).
    endpoint: str
    headers: Mapping[str, str]
    compression: str
    timeout_seconds: float
    # gRPC only: plaintext channel. https endpoints are always secure.
    insecure: bool
    # Given as arguments (service_name, resource_attributes). configure() builds
    # the resource with Resource.create, which adds OTEL_RESOURCE_ATTRIBUTES and
    # OTEL_SERVICE_NAME through the SDK's OTELResourceDetector; these win.
    resource_attributes: Mapping[str, str]
    max_request_bytes: int
    max_queue_size: int
    max_export_batch_size: int
    schedule_delay_millis: int
    span_limits: SpanLimits = field(compare=False)


def _environment_value(environ: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    """The first non-empty variable among ``names``, as (name, stripped value)."""
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def _choose(argument: object, argument_name: str, environ: Mapping[str, str], *names: str):
    """(source, raw value) by the order argument → environment; None when neither is set."""
    if argument is not None and not (isinstance(argument, str) and not argument.strip()):
        return f"argument {argument_name}", argument
    return _environment_value(environ, *names)


@contextmanager
def _muted(logger_name: str) -> Iterator[None]:
    logger = logging.getLogger(logger_name)

    def mute(record: logging.LogRecord) -> bool:
        return False

    logger.addFilter(mute)
    try:
        yield
    finally:
        logger.removeFilter(mute)


def _parse_header_variable(text: str, source: str) -> dict[str, str]:
    """OTEL_*_HEADERS through OpenTelemetry's parse_env_headers, refusing what it would skip.

    The parser logs and drops an entry it cannot read; an exporter missing
    its Authorization header fails later and far away, so each entry is
    parsed alone and one that yields nothing is a ConfigurationError (naming
    the entry by position and name, never its value).
    """
    headers: dict[str, str] = {}
    for position, entry in enumerate(text.split(","), start=1):
        if not entry.strip():
            continue
        with _muted(_HEADER_PARSER_LOGGER):
            parsed = parse_env_headers(entry, liberal=True)
        if not parsed:
            name = entry.partition("=")[0].strip() if "=" in entry else ""
            raise ConfigurationError(
                f"{source}: entry {position}{f' ({name!r})' if name else ''} is not name=value with a valid "
                "header name (the value URL-encoded), separated by commas")
        headers.update(parsed)
    return headers


def _headers(value: object, source: str) -> dict[str, str]:
    if isinstance(value, str):
        # parse_env_headers lowercases names: gRPC metadata keys must be, HTTP names are case-insensitive.
        headers = _parse_header_variable(value, source)
    elif isinstance(value, Mapping):
        headers = {str(key).strip().lower(): str(header_value) for key, header_value in value.items()}
        for name in headers:
            if not _HEADER_NAME.match(name):
                raise ConfigurationError(f"{source}: {name!r} is not a valid header name")
    else:
        raise ConfigurationError(f"{source}: expected a mapping or a 'name=value,…' string, got {value!r}")
    for name, header_value in headers.items():
        if any(character in header_value for character in "\r\n\0"):
            raise ConfigurationError(f"{source}: the value of {name!r} contains a line break or NUL")
    return headers


def _check_resource_attributes(environ: Mapping[str, str]) -> None:
    """Refuse an OTEL_RESOURCE_ATTRIBUTES entry the SDK's OTELResourceDetector would skip with a warning.

    The detector reads the variable itself (in Resource.create); this only
    finds, at start-up, the one thing it cannot read: an entry without ``=``.
    """
    found = _environment_value(environ, OTEL_RESOURCE_ATTRIBUTES)
    if found is None:
        return
    for position, entry in enumerate(found[1].split(","), start=1):
        if entry.strip() and "=" not in entry:
            raise ConfigurationError(f"{found[0]}: entry {position} is not key=value (entries are separated by commas)")


def _boolean(value: object, source: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigurationError(f"{source}: expected true or false, got {value!r}")


def _positive_number(value: object, source: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigurationError(f"{source}: expected a number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise ConfigurationError(f"{source}: expected a positive number, got {value!r}")
    return number


def _positive_integer(value: object, source: str) -> int:
    if isinstance(value, bool):
        raise ConfigurationError(f"{source}: expected a positive integer, got {value!r}")
    try:
        number = int(str(value).strip()) if isinstance(value, str) else int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigurationError(f"{source}: expected a positive integer, got {value!r}") from None
    if number <= 0 or (isinstance(value, float) and value != number):
        raise ConfigurationError(f"{source}: expected a positive integer, got {value!r}")
    return number


def _validated_url(url: str, source: str) -> str:
    parsed = urlparse(url)
    try:
        parsed.port  # raises ValueError on a non-numeric or out-of-range port
    except ValueError as error:
        raise ConfigurationError(f"{source}: bad port in {url!r} ({error})") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigurationError(f"{source}: expected a URL such as http://localhost:4318, got {url!r}")
    return url


def _resolve_endpoint(
    protocol: str, endpoint: str | None, traces_endpoint: str | None, environ: Mapping[str, str]
) -> str:
    """The URL for the exporter. A traces endpoint is used as is; a base one gets /v1/traces for HTTP."""
    candidates = (
        ("argument traces_endpoint", traces_endpoint, True),
        ("argument endpoint", endpoint, False),
        (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, environ.get(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), True),
        (OTEL_EXPORTER_OTLP_ENDPOINT, environ.get(OTEL_EXPORTER_OTLP_ENDPOINT), False),
    )
    for source, url, is_traces_endpoint in candidates:
        if url is None or not str(url).strip():
            continue
        url = _validated_url(str(url).strip(), source)
        if is_traces_endpoint or protocol == PROTOCOL_GRPC:
            return url
        return f"{url.rstrip('/')}/{HTTP_TRACES_PATH}"
    if protocol == PROTOCOL_GRPC:
        return DEFAULT_GRPC_ENDPOINT
    return f"{DEFAULT_HTTP_ENDPOINT}/{HTTP_TRACES_PATH}"


def _prompt_span_limits() -> SpanLimits:
    # Imported here, not at module level: ``import promptprism.exporter`` stays
    # OpenTelemetry-only, and the instrumentation (upstream of us in the data
    # flow, README "Development") loads only when a provider is actually configured.
    from promptprism.instrumentation import span_limits_for_prompts

    return span_limits_for_prompts()


def resolve_settings(
    environ: Mapping[str, str] | None = None,
    *,
    protocol: str | None = None,
    endpoint: str | None = None,
    traces_endpoint: str | None = None,
    headers: Mapping[str, str] | str | None = None,
    compression: str | None = None,
    timeout: float | None = None,
    insecure: bool | None = None,
    service_name: str | None = None,
    resource_attributes: Mapping[str, str] | None = None,
    max_request_bytes: int | None = None,
    max_queue_size: int | None = None,
    max_export_batch_size: int | None = None,
    schedule_delay_millis: int | None = None,
    span_limits: SpanLimits | None = None,
) -> ExportSettings:
    """Resolve every setting (argument → environment → default) and validate it."""
    environ = os.environ if environ is None else environ

    chosen = _choose(protocol, "protocol", environ, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL)
    resolved_protocol = DEFAULT_PROTOCOL if chosen is None else str(chosen[1]).strip().lower()
    if chosen is not None and resolved_protocol == PROTOCOL_HTTP_JSON:
        raise ConfigurationError(
            f"{chosen[0]}: http/json is not supported by the OpenTelemetry Python exporters; "
            "use http/protobuf or grpc"
        )
    if chosen is not None and resolved_protocol not in PROTOCOLS:
        raise ConfigurationError(f"{chosen[0]}: expected one of {', '.join(PROTOCOLS)}, got {chosen[1]!r}")

    resolved_endpoint = _resolve_endpoint(resolved_protocol, endpoint, traces_endpoint, environ)

    chosen = _choose(headers, "headers", environ, OTEL_EXPORTER_OTLP_TRACES_HEADERS, OTEL_EXPORTER_OTLP_HEADERS)
    resolved_headers = {} if chosen is None else _headers(chosen[1], chosen[0])

    chosen = _choose(
        compression, "compression", environ, OTEL_EXPORTER_OTLP_TRACES_COMPRESSION, OTEL_EXPORTER_OTLP_COMPRESSION
    )
    resolved_compression = DEFAULT_COMPRESSION if chosen is None else str(chosen[1]).strip().lower()
    if chosen is not None and resolved_compression not in COMPRESSIONS:
        raise ConfigurationError(f"{chosen[0]}: expected one of {', '.join(COMPRESSIONS)}, got {chosen[1]!r}")

    chosen = _choose(timeout, "timeout", environ, OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, OTEL_EXPORTER_OTLP_TIMEOUT)
    resolved_timeout = DEFAULT_TIMEOUT_SECONDS if chosen is None else _positive_number(chosen[1], chosen[0])

    # https always means TLS (the specification: the scheme takes precedence).
    scheme_is_secure = urlparse(resolved_endpoint).scheme == "https"
    chosen = _choose(insecure, "insecure", environ, OTEL_EXPORTER_OTLP_TRACES_INSECURE, OTEL_EXPORTER_OTLP_INSECURE)
    if chosen is not None:
        resolved_insecure = _boolean(chosen[1], chosen[0]) and not scheme_is_secure
    else:
        resolved_insecure = not scheme_is_secure

    _check_resource_attributes(environ)
    attributes: dict[str, str] = {}
    if resource_attributes is not None:
        attributes.update({str(key): str(value) for key, value in resource_attributes.items()})
    if service_name is not None:
        if not str(service_name).strip():
            raise ConfigurationError("argument service_name: must not be empty")
        attributes[SERVICE_NAME] = str(service_name)

    chosen = _choose(max_request_bytes, "max_request_bytes", environ, PROMPTPRISM_EXPORT_MAX_REQUEST_BYTES)
    resolved_max_request_bytes = (
        DEFAULT_MAX_REQUEST_BYTES if chosen is None else _positive_integer(chosen[1], chosen[0])
    )

    chosen = _choose(max_queue_size, "max_queue_size", environ, OTEL_BSP_MAX_QUEUE_SIZE)
    resolved_queue_size = DEFAULT_MAX_QUEUE_SIZE if chosen is None else _positive_integer(chosen[1], chosen[0])
    chosen = _choose(max_export_batch_size, "max_export_batch_size", environ, OTEL_BSP_MAX_EXPORT_BATCH_SIZE)
    resolved_batch_size = (
        DEFAULT_MAX_EXPORT_BATCH_SIZE if chosen is None else _positive_integer(chosen[1], chosen[0])
    )
    if resolved_batch_size > resolved_queue_size:
        # The SDK refuses this too, with a message that names neither setting.
        raise ConfigurationError(
            f"max_export_batch_size ({resolved_batch_size}) must not exceed max_queue_size ({resolved_queue_size})"
        )
    chosen = _choose(schedule_delay_millis, "schedule_delay_millis", environ, OTEL_BSP_SCHEDULE_DELAY)
    resolved_delay = DEFAULT_SCHEDULE_DELAY_MILLIS if chosen is None else _positive_integer(chosen[1], chosen[0])

    return ExportSettings(
        protocol=resolved_protocol,
        endpoint=resolved_endpoint,
        headers=resolved_headers,
        compression=resolved_compression,
        timeout_seconds=resolved_timeout,
        insecure=resolved_insecure,
        resource_attributes=attributes,
        max_request_bytes=resolved_max_request_bytes,
        max_queue_size=resolved_queue_size,
        max_export_batch_size=resolved_batch_size,
        schedule_delay_millis=resolved_delay,
        span_limits=span_limits if span_limits is not None else _prompt_span_limits(),
    )


def build_resource(settings: ExportSettings) -> Resource:
    """The SDK's resource: defaults, OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (read by
    Resource.create from the process environment), then the arguments' attributes over them."""
    return Resource.create(dict(settings.resource_attributes))


def build_otlp_exporter(settings: ExportSettings) -> SpanExporter:
    """The OpenTelemetry OTLP span exporter for these settings, every value passed explicitly."""
    try:
        if settings.protocol == PROTOCOL_GRPC:
            import grpc
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        else:
            from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
    except ImportError as error:
        raise ConfigurationError(
            f"the {settings.protocol} OTLP exporter is not installed ({error}); "
            "install promptprism[exporter]"
        ) from None

    gzip = settings.compression == COMPRESSION_GZIP
    if settings.protocol == PROTOCOL_GRPC:
        return GrpcExporter(
            endpoint=settings.endpoint,
            insecure=settings.insecure,
            headers=tuple(settings.headers.items()),
            timeout=settings.timeout_seconds,
            compression=grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression,
        )
    http_arguments: dict[str, object] = {}
    if "max_request_size" in inspect.signature(HttpExporter.__init__).parameters:
        # The HTTP exporter (1.4x and later) drops a request over its own 64 MiB
        # limit before sending it. The size-bounded wrapper already splits
        # batches; a single span above the limit should reach the receiver,
        # which answers 413 (logged by the exporter) if it cannot take it.
        http_arguments["max_request_size"] = 0
    return HttpExporter(
        endpoint=settings.endpoint,
        headers=dict(settings.headers),
        timeout=settings.timeout_seconds,
        compression=HttpCompression.Gzip if gzip else HttpCompression.NoCompression,
        **http_arguments,
    )


def build_span_exporter(settings: ExportSettings, inner: SpanExporter | None = None) -> SizeBoundedSpanExporter:
    """Size check and split, then the OTLP exporter run with instrumentation suppressed."""
    return SizeBoundedSpanExporter(
        SuppressInstrumentationSpanExporter(inner if inner is not None else build_otlp_exporter(settings)),
        settings.max_request_bytes,
    )


@dataclass
class ConfiguredTracing:
    """What :func:`configure` set up; keep it to flush and shut down."""

    tracer_provider: TracerProvider
    span_processor: BatchSpanProcessor
    # The outermost exporter: its ``statistics`` count requests, failures and oversized spans.
    span_exporter: SizeBoundedSpanExporter
    settings: ExportSettings

    def get_tracer(self, name: str, version: str | None = None) -> trace.Tracer:
        return self.tracer_provider.get_tracer(name, version)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.tracer_provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()


def configure(*, set_global: bool = True, **overrides) -> ConfiguredTracing:
    """Set up a tracer provider exporting over OTLP from the standard OTEL_* variables.

    ``overrides`` are the keyword arguments of :func:`resolve_settings`; each
    one beats its variable. With ``set_global`` (the default) the provider
    becomes OpenTelemetry's global one, so other instrumentations use it too;
    OpenTelemetry lets that happen once per process.
    """
    settings = resolve_settings(os.environ, **overrides)
    span_exporter = build_span_exporter(settings)
    tracer_provider = TracerProvider(
        resource=build_resource(settings),
        span_limits=settings.span_limits,
    )
    span_processor = BatchSpanProcessor(
        span_exporter,
        max_queue_size=settings.max_queue_size,
        max_export_batch_size=settings.max_export_batch_size,
        schedule_delay_millis=settings.schedule_delay_millis,
    )
    tracer_provider.add_span_processor(span_processor)
    if set_global:
        trace.set_tracer_provider(tracer_provider)
    return ConfiguredTracing(tracer_provider, span_processor, span_exporter, settings)
