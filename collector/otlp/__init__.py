"""OTLP translation: protobuf / OTLP/JSON payloads → decoded spans and log records.

Pure, no I/O, no promptprism meaning yet (as opentelemetry-python keeps
``otlp-proto-common`` apart from its exporters): ``traces`` and ``logs``
decode, ``model`` holds what they produce, ``attribute_text`` spells a
value the way the OpenTelemetry Collector's ClickHouse exporter stores it.
"""

from __future__ import annotations

from ._parse import MalformedPayload

__all__ = ["MalformedPayload", "attribute_text", "logs", "model", "traces"]
