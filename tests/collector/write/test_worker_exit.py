"""Ingest workers end with the collector process, even when it is killed with SIGKILL.

Before, a killed collector left its workers waiting on their call queue
forever, and with them multiprocessing's resource tracker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from support import HAS_PROC, children_of, command_line, wait_for_exit

pytestmark = pytest.mark.skipif(not HAS_PROC, reason="reads the process table from /proc")

# A stand-in collector process: starts a pool of two workers, says which, then waits.
PARENT = """
import sys
from promptprism.collector.write.workers import ConversionPool

pool = ConversionPool(2)
pool.start()
pool.convert("traces", b"", "protobuf")  # both workers started and serving
print(" ".join(map(str, pool.worker_pids())), flush=True)
sys.stdin.read()
"""


def test_workers_and_the_resource_tracker_exit_when_the_collector_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        workers = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(workers) == 2, "the stand-in collector did not start its workers"
        helpers = children_of(parent.pid)
        assert set(workers) <= set(helpers)
        assert any("resource_tracker" in command_line(pid) for pid in helpers)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert wait_for_exit(helpers, timeout=30) == [], [command_line(pid) for pid in helpers]
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdin.close()
        parent.stdout.close()


def test_a_worker_started_outside_multiprocessing_watches_nothing():
    from promptprism.collector.write import workers

    workers._exit_with_the_collector()  # this test process has no multiprocessing parent: a no-op
