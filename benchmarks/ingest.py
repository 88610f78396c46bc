"""Ingest throughput: OTLP/gRPC over loopback → durable in the embedded store.

Pre-built, realistic exports (512 spans × 40 block events, half the spans
with ~1 KiB of content per block, 15 span attributes) are sent by a few
client threads over loopback gRPC to three servers running in this process:

1. ``noop``     — a servicer that only parses the protobuf (the ceiling);
2. ``decode``   — parse + decode + reassemble, nothing stored;
3. ``collector``— the real collector: acknowledged = durable (chdb or its spool).

The configurations are interleaved round by round (each round sends the same
exports to each server, in a rotating order), so load from other processes
on a shared machine hits all of them alike. Prints each round's spans/s and
ratios, then the median ratio of collector ÷ noop over the rounds and its
range (goal ≥ 0.35×), and checks that every export the collector
acknowledged is in the store. ``--stages`` prints instead the
single-threaded cost of each stage for one export (the compiled walk when
it is built — what a worker runs —, then the pure-Python parse and decode
it falls back to, reassemble, rows, inserts). ``--cpu`` adds, after the rounds, the CPU time
one export costs each process (this one — the servers and the sending
client — and each ingest worker), for the parse-only servicer and for the
collector: a figure the machine's load disturbs less than throughput.
``--timeline`` adds, after the rounds, two more rounds sent to the collector
alone and prints the last one's timeline: when each export's conversion,
spool write and each group's insert (table by table) began and ended, in ms
from the round's start — where a round's wall time goes, which the CPU
figures do not show.
``--settle`` waits after each collector round, counted in no round, until the
store has run no background merge for 0.3 s. The collector runs in this
process, and without it the merges its INSERTs start take CPU from whichever
configuration runs next — the parse-only servicer's round too, which flatters
the ratio; settled, no round pays for them (they are then in no round's time:
``--cpu`` counts them in the collector's CPU per export).
Run: ``nice python benchmarks/ingest.py [--rounds N] [--batches N] [--stages]``.
``--baseline PATH`` runs it here and in another checkout (with its own
.venv) in alternation (``--rounds`` times) and prints new/old ratios; with
``--cpu`` also of the CPU time per export (the steadier figure).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from promptprism.collector.otlp.traces import decode_protobuf
from promptprism.collector.write.reassemble import reassemble
from promptprism.wire import names

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _baseline import Figure, compare  # noqa: E402

SPANS_PER_BATCH = 512
BLOCKS_PER_SPAN = 40
CONTENT_BYTES = 1024  # per block, on half the spans
CLIENT_THREADS = 2  # exports in flight, as a BatchSpanProcessor per app process × 2 apps
EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LAYERS = ("identity", "instructions", "skills", "memory", "knowledge", "state", "template")
STABILITIES = ("static", "session", "turn")


def _kv(key: str, value) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def build_batch(batch_number: int) -> bytes:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend([_kv("service.name", "bench-app"), _kv("deployment.environment", "prod")])
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name, scope_spans.scope.version = names.TRACER_NAME, "0.1.0"
    now = time.time_ns()
    for number in range(SPANS_PER_BATCH):
        with_content = number % 2 == 0
        blocks, position = [], 0
        for index in range(BLOCKS_PER_SPAN):
            text = (f"[{LAYERS[index % len(LAYERS)]} {index}] " + "Émile aime le thé. " * 60)[:CONTENT_BYTES - 8]
            data = text.encode("utf-8")
            blocks.append((index, text, position, len(data), hashlib.sha256(data).hexdigest()))
            position += len(data)
        prompt_sha = hashlib.sha256(b"".join(b[1].encode() for b in blocks)).hexdigest()
        span = Span(trace_id=hashlib.md5(f"{batch_number}/{number}".encode()).digest(),
                    span_id=hashlib.md5(f"span {batch_number}/{number}".encode()).digest()[:8],
                    name="chat gpt-4o", kind=Span.SPAN_KIND_CLIENT,
                    start_time_unix_nano=now, end_time_unix_nano=now + 900_000_000)
        span.attributes.extend([_kv(key, value) for key, value in (
            (names.GEN_AI_OPERATION_NAME, "chat"), (names.GEN_AI_PROVIDER_NAME, "openai"),
            (names.GEN_AI_REQUEST_MODEL, "gpt-4o"), (names.GEN_AI_USAGE_INPUT_TOKENS, 9000),
            (names.GEN_AI_USAGE_OUTPUT_TOKENS, 120), (names.GEN_AI_CONVERSATION_ID, f"conv-{number % 50}"),
            (names.SCHEMA_VERSION_ATTR, 1), (names.PROMPT_BYTES, position), (names.PROMPT_SHA256, prompt_sha),
            (names.PROMPT_BLOCK_COUNT, BLOCKS_PER_SPAN), (names.PROMPT_MAPPED, True),
            (names.PROMPT_TEMPLATE_NAME, "support"), (names.PROMPT_TEMPLATE_ORIGIN, "builtin"),
            (names.PROCESS_KIND, "channel"), (names.MESSAGE_ID, f"m-{batch_number}-{number}"))])
        for index, text, start, size, digest in blocks:
            event = span.events.add(name=names.EVENT_PROMPT_BLOCK, time_unix_nano=now)
            attributes = [
                _kv(names.BLOCK_INDEX, index), _kv(names.BLOCK_NAME, f"block_{index}"),
                _kv(names.BLOCK_LAYER, LAYERS[index % len(LAYERS)]),
                _kv(names.BLOCK_STABILITY, STABILITIES[index % 3]), _kv(names.BLOCK_SOURCE, "template:support"),
                _kv(names.BLOCK_START, start), _kv(names.BLOCK_END, start + size), _kv(names.BLOCK_SIZE, size),
                _kv(names.BLOCK_SHA256, digest)]
            if with_content:
                attributes.append(_kv(names.BLOCK_CONTENT, text))
            event.attributes.extend(attributes)
        scope_spans.spans.append(span)
    return request.SerializeToString()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def drive(target: str, payloads: list[bytes]) -> float:
    """Send every payload (CLIENT_THREADS in flight); seconds until all are acknowledged."""
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    channel = grpc.insecure_channel(target, options=options)
    call = channel.unary_unary(EXPORT_PATH, request_serializer=None,
                               response_deserializer=ExportTraceServiceResponse.FromString)
    grpc.channel_ready_future(channel).result(timeout=30)
    pending = list(payloads)
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not pending:
                    return
                payload = pending.pop()
            call(payload, timeout=300)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(CLIENT_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    channel.close()
    return elapsed


def baseline_server(handler) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         options=[("grpc.max_receive_message_length", 256 * 1024 * 1024)])
    method = grpc.unary_unary_rpc_method_handler(
        handler, request_deserializer=None, response_serializer=ExportTraceServiceResponse.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": method}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


def noop_handler(payload: bytes, context) -> ExportTraceServiceResponse:
    ExportTraceServiceRequest.FromString(payload)
    return ExportTraceServiceResponse()


def decode_handler(payload: bytes, context) -> ExportTraceServiceResponse:
    reassemble(decode_protobuf(payload).spans)
    return ExportTraceServiceResponse()


def stages(payload: bytes, repeats: int = 3) -> None:
    """Milliseconds per stage for one export, best of ``repeats``, one thread."""
    from promptprism.collector.write import rows
    from promptprism.collector.otlp.traces import compiled_walk, decode_request, parse_protobuf
    from promptprism.collector.store import open_store

    def best(function) -> float:
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            function()
            times.append(time.perf_counter() - started)
        return min(times) * 1000

    request = parse_protobuf(payload)
    decoded = decode_request(request)
    records, _ = reassemble(decoded.spans)
    tables = rows.build_tables(decoded.spans, records)
    timings = {}
    if compiled_walk is not None:  # what a worker runs: the payload's bytes to spans in one compiled pass
        timings["walk (compiled: bytes to spans; parse + decode are the Python path it falls back to)"] = best(
            lambda: decode_protobuf(payload))
    timings.update({"parse": best(lambda: parse_protobuf(payload)), "decode": best(lambda: decode_request(request)),
                    "reassemble": best(lambda: reassemble(decoded.spans)),
                    "rows": best(lambda: rows.build_tables(decoded.spans, records))})
    with tempfile.TemporaryDirectory(prefix="promptprism-bench-stages-") as data_dir:
        store = open_store("embedded", data_dir=data_dir)
        tokens = iter(range(1_000_000))
        for name, table in tables.non_empty():
            timings[f"insert {name}"] = best(lambda: store.insert(name, table, dedup_token=f"stage-{next(tokens)}"))
        store.close()
    print("per export, one thread: " + ", ".join(f"{name} {ms:.0f} ms" for name, ms in timings.items()), flush=True)


def report(label: str, spans: int, seconds: float) -> float:
    rate = spans / seconds
    print(f"  {label:<10} {spans:>6} spans in {seconds:6.2f} s  {rate:>8.0f} spans/s  "
          f"{rate * BLOCKS_PER_SPAN:>9.0f} blocks/s", flush=True)
    return rate


# What --baseline reads from each tree's output (report() and the ratio lines below; the
# spans/s of the first round, and the median ratio — or the one ratio of an older script).
FIGURES = [
    Figure("noop spans/s", r"(?m)^\s*noop\s+\d+ spans in\s+[\d.]+ s\s+(\d+) spans/s", "spans/s", False),
    Figure("decode spans/s", r"(?m)^\s*decode\s+\d+ spans in\s+[\d.]+ s\s+(\d+) spans/s", "spans/s", False),
    Figure("collector spans/s", r"(?m)^\s*collector\s+\d+ spans in\s+[\d.]+ s\s+(\d+) spans/s", "spans/s", False),
    Figure("collector / noop", r"ratio collector/noop\s+(?:median )?([\d.]+)×", "x", False),
]
# With --cpu: the CPU time one export costs, in every process (steadier than throughput on a shared machine).
CPU_FIGURES = [
    Figure("noop cpu/export", r"cpu per export, noop: (\d+) ms", "ms", True),
    Figure("collector cpu/export", r"cpu per export, collector: (\d+) ms", "ms", True),
]
# With --stages: each stage's best-of-three milliseconds for one export, one thread (CPU cost, least noisy).
STAGE_FIGURES = [Figure(stage, rf"[:,] {stage} (\d+) ms", "ms", True)
                 for stage in ("parse", "decode", "reassemble", "rows", "insert requests", "insert blocks")]


def wait_stored(collector, expected: int, timeout: float = 300.0) -> int:
    """Requests of the benchmark's service in the store, once ``expected`` are there (or the time is up).

    The collector runs in this process: its sink counts the requests it has inserted, and that count
    is watched every 2 ms (a store query every 50 ms, as before, added ~25 ms to each collector round on
    average, ~3 % of it); then the store is asked, and its count is the answer."""
    deadline = time.monotonic() + timeout
    while collector.sink.stats()["requests_stored"] < expected:
        if time.monotonic() > deadline:
            break
        time.sleep(0.002)
    while True:
        stored = collector.store.query(
            f"SELECT count() AS n FROM {collector.store.database}.requests WHERE service = 'bench-app'")[0]["n"]
        if stored >= expected or time.monotonic() > deadline:
            return stored
        time.sleep(0.05)


def settle(collector, timeout: float = 60.0, quiet: float = 0.3) -> float:
    """Wait until the store has run no background merge for ``quiet`` seconds (``--settle``); returns
    the seconds waited (at most ``timeout``)."""
    started = quiet_since = time.monotonic()
    while time.monotonic() - started < timeout:
        now = time.monotonic()
        if collector.store.query("SELECT count() AS merges FROM system.merges")[0]["merges"]:
            quiet_since = now
        elif now - quiet_since >= quiet:
            break
        time.sleep(0.01)
    return time.monotonic() - started


def _process_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_export(targets: dict[str, str], collector, payloads: list[bytes], expected: int) -> int:
    """Print the CPU milliseconds one export costs each process, parse-only servicer then collector."""
    pool = collector.grpc.ingest.pool
    workers = pool.worker_pids() if pool is not None else []
    for label in ("noop", "collector"):
        time.sleep(2.0)  # the store's background merges of earlier rounds settle first
        here, there = time.process_time(), [_process_seconds(pid) for pid in workers]
        drive(targets[label], payloads)
        if label == "collector":
            expected += SPANS_PER_BATCH * len(payloads)
            wait_stored(collector, expected)
        parts = {"this process": time.process_time() - here}
        if label == "collector":
            for number, (pid, before) in enumerate(zip(workers, there)):
                parts[f"worker {number + 1}"] = _process_seconds(pid) - before
        total = sum(parts.values())
        print(f"cpu per export, {label}: {total * 1000 / len(payloads):.0f} ms ("
              + ", ".join(f"{name} {seconds * 1000 / len(payloads):.0f}" for name, seconds in parts.items()) + ")",
              flush=True)
    return expected


class Timeline:
    """Times when the collector's stages begin and end (``--timeline``): the collector runs in this
    process, so its conversion, spool write and insert methods are wrapped in place."""

    def __init__(self, collector):
        from promptprism.collector.write.ingest import Ingest
        from promptprism.collector.write.sink import Sink

        self.started = time.perf_counter()
        self.events: list[tuple[float, str, str]] = []
        self._lock = threading.Lock()
        for cls, method, label in ((Ingest, "_convert_now", "convert"), (Sink, "_spool_accept", "spool write"),
                                   (Sink, "_insert", "group insert")):
            setattr(cls, method, self._timed(getattr(cls, method), label))
        insert = collector.store.insert

        def insert_table(table, columns, **options):
            started = time.perf_counter()
            insert(table, columns, **options)
            self.note(f"  insert {table}: {columns.num_rows} rows, {(time.perf_counter() - started) * 1000:.0f} ms")

        collector.store.insert = insert_table

    def _timed(self, function, label: str):
        def timed(*args, **options):
            self.note(f"{label} begins")
            try:
                return function(*args, **options)
            finally:
                self.note(f"{label} ends")
        return timed

    def note(self, what: str) -> None:
        with self._lock:
            self.events.append((time.perf_counter() - self.started, threading.current_thread().name, what))

    def restart(self) -> None:
        with self._lock:
            self.events, self.started = [], time.perf_counter()

    def print(self) -> None:
        threads = {name: f"t{number}" for number, name in enumerate(dict.fromkeys(name for _, name, _ in self.events))}
        for seconds, name, what in self.events:
            print(f"  {seconds * 1000:7.0f} ms  {threads[name]:<4} {what}", flush=True)
        print("  (threads: " + ", ".join(f"{short} {name}" for name, short in threads.items()) + ")", flush=True)


def timeline(collector, target: str, expected: int, batches: int) -> int:
    """Two rounds sent to the collector alone; print the second one's timeline."""
    recorder = Timeline(collector)
    for number in range(2):
        payloads = [build_batch(800_000 + 100 * number + index) for index in range(batches)]
        time.sleep(2.0)  # the background merges of earlier rounds settle first
        recorder.restart()
        seconds = drive(target, payloads)
        recorder.note(f"all {len(payloads)} exports acknowledged ({seconds * 1000:.0f} ms)")
        expected += SPANS_PER_BATCH * len(payloads)
        wait_stored(collector, expected)
        recorder.note("all seen in the store (the sink's count, watched every 2 ms, then the store's)")
    print(f"timeline of a round of {len(payloads)} exports sent to the collector ({CLIENT_THREADS} in flight):",
          flush=True)
    recorder.print()
    return expected


def summary(label: str, ratios: list[float]) -> str:
    return (f"ratio {label:<18} median {statistics.median(ratios):.2f}×  "
            f"(range {min(ratios):.2f}–{max(ratios):.2f}, {len(ratios)} rounds)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None,
                        help="interleaved rounds (default 5); with --baseline, alternating runs per tree (default 3)")
    parser.add_argument("--batches", type=int, default=4, help="exports of 512 spans per server per round (default 4)")
    parser.add_argument("--default-gc", action="store_true", help="keep CPython's GC thresholds for the collector run")
    parser.add_argument("--ingest-workers", type=int, default=None, metavar="N",
                        help="conversion processes for the collector run (default: the collector's; 0 = in-process)")
    parser.add_argument("--cpu", action="store_true",
                        help="after the rounds, the CPU time one export costs each process (noop, collector, workers)")
    parser.add_argument("--timeline", action="store_true",
                        help="after the rounds, when each stage of a collector round begins and ends")
    parser.add_argument("--settle", action="store_true",
                        help="after each collector round, wait (uncounted) until the store has run no merge for "
                             "0.3 s, so that its merges take no CPU from the next configuration's round")
    parser.add_argument("--stages", action="store_true",
                        help="only time each stage on one export (its own chdb store: one per process)")
    parser.add_argument("--baseline", metavar="PATH",
                        help="another checkout (with its .venv) to compare with, run in alternation")
    args = parser.parse_args()
    if args.baseline:
        passed = [f"--batches={args.batches}", *(["--default-gc"] if args.default_gc else []),
                  *(["--settle"] if args.settle else []),
                  *([f"--ingest-workers={args.ingest_workers}"] if args.ingest_workers is not None else []),
                  *(["--stages"] if args.stages else []), *(["--cpu"] if args.cpu and not args.stages else [])]
        figures = STAGE_FIGURES if args.stages else FIGURES + (CPU_FIGURES if args.cpu else [])
        return compare("ingest.py", args.baseline, figures, rounds=args.rounds or 3, arguments=passed)
    args.rounds = args.rounds or 5
    print(f"building {args.rounds} × {args.batches} exports of {SPANS_PER_BATCH} spans × {BLOCKS_PER_SPAN} blocks …",
          flush=True)
    warmup = [build_batch(1_000_000 + number) for number in range(2)]
    if args.stages:
        stages(warmup[0])
        return 0
    # Every round sends new exports to the collector (the same bytes would be
    # deduplicated, not stored again); the baselines get the same ones.
    rounds = [[build_batch(round_number * 1000 + number) for number in range(args.batches)]
              for round_number in range(args.rounds)]
    print(f"export size {len(warmup[0]) / 1e6:.1f} MB; {CLIENT_THREADS} exports in flight", flush=True)

    from promptprism.collector.app import Collector, tune_process
    from promptprism.collector.config import CollectorConfig

    if not args.default_gc:
        tune_process()  # as `promptprism collector` does
    servers = {label: baseline_server(handler) for label, handler in (("noop", noop_handler),
                                                                     ("decode", decode_handler))}
    ratios: dict[str, list[float]] = {"collector/noop": [], "decode/noop": [], "collector/decode": []}
    with tempfile.TemporaryDirectory(prefix="promptprism-bench-") as data_dir:
        config = CollectorConfig.load({"data_dir": data_dir, "otlp_grpc_address": f"127.0.0.1:{free_port()}",
                                       "otlp_http_address": f"127.0.0.1:{free_port()}",
                                       "ui_address": f"127.0.0.1:{free_port()}",
                                       "ingest_workers": args.ingest_workers}, environ={})
        with Collector(config) as collector:
            targets = {label: target for label, (_, target) in servers.items()}
            targets["collector"] = collector.endpoints()["otlp_grpc"].removeprefix("http://")
            print(f"collector: {collector.config.ingest_workers} ingest worker process(es)", flush=True)
            for target in targets.values():
                drive(target, warmup)
            expected = wait_stored(collector, SPANS_PER_BATCH * len(warmup))
            labels = list(targets)
            for round_number, payloads in enumerate(rounds):
                spans = SPANS_PER_BATCH * len(payloads)
                order = labels[round_number % len(labels):] + labels[:round_number % len(labels)]
                print(f"round {round_number + 1}/{len(rounds)}: {' → '.join(order)}", flush=True)
                rates = {}
                for label in order:
                    seconds = drive(targets[label], payloads)
                    if label == "collector":  # until stored, not only acknowledged: a spool backlog counts
                        started = time.perf_counter()
                        expected += spans
                        stored = wait_stored(collector, expected)
                        seconds += time.perf_counter() - started
                        if args.settle:
                            print(f"  (merges settled in {settle(collector):.2f} s, not counted)", flush=True)
                    rates[label] = report(label, spans, seconds)
                ratios["collector/noop"].append(rates["collector"] / rates["noop"])
                ratios["decode/noop"].append(rates["decode"] / rates["noop"])
                ratios["collector/decode"].append(rates["collector"] / rates["decode"])
                print(f"  collector/noop {ratios['collector/noop'][-1]:.2f}×", flush=True)
            if args.cpu:
                extra = [build_batch(900_000 + number) for number in range(max(4, args.batches))]
                expected = cpu_per_export(targets, collector, extra, expected)
                stored = wait_stored(collector, expected)
            if args.timeline:
                expected = timeline(collector, targets["collector"], expected, args.batches)
                stored = wait_stored(collector, expected)
    for server, _ in servers.values():
        server.stop(None)
    print(f"stored requests: {stored} (expected {expected})")
    for label, values in ratios.items():
        print(summary(label, values) + ("  (goal ≥ 0.35×)" if label == "collector/noop" else ""))
    return 0 if stored == expected else 1


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
