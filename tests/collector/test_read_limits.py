"""Readers cannot starve ingestion (issue 14, must fix 5): the read side's bounds, tested by behaviour.

The ingest rate under read load is measured by ``benchmarks/read_load.py``
(a ratio, not asserted here).
"""

from __future__ import annotations

import asyncio
import threading

import httpx
import pyarrow as pa
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from promptprism.collector import app as collector_app
from promptprism.collector import read_limits
from promptprism.collector.read_limits import ReadGate, ReadStore
from promptprism.collector.store.base import StoreError
from promptprism.collector.store.embedded import WriterFirstLock
from support import wait_until


def _held_app():
    """An app whose /held requests wait until released; /quick answers at once."""
    release = asyncio.Event()
    started = []

    async def held(request):
        started.append(1)
        await release.wait()
        return PlainTextResponse("done")

    async def quick(request):
        return PlainTextResponse("quick")

    app = Starlette(routes=[Route("/held", held), Route("/quick", quick), Route("/healthz", quick)])
    return app, release, started


def test_the_gate_runs_a_bounded_number_queues_a_bounded_number_and_refuses_the_rest():
    async def scenario():
        inner, release, started = _held_app()
        gate = ReadGate(inner, running=1, waiting=1)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gate), base_url="http://test") as client:
            running = asyncio.create_task(client.get("/held"))
            while not started:
                await asyncio.sleep(0)
            waiting = asyncio.create_task(client.get("/quick"))
            while not gate.waiting:
                await asyncio.sleep(0)
            refused = await client.get("/quick")
            assert refused.status_code == 503
            assert refused.headers["Retry-After"] == str(read_limits.READ_RETRY_AFTER_SECONDS)
            probe = await client.get("/healthz")  # probes are never gated
            assert probe.status_code == 200
            release.set()
            assert (await running).status_code == 200 and (await waiting).status_code == 200
            assert (await client.get("/quick")).status_code == 200
            assert gate.refused == 1

    asyncio.run(scenario())


def test_read_queries_run_with_the_read_settings(store):
    reader = ReadStore(store)
    row = reader.query("SELECT getSetting('max_threads') AS threads, getSetting('max_execution_time') AS seconds, "
                       "getSetting('max_memory_usage') AS memory -- a trailing comment;")[0]
    assert (int(row["threads"]), float(row["seconds"]), int(row["memory"])) == (
        read_limits.READ_QUERY_SETTINGS["max_threads"], read_limits.READ_QUERY_SETTINGS["max_execution_time"],
        read_limits.READ_QUERY_SETTINGS["max_memory_usage"])
    # Other queries (the writer's) keep the session's own settings: no time limit.
    assert float(store.query("SELECT getSetting('max_execution_time') AS seconds")[0]["seconds"]) == 0


@pytest.mark.clickhouse
def test_settings_where_known_apply_only_where_the_store_has_them(store):
    # one the store knows (every version), one no version has: the query runs, with the known one
    reader = ReadStore(store, where_known={"max_block_size": 1234, "promptprism_no_such_setting": 1})
    row = reader.query("SELECT getSetting('max_block_size') AS block, getSetting('max_threads') AS threads")[0]
    assert (int(row["block"]), int(row["threads"])) == (1234, read_limits.READ_QUERY_SETTINGS["max_threads"])
    assert "promptprism_no_such_setting" not in reader.effective_settings()
    # the defaults run on this ClickHouse, whichever it is
    assert ReadStore(store).query("SELECT 1 AS one") == [{"one": 1}]


def test_a_read_query_past_its_memory_limit_fails_alone(store):
    reader = ReadStore(store, {"max_memory_usage": 10 * 1024 * 1024, "max_threads": 1})
    with pytest.raises(StoreError):
        reader.query("SELECT groupArray(number) AS numbers FROM numbers(20000000)")
    assert store.query("SELECT 1 AS one") == [{"one": 1}]


def test_the_ui_gives_the_read_side_the_gated_store(monkeypatch):
    given = []
    monkeypatch.setattr(collector_app, "read_side_routes", lambda store, pages: given.append(store) or [])
    app = collector_app.ui_app(object(), metrics=None, token=None, ready=threading.Event())
    assert isinstance(app, ReadGate)
    assert isinstance(given[0], ReadStore) and given[0].settings == read_limits.READ_QUERY_SETTINGS


def test_a_waiting_insert_goes_before_waiting_reads():
    lock = WriterFirstLock()
    order = []
    holder_in, holder_release = threading.Event(), threading.Event()

    def holder():
        with lock.hold():
            holder_in.set()
            holder_release.wait(30)

    def statement(name, writer):
        with lock.hold(writer=writer):
            order.append(name)

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    holder_in.wait(30)
    readers = [threading.Thread(target=statement, args=(f"read{index}", False)) for index in range(3)]
    for reader in readers:
        reader.start()
    writer = threading.Thread(target=statement, args=("insert", True))
    writer.start()
    wait_until(lambda: lock._writers_waiting == 1, message="the insert did not queue")
    holder_release.set()
    for thread in [*threads, *readers, writer]:
        thread.join(30)
    assert order[0] == "insert" and sorted(order[1:]) == ["read0", "read1", "read2"]


def test_the_embedded_store_inserts_and_reads_under_the_lock(store):
    store.execute(f"CREATE TABLE {store.database}.lock_probe (a UInt32) ENGINE = MergeTree ORDER BY a")
    store.insert("lock_probe", pa.table({"a": pa.array([1, 2], pa.uint32())}))
    assert store.query(f"SELECT count() AS n FROM {store.database}.lock_probe") == [{"n": 2}]


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_read_budget_lets_a_burst_run_then_holds_sustained_reads_to_their_share():
    clock = _Clock()
    budget = read_limits.ReadBudget(share=0.5, burst=3.0, clock=clock)
    assert budget.wait_before_start() == 0  # a page or a dashboard refresh runs at once
    budget.charge(2.0)
    clock.now += 2.0  # 1 s refilled while it ran: 3 - 2 + 1 = 2 left
    assert budget.wait_before_start() == 0
    budget.charge(5.0)  # a long read overdraws the budget by 3 s
    assert budget.wait_before_start() == pytest.approx(6.0)  # 3 s of reading refills in 6 s at a share of 0.5
    clock.now += 6.0
    assert budget.wait_before_start() == 0
    # Sustained: reading all the time is held to the share of the time.
    read_seconds, start = 0.0, clock.now
    for _ in range(200):
        clock.now += budget.wait_before_start()
        clock.now += 0.25
        budget.charge(0.25)
        read_seconds += 0.25
    assert read_seconds / (clock.now - start) == pytest.approx(0.5, abs=0.05)
    assert read_limits.ReadBudget(share=1.0, burst=0.0, clock=clock).wait_before_start() == 0


def test_the_gate_waits_for_the_read_budget_before_running_a_read():
    clock = _Clock()
    pauses = []

    async def sleep(seconds):
        pauses.append(seconds)
        clock.now += seconds

    async def scenario():
        async def slow(request):
            clock.now += 4.0  # a read that ran 4 s (on the gate's clock)
            return PlainTextResponse("read")

        gate = ReadGate(Starlette(routes=[Route("/slow", slow)]), running=1, waiting=4,
                        share=0.5, burst=1.0, clock=clock, sleep=sleep)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gate), base_url="http://test") as client:
            assert (await client.get("/slow")).status_code == 200
            assert not pauses  # the first read ran at once
            assert (await client.get("/slow")).status_code == 200
        return gate

    gate = asyncio.run(scenario())
    # 4 s of reading from a full budget of 1 s (it cannot refill past full): 3 s overdrawn, 6 s to wait.
    assert pauses == [pytest.approx(6.0)]
    assert gate.throttled_seconds == pytest.approx(6.0)


def test_the_read_budget_holds_only_while_there_is_ingest_to_protect():
    """With no export for a while, a user clicking through pages never waits for the budget (and is not
    charged for it); once exports arrive, sustained reads are held to their share again."""
    clock = _Clock()
    pauses = []
    ingesting = [False]

    async def sleep(seconds):
        pauses.append(seconds)
        clock.now += seconds

    async def scenario():
        async def slow(request):
            clock.now += 4.0
            return PlainTextResponse("read")

        gate = ReadGate(Starlette(routes=[Route("/slow", slow)]), running=1, waiting=4, share=0.5, burst=1.0,
                        clock=clock, sleep=sleep, ingest_active=lambda: ingesting[0])
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gate), base_url="http://test") as client:
            for _ in range(3):  # 12 s of reading, nothing ingested: no wait, nothing charged
                assert (await client.get("/slow")).status_code == 200
            assert not pauses
            ingesting[0] = True
            for _ in range(2):
                assert (await client.get("/slow")).status_code == 200
        return gate

    asyncio.run(scenario())
    assert pauses == [pytest.approx(6.0)]  # the full burst of 1 s, then 3 s overdrawn: 6 s at a share of 0.5


def test_metrics_say_whether_ingest_is_under_way():
    from promptprism.collector.metrics import Metrics

    metrics = Metrics()
    assert not metrics.ingest_active(10.0)
    metrics.export_finished("http", "ok", 10)
    assert metrics.ingest_active(10.0)
    metrics.last_export_at -= 11.0
    assert not metrics.ingest_active(10.0)
