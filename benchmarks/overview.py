"""The inspector's ``/overview`` page on the demo store: how long a user waits for it.

    .venv/bin/python benchmarks/overview.py                                   # this tree
    .venv/bin/python benchmarks/overview.py --baseline /path/to/checkout --rounds 3

The demo store (``promptprism demo``: 120 requests over a simulated week) is
built once under ``--store`` by a collector on free ports; every measurement
works on a copy. A collector is started on the copy and ``/overview`` (the
default: the last 7 days) is loaded ``--loads`` times over HTTP: the first
load after the start (what a user sees after the demo), then the median of
the others, wall time and the collector process's CPU. That is done twice:
before the collector's rollup job has run (it waits a minute after the start,
so straight after the demo every hour is read raw) and after one run of it
(whole hours from the hourly rollups, the edges raw). ClickHouse's query
condition cache is off, as in ``reads.py``: 26.x caches filter results, which
would flatter every load but the first.

``--baseline PATH`` runs this same script with the other checkout's ``.venv``
(so its code) in alternating rounds and prints the ratios new/old; its
``--store`` must be one both schemas accept (a checkout of main, not an old one).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "tests"))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _collector(data_dir: str):
    from support import free_port

    from promptprism.collector.app import Collector
    from promptprism.collector.config import CollectorConfig

    flags = {"data_dir": data_dir, "otlp_grpc_address": f"127.0.0.1:{free_port()}",
             "otlp_http_address": f"127.0.0.1:{free_port()}", "ui_address": f"127.0.0.1:{free_port()}"}
    return Collector(CollectorConfig.load(flags, environ={})).start()


def build(store: str) -> None:
    """The demo's traffic, sent by ``promptprism demo`` to a collector on ``store``."""
    collector = _collector(store)
    try:
        environment = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "PROMPTPRISM_"))}
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.endpoints()["otlp_http"]
        environment["PROMPTPRISM_URL"] = collector.endpoints()["ui"]
        subprocess.run([os.path.join(os.path.dirname(sys.executable), "promptprism"), "demo"], env=environment,
                       check=True, stdout=subprocess.DEVNULL)
        time.sleep(3)  # the last exports are written
    finally:
        collector.stop()


def _loads(url: str, loads: int) -> tuple[float, float, float]:
    """First load's wall seconds, then the median wall and CPU seconds of the others."""
    walls, cpus = [], []
    for _ in range(loads):
        cpu, started = _cpu(), time.perf_counter()
        with urllib.request.urlopen(url, timeout=120) as response:
            assert response.status == 200 and b"Prompt growth" in response.read()
        walls.append(time.perf_counter() - started)
        cpus.append(_cpu() - cpu)
    return walls[0], statistics.median(walls[1:]), statistics.median(cpus[1:])


def measure(store: str, loads: int) -> None:
    from promptprism.collector.read.insight import rollups

    scratch = tempfile.mkdtemp(prefix="promptprism-overview-")
    try:
        copy = os.path.join(scratch, "store")
        shutil.copytree(store, copy, symlinks=True)  # the database directories are relative links
        collector = _collector(copy)
        try:
            # The query condition cache would make every load after the first look cheap.
            collector.store.execute("SET use_query_condition_cache = 0")
            url = collector.endpoints()["ui"] + "/overview"
            first, median, cpu = _loads(url, loads)
            print(f"raw first load {first:.3f} s")
            print(f"raw page {median:.3f} s (cpu {cpu:.3f} s)")
            rollups.run_once(collector.store)
            first, median, cpu = _loads(url, loads)
            print(f"rolled first load {first:.3f} s")
            print(f"rolled page {median:.3f} s (cpu {cpu:.3f} s)")
        finally:
            collector.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def compare(store: str, baseline: str, rounds: int, loads: int) -> None:
    """Alternate this tree and ``baseline`` (this script, each tree's own .venv and code)."""
    import re

    # (figure, the pattern of its seconds in the output)
    figures = {"raw first load": r"^raw first load ([0-9.]+) s", "raw page": r"^raw page ([0-9.]+) s",
               "raw page cpu": r"^raw page .*cpu ([0-9.]+) s", "rolled first load": r"^rolled first load ([0-9.]+) s",
               "rolled page": r"^rolled page ([0-9.]+) s", "rolled page cpu": r"^rolled page .*cpu ([0-9.]+) s"}
    values: dict[str, list[tuple[float, float]]] = {figure: [] for figure in figures}
    arguments = [os.path.abspath(__file__), "--store", store, "--loads", str(loads)]
    print(f"overview: this tree {HERE} against {baseline}, {rounds} alternating rounds", flush=True)
    for number in range(rounds):
        outputs = []
        for tree in (HERE, os.path.abspath(baseline)):
            completed = subprocess.run([os.path.join(tree, ".venv", "bin", "python"), *arguments], cwd=tree,
                                       capture_output=True, text=True, check=True)
            outputs.append(completed.stdout)
        line = []
        for figure, pattern in figures.items():
            new, old = (float(re.search(pattern, output, re.M).group(1)) for output in outputs)
            values[figure].append((new, old))
            line.append(f"{figure} {new:.3f}/{old:.3f}")
        print(f"  round {number + 1}: " + "; ".join(line), flush=True)
    print("medians (new / old; the ratio is the median of per-round ratios):")
    for figure in figures:
        pairs = values[figure]
        print(f"  {figure:<18} new {statistics.median(p[0] for p in pairs):.3f} s  "
              f"old {statistics.median(p[1] for p in pairs):.3f} s  "
              f"ratio {statistics.median(new / old for new, old in pairs):.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default=os.path.join(tempfile.gettempdir(), "promptprism-overview-demo"))
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--baseline", help="another checkout (with its .venv) to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    if not os.path.isdir(arguments.store):
        print(f"building the demo store in {arguments.store}", flush=True)
        build(arguments.store)
    if arguments.baseline:
        compare(arguments.store, arguments.baseline, arguments.rounds, arguments.loads)
    else:
        measure(arguments.store, arguments.loads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
