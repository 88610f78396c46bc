"""Ingest under read load: does the read side starve ingestion? (issue 14, must fix 5)

A real collector (embedded store in a temporary directory) first takes a
preload of exports, so reads have rows to scan; then ingest is measured
twice for the same number of exports, over loopback gRPC:

1. ``unloaded`` — ingest alone;
2. ``loaded``   — ingest while READERS client threads loop over ``/overview``,
   ``/api/requests?limit=1000`` and ``/api/insight/cache``.

The two alternate for ``--rounds`` rounds (so a change in the machine's load
falls on both); prints spans/s of each, the median and range of the ratio
loaded / unloaded (goal ≥ 0.70) and what the readers got (answers by
status: a busy read side answers 503).
Run: ``python benchmarks/read_load.py [--rounds N] [--exports N] [--read-share S]``
(``--read-share 1``: no read-time budget, to compare).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ingest import SPANS_PER_BATCH, build_batch, drive, free_port  # noqa: E402

from promptprism.collector import read_limits  # noqa: E402
from promptprism.collector.app import Collector  # noqa: E402
from promptprism.collector.config import CollectorConfig  # noqa: E402

READERS = 4
READ_PATHS = ("/overview", "/api/requests?limit=1000", "/api/insight/cache")


def reader(ui: str, offset: int, stop, answers) -> None:
    """One reading client: loops over READ_PATHS until told to stop, counting answers by status."""
    with httpx.Client(base_url=ui, timeout=120) as client:
        index = offset
        while not stop.is_set():
            path = READ_PATHS[index % len(READ_PATHS)]
            index += 1
            try:
                outcome = client.get(path).status_code
            except httpx.HTTPError as error:
                outcome = type(error).__name__
            key = (path.split("?")[0], outcome)
            answers[key] = answers.get(key, 0) + 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exports", type=int, default=12, help="exports per measured run")
    parser.add_argument("--preload", type=int, default=8, help="exports stored before measuring")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of (unloaded, loaded), interleaved")
    parser.add_argument("--running-reads", type=int, default=read_limits.MAX_RUNNING_READS,
                        help="read requests the collector runs at once (read_limits.MAX_RUNNING_READS)")
    parser.add_argument("--read-share", type=float, default=read_limits.READ_TIME_SHARE,
                        help="share of the time sustained reads may run (read_limits.READ_TIME_SHARE; 1 = no budget)")
    arguments = parser.parse_args()
    read_limits.MAX_RUNNING_READS = arguments.running_reads
    read_limits.READ_TIME_SHARE = arguments.read_share
    ratios, rates, all_answers = [], [], {}
    with tempfile.TemporaryDirectory() as directory:
        config = CollectorConfig.load({
            "data_dir": directory, "otlp_grpc_address": f"127.0.0.1:{free_port()}",
            "otlp_http_address": f"127.0.0.1:{free_port()}", "ui_address": f"127.0.0.1:{free_port()}"},
            environ={})
        with Collector(config) as collector:
            target = collector.endpoints()["otlp_grpc"].removeprefix("http://")
            ui = collector.endpoints()["ui"]
            number = iter(range(1_000_000))
            drive(target, [build_batch(next(number)) for _ in range(arguments.preload)])

            def run() -> float:
                payloads = [build_batch(next(number)) for _ in range(arguments.exports)]
                seconds = drive(target, payloads)
                return arguments.exports * SPANS_PER_BATCH / seconds

            def loaded_run() -> float:
                # The readers are other processes, as real dashboards and browsers are:
                # their own Python work must not count against the collector's.
                stop = multiprocessing.Event()
                answers = multiprocessing.Manager().dict()
                readers = [multiprocessing.Process(target=reader, args=(ui, offset, stop, answers))
                           for offset in range(READERS)]
                for process in readers:
                    process.start()
                time.sleep(2.0)  # the readers are busy before ingest starts
                try:
                    return run()
                finally:
                    stop.set()
                    for process in readers:
                        process.join()
                    for key, count in dict(answers).items():
                        all_answers[key] = all_answers.get(key, 0) + count

            # Interleaved, so a change in the machine's load falls on both sides.
            for index in range(arguments.rounds):
                unloaded = run()
                loaded = loaded_run()
                time.sleep(1.0)  # the last reads finish before the next unloaded run
                rates.append((unloaded, loaded))
                ratios.append(loaded / unloaded)
                print(f"round {index + 1}: unloaded {unloaded:6.0f} spans/s, loaded {loaded:6.0f} spans/s, "
                      f"ratio {loaded / unloaded:.2f}", flush=True)
    print(f"{READERS} readers, {arguments.running_reads} read(s) at once, read share {arguments.read_share}")
    print(f"ratio loaded / unloaded: median {statistics.median(ratios):.2f}, "
          f"range {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} rounds  (goal >= 0.70)")
    for (path, status), count in sorted(all_answers.items(), key=str):
        print(f"  reads {path} -> {status}: {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
