"""The scripted scenario written through the write path's own row builder
(collector/write/rows.py, via write_path_samples.write_records) into a fresh
migrated database."""

from __future__ import annotations

import time

import pytest

from ...write_path_samples import write_records
from . import scenario


@pytest.fixture
def now_ns() -> int:
    # Whole seconds: the window edges are Unix seconds, as in Grafana.
    return int(time.time()) * 10**9


@pytest.fixture
def scenario_store(store, now_ns):
    write_records(store, scenario.records(now_ns))
    return store
