"""The scripted scenario written through the write path's own row builder
(collector/write/rows.py) into a fresh migrated database."""

from __future__ import annotations

import time

import pytest

from . import scenario


def write_records(store, records, *, genai_events=()) -> None:
    from promptprism.collector.write.rows import build_tables

    for table, columns in build_tables([], records, genai_events=genai_events).non_empty():
        store.insert(table, columns)


@pytest.fixture
def now_ns() -> int:
    # Whole seconds: the window edges are Unix seconds, as in Grafana.
    return int(time.time()) * 10**9


@pytest.fixture
def scenario_store(store, now_ns):
    write_records(store, scenario.records(now_ns))
    return store
