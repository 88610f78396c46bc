"""A group's `otel_traces` is inserted beside its request tables, on the store's second insert lane.

The request tables keep their order on the first lane (text before the rows
that point at it, a document before its request); a lane that fails leaves
the group to be inserted again under the same token, or, when the store
rejects a batch, its neighbours one by one — never into a table the group
was stored in already, so nothing is doubled.
"""

from __future__ import annotations

import threading

import pytest

from promptprism.collector.store.base import StoreError
from promptprism.collector.write import sink as sink_module
from promptprism.collector.write.sink import open_sink

from support import wait_until

from ..write_path_samples import make_batch
from .test_group_commit import TABLES, accepted_one_by_one, table_rows
from .test_sink import counts, now_ns


def spooled_as_one_group(sink, batches) -> None:
    """Accept ``batches`` while another export is being converted (each goes to the spool), then let
    the replay insert them as one group."""
    conversion = sink.converting()
    conversion.__enter__()
    try:
        for batch in batches:
            sink.accept(batch)
        assert sink.stats()["spool_batches"] == len(batches)
    finally:
        conversion.__exit__(None, None, None)
    wait_until(lambda: sink.stats()["spool_batches"] == 0, timeout=60, message="the spool was not replayed")


class TwoLanes:
    """The test's store, offering two insert lanes; records which lane each table went on. The store
    beneath is used on its first lane: what is tested is the sink's choice of lanes."""

    insert_lanes = 2

    def __init__(self, store, meet=()):
        self.store = store
        self.lanes: dict[int, list[str]] = {0: [], 1: []}
        # Tables whose inserts must be under way at the same time (a barrier: one lane after the
        # other would wait out its timeout and fail the insert).
        self.meet = set(meet)
        self._barrier = threading.Barrier(len(self.meet) or 1, timeout=30)
        self._lock = threading.Lock()

    def insert(self, table, columns, *, dedup_token=None, lane=0):
        with self._lock:
            self.lanes[lane].append(table)
        if table in self.meet:
            self._barrier.wait()
        self.store.insert(table, columns, dedup_token=dedup_token)

    def __getattr__(self, name):
        return getattr(self.store, name)


@pytest.mark.clickhouse
def test_a_group_s_otel_traces_is_inserted_while_its_request_tables_are(store, second_store, tmp_path, monkeypatch):
    monkeypatch.setattr(sink_module, "SPOOL_GROUP_LINGER_SECONDS", 600.0)
    started = now_ns()
    batches = [make_batch(10 * n, 3, started_at_ns=started) for n in range(4)]
    lanes = TwoLanes(store, meet=("requests", "otel_traces"))
    sink = open_sink(lanes, data_dir=str(tmp_path / "lanes"))
    try:
        spooled_as_one_group(sink, batches)
        assert sink.stats()["batches_replayed"] == 4 and sink.stats()["store_errors"] == 0
    finally:
        sink.close()
    # The request tables in their order on the first lane, `otel_traces` alone on the second.
    assert lanes.lanes == {0: ["contents", "request_docs", "requests"], 1: ["otel_traces"]}
    accepted_one_by_one(second_store, batches, tmp_path / "one-by-one")
    for table in TABLES:
        assert table_rows(store, table) == table_rows(second_store, table), table


@pytest.mark.clickhouse
def test_a_store_with_one_lane_gets_every_table_on_it_in_order(store, tmp_path):
    lanes = TwoLanes(store)
    lanes.insert_lanes = 1
    sink = open_sink(lanes, data_dir=str(tmp_path))
    try:
        sink.accept(make_batch(0, 3, started_at_ns=now_ns()))
    finally:
        sink.close()
    assert lanes.lanes == {0: ["contents", "request_docs", "requests", "otel_traces"], 1: []}
    assert counts(store)["otel_traces_raw"] == 3


class RejectsOneBatch:
    """The test's store; refuses for good (StoreError) any `requests` insert holding one request."""

    def __init__(self, store, request_id: str):
        self.store = store
        self.request_id = request_id
        self.refused = 0

    def insert(self, table, columns, *, dedup_token=None, lane=0):
        if table == "requests" and self.request_id in columns.column("request_id").to_pylist():
            self.refused += 1
            raise StoreError("the store refuses this request")
        self.store.insert(table, columns, dedup_token=dedup_token, lane=lane)

    def __getattr__(self, name):
        return getattr(self.store, name)


def distinct(rows: list[tuple]) -> bool:
    return len(rows) == len(set(rows))


@pytest.mark.clickhouse
def test_a_batch_the_store_refuses_leaves_its_neighbours_stored_once_in_every_table(store, tmp_path, monkeypatch):
    """The group fails on `requests`; its other tables were stored already (the request tables before
    it on the first lane; `otel_traces` on the second, when there is one). The batches are then
    inserted one by one, but only into the tables the group did not store: a second copy of those
    rows would be a second row in each (its token differs), a span shown twice."""
    monkeypatch.setattr(sink_module, "SPOOL_GROUP_LINGER_SECONDS", 600.0)
    started = now_ns()
    batches = [make_batch(10 * n, 3, started_at_ns=started) for n in range(3)]
    bad = batches[1].tables.tables["requests"].column("request_id")[0].as_py()
    refusing = RejectsOneBatch(store, bad)
    sink = open_sink(refusing, data_dir=str(tmp_path))
    try:
        spooled_as_one_group(sink, batches)
        stats = sink.stats()
    finally:
        sink.close()
    assert refusing.refused == 2  # the group, then the batch alone
    assert stats["spool_corrupt"] == 1 and stats["batches_replayed"] == 2
    assert len(list((tmp_path / "spool" / "corrupt").iterdir())) == 1  # the refused batch kept aside
    good = {row.as_py() for batch in (batches[0], batches[2])
            for row in batch.tables.tables["requests"].column("request_id")}
    assert {row["request_id"] for row in store.query(f"SELECT request_id FROM {store.database}.requests")} == good
    for table in TABLES:
        assert distinct(table_rows(store, table)), table
    spans = {row["SpanId"] for row in store.query(f"SELECT SpanId FROM {store.database}.otel_traces")}
    assert good <= spans  # the neighbours' spans are there, once each
