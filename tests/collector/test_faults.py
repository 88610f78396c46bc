"""Faults: the store down, the spool full, the collector killed mid-load.

Acknowledged means durable: whatever the exporter was told succeeded must
be in the store after the fault, and what could not be made durable must be
answered with a retryable code, never accepted and dropped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

import grpc
import httpx
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.sdk.trace.export import SpanExportResult

from chdb_http_fixture import ChdbHttpProcess  # tests/ is on sys.path (rootdir conftest)
from promptprism.collector.app import Collector
from promptprism.collector.store.server import ServerStore
from support import free_port, metric_value, wait_until

from .collector_harness import (
    PARTS,
    CollectorProcess,
    collector_config,
    emit_prompt,
    exporter,
    grpc_export,
    prompt_export,
    tracer_for,
)


def test_store_down_and_spool_full_answers_retryable(tmp_path):
    dead_store = f"http://default:x@127.0.0.1:{free_port()}/promptprism"  # nothing listens there
    config = collector_config(tmp_path, store=dead_store, spool_max_bytes=1)
    with Collector(config) as collector:
        with pytest.raises(grpc.RpcError) as refused:
            grpc_export(collector, prompt_export())
        error = refused.value
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        trailers = dict(error.trailing_metadata())
        retry = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
        assert retry.retry_delay.seconds >= 1
        status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
        assert status.code == code_pb2.UNAVAILABLE
        detail = error_details_pb2.RetryInfo()
        assert status.details[0].Unpack(detail) and detail == retry

        answer = httpx.post(collector.endpoints()["otlp_http"] + "/v1/traces", content=prompt_export(),
                            headers={"Content-Type": "application/x-protobuf"})
        assert answer.status_code == 503 and int(answer.headers["Retry-After"]) >= 1
        metrics = httpx.get(collector.endpoints()["ui"] + "/metrics").text
        assert metric_value(metrics, "promptprism_collector_exports_total", transport="grpc", outcome="backpressure") == 1


def _trace_ids(store: ServerStore) -> set[str]:
    return {row["trace_id"] for row in store.query(f"SELECT DISTINCT trace_id FROM {store.database}.requests")}


def test_store_down_during_sends_is_spooled_then_replayed(tmp_path):
    clickhouse = ChdbHttpProcess(str(tmp_path / "clickhouse")).start()
    reader = ServerStore(clickhouse.url)
    try:
        config = collector_config(tmp_path / "collector", store=clickhouse.url)
        with Collector(config) as collector:
            provider, tracer = tracer_for(exporter(collector, "grpc"))
            sent = {emit_prompt(tracer, PARTS)[0]}
            clickhouse.stop()  # the store goes away; exports must still be acknowledged (spooled)
            sent |= {emit_prompt(tracer, PARTS)[0] for _ in range(5)}
            http_provider, http_tracer = tracer_for(exporter(collector, "http"))
            sent |= {emit_prompt(http_tracer, PARTS)[0] for _ in range(3)}
            stats = collector.sink.stats()
            assert stats["spool_batches"] >= 1 and stats["batches_spooled"] >= 8
            clickhouse.start()  # same data dir and port: the store is back
            wait_until(lambda: not collector.sink.stats()["spool_batches"], timeout=60,
                       message="the spool was not replayed")
            provider.shutdown()
            http_provider.shutdown()
        assert _trace_ids(reader) == sent
        assert reader.query(f"SELECT count() AS n FROM {reader.database}.requests")[0]["n"] == len(sent)
    finally:
        reader.close()
        clickhouse.stop()


def test_sigkill_mid_load_loses_nothing_acknowledged(tmp_path):
    collector = CollectorProcess(tmp_path).start()
    acknowledged: list[str] = []
    stop = threading.Event()

    def load():
        while not stop.is_set():
            payload = prompt_export()
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

            trace_id = ExportTraceServiceRequest.FromString(payload).resource_spans[0].scope_spans[0].spans[0].trace_id
            try:
                grpc_export(collector, payload)
            except grpc.RpcError:
                return  # the collector died under us: this one was never acknowledged
            acknowledged.append(trace_id.hex())

    senders = [threading.Thread(target=load) for _ in range(3)]
    for sender in senders:
        sender.start()
    try:
        wait_until(lambda: len(acknowledged) >= 30, timeout=60, message="30 exports were not acknowledged")
    finally:
        collector.kill()  # SIGKILL mid-load
        stop.set()
        for sender in senders:
            sender.join()

    collector.start()  # same ports, same data directory: the spool and the store as the kill left them
    try:
        ui = collector.ui
        missing = [trace_id for trace_id in acknowledged
                   if httpx.get(f"{ui}/api/traces/{trace_id}", timeout=30).status_code != 200]
        assert missing == []
        one = httpx.get(f"{ui}/api/traces/{acknowledged[0]}").json()
        assert len(one["requests"]) == 1 and one["requests"][0]["prompt"]["mapped"] is True
    finally:
        assert collector.stop() == 0


@contextlib.contextmanager
def unwritable(directory: Path):
    """``directory`` and everything under it cannot be written, for root too, while the block runs.

    chmod does not stop root (CI runs as root), so as root the files and
    directories are made immutable (chattr +i: creating, renaming, writing
    and deleting all fail with EPERM until it is lifted); otherwise their
    write bits go. Skips where neither takes effect (a filesystem without
    immutable flags, such as tmpfs or overlayfs).
    """
    root = os.geteuid() == 0
    if root:
        command = shutil.which("chattr")
        if command is None:
            pytest.skip("chattr not installed: cannot make a directory unwritable for root")
        subprocess.run([command, "-R", "-f", "+i", str(directory)], check=False)
    else:
        subprocess.run(["chmod", "-R", "a-w", str(directory)], check=True)
    try:
        probe = directory / "probe"
        try:
            probe.write_bytes(b"")
        except OSError:
            pass
        else:
            probe.unlink()
            pytest.skip(f"{directory} stays writable here (filesystem without immutable flags?)")
        yield
    finally:
        if root:
            subprocess.run([command, "-R", "-f", "-i", str(directory)], check=False)
        else:
            subprocess.run(["chmod", "-R", "u+w", str(directory)], check=True)


def _prompt_spans() -> list:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider, tracer = tracer_for(memory)
    emit_prompt(tracer, PARTS)
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_an_unwritable_data_directory_is_answered_retryable_and_nothing_is_dropped(tmp_path):
    """Issue 14, must fix 3: the store and the spool cannot write; exporters are told to retry, and
    the export an OTel SDK exporter kept retrying through the fault is stored once it is lifted."""
    collector = CollectorProcess(tmp_path).start()
    try:
        grpc_export(collector, prompt_export())  # the store works
        url = collector.endpoints()["otlp_http"] + "/v1/traces"
        headers = {"Content-Type": "application/x-protobuf"}
        spans = _prompt_spans()
        trace_id = format(spans[0].context.trace_id, "032x")
        results = []
        with unwritable(collector.data_dir):
            with pytest.raises(grpc.RpcError) as refused:
                grpc_export(collector, prompt_export())
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # not INTERNAL: the SDK retries it
            assert "google.rpc.retryinfo-bin" in dict(refused.value.trailing_metadata())
            answer = httpx.post(url, content=prompt_export(), headers=headers, timeout=30)
            assert answer.status_code == 503 and int(answer.headers["Retry-After"]) >= 1

            sdk_exporter = exporter(collector, "http", timeout=300)
            sending = threading.Thread(target=lambda: results.append(sdk_exporter.export(spans)))
            sending.start()

            def refused_again() -> bool:
                metrics = httpx.get(collector.ui + "/metrics", timeout=30).text
                return (metric_value(metrics, "promptprism_collector_exports_total", transport="http",
                                     outcome="backpressure") or 0) >= 2
            wait_until(refused_again, timeout=120, message="the SDK exporter's export was not refused")
        sending.join(timeout=300)
        assert results == [SpanExportResult.SUCCESS]
        assert httpx.get(f"{collector.ui}/api/traces/{trace_id}", timeout=30).status_code == 200
        metrics = httpx.get(collector.ui + "/metrics", timeout=30).text
        assert not metric_value(metrics, "promptprism_collector_exports_total", transport="http", outcome="error")
        assert not metric_value(metrics, "promptprism_collector_exports_total", transport="grpc", outcome="error")
    finally:
        assert collector.stop() == 0
