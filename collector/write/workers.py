"""Worker processes for the CPU-bound half of an export (``convert``).

One Python process converts one export at a time under one GIL (the
Python walk is the bottleneck, not gRPC or the store: README "The collector",
throughput); worker processes
let every core convert while the collector process keeps what must be one:
the store (chdb allows one data directory per process), deduplication, the
spool and the durable acknowledgement.

Payload bytes go to a worker; Arrow IPC bytes per table come back
(``convert.to_wire``). Workers are started with ``spawn``: a forked child
would inherit chdb's threads and locks from the collector process.

The pool is process-wide, created on first use and reused by every
``Collector`` in the process (tests start many), and shut down at exit.

Failure handling:
- a malformed payload comes back as its message (for the sender) and its
  summary (for the log): ``MalformedPayload`` as in-process;
- a worker that dies (killed, out of memory) fails the exports it held with
  ``Backpressure`` — retryable — and the pool is replaced for the next ones;
- past ``MAX_QUEUED_EXPORTS_PER_WORKER`` waiting exports per worker, new ones
  get ``Backpressure`` instead of queueing without bound.
"""

from __future__ import annotations

import atexit
import gc
import logging
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool

from .._logsafe import RateLimitedLog, describe_exception
from ..otlp import MalformedPayload
from .convert import UNCONVERTIBLE, ConvertedExport, convert, from_wire, to_wire
from .sink import Backpressure

logger = logging.getLogger(__name__)

START_METHOD = "spawn"  # never fork: the collector process holds chdb's threads and locks
# Exports waiting for a worker beyond those being converted, per worker.
# Each holds its payload (up to the receive limit) in memory; two keep every
# worker busy between one answer and the next request while bounding memory.
MAX_QUEUED_EXPORTS_PER_WORKER = 2
# A conversion not back by then is answered retryable (a stuck worker must
# not hold a receiver thread forever); matches the sink's accept timeout.
CONVERT_TIMEOUT_SECONDS = 120.0
# What a client is told to wait after a worker died or the pool was full:
# workers restart in about a second.
WORKER_RETRY_AFTER_SECONDS = 1.0
# Worker GC threshold, as app.GC_GENERATION0_THRESHOLD for the collector
# process: a conversion allocates tens of thousands of short-lived objects.
WORKER_GC_GENERATION0_THRESHOLD = 50_000

_OK, _MALFORMED, _FAILED = "ok", "malformed", "failed"


def _start_worker() -> None:
    gc.freeze()
    _, generation1, generation2 = gc.get_threshold()
    gc.set_threshold(WORKER_GC_GENERATION0_THRESHOLD, generation1, generation2)
    _exit_with_the_collector()


def _exit_with_the_collector() -> None:
    """A worker ends when the collector process does, even when it was killed (SIGKILL, OOM).

    Nothing else would end it: it waits on its call queue forever, and it
    keeps multiprocessing's resource tracker alive too. ``parent_process()``
    holds the read end of a pipe whose write end only the collector process
    has, so its ``join`` returns exactly when that process is gone. (Linux's
    PR_SET_PDEATHSIG would fire when the *thread* that started the worker
    ends, and the pool starts workers from receiver threads.)
    """
    parent = multiprocessing.parent_process()
    if parent is None:  # not started by multiprocessing: nothing to watch
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="promptprism-worker-parent-watch", daemon=True).start()


def _ready() -> bool:
    return True


def _convert_in_worker(kind: str, payload: bytes, encoding: str) -> tuple:
    """Runs in a worker. Never raises: an exception's text may quote the
    payload and the pool would pickle it with its traceback."""
    try:
        return _OK, to_wire(convert(kind, payload, encoding))
    except MalformedPayload as error:
        return _MALFORMED, str(error)
    except Exception as error:  # a bug or a value the columns cannot hold: this export only
        return _FAILED, describe_exception(error)


class ConversionPool:
    """``workers`` processes converting exports; thread-safe."""

    def __init__(self, workers: int):
        if workers < 1:
            raise ValueError("a conversion pool needs at least one worker")
        self.workers = workers
        self.max_in_flight = workers * (1 + MAX_QUEUED_EXPORTS_PER_WORKER)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._executor: ProcessPoolExecutor | None = None
        self._closed = False
        self._failures = RateLimitedLog(logger)  # a client can send such payloads in a loop
        self.restarts = 0

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def start(self) -> None:
        """Start the worker processes now rather than on the first export."""
        executor = self._current()
        for _ in range(self.workers):
            executor.submit(_ready)

    def worker_pids(self) -> list[int]:
        """Process ids of the current workers (tests kill one)."""
        executor = self._current()
        return list((executor._processes or {}).keys())  # no public accessor in concurrent.futures

    def convert(self, kind: str, payload: bytes, encoding: str) -> ConvertedExport:
        """Convert in a worker. Raises MalformedPayload or Backpressure."""
        with self._lock:
            if self._in_flight >= self.max_in_flight:
                raise Backpressure("every ingest worker is busy", WORKER_RETRY_AFTER_SECONDS)
            self._in_flight += 1
        try:
            executor = self._current()
            try:
                future = executor.submit(_convert_in_worker, kind, payload, encoding)
                outcome = future.result(timeout=CONVERT_TIMEOUT_SECONDS)
            except BrokenProcessPool:
                self._replace(executor)
                raise Backpressure("an ingest worker stopped; retry", WORKER_RETRY_AFTER_SECONDS) from None
            except FutureTimeout:
                raise Backpressure("the export was not converted in time", WORKER_RETRY_AFTER_SECONDS) from None
        finally:
            with self._lock:
                self._in_flight -= 1
        if outcome[0] == _OK:
            return from_wire(outcome[1])
        if outcome[0] == _MALFORMED:
            raise MalformedPayload(outcome[1])
        self._failures.error("an ingest worker failed to convert an export: %s", outcome[1])
        # The payload's own values made the conversion fail: sending it again fails
        # again, so it is refused as unreadable (400 / INVALID_ARGUMENT), not INTERNAL.
        raise MalformedPayload(UNCONVERTIBLE)

    def _current(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise Backpressure("the collector is shutting down", WORKER_RETRY_AFTER_SECONDS)
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    max_workers=self.workers, mp_context=multiprocessing.get_context(START_METHOD),
                    initializer=_start_worker)
            return self._executor

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        """Drop a broken executor (once, whichever thread sees it first); the next export starts a new one."""
        with self._lock:
            if self._executor is not broken:
                return
            self._executor = None
            self.restarts += 1
        logger.warning("an ingest worker process stopped; starting new workers")
        broken.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)


_pools: dict[int, ConversionPool] = {}
_pools_lock = threading.Lock()


def shared_pool(workers: int) -> ConversionPool:
    """The process-wide pool of ``workers`` processes, created on first use."""
    with _pools_lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ConversionPool(workers)
        return pool


@atexit.register
def close_pools() -> None:
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()
