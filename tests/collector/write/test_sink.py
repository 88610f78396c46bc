"""The sink against the embedded store: durable accepts, grouping, dedup, spool, replay."""

from __future__ import annotations

import threading
import time

import pytest

from promptprism.collector.store.base import StoreError
from promptprism.collector.write.sink import Backpressure, open_sink

from support import wait_until

from ..write_path_samples import make_batch

COUNT_TABLES = ("requests", "request_docs", "tools", "contents", "otel_traces")


def now_ns() -> int:
    return time.time_ns() - 3_600 * 10**9


def counts(store) -> dict[str, int]:
    result = {}
    for table in COUNT_TABLES:
        final = "" if table == "otel_traces" else " FINAL"
        result[table] = store.query(f"SELECT count() AS n FROM {store.database}.{table}{final}")[0]["n"]
        # Raw rows too: dedup must happen at insert, not only under FINAL.
        result[f"{table}_raw"] = store.query(f"SELECT count() AS n FROM {store.database}.{table}")[0]["n"]
    # `blocks` is a view of the documents' blocks (migration 050), which takes no FINAL: each block of a
    # request once, and raw, every block of every stored document.
    result["blocks"] = store.query(
        f"SELECT count() AS n FROM (SELECT 1 FROM {store.database}.blocks LIMIT 1 BY request_id, `index`)")[0]["n"]
    result["blocks_raw"] = store.query(f"SELECT count() AS n FROM {store.database}.blocks")[0]["n"]
    return result


@pytest.fixture
def sink(store, tmp_path):
    sink = open_sink(store, data_dir=str(tmp_path))
    yield sink
    sink.close()


def test_accept_writes_every_table(store, sink):
    sink.accept(make_batch(0, 4, started_at_ns=now_ns()))
    c = counts(store)
    assert c["requests"] == 4 and c["request_docs"] == 4 and c["otel_traces"] == 4
    # each request's blocks are in its document (migration 048), read through the view `blocks`;
    # its tool definition too (an array of it), not a row of `tools`
    assert c["blocks"] == 16 and c["tools"] == 0
    assert store.query(f"SELECT sum(JSONLength(doc, 'tool_names')) AS n FROM {store.database}.request_docs"
                       )[0]["n"] == 4
    # 3 shared blocks + 4 distinct turn blocks + 1 tool definition, once each
    assert c["contents"] == 8
    stats = sink.stats()
    assert stats["spans_stored"] == 4 and stats["requests_stored"] == 4
    assert stats["spool_batches"] == 0


def test_resent_batch_is_one_row_in_every_table(store, tmp_path):
    batch = make_batch(0, 3, started_at_ns=now_ns())
    sink = open_sink(store, data_dir=str(tmp_path))
    sink.accept(batch)
    before = counts(store)
    sink.accept(batch)  # the exporter timed out and sent it again
    assert sink.stats()["batches_duplicate"] == 1
    sink.close()
    # A restarted collector has forgotten the token; ClickHouse has not.
    restarted = open_sink(store, data_dir=str(tmp_path))
    restarted.accept(batch)
    restarted.close()
    assert counts(store) == before
    assert before["otel_traces_raw"] == 3 and before["requests_raw"] == 3


def test_a_static_prompt_is_stored_once(store, sink):
    start = now_ns()
    for number in range(20):
        sink.accept(make_batch(number, 1, started_at_ns=start))
    c = counts(store)
    # 3 static/session blocks and the tool once, 20 distinct questions
    assert c["contents_raw"] == 3 + 20 + 1
    assert c["blocks"] == 80
    assert sink.stats()["contents_written"] == 24


class GatedStore:
    """The test's store with a gate: inserts wait until the test opens it, and are counted."""

    def __init__(self, store):
        self.store = store
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.inserts = 0
        self._lock = threading.Lock()  # the writer and the replay thread both insert

    def insert(self, table, columns, *, dedup_token=None, lane=0):
        self.entered.set()
        assert self.gate.wait(60), "the test never opened the gate"
        with self._lock:
            self.inserts += 1
        self.store.insert(table, columns, dedup_token=dedup_token, lane=lane)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_accepts_that_arrive_while_the_writer_inserts_are_spooled_and_inserted_as_one_group(
        store, tmp_path, monkeypatch):
    from promptprism.collector.write import sink as sink_module

    # Linger longer than the test: the spooled batches wait for close(), which inserts them at once.
    monkeypatch.setattr(sink_module, "SPOOL_GROUP_LINGER_SECONDS", 600.0)
    gated = GatedStore(store)
    sink = open_sink(gated, data_dir=str(tmp_path))
    batches = [make_batch(10 * n, 2, started_at_ns=now_ns()) for n in range(12)]
    errors = []

    def send(batch):
        try:
            sink.accept(batch)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=send, args=(batch,)) for batch in batches]
    threads[0].start()  # nothing else under way: inserted at once
    conversion = None
    try:
        assert gated.entered.wait(60), "the writer never inserted the first batch"
        # Another export is being converted meanwhile: the replay waits for it rather than inserting at once.
        conversion = sink.converting()
        conversion.__enter__()
        for thread in threads[1:]:  # the writer is held inside the first insert: they go to the spool
            thread.start()
        for thread in threads[1:]:  # and are acknowledged from there, durable, before any of them is inserted
            thread.join(60)
            assert not thread.is_alive()
        stats = sink.stats()
        assert stats["batches_spooled_under_load"] == len(batches) - 1 and stats["spool_batches"] == len(batches) - 1
        assert gated.inserts == 0
    finally:
        if conversion is not None:
            conversion.__exit__(None, None, None)
        gated.gate.set()
        for thread in threads:
            thread.join()
        sink.close()
    assert errors == []
    assert counts(store)["otel_traces_raw"] == 24
    stats = sink.stats()
    assert stats["groups_written"] == 2  # the first batch alone, then the eleven that waited, together
    # one insert per non-empty table per group: contents, request_docs (with their blocks), requests (with
    # their tools), otel_traces
    assert gated.inserts == 4 * stats["groups_written"]
    assert stats["spool_batches"] == 0 and not list((tmp_path / "spool").iterdir())  # files and intent removed


def test_with_no_export_being_converted_the_spool_is_inserted_without_lingering(store, tmp_path, monkeypatch):
    """Nothing else is coming: an export spooled under load reaches the store without waiting for companions."""
    from promptprism.collector.write import sink as sink_module

    monkeypatch.setattr(sink_module, "SPOOL_GROUP_LINGER_SECONDS", 600.0)  # longer than the test
    gated = GatedStore(store)
    sink = open_sink(gated, data_dir=str(tmp_path))
    first, second = (make_batch(10 * n, 2, started_at_ns=now_ns()) for n in range(2))
    writer = threading.Thread(target=sink.accept, args=(first,))
    try:
        writer.start()
        assert gated.entered.wait(60), "the writer never inserted the first batch"
        sink.accept(second)  # the writer is busy: spooled, acknowledged
        assert sink.stats()["batches_spooled_under_load"] == 1
        gated.gate.set()
        writer.join(60)
        wait_until(lambda: sink.stats()["batches_replayed"] == 1, timeout=60, message="the spool lingered")
        assert counts(store)["otel_traces_raw"] == 4
    finally:
        gated.gate.set()
        writer.join()
        sink.close()


def test_an_export_converted_but_not_yet_accepted_still_holds_the_group(store, tmp_path, monkeypatch):
    """Between an export's conversion and its accept (copied out of its worker, then spooled) it is
    still on its way: a batch spooled meanwhile waits for it, and both share one insert."""
    from promptprism.collector.write import sink as sink_module

    monkeypatch.setattr(sink_module, "SPOOL_GROUP_LINGER_SECONDS", 600.0)  # longer than the test
    gated = GatedStore(store)
    sink = open_sink(gated, data_dir=str(tmp_path))
    first, second, third = (make_batch(10 * n, 2, started_at_ns=now_ns()) for n in range(3))
    writer = threading.Thread(target=sink.accept, args=(first,))
    try:
        writer.start()
        assert gated.entered.wait(60), "the writer never inserted the first batch"
        with sink.arriving():  # the third export: converted already, not yet accepted
            with sink.arriving():
                sink.accept(second)  # the writer is busy: spooled, acknowledged
            gated.gate.set()
            writer.join(60)
            time.sleep(0.5)  # the replay has had time to insert the second alone, and must not have
            assert sink.stats()["batches_replayed"] == 0
            sink.accept(third)  # the spool holds the second: this one joins it
        wait_until(lambda: sink.stats()["batches_replayed"] == 2, timeout=60,
                   message="the spool was not inserted once nothing was arriving")
        stats = sink.stats()
        assert stats["groups_written"] == 2  # the first alone (the writer), then the second and third together
        # 4 inserts per group: contents, request_docs, requests, otel_traces
        assert gated.inserts == 8 and counts(store)["otel_traces_raw"] == 6
    finally:
        gated.gate.set()
        writer.join()
        sink.close()


def unreachable_store(port: int):
    """A real server store whose server is not there: every call is StoreUnavailable."""
    from promptprism.collector.store.server import ServerStore

    return ServerStore(f"http://default:secret@127.0.0.1:{port}/nowhere", auto_migrate=True)


def test_unreachable_store_spools_and_a_later_start_replays(store, tmp_path, port):
    batches = [make_batch(10 * n, 2, started_at_ns=now_ns()) for n in range(3)]
    down = open_sink(unreachable_store(port), data_dir=str(tmp_path))
    for batch in batches:
        down.accept(batch)  # returns: durable in the spool
    stats = down.stats()
    assert stats["batches_spooled"] == 3 and stats["spool_batches"] >= 1 and stats["store_up"] == 0
    down.close()
    assert counts(store)["requests_raw"] == 0

    up = open_sink(store, data_dir=str(tmp_path))  # the start-up replays the spool
    wait_until(lambda: up.stats()["spool_batches"] == 0)
    up.accept(batches[0])  # a resend after the replay is still one record
    up.close()
    c = counts(store)
    assert c["requests_raw"] == 6 == c["request_docs_raw"] and c["otel_traces_raw"] == 6 and c["blocks_raw"] == 24
    assert not list((tmp_path / "spool").glob("*.spool"))


def test_store_down_and_spool_full_is_backpressure(tmp_path, port):
    sink = open_sink(unreachable_store(port), data_dir=str(tmp_path), spool_max_files=1)
    try:
        sink.accept(make_batch(0, 1, started_at_ns=now_ns()))
        with pytest.raises(Backpressure) as raised:
            sink.accept(make_batch(1, 1, started_at_ns=now_ns()))
        assert raised.value.retry_after_seconds > 0
        assert sink.stats()["backpressure"] == 1
    finally:
        sink.close()


def test_rows_the_store_rejects_are_an_error_not_spooled(chdb_root, tmp_path):
    unmigrated = chdb_root.with_database("sink_no_tables")  # no tables: every insert fails for good
    sink = open_sink(unmigrated, data_dir=str(tmp_path))
    try:
        with pytest.raises(StoreError):
            sink.accept(make_batch(0, 1, started_at_ns=now_ns()))
        assert sink.stats()["spool_batches"] == 0
    finally:
        sink.close()
        chdb_root.execute("DROP DATABASE IF EXISTS sink_no_tables SYNC")


def test_an_unreadable_spool_file_is_moved_aside(store, tmp_path):
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    (spool_dir / "00000000000000000001-1-00000001.spool").write_bytes(b"garbage")
    sink = open_sink(store, data_dir=str(tmp_path))
    try:
        wait_until(lambda: sink.stats()["spool_corrupt"] == 1)
        assert (spool_dir / "corrupt" / "00000000000000000001-1-00000001.spool").exists()
        sink.accept(make_batch(0, 1, started_at_ns=now_ns()))  # and the sink carries on
    finally:
        sink.close()


def test_accept_after_close_is_backpressure(store, tmp_path):
    sink = open_sink(store, data_dir=str(tmp_path))
    sink.close()
    with pytest.raises(Backpressure):
        sink.accept(make_batch(0, 1, started_at_ns=now_ns()))


def test_a_group_whose_insert_went_through_before_a_crash_is_not_stored_twice(store, tmp_path, port):
    """The process died after inserting several spool files as one group but before removing them:
    the start-up replays that group's intent under the same token, and ClickHouse drops it."""
    from promptprism.collector.write.rows import merge_tables
    from promptprism.collector.write.sink import group_token
    from promptprism.collector.write.spool import Spool

    batches = [make_batch(10 * n, 2, started_at_ns=now_ns()) for n in range(3)]
    down = open_sink(unreachable_store(port), data_dir=str(tmp_path))
    for batch in batches:
        down.accept(batch)
    down.close()
    spool = Spool(tmp_path / "spool", max_bytes=10**9, max_files=1000)
    paths = spool.pending()
    assert len(paths) == 3
    # A group of the first two (the third arrived later): grouped again now, all three would get another token.
    groups = [spool.read(path) for path in paths[:2]]
    token = group_token([batch for group in groups for batch in group.batch_tokens])
    spool.write_intent(token, paths[:2])
    for name, table in merge_tables(group.tables for group in groups).non_empty():
        store.insert(name, table, dedup_token=token)  # the insert the crash interrupted had gone through
    assert counts(store)["requests_raw"] == 4

    up = open_sink(store, data_dir=str(tmp_path))  # replays the intent before it returns
    try:
        assert up.stats()["spool_batches"] == 0 and not spool.intents()
    finally:
        up.close()
    c = counts(store)
    assert c["requests_raw"] == 6 == c["request_docs_raw"] and c["otel_traces_raw"] == 6 and c["blocks_raw"] == 24


def test_ingest_keeps_an_export_arriving_until_its_accept_returns(store, tmp_path):
    """``Ingest.export`` marks the whole way in, conversion and accept: during the accept the replay
    still sees the export coming (and waits for it), and once it returns nothing is."""
    from promptprism.collector.metrics import Metrics
    from promptprism.collector.write.ingest import ENCODING_JSON, Ingest

    from ..otlp_samples import otlp_json

    sink = open_sink(store, data_dir=str(tmp_path))
    seen = []
    accept = sink.accept

    def accept_and_look(batch):
        seen.append(sink._others_coming())
        accept(batch)

    sink.accept = accept_and_look
    try:
        outcome = Ingest(sink, Metrics()).export(otlp_json(), ENCODING_JSON, "http")
        assert outcome.accepted >= 1 and seen == [True]
        assert not sink._others_coming()
    finally:
        sink.close()
