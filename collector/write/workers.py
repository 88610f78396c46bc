"""Worker processes for the CPU-bound half of an export (``convert``).

One Python process converts one export at a time under one GIL (the
Python walk is the bottleneck, not gRPC or the store: README "The collector",
throughput); worker processes
let every core convert while the collector process keeps what must be one:
the store (chdb allows one data directory per process), deduplication, the
spool and the durable acknowledgement.

Payload bytes go to a worker; Arrow IPC bytes per table come back
(``convert.to_wire``). Both travel through a shared-memory slot rather than
the pool's pipe: the payload is copied into the slot, the worker copies it
out, writes its tables' bytes into the same slot, and the collector copies
them out. Pickled through the pipe, a 20 MB payload cost the worker ~40 ms
of CPU to receive (read in 64 KiB pieces, copied three times), as much as
reassembling it. There is one slot per export allowed in flight, reused
(its pages stay mapped, in the collector and in each worker: ``_attached``);
it grows when a larger export comes. A result larger than its slot comes
back through the pipe as before. Workers are
started with ``spawn``: a forked child would inherit chdb's threads and
locks from the collector process.

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
import queue
import threading
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool

from .._logsafe import RateLimitedLog, describe_exception
from ..otlp import MalformedPayload
from .convert import (
    ENCODING_PROTOBUF,
    KIND_TRACES,
    UNCONVERTIBLE,
    ConvertedExport,
    convert,
    from_slot,
    from_wire,
    to_slot,
    to_wire,
)
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

_OK, _MALFORMED, _FAILED = "ok", "malformed", "failed"
_OK_IN_SLOT = "ok-in-slot"  # the tables' IPC bytes are in the slot: (name, offset, length) each
_NO_SLOT = "no-slot"  # the worker could not open the slot: retryable
# A slot is made at least this large, and grows to a power of two: few re-creations.
MIN_SLOT_BYTES = 1024 * 1024
# Memory a worker keeps after a conversion for the next one (``_memory``): freed
# CPython arenas, and free space at the top of glibc's heap. A 512 × 40 export
# frees ~15 MiB of arenas and as much heap; a worker's resident size stays ~40 MiB
# above what it drops to without this.
WORKER_KEPT_ARENA_BYTES = 64 * 1024 * 1024
WORKER_KEPT_HEAP_BYTES = 64 * 1024 * 1024


# Freed memory the collector's process keeps for reuse (``_memory``, as its ingest workers do):
# each export's payload (~20 MB for 512 spans × 40 blocks) and its tables come and go through the
# gRPC and sink threads, and glibc's defaults hand much of that space back to the kernel at once,
# so the next export faulted it in again, page by page. A real collector sent 32 such exports, 2 in
# flight, three alternating pairs: 6,500–7,200 page faults an export in its process, 5,300–6,300
# with this; its CPU 5–33 ms less an export (of 136–165), its resident size the same within the
# ±50 MiB it varies by from run to run (README "Ingest throughput").
COLLECTOR_KEPT_ARENA_BYTES = 16 * 1024 * 1024
COLLECTOR_KEPT_HEAP_BYTES = 64 * 1024 * 1024


def keep_collector_memory() -> None:
    """In the collector's process (``app.tune_process``): freed memory kept for the next export."""
    if _keep_freed_memory is not None:
        _keep_freed_memory(COLLECTOR_KEPT_ARENA_BYTES, COLLECTOR_KEPT_HEAP_BYTES)


def _start_worker() -> None:
    gc.freeze()
    # Never on its own: a worker's cyclic garbage is collected after each export (_FreedLater).
    gc.disable()
    if _keep_freed_memory is not None:
        _keep_freed_memory(WORKER_KEPT_ARENA_BYTES, WORKER_KEPT_HEAP_BYTES)
    _exit_with_the_collector()
    _LATER.start()


class _FreedLater:
    """What a conversion leaves (the spans, the records, their blocks: some hundreds of thousands
    of objects for a 512 × 40 export) freed by a thread of the worker's own, after the answer,
    and then the worker's cyclic garbage collected.

    Freed where the conversion ends, they cost ~8–10 ms of the worker's time between the tables
    being ready and the answer being sent: time the export waits for its acknowledgement. Handed
    here instead, they are freed once the worker has sent it and waits for its next export (its
    main thread then holds no GIL). The cyclic collector runs here too, and only here: on its own
    it would also run while the export's objects are still alive, between the conversion and the
    answer, and walk every one of them (a conversion leaves ~1 cyclic object; ~17 young-generation
    collections per export found that much, for ~8 % of a conversion); and not while the next
    export is already converting (``_collect``). Without the thread started (a conversion in the
    collector's process, a test), what is handed is freed at once, as before."""

    def __init__(self):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._collections = 0
        self._uncollected = 0  # exports freed since the last collection
        self.converting = 0  # conversions under way in this process (``_converted``)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._free, name="promptprism-worker-free", daemon=True)
            self._thread.start()

    def hand(self, box: list) -> None:
        """``box`` holds the only references left to what it holds: emptied (freed) by the thread."""
        if self._thread is not None:
            self._queue.put(box)

    def _free(self) -> None:
        while True:
            self._queue.get().clear()  # the last references: the objects are freed here
            if self._queue.empty():
                self._collect()

    def _collect(self) -> None:
        # The young generations hold what the export left (~0.1 ms); a full collection walks the
        # worker's every object (~6–12 ms), so only every FULL_COLLECTION_EVERY exports. When the
        # next export is already converting (it was queued), its objects are young too and a
        # collection would walk them all: left for a later export, up to FULL_COLLECTION_EVERY.
        self._uncollected += 1
        if self.converting and self._uncollected < FULL_COLLECTION_EVERY:
            return
        self._uncollected = 0
        self._collections += 1
        gc.collect(2 if self._collections % FULL_COLLECTION_EVERY == 0 else 1)


_LATER = _FreedLater()
FULL_COLLECTION_EVERY = 64


try:  # a conversion's freed memory kept for the next one, not faulted in again (README "Ingest throughput")
    from ._memory import keep_freed_memory as _keep_freed_memory
except ImportError:  # not built: the allocators' defaults
    _keep_freed_memory = None


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
    converted, failure = _converted(kind, payload, encoding, keep_spans=True)
    try:
        return failure or (_OK, to_wire(converted))
    finally:
        box, converted = [converted], None
        _LATER.hand(box)


def _converted(kind: str, payload: bytes, encoding: str, keep_spans: bool = False) -> tuple:
    """``(ConvertedExport, None)``, or ``(None, failure outcome)``.

    The cyclic garbage collector is paused meanwhile: a 512 × 40 export allocates some
    hundreds of thousands of objects, all freed by reference counting (~17 young-generation
    collections per export found ~1 cyclic object each), and those collections cost ~8 % of a
    conversion (~187 instead of ~204 ms, median of 12 interleaved). Whatever cycles a conversion
    leaves are collected once it is back on; in a worker, where it stays off, once the export's
    answer is sent (``_FreedLater``).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    _LATER.converting += 1
    try:
        return convert(kind, payload, encoding, keep_spans), None
    except MalformedPayload as error:
        return None, (_MALFORMED, str(error))
    except Exception as error:  # a bug or a value the columns cannot hold: this export only
        return None, (_FAILED, describe_exception(error))
    finally:
        _LATER.converting -= 1
        if was_enabled:
            gc.enable()


def _convert_in_slot(kind: str, slot_name: str, size: int, encoding: str) -> tuple:
    """Runs in a worker: the payload is the first ``size`` bytes of the shared-memory slot;
    the tables are written into the slot as Arrow IPC streams when they fit, else they go
    back through the pipe. Never raises (as ``_convert_in_worker``)."""
    try:
        slot = _attached(slot_name)
    except OSError as error:  # the slot is gone (the pool closing): retryable, like a lost worker
        return _NO_SLOT, describe_exception(error)
    converted = None
    try:
        view = slot.buf[:size]
        # A traces protobuf payload is decoded where it lies (decode_protobuf reads a view and keeps
        # no reference to it); the other kinds get their own copy.
        in_place = kind == KIND_TRACES and encoding == ENCODING_PROTOBUF
        try:
            converted, failure = _converted(kind, view if in_place else bytes(view), encoding, keep_spans=True)
        finally:
            try:
                view.release()
            except BufferError:  # still referenced (a traceback): released when collected
                pass
        if failure:
            return failure
        wire = to_slot(converted, slot.buf)
        if wire is None:
            return _OK, to_wire(converted)  # larger than the slot: through the pipe
        return _OK_IN_SLOT, wire
    finally:
        # Freed after the answer (a failure's garbage collected there too): the box holds the last reference.
        box, converted = [converted], None
        _LATER.hand(box)


def _attach(name: str) -> shared_memory.SharedMemory:
    # Python 3.11 also registers an attached segment with the resource tracker; a spawned worker
    # shares the collector's tracker, which keeps one record per name: the collector's (it unlinks
    # the segment, and the tracker does if the collector is killed).
    return shared_memory.SharedMemory(name=name)


# In a worker: the slots it has mapped, by name, most recently used last. The collector reuses its
# slots, so a worker maps each once and keeps it mapped, as the collector does: mapped anew for
# every export, its pages were faulted in again (~2,100 faults and ~4.4 ms of a worker's CPU for
# a 20 MB payload and its 7 MB of tables, measured alone). A slot the collector has replaced
# (unlinked; its memory lives on while mapped here) is let go of when the worker is handed a slot
# it has not mapped yet, and the least recently used beyond this many.
WORKER_KEPT_SLOTS = 4
_slots_attached: dict[str, tuple[shared_memory.SharedMemory, int]] = {}


def _attached(name: str) -> shared_memory.SharedMemory:
    """The slot ``name``, mapped once per worker. A kept mapping is used only while the name still
    names that segment (same inode): a new segment the collector made under a name it had used
    and unlinked is mapped anew (where segments are not files under /dev/shm, every export maps its
    slot anew). Raises OSError when there is no such segment."""
    identity = _identity(name)
    kept = _slots_attached.pop(name, None)
    if kept is not None:
        if identity is not None and kept[1] == identity:
            _slots_attached[name] = kept
            return kept[0]
        _let_go(kept[0])
    slot = _attach(name)
    # A new name: the collector may have replaced a slot (a larger export): let go of kept ones it unlinked.
    for other, (_, kept_identity) in list(_slots_attached.items()):
        if _identity(other) != kept_identity:
            _let_go(_slots_attached.pop(other)[0])
    _slots_attached[name] = (slot, -1 if identity is None else identity)
    while len(_slots_attached) > WORKER_KEPT_SLOTS:
        _let_go(_slots_attached.pop(next(iter(_slots_attached)))[0])
    return slot


def _identity(name: str) -> int | None:
    """The inode of the segment ``name`` names now; None when there is none (or no /dev/shm)."""
    try:
        return os.stat(f"/dev/shm/{name.lstrip('/')}").st_ino
    except OSError:
        return None


def _let_go(slot: shared_memory.SharedMemory) -> None:
    try:
        slot.close()
    except BufferError:  # a view of it still referenced (a traceback): unmapped when collected
        pass


class _Slots:
    """Shared-memory segments, one per export in flight, reused; made and unlinked by the collector."""

    def __init__(self, count: int):
        self._lock = threading.Lock()
        self._free: list[shared_memory.SharedMemory | None] = [None] * count
        self._all: set[shared_memory.SharedMemory] = set()
        self._closed = False

    def take(self, size: int) -> shared_memory.SharedMemory:
        with self._lock:
            if self._closed:
                raise Backpressure("the collector is shutting down", WORKER_RETRY_AFTER_SECONDS)
            if not self._free:  # slots of conversions that timed out are not back yet
                raise Backpressure("every ingest worker is busy", WORKER_RETRY_AFTER_SECONDS)
            slot = self._free.pop()
        if slot is None or slot.size < size:
            if slot is not None:
                self._discard(slot)
            capacity = max(MIN_SLOT_BYTES, 1 << max(0, size - 1).bit_length())
            try:
                slot = shared_memory.SharedMemory(create=True, size=capacity)
            except OSError:
                with self._lock:
                    self._free.append(None)
                raise Backpressure("no shared memory for the export", WORKER_RETRY_AFTER_SECONDS) from None
            with self._lock:
                self._all.add(slot)
        return slot

    def give_back(self, slot: shared_memory.SharedMemory) -> None:
        with self._lock:
            if not self._closed:
                self._free.append(slot)
                return
        self._discard(slot)

    def _discard(self, slot: shared_memory.SharedMemory) -> None:
        with self._lock:
            self._all.discard(slot)
        slot.close()
        try:
            slot.unlink()
        except FileNotFoundError:
            pass

    def give_back_later(self, slot: shared_memory.SharedMemory, future) -> None:
        """A slot whose worker did not answer in time: reused once that conversion has ended."""
        future.add_done_callback(lambda _: self.give_back(slot))

    def close(self) -> None:
        """Unlink every slot; one still in use is unlinked when it is given back."""
        with self._lock:
            self._closed = True
            idle = [slot for slot in self._free if slot is not None]
            self._free = []
        for slot in idle:
            self._discard(slot)


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
        self._slots = _Slots(self.max_in_flight)
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
        slot = None
        try:
            executor = self._current()
            slot = self._slots.take(len(payload))
            slot.buf[:len(payload)] = payload
            try:
                future = executor.submit(_convert_in_slot, kind, slot.name, len(payload), encoding)
                outcome = future.result(timeout=CONVERT_TIMEOUT_SECONDS)
            except BrokenProcessPool:
                self._replace(executor)
                raise Backpressure("an ingest worker stopped; retry", WORKER_RETRY_AFTER_SECONDS) from None
            except FutureTimeout:
                # The worker may still write into the slot: it is not reused.
                slot, stuck = None, slot
                self._slots.give_back_later(stuck, future)
                raise Backpressure("the export was not converted in time", WORKER_RETRY_AFTER_SECONDS) from None
            if outcome[0] == _OK_IN_SLOT:
                outcome = _OK, from_slot(outcome[1], slot.buf)
        finally:
            if slot is not None:
                self._slots.give_back(slot)
            with self._lock:
                self._in_flight -= 1
        if outcome[0] == _OK:
            return from_wire(outcome[1])
        if outcome[0] == _NO_SLOT:
            raise Backpressure("an ingest worker could not read the export; retry", WORKER_RETRY_AFTER_SECONDS)
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
        self._slots.close()


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
