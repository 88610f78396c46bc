"""The sink against the embedded store: durable accepts, grouping, dedup, spool, replay."""

from __future__ import annotations

import threading
import time

import pytest

from promptprism.collector.sink import open_sink

from .write_path_samples import make_batch

COUNT_TABLES = ("requests", "blocks", "tools", "contents", "otel_traces")


def now_ns() -> int:
    return time.time_ns() - 3_600 * 10**9


def counts(store) -> dict[str, int]:
    result = {}
    for table in COUNT_TABLES:
        final = "" if table == "otel_traces" else " FINAL"
        result[table] = store.query(f"SELECT count() AS n FROM {store.database}.{table}{final}")[0]["n"]
        # Raw rows too: dedup must happen at insert, not only under FINAL.
        result[f"{table}_raw"] = store.query(f"SELECT count() AS n FROM {store.database}.{table}")[0]["n"]
    return result


@pytest.fixture
def sink(store, tmp_path):
    sink = open_sink(store, data_dir=str(tmp_path))
    yield sink
    sink.close()


def test_accept_writes_every_table(store, sink):
    sink.accept(make_batch(0, 4, started_at_ns=now_ns()))
    c = counts(store)
    assert c["requests"] == 4 and c["otel_traces"] == 4
    assert c["blocks"] == 16 and c["tools"] == 4
    # 3 shared blocks + 4 distinct turn blocks + 1 tool definition, once each
    assert c["contents"] == 8
    stats = sink.stats()
    assert stats["spans_stored"] == 4 and stats["requests_stored"] == 4
    assert stats["spool_batches"] == 0
