"""``promptprism demo``: realistic agent traffic, sent for real, against a built-in fake provider.

An assistant application in three services runs for a simulated week:

- ``demo-chat-gateway`` (process kind ``channel``): chat turns through the
  real OpenAI client (Chat Completions, some streamed, tool calls), with
  history that grows turn by turn; one channel scope uses a legacy template
  override that puts the per-turn state *before* the identity block, which
  breaks the provider's prompt cache; quick replies use a hand-written
  prompt that promptprism did not render (recorded unmapped).
- ``demo-agent-worker`` (``worker``): background tasks through the real
  Anthropic client (async, streamed, a tool loop, ``cache_control``).
- ``demo-memory-compactor`` (``compactor``): a nightly batch run through the
  OpenAI Responses API that folds conversations into memory, with a repair
  attempt after a provider error.

Skills and memory change from day to day, so growth and cache breaks show up
in the inspector and dashboards. Spans are backdated to their simulated time.
Export uses the standard ``OTEL_*`` variables (``promptprism.exporter.configure``);
the default reaches ``make run``'s collector on localhost.

This module is the command: arguments, the request budget and its progress
display, export and the closing report. The story is in ``demo.scenario``,
the application that plays it in ``demo.application`` (package
``promptprism.collector.demo``, with the fake provider).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sys
import urllib.request
import uuid
import warnings
from typing import Any
from urllib.parse import urlparse

from ..config import DEFAULT_URL, PROMPTPRISM_URL
from ..demo.application import DemoApplication
from ..demo.scenario import SERVICES
from . import CommandError

DEFAULT_REQUESTS = 120
DEFAULT_DAYS = 7
# How long to wait for the exporter to deliver everything at the end.
FLUSH_TIMEOUT_MILLIS = 30_000
# A collector on this machine or the next answers a TCP connect in
# milliseconds; waiting longer only delays the one line that says nothing
# listens (the exporter itself would retry for minutes).
ENDPOINT_CHECK_TIMEOUT_SECONDS = 3.0
DEFAULT_PORTS = {"http": 80, "https": 443}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="send realistic sample traffic through real OpenAI/Anthropic clients (local fake provider)",
        description="Run a simulated agent application for a week of (backdated) traffic against a built-in "
                    "fake provider and export its spans with the standard OTEL_* variables.",
    )
    parser.add_argument("--requests", type=_positive, default=DEFAULT_REQUESTS, metavar="N",
                        help=f"LLM requests to send (default {DEFAULT_REQUESTS})")
    parser.add_argument("--days", type=_positive, default=DEFAULT_DAYS, metavar="D",
                        help=f"simulated days, oldest first (default {DEFAULT_DAYS})")
    parser.add_argument("--seed", type=int, default=7, help="random seed (same seed, same traffic shape)")
    parser.add_argument("--no-content", action="store_true",
                        help="do not capture prompt and message text (structure, sizes and hashes only)")
    parser.set_defaults(handler=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than zero")
    return value


class Budget:
    """The number of LLM requests still to send, with a progress display."""

    def __init__(self, total: int, stream: Any):
        self.total = total
        self.sent = 0
        self._stream = stream
        self._interactive = hasattr(stream, "isatty") and stream.isatty()
        self._last_reported = -1

    def take(self) -> bool:
        if self.sent >= self.total:
            return False
        self.sent += 1
        self._report()
        return True

    @property
    def exhausted(self) -> bool:
        return self.sent >= self.total

    def _report(self) -> None:
        percent = self.sent * 100 // self.total
        if self._interactive:
            bar = "#" * (percent // 4)
            self._stream.write(f"\r  [{bar:<25}] {self.sent}/{self.total} requests")
            if self.sent == self.total:
                self._stream.write("\n")
            self._stream.flush()
        elif percent // 10 != self._last_reported // 10 or self.sent == self.total:
            self._last_reported = percent
            self._stream.write(f"  {self.sent}/{self.total} requests sent\n")
            self._stream.flush()


# --- the command ---------------------------------------------------------------------------


def _tracing(service: str) -> Any:
    """A tracer provider for one service from the OTEL_* variables (not the global one)."""
    from promptprism.exporter import ConfigurationError, configure

    try:
        return configure(set_global=False, service_name=service)
    except ConfigurationError as error:
        raise CommandError(str(error)) from None


# What each side sends first to find out which protocol answers: an HTTP/1.1
# request, or HTTP/2's connection preface with an empty SETTINGS frame. An
# HTTP/1.1 server answers either with "HTTP/1."; a gRPC (HTTP/2-only) server
# answers either with a SETTINGS frame, never with "HTTP/".
_HTTP1_PROBE = b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
_HTTP2_PROBE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def check_endpoint(endpoint: str, timeout: float = ENDPOINT_CHECK_TIMEOUT_SECONDS, *,
                   protocol: str = "http/protobuf") -> None:
    """CommandError naming ``endpoint`` when nothing accepts a connection there, or when what answers
    speaks the other OTLP transport (gRPC on 4317 given for http/protobuf, or the other way round)."""
    parsed = urlparse(endpoint)
    host = parsed.hostname or "localhost"
    try:
        port = parsed.port or DEFAULT_PORTS.get(parsed.scheme, 80)
    except ValueError:  # a port that is not a number: the exporter's own validation names it
        return
    try:
        with socket.create_connection((host, port), timeout=timeout) as connection:
            if parsed.scheme == "https":  # the answer is TLS either way
                return
            grpc = protocol == "grpc"
            first = _first_bytes(connection, _HTTP2_PROBE if grpc else _HTTP1_PROBE % host.encode("idna"), timeout)
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise CommandError(
            f"no collector at {endpoint} ({reason}); start one with `promptprism collector` (or `make run`), "
            "or point OTEL_EXPORTER_OTLP_ENDPOINT at the one you run") from None
    speaks_http1 = first.startswith(b"HTTP/1.")
    if grpc and speaks_http1:
        raise CommandError(
            f"{endpoint} answers HTTP/1.1, not gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc): it looks like an "
            "OTLP/HTTP port (the collector's is 4318; its gRPC port is 4317). Point "
            "OTEL_EXPORTER_OTLP_ENDPOINT at the gRPC port, or set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
    if not grpc and first and not first.startswith(b"HTTP/"):
        raise CommandError(
            f"{endpoint} does not answer HTTP/1.1 (OTEL_EXPORTER_OTLP_PROTOCOL={protocol}): it looks like an "
            "OTLP/gRPC port (the collector's is 4317; its HTTP port is 4318). Point "
            "OTEL_EXPORTER_OTLP_ENDPOINT at the HTTP port, or set OTEL_EXPORTER_OTLP_PROTOCOL=grpc")


def _first_bytes(connection: socket.socket, probe: bytes, timeout: float) -> bytes:
    """The first bytes the server answers ``probe`` with; empty when it says nothing in time."""
    connection.settimeout(timeout)
    try:
        connection.sendall(probe)
        return connection.recv(16)
    except OSError:  # silence or a reset proves nothing about the protocol; the export will tell
        return b""


def inspector_url(settings: Any, timeout: float = ENDPOINT_CHECK_TIMEOUT_SECONDS) -> str:
    """Where to open the inspector: ``PROMPTPRISM_URL``; else what the collector at the OTLP/HTTP
    endpoint says (``GET /``); else the default address."""
    given = os.environ.get(PROMPTPRISM_URL)
    if given:
        return given.rstrip("/")
    if settings.protocol != "grpc":
        parsed = urlparse(settings.endpoint)
        about = f"{parsed.scheme}://{parsed.netloc}/"
        request = urllib.request.Request(about, headers=dict(settings.headers))
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer = json.loads(response.read(64 * 1024))
            if isinstance(answer, dict) and isinstance(answer.get("inspector"), str):
                return answer["inspector"].rstrip("/")
        except (OSError, ValueError):  # not a promptprism collector, or an older one
            pass
    return DEFAULT_URL.rstrip("/")


def new_run_tag() -> str:
    """Six hex digits that keep this run's conversation and batch-run ids apart from any other run's."""
    return uuid.uuid4().hex[:6]


def run(args: argparse.Namespace) -> int:
    try:
        import anthropic  # noqa: F401
        import openai  # noqa: F401
    except ImportError:
        raise CommandError("the demo drives the real OpenAI and Anthropic clients: "
                           "pip install 'promptprism[providers,exporter]'") from None
    from promptprism.exporter import ConfigurationError, resolve_settings
    from ..demo.fake_provider import FakeProvider

    # Before any exporter starts: with nothing listening it would retry for minutes.
    try:
        settings = resolve_settings(service_name=SERVICES["channel"])
    except ConfigurationError as error:
        raise CommandError(str(error)) from None
    check_endpoint(settings.endpoint, protocol=settings.protocol)

    # The fake provider's model names are not Anthropic's; their SDK warns about that.
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"anthropic(\.|$)")
    warnings.filterwarnings("ignore", message=r".*model .* is deprecated.*")

    tracing = {kind: _tracing(service) for kind, service in SERVICES.items()}
    endpoint = next(iter(tracing.values())).settings.endpoint
    print(f"promptprism demo: {args.requests} requests over {args.days} simulated days, "
          f"3 services, exporting to {endpoint}", file=sys.stderr)
    budget = Budget(args.requests, sys.stderr)
    with FakeProvider() as provider:
        application = DemoApplication(
            provider=provider,
            tracer_providers={kind: configured.tracer_provider for kind, configured in tracing.items()},
            capture_content=not args.no_content, budget=budget, rng=random.Random(args.seed),
            run_tag=new_run_tag())
        result = application.run(args.days)

    failed = 0
    for configured in tracing.values():
        configured.force_flush(FLUSH_TIMEOUT_MILLIS)
        configured.shutdown()
        failed += configured.span_exporter.statistics.failed_spans
    if failed:
        raise CommandError(f"{failed} spans could not be exported to {endpoint}; is the collector running "
                           "(`make run`)? Set OTEL_EXPORTER_OTLP_ENDPOINT to point elsewhere.")
    base = inspector_url(settings)
    print(f"sent {result.requests} requests in {len(set(result.traces))} traces.", file=sys.stderr)
    if result.example_trace_id:
        print(f"open a trace: {base}/trace/{result.example_trace_id}")
    return 0
