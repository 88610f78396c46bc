"""``promptprism collector``: run the OTLP receivers, the store and the UI server.

Every setting of ``config.SETTINGS`` is a flag (``--data-dir`` for
``data_dir``); a flag wins over its ``PROMPTPRISM_*`` variable, which wins
over the default. A bad setting is one line on stderr and exit status 2.
SIGTERM or SIGINT stops the receivers, flushes the sink and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from ...wire.errors import ConfigurationError
from ..config import SETTINGS, CollectorConfig
from . import CommandError

CONFIG_ERROR_STATUS = 2  # as argparse: the command line (or environment) is wrong


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "collector", help="run the OTLP receiver, the store and the inspector",
        description="Receive OTLP traces (gRPC and HTTP), store LLM requests in ClickHouse, "
                    "serve the JSON API and the inspector.",
    )
    for name, setting in SETTINGS.items():
        shown = "unset" if setting.default is None else setting.default
        if setting.default is False:  # a switch: the flag alone turns it on
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None, action="store_const",
                                const=True, help=f"{setting.help} [env {setting.env}=true; default off]")
            continue
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None, metavar="VALUE",
                            help=f"{setting.help} [env {setting.env}; default {shown}]")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    flags = {name: getattr(args, name, None) for name in SETTINGS}
    try:
        config = CollectorConfig.load(flags)
    except ConfigurationError as error:
        print(f"promptprism collector: {error}", file=sys.stderr)
        return CONFIG_ERROR_STATUS
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("uvicorn", "uvicorn.error", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    from ..app import Collector, tune_process  # heavy imports (grpc, chdb) only for this verb
    from ..store.base import StoreError

    tune_process()
    stop = threading.Event()
    previous = {number: signal.signal(number, lambda *_: stop.set()) for number in (signal.SIGTERM, signal.SIGINT)}
    collector = Collector(config)
    try:
        try:
            collector.start()
        except (OSError, StoreError) as error:
            raise CommandError(str(error).splitlines()[0] if str(error) else type(error).__name__) from None
        _announce(collector, config)
        stop.wait()
        print("promptprism collector: stopping (flushing accepted data)", file=sys.stderr, flush=True)
    finally:
        collector.stop()
        for number, handler in previous.items():
            signal.signal(number, handler)
    print("promptprism collector: stopped", file=sys.stderr, flush=True)
    return 0


def _announce(collector, config: CollectorConfig) -> None:
    endpoints = collector.endpoints()
    store = "embedded ClickHouse under " + config.data_dir if config.store == "embedded" else _redacted(config.store)
    lines = [
        f"promptprism collector ready — store: {store}",
        f"  OTLP/gRPC  {endpoints['otlp_grpc']}",
        f"  OTLP/HTTP  {endpoints['otlp_http']}/v1/traces",
        f"  inspector  {endpoints['ui']}/   (API {endpoints['ui']}/api/requests, health /healthz, metrics /metrics)",
        "Point an application at it:",
        f"  export OTEL_EXPORTER_OTLP_ENDPOINT={endpoints['otlp_grpc']}   # gRPC",
        f"  # or: OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_EXPORTER_OTLP_ENDPOINT={endpoints['otlp_http']}",
    ]
    if config.ingest_token:
        lines.append("  export OTEL_EXPORTER_OTLP_HEADERS='authorization=Bearer <PROMPTPRISM_INGEST_TOKEN>'")
    if config.ui_token:
        lines.append("  the inspector and API need the UI token (Authorization: Bearer …, or ?token= once in a browser)")
    print("\n".join(lines), flush=True)


def _redacted(url: str) -> str:
    """A store URL without its password, for printing."""
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if parsed.password:
        return url.replace(f":{parsed.password}@", ":***@", 1)
    return url
