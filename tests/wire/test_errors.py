"""One error type for a bad setting, whichever part of promptprism reads it."""

from __future__ import annotations

import pytest

import promptprism.collector
import promptprism.exporter
from promptprism.collector.config import CollectorConfig
from promptprism.exporter import resolve_settings
from promptprism.wire.errors import ConfigurationError


def test_the_collector_and_the_exporter_offer_the_same_type():
    assert promptprism.collector.ConfigurationError is ConfigurationError
    assert promptprism.exporter.ConfigurationError is ConfigurationError
    assert issubclass(ConfigurationError, ValueError)


def test_a_bad_collector_setting_and_a_bad_exporter_setting_raise_it():
    with pytest.raises(ConfigurationError, match="PROMPTPRISM_RETENTION_DAYS"):
        CollectorConfig.load(environ={"PROMPTPRISM_RETENTION_DAYS": "forever"})
    with pytest.raises(ConfigurationError, match="OTEL_EXPORTER_OTLP_TIMEOUT"):
        resolve_settings(environ={"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"})
