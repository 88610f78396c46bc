"""A real collector in its own process: CPU time and page faults per export, by process and thread.

``ingest.py`` runs the collector inside the benchmark's process, beside the
servers it compares it with; this starts ``promptprism collector`` as users
do (its CLI, its process settings, its ingest workers), sends it the same
exports as ``ingest.py`` (512 spans × 40 blocks, ~20 MB each) over loopback
gRPC, 2 in flight, and reads from ``/proc`` what each export cost: the
collector's process (user and system CPU, minor page faults, resident size
at the end), each of its threads grouped by their kernel name (Python's
threads — the gRPC handlers, the sink — keep the process's, ``promptprism``;
chdb's are ``ThreadPool`` and ``MergeMutate``, gRPC's core ``event_engine``)
and each ingest worker.

``--baseline PATH`` alternates runs with the collector of another checkout
(its ``.venv/bin/promptprism``; ``make .venv/.installed`` there first),
the same client and exports, and prints the new/old ratio of each figure's
median. Absolute times vary with the machine's load; the ratios of
alternated runs much less.

Run: ``nice python benchmarks/collector_process.py [--exports N] [--runs N] [--baseline PATH]``.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ingest import CLIENT_THREADS, build_batch, drive, free_port  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP_EXPORTS = 2
START_TIMEOUT_SECONDS = 60.0
SETTLE_SECONDS = 4.0  # after the last acknowledgement: the group's INSERTs and the merges they start


def _stat(path: str) -> tuple[str, list[str]]:
    with open(path) as stat:
        text = stat.read()
    return text[text.index("(") + 1:text.rindex(")")], text.rsplit(")", 1)[1].split()


def _cpu_and_faults(fields: list[str]) -> tuple[int, int, int]:
    return int(fields[11]), int(fields[12]), int(fields[7])  # utime, stime (ticks), minflt


def _threads(pid: int) -> collections.Counter:
    """CPU ticks and minor faults of a process's threads, summed by name (digits dropped)."""
    found: collections.Counter = collections.Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name, fields = _stat(f"/proc/{pid}/task/{tid}/stat")
        except OSError:  # ended meanwhile
            continue
        group = "".join(ch for ch in name if not ch.isdigit()).rstrip("_-")
        user, system, faults = _cpu_and_faults(fields)
        found[(group, "cpu")] += user + system
        found[(group, "faults")] += faults
    return found


def _children(pid: int) -> list[int]:
    listed = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout
    return [int(number) for number in listed.split()]


def _wait_listening(port: int, process: subprocess.Popen) -> None:
    import socket

    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the collector exited with status {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit("the collector did not listen in time")


def run_once(executable: str, warmup: list[bytes], exports: list[bytes]) -> dict[str, float]:
    """One collector process from ``executable``: its figures per export."""
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="promptprism-bench-") as data_dir:
        grpc_port, http_port, ui_port = free_port(), free_port(), free_port()
        process = subprocess.Popen(
            [executable, "collector", "--data-dir", data_dir, "--otlp-grpc-address", f"127.0.0.1:{grpc_port}",
             "--otlp-http-address", f"127.0.0.1:{http_port}", "--ui-address", f"127.0.0.1:{ui_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_listening(grpc_port, process)
            target = f"127.0.0.1:{grpc_port}"
            drive(target, warmup)  # starts the workers, fills the allocators' caches
            time.sleep(SETTLE_SECONDS)
            pids = [process.pid, *_children(process.pid)]
            before = {pid: _cpu_and_faults(_stat(f"/proc/{pid}/stat")[1]) for pid in pids}
            threads_before = _threads(process.pid)
            seconds = drive(target, exports)
            time.sleep(SETTLE_SECONDS)
            after = {pid: _cpu_and_faults(_stat(f"/proc/{pid}/stat")[1]) for pid in pids}
            threads_after = _threads(process.pid)
            with open(f"/proc/{process.pid}/status") as status:
                resident_kib = int(status.read().split("VmRSS:")[1].split()[0])
        finally:
            process.send_signal(2)
            process.wait(60)
    count, tick_ms = len(exports), 1000 / os.sysconf("SC_CLK_TCK")
    figures["acknowledged, wall ms/export"] = seconds * 1000 / count
    user, system, faults = (after[process.pid][n] - before[process.pid][n] for n in range(3))
    figures["collector process, user ms/export"] = user * tick_ms / count
    figures["collector process, system ms/export"] = system * tick_ms / count
    figures["collector process, page faults/export"] = faults / count
    figures["collector process, resident MiB at the end"] = resident_kib / 1024
    workers = [pid for pid in pids[1:] if after[pid][0] + after[pid][1] > before[pid][0] + before[pid][1]]
    figures["ingest workers, CPU ms/export"] = sum(
        (after[pid][0] + after[pid][1] - before[pid][0] - before[pid][1]) for pid in workers) * tick_ms / count
    for group, kind in sorted({key for key in threads_after}):
        if kind != "cpu":
            continue
        cpu = (threads_after[(group, "cpu")] - threads_before[(group, "cpu")]) * tick_ms / count
        thread_faults = (threads_after[(group, "faults")] - threads_before[(group, "faults")]) / count
        if cpu >= 1 or thread_faults >= 50:
            figures[f"  threads {group}, CPU ms/export"] = cpu
            figures[f"  threads {group}, page faults/export"] = thread_faults
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exports", type=int, default=32, help="exports measured per run (default 32)")
    parser.add_argument("--runs", type=int, default=3, help="runs per collector (default 3)")
    parser.add_argument("--baseline", metavar="PATH", help="another checkout whose collector alternates with this one")
    args = parser.parse_args()
    collectors = {"new": os.path.join(HERE, ".venv", "bin", "promptprism")}
    if args.baseline:
        collectors["old"] = os.path.join(os.path.abspath(args.baseline), ".venv", "bin", "promptprism")
    for label, executable in collectors.items():
        if not os.path.exists(executable):
            raise SystemExit(f"{executable} not found: run `make .venv/.installed` in its checkout first")
    print(f"building {WARMUP_EXPORTS} + {args.exports} exports …", flush=True)
    warmup = [build_batch(2_000_000 + number) for number in range(WARMUP_EXPORTS)]
    exports = [build_batch(3_000_000 + number) for number in range(args.exports)]
    print(f"export size {len(exports[0]) / 1e6:.1f} MB; {CLIENT_THREADS} in flight; "
          f"{args.runs} run(s) per collector, alternating", flush=True)
    results: dict[str, list[dict[str, float]]] = {label: [] for label in collectors}
    for run in range(args.runs):
        for label, executable in collectors.items():
            figures = run_once(executable, warmup, exports)
            results[label].append(figures)
            print(f"run {run + 1} {label}: wall {figures['acknowledged, wall ms/export']:.0f} ms/export, "
                  f"collector process {figures['collector process, user ms/export']:.0f} user + "
                  f"{figures['collector process, system ms/export']:.0f} system ms, "
                  f"{figures['collector process, page faults/export']:.0f} faults; "
                  f"workers {figures['ingest workers, CPU ms/export']:.0f} ms", flush=True)
    names = list(dict.fromkeys(name for runs in results.values() for figures in runs for name in figures))
    header = "medians" + (" (new / old, and new ÷ old)" if args.baseline else "")
    print(header)
    for name in names:
        medians = {label: statistics.median(figures.get(name, 0.0) for figures in runs)
                   for label, runs in results.items()}
        line = f"  {name:<52} {medians['new']:9.1f}"
        if args.baseline:
            line += f" / {medians['old']:9.1f}"
            if medians["old"]:
                line += f"   {medians['new'] / medians['old']:.2f}×"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
