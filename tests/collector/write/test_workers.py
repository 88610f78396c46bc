"""Conversion in worker processes: the same tables as in-process, the same
answers for bad payloads, and a worker that dies mid-export costs one
retryable answer, not a hung receiver."""

from __future__ import annotations

import os
import signal
import threading

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from promptprism.collector.otlp import MalformedPayload
from promptprism.collector.write.convert import KIND_LOGS, KIND_TRACES, convert
from promptprism.collector.write.sink import Backpressure
from promptprism.collector.write.workers import ConversionPool, shared_pool

from support import HAS_PROC, cpu_seconds, wait_until

from ..collector_harness import PARTS, assert_exact_map, count_rows, grpc_export, prompt_export, running_collector
from ..log_samples import logs_payload
from ..otlp_samples import otlp_json

LOGS_PATH = "/v1/logs"


def _request_id(payload: bytes) -> str:
    return ExportTraceServiceRequest.FromString(payload).resource_spans[0].scope_spans[0].spans[0].span_id.hex()


def _big_export(spans: int = 600, events: int = 60) -> bytes:
    """An export that takes a worker well over a second: time to kill it mid-way."""
    request = ExportTraceServiceRequest.FromString(prompt_export())
    template = request.resource_spans[0].scope_spans[0].spans[0]
    while len(template.events) < events:
        template.events.append(template.events[len(template.events) % 3])
    scope_spans = request.resource_spans[0].scope_spans[0]
    for number in range(1, spans):
        span = scope_spans.spans.add()
        span.CopyFrom(template)
        span.span_id = (number + 1).to_bytes(8, "big")
    return request.SerializeToString()


def _assert_same(left, right):
    assert left.tables.tables.keys() == right.tables.tables.keys()
    for name, table in left.tables.tables.items():
        assert table.equals(right.tables.tables[name]), name
    for field in ("content_keys", "spans", "requests"):
        assert getattr(left.tables, field) == getattr(right.tables, field)
    for field in ("dedup_token", "received", "rejected", "error_message", "requests", "mapped_blocks",
                  "unmapped_reasons", "genai_events", "other_log_records", "unjoinable_genai_events"):
        assert getattr(left, field) == getattr(right, field), field


@pytest.mark.parametrize("kind, payload, encoding", [
    (KIND_TRACES, prompt_export(), "protobuf"),
    (KIND_TRACES, otlp_json(), "json"),
    (KIND_LOGS, logs_payload(), "protobuf"),
])
def test_a_worker_builds_the_tables_the_collector_process_builds(kind, payload, encoding):
    _assert_same(shared_pool(1).convert(kind, payload, encoding), convert(kind, payload, encoding))


def test_a_malformed_payload_comes_back_as_malformed():
    with pytest.raises(MalformedPayload) as raised:
        shared_pool(1).convert(KIND_TRACES, b"\xff\xff\xff\xff\xff", "protobuf")
    assert raised.value.summary == "not an OTLP ExportTraceServiceRequest"


@pytest.mark.parametrize("payload", [prompt_export(), b"\xff\xff\xff\xff\xff"])
def test_a_conversion_runs_with_the_cyclic_collector_paused_and_turns_it_back_on(payload, monkeypatch):
    import gc

    from promptprism.collector.write import workers

    seen = []

    def recording(kind, payload, encoding, *rest):
        seen.append(gc.isenabled())
        return convert(kind, payload, encoding, *rest)

    monkeypatch.setattr(workers, "convert", recording)
    assert gc.isenabled()
    converted, failure = workers._converted(KIND_TRACES, payload, "protobuf")
    assert seen == [False] and gc.isenabled()
    if converted is None:  # the malformed payload: its failure, and the collector back on all the same
        assert failure[0] == workers._MALFORMED
    else:
        assert failure is None
        _assert_same(converted, convert(KIND_TRACES, payload, "protobuf"))


def test_a_worker_frees_what_a_conversion_leaves_after_answering(monkeypatch):
    """The spans and records go to the worker's freeing thread, not out of scope before the answer."""
    from multiprocessing import shared_memory

    from promptprism.collector.write import workers

    handed = []
    monkeypatch.setattr(workers._LATER, "hand", handed.append)
    payload = prompt_export()
    slot = shared_memory.SharedMemory(create=True, size=1 << 20)
    try:
        slot.buf[:len(payload)] = payload
        outcome, wire = workers._convert_in_slot(KIND_TRACES, slot.name, len(payload), "protobuf")
        assert outcome == workers._OK_IN_SLOT
        (box,) = handed
        (export,) = box  # the last reference: the export is freed when the thread empties the box
        assert len(export.spans) == 1 and len(export.records) == 1 and export.records[0].blocks
        # Neither the spans nor the records cross back: only the tables and the counts.
        _, fields = wire
        assert "spans" not in fields and "records" not in fields and fields["requests"] == 1
    finally:
        slot.close()
        slot.unlink()


class _Noted:
    def __init__(self, freed: list):
        self.freed = freed

    def __del__(self):
        self.freed.append(threading.current_thread().name)


def _hand_a_cycle(freeing, freed: list) -> None:
    """Hand ``freeing`` an object that refers to itself: only a collection frees it."""
    cyclic = _Noted(freed)
    cyclic.itself = cyclic
    freeing.hand([cyclic])


def test_what_is_handed_is_freed_by_the_freeing_thread_or_at_once_without_it():
    import gc

    from promptprism.collector.write.workers import _FreedLater

    freed: list[str] = []
    idle = _FreedLater()
    idle.hand([_Noted(freed)])  # no thread (in the collector's process, a test): freed here, at once
    assert freed == [threading.current_thread().name]
    later = _FreedLater()
    later.start()
    later.start()  # one thread however often started
    later.hand([_Noted(freed)])
    wait_until(lambda: len(freed) == 2, timeout=10)
    assert freed[1] == "promptprism-worker-free"
    # A worker's collector is off: cyclic garbage is collected by the thread, after what it frees.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        _hand_a_cycle(later, freed)
        wait_until(lambda: len(freed) == 3, timeout=10)
        assert freed[2] == "promptprism-worker-free"
        # While the next export is converting, its live objects are young too: no collection then,
        # until an export is freed with nothing converting.
        later.converting = 1
        _hand_a_cycle(later, freed)
        marker: list[str] = []
        later.hand([_Noted(marker)])  # freed after the first: once it is, the first box was handled
        wait_until(lambda: marker, timeout=10)
        assert len(freed) == 3
        later.converting = 0
        later.hand([])
        wait_until(lambda: len(freed) == 4, timeout=10)
        assert freed[3] == "promptprism-worker-free"
    finally:
        if was_enabled:
            gc.enable()


def test_a_conversion_is_counted_while_it_runs(monkeypatch):
    from promptprism.collector.write import workers

    seen = []

    def recording(kind, payload, encoding, *rest):
        seen.append(workers._LATER.converting)
        raise ValueError("a bug of ours")

    before = workers._LATER.converting
    monkeypatch.setattr(workers, "convert", recording)
    converted, failure = workers._converted(KIND_TRACES, prompt_export(), "protobuf")
    assert converted is None and failure[0] == workers._FAILED
    assert seen == [before + 1] and workers._LATER.converting == before


def test_past_the_queue_bound_exports_are_refused_retryable():
    pool = ConversionPool(1)
    pool._in_flight = pool.max_in_flight  # every slot taken by exports still converting
    with pytest.raises(Backpressure):
        pool.convert(KIND_TRACES, prompt_export(), "protobuf")
    pool.close()


@pytest.mark.parametrize("workers", [0, 1])
def test_traces_and_logs_over_grpc_and_http(store, tmp_path, workers):
    with running_collector(store, tmp_path, ingest_workers=workers) as collector:
        assert (collector.grpc.ingest.pool is None) == (workers == 0)
        grpc_payload, http_payload = prompt_export(), prompt_export()
        grpc_export(collector, grpc_payload)
        base = collector.endpoints()["otlp_http"]
        assert httpx.post(base + "/v1/traces", content=http_payload,
                          headers={"Content-Type": "application/x-protobuf"}).status_code == 200
        assert httpx.post(base + LOGS_PATH, content=logs_payload(),
                          headers={"Content-Type": "application/x-protobuf"}).status_code == 200
        assert httpx.post(base + "/v1/traces", content=b"\xff\xff\xff\xff\xff",
                          headers={"Content-Type": "application/x-protobuf"}).status_code == 400
        with pytest.raises(grpc.RpcError) as refused:
            grpc_export(collector, b"\x0a\x7fshort")
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    for payload in (grpc_payload, http_payload):
        assert_exact_map(store, _request_id(payload), PARTS)
    assert count_rows(store, "genai_events") > 0


@pytest.mark.skipif(not HAS_PROC, reason="watches the worker's CPU time in /proc")
def test_a_worker_killed_mid_export_answers_retryable_and_the_pool_recovers(store, tmp_path):
    with running_collector(store, tmp_path, ingest_workers=1) as collector:
        pool = collector.grpc.ingest.pool
        grpc_export(collector, prompt_export())  # the worker is up
        answers: list = []

        def send() -> None:
            try:
                answers.append(grpc_export(collector, _big_export()))
            except grpc.RpcError as error:
                answers.append(error)

        (worker,) = pool.worker_pids()
        idle = cpu_seconds(worker)  # an idle worker waits on its queue and uses no CPU
        sender = threading.Thread(target=send)
        sender.start()
        wait_until(lambda: cpu_seconds(worker) > idle, timeout=60, message="the worker never took the export")
        os.kill(worker, signal.SIGKILL)  # mid-export: it takes the worker seconds to convert
        sender.join(60)
        assert not sender.is_alive()
        assert isinstance(answers[0], grpc.RpcError) and answers[0].code() == grpc.StatusCode.UNAVAILABLE
        later = prompt_export()
        grpc_export(collector, later)
        assert pool.restarts >= 1
    assert_exact_map(store, _request_id(later), PARTS)


def test_bad_setting_is_refused():
    from promptprism.collector.config import CollectorConfig, ConfigurationError

    with pytest.raises(ConfigurationError, match="PROMPTPRISM_INGEST_WORKERS"):
        CollectorConfig.load({"ingest_workers": "-1"}, environ={})
    assert CollectorConfig.load({}, environ={"PROMPTPRISM_INGEST_WORKERS": "0"}).ingest_workers == 0


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="POSIX shared memory is listed in /dev/shm on Linux")
def test_the_shared_memory_an_export_crossed_in_is_reused_then_unlinked_when_the_pool_closes():
    pool = ConversionPool(1)
    payload = prompt_export()
    try:
        first = pool.convert(KIND_TRACES, payload, "protobuf")
        second = pool.convert(KIND_TRACES, payload, "protobuf")
        _assert_same(first, convert(KIND_TRACES, payload, "protobuf"))
        _assert_same(second, first)
        names = [slot.name for slot in pool._slots._all]
        assert len(names) == 1  # one export in flight at a time: one slot, reused
        assert all(os.path.exists(f"/dev/shm/{name}") for name in names)
    finally:
        pool.close()
    assert not any(os.path.exists(f"/dev/shm/{name}") for name in names)


@pytest.mark.skipif(not HAS_PROC or not os.path.isdir("/dev/shm"),
                    reason="a worker's mappings are read from /proc, shared memory listed in /dev/shm (Linux)")
def test_a_worker_maps_a_slot_once_and_lets_go_of_one_the_collector_replaced():
    """A worker keeps the slot it converted in mapped for the next export (its pages stay faulted in),
    and when a larger export makes the collector replace the slot, the worker unmaps the old one."""
    pool = ConversionPool(1)
    payload = prompt_export()

    def mappings(pid: int, name: str) -> int:
        with open(f"/proc/{pid}/maps") as maps:
            return sum(name in line for line in maps)

    try:
        for _ in range(3):
            pool.convert(KIND_TRACES, payload, "protobuf")
        (worker,) = pool.worker_pids()
        (slot,) = pool._slots._all
        assert mappings(worker, slot.name) == 1  # mapped once, still mapped between exports
        big = _big_export(spans=150)
        assert len(big) > slot.size
        _assert_same(pool.convert(KIND_TRACES, big, "protobuf"), convert(KIND_TRACES, big, "protobuf"))
        (larger,) = pool._slots._all
        assert larger.name != slot.name and pool.worker_pids() == [worker]
        assert mappings(worker, larger.name) == 1
        assert mappings(worker, slot.name) == 0  # unlinked by the collector, unmapped by the worker
        _assert_same(pool.convert(KIND_TRACES, payload, "protobuf"), convert(KIND_TRACES, payload, "protobuf"))
        assert mappings(worker, larger.name) == 1
    finally:
        pool.close()
