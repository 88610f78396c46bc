"""promptprism collector: OTLP receiver, ClickHouse store, JSON API, inspector and CLI.

The packages follow the data: ``receive`` (gRPC, HTTP) → ``otlp`` (decode)
→ ``write`` (reassemble, rows, sink; ``conventions`` say what other
instrumentations' attributes mean) → ``store`` → ``read`` (lookups, diff,
API, inspector, insight); ``record`` declares the request record they pass
along, ``app`` wires them into one process, ``cli`` is the ``promptprism``
command and ``demo`` its sample traffic.

Heavy dependencies (grpcio, chdb, clickhouse-connect, starlette) are imported
only by the submodules that need them, never here: ``Collector`` is loaded
on first use, so the CLI's light verbs and the fake provider stay light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..wire.errors import ConfigurationError
from .config import CollectorConfig

if TYPE_CHECKING:
    from .app import Collector

__all__ = ["Collector", "CollectorConfig", "ConfigurationError"]


def __getattr__(name: str):
    if name == "Collector":
        from .app import Collector

        return Collector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
