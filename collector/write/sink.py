"""The write path: accepted batches → ClickHouse, or → the on-disk spool.

``Sink.accept`` returns only once a batch is durable: inserted into the
store, or written (fsync'ed) to the spool under ``data_dir``. Every INSERT
costs ~30 ms of CPU whatever its size (README "The collector", throughput:
eight exports in one INSERT cost 41 ms instead of 8 × 32), so inserts are grouped:

- when the sink is idle and no other export is being converted, the writer
  thread inserts the batch at once (one insert per table) and the accept
  returns after the insert: a lone client sees its rows in the store as soon
  as it is answered;
- under load — another export being converted (``converting``), the writer
  busy inserting, or spooled batches waiting — the receiver's thread writes
  its batch to the spool and returns (durable: the OTLP contract allows
  acknowledging there), and the replay thread inserts whatever the spool
  holds as one group (group commit), after waiting up to
  ``SPOOL_GROUP_LINGER_SECONDS`` for it to fill — only while other exports
  are on their way in (``arriving``: being converted, or converted and being
  accepted): with none, nothing else is coming, and it inserts at once. Rows
  acknowledged this way reach the store that much later. The replay takes
  the tables of files this process wrote from memory
  (``spool.MAX_KEPT_BYTES``), not from disk.

The same replay thread moves batches spooled while the store was unreachable
into it when it is back, and deletes each file only after its insert
succeeded (a group's intent, see ``spool``, keeps a restart from inserting a
file twice). Past the memory or spool bounds ``accept`` raises
``Backpressure`` and the receiver answers with OTLP's retryable codes.

Idempotence: every insert carries an ``insert_deduplication_token`` derived
from the batches' ``dedup_token``s (the same group, e.g. a spool replay, is
dropped by ClickHouse), and the tokens of batches made durable recently are
remembered, so a batch re-sent after a timeout is acknowledged without
writing it again, whatever group it would have landed in.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from .._logsafe import describe_exception, describe_store_error
from ..store.base import Store, StoreError, StoreUnavailable
from .convert import ConvertedExport
from .rows import TableSet, merge_tables
from .spool import Spool, SpoolCorrupt, SpooledGroup, SpoolFull

logger = logging.getLogger(__name__)

# One group (one insert per table) holds at most this many spans: at the
# ~440k rows/s chdb inserts, 20k spans and their blocks stay well under a
# second of insert work, so no accept waits long behind a big group.
MAX_GROUP_SPANS = 20_000
# …and at most this much estimated payload, bounding the Arrow copy of a group:
# eight 512-span exports of the ingest benchmark (~15 MB of tables each; 64 MB
# held four). Within the spool's memory (spool.MAX_KEPT_BYTES) and the sink's.
MAX_GROUP_BYTES = 128 * 1024 * 1024
# After the first batch arrives, wait this long for others to share its
# inserts: a fraction of one insert's ~7 ms, so a lone batch barely notices.
GROUP_LINGER_SECONDS = 0.002
# A group's request tables, inserted one after another on the store's first
# lane in `rows.TABLES` order: text before the rows that point at it, a
# document before its request. The others (`otel_traces`, a logs or metrics
# export's tables) point at nothing: on a store with two insert lanes they go
# on the second, beside them (README "Ingest throughput").
FIRST_LANE_TABLES = frozenset(("contents", "tools", "request_docs", "requests"))
# Accepted but not yet durable: the memory bound. A receiver past it gets
# Backpressure instead of the process growing without limit.
MAX_PENDING_BATCHES = 1024
MAX_PENDING_BYTES = 256 * 1024 * 1024
# Spool bounds (per collector): a day of moderate traffic while ClickHouse
# is down, without filling a small disk.
DEFAULT_SPOOL_MAX_BYTES = 2 * 1024 * 1024 * 1024
DEFAULT_SPOOL_MAX_FILES = 100_000
# Tokens of batches made durable recently: an exporter retries within
# seconds to minutes, far fewer batches than this. ~100 bytes each.
RECENT_BATCH_TOKENS = 65_536
# (day, content sha256) of content written recently — the key contents_table
# writes under (rows.content_sha256): a static system prompt sent
# 10,000 times a day is written once. ~150 bytes each, ~15 MB at most.
RECENT_CONTENT_KEYS = 100_000
# While the store is down, try it again after this long, doubling up to the
# maximum: fast recovery from a blip, little noise during an outage.
STORE_RETRY_INITIAL_SECONDS = 0.5
STORE_RETRY_MAX_SECONDS = 15.0
# How often the replay thread looks at the spool when nothing woke it.
REPLAY_POLL_SECONDS = 1.0
# Under load, the replay thread waits this long after the oldest spooled batch
# was written before inserting, so that several exports share each INSERT
# (eight cost ~41 ms of CPU where one costs ~32 ms). It is how much later
# rows acknowledged from the spool appear in the store; far below an
# exporter's timeout, and the spool is durable meanwhile. Longer than one
# 512-span export's conversion on a busy 2-core machine (~0.3-0.5 s), so that
# the exports converted meanwhile join the group (0.25 s: groups of one). At
# 0.5 s, 26 exports made 15 groups (measured on benchmarks/ingest.py's
# traffic); at 1 s, rounds of 8 exports made 2-4 groups instead of 5-6, for
# ~1.2x the throughput until stored (rounds alternating the two in one process).
SPOOL_GROUP_LINGER_SECONDS = 1.0
# …unless this much is waiting already: a group that size amortizes the INSERT well.
SPOOL_GROUP_FULL_BYTES = MAX_GROUP_BYTES
# A starting collector first replays what an earlier run left in the spool,
# for at most this long, so that what it acknowledged is readable once it
# answers /healthz; the rest follows in the background.
STARTUP_REPLAY_SECONDS = 30.0
# An accept that is not durable by then is answered retryable; a later
# write of the same batch is harmless (deduplicated).
ACCEPT_TIMEOUT_SECONDS = 120.0
# What a receiver tells the client to wait when we push back.
BACKPRESSURE_RETRY_AFTER_SECONDS = 5.0
# Spans a spool file is assumed to hold when grouping files (their counts
# are only known once read): one SDK batch (OTEL_BSP_MAX_EXPORT_BATCH_SIZE).
SPOOL_FILE_SPANS_GUESS = 512


class Backpressure(Exception):
    """The batch was not accepted: store down and spool full, or memory bound reached."""

    def __init__(self, message: str, retry_after_seconds: float = BACKPRESSURE_RETRY_AFTER_SECONDS):
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


def group_token(batch_tokens: list[str]) -> str:
    """The insert_deduplication_token of a group: the same batches → the same token."""
    return hashlib.sha256("\n".join(sorted(batch_tokens)).encode("utf-8")).hexdigest()


class _Recent:
    """A bounded set that forgets the oldest entries first."""

    def __init__(self, limit: int):
        self.limit = limit
        self._items: OrderedDict = OrderedDict()

    def __contains__(self, item) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item) -> None:
        self._items[item] = None
        self._items.move_to_end(item)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)


@dataclass
class _Ticket:
    batch: ConvertedExport
    token: str
    size: int
    rows: int
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    finished: bool = False

    def finish(self, error: BaseException | None = None) -> None:
        """The outcome; the waiting accept learns it at ``release``, once the writer is idle again."""
        self.error = error
        self.finished = True

    def release(self) -> None:
        self.done.set()


class Sink:
    def __init__(self, store: Store, spool: Spool):
        self.store = store
        self.spool = spool
        self._condition = threading.Condition()
        self._queue: list[_Ticket] = []
        self._pending_bytes = 0
        self._closing = False
        self._writer_busy = False  # inserting a group: later accepts go to the spool
        self._state_lock = threading.Lock()  # recent sets, store health, counters
        self._replay_lock = threading.Lock()  # one replay pass at a time
        self._replay_wake = threading.Event()
        self._recent_batches = _Recent(RECENT_BATCH_TOKENS)
        self._recent_contents = _Recent(RECENT_CONTENT_KEYS)
        self._converting = 0  # exports being converted now (``converting``): the next accept goes to the spool
        self._arriving = 0  # exports converted or accepted now (``arriving``): the replay lingers only for them
        self._store_down_until = 0.0
        self._retry_delay = STORE_RETRY_INITIAL_SECONDS
        self._counters: dict[str, float] = dict.fromkeys((
            "batches_accepted", "batches_duplicate", "batches_spooled", "batches_replayed",
            "spans_received", "spans_stored", "requests_stored", "contents_written",
            "inserts", "insert_seconds_total", "insert_seconds_last", "store_unavailable",
            "store_errors", "backpressure", "spool_corrupt", "groups_written", "batches_spooled_under_load",
            "log_records_received", "genai_events_stored", "log_records_stored", "metric_points_stored"), 0)
        self._second_lane = (
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="promptprism-sink-lane")
            if store.insert_lanes > 1 else None)
        self._writer = threading.Thread(target=self._write_loop, name="promptprism-sink-writer", daemon=True)
        self._replayer = threading.Thread(target=self._replay_loop, name="promptprism-sink-replay", daemon=True)
        self._writer.start()
        self._replayer.start()

    # --- the receiver's side -----------------------------------------------

    def accept(self, batch: ConvertedExport) -> None:
        """Return once ``batch`` is durable; raise Backpressure (retryable) or StoreError.

        ``batch``: one export's tables, laid out already (by ``convert``).
        Its size in the memory bound is the tables' own size.
        """
        rows = batch.rows
        if not rows and not batch.tables.requests:
            return
        ticket = _Ticket(batch, batch.dedup_token or f"unnamed-{uuid.uuid4().hex}", batch.nbytes, rows)
        spans = batch.tables.spans
        with self._condition:
            if self._closing:
                raise Backpressure("the collector is shutting down", 1.0)
            # Another export being converted is coming: this one waits for it in the spool
            # (durable, acknowledged now) and both share one insert per table.
            under_load = (self._writer_busy or bool(self._queue) or self.spool.depth_files > 0
                          or self._converting > 0 or time.monotonic() < self._store_down_until)
            if not under_load:
                over = len(self._queue) >= MAX_PENDING_BATCHES or (
                    self._queue and self._pending_bytes + ticket.size > MAX_PENDING_BYTES)
                if over:
                    self._count("backpressure")
                    raise Backpressure("too many batches waiting to be written")
                self._queue.append(ticket)
                self._pending_bytes += ticket.size
                self._condition.notify_all()
            self._count("spans_received", spans)
            points = batch.metric_points if isinstance(batch, ConvertedExport) else 0
            self._count("log_records_received", rows - spans - points)
        if under_load:
            self._spool_accept(ticket)
            self._count("batches_accepted")
            return
        if not ticket.done.wait(ACCEPT_TIMEOUT_SECONDS):
            self._count("backpressure")
            raise Backpressure("the batch was not written in time")
        if ticket.error is not None:
            raise ticket.error
        self._count("batches_accepted")

    @contextlib.contextmanager
    def converting(self):
        """Around an export's conversion: while one is under way, an accept goes to the spool
        (and is acknowledged there) so that the two share an insert."""
        with self._condition:
            self._converting += 1
        try:
            yield
        finally:
            with self._condition:
                self._converting -= 1
                idle = not self._converting and not self._arriving
            if idle:  # a conversion marked without its way in (``arriving``) ended: nothing is coming
                self._replay_wake.set()

    @contextlib.contextmanager
    def arriving(self):
        """Around an export's whole way in — its conversion and its ``accept``: while one is on
        its way, the replay waits (up to ``SPOOL_GROUP_LINGER_SECONDS``) for it to share an
        insert; once none is, nothing else is coming and what the spool holds is inserted at
        once. It spans the accept too: an export whose conversion just ended is still coming
        (copied out of its worker, then written to the spool), and a group taken in that
        moment used to leave it for an insert of its own (``benchmarks/ingest.py --timeline``:
        rounds of 4 exports inserted as 3 groups of 1, 2 and 1)."""
        with self._condition:
            self._arriving += 1
        try:
            yield
        finally:
            with self._condition:
                self._arriving -= 1
                idle = not self._arriving
            if idle:
                self._replay_wake.set()

    def _others_coming(self) -> bool:
        with self._condition:
            return self._arriving > 0 or self._converting > 0

    def _spool_accept(self, ticket: _Ticket) -> None:
        """Under load: make one batch durable in the spool, in the caller's thread (Backpressure when full)."""
        token, batch = ticket.token, ticket.batch
        with self._state_lock:
            if token in self._recent_batches:
                self._counters["batches_duplicate"] += 1
                return
        with self._state_lock:
            tables = batch.tables.without_contents(self._recent_contents)
        try:
            # The tables' IPC bytes from a worker, when they came from one, are written as they are.
            self.spool.write(SpooledGroup(group_token([token]), [token], tables,
                                          getattr(batch, "serialized", None) or {}))
        except SpoolFull as error:
            self._count("backpressure")
            raise Backpressure(f"the ingest backlog is full: {error}") from None
        except OSError as error:
            self._count("backpressure")
            raise Backpressure(f"the spool cannot be written: {error}") from None
        self._count("batches_spooled" if time.monotonic() < self._store_down_until else "batches_spooled_under_load")
        self._made_durable([token], tables, stored=False)
        self._replay_wake.set()

    def close(self) -> None:
        """Write everything accepted so far (the spool too, while the store takes it), then stop both threads."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()
        self._writer.join()
        try:
            self.replay_spool(linger=False)
        except Exception as error:  # the files stay on disk for the next start
            logger.error("spool replay at shutdown failed: %s", describe_exception(error))
        self._replay_wake.set()
        self._replayer.join()
        if self._second_lane is not None:
            self._second_lane.shutdown()

    def stats(self) -> dict[str, float | int]:
        with self._condition:
            pending = len(self._queue)
            pending_bytes = self._pending_bytes
        with self._state_lock:
            result: dict[str, float | int] = dict(self._counters)
            result["store_up"] = int(time.monotonic() >= self._store_down_until)
        result.update(pending_batches=pending, pending_bytes=pending_bytes,
                      spool_batches=self.spool.depth_files, spool_bytes=self.spool.depth_bytes)
        return result

    # --- writer ------------------------------------------------------------

    def _count(self, name: str, amount: float = 1) -> None:
        with self._state_lock:
            self._counters[name] += amount

    def _take_group(self) -> list[_Ticket]:
        with self._condition:
            self._writer_busy = False
            while not self._queue and not self._closing:
                self._condition.wait()
            if len(self._queue) == 1 and not self._closing:
                self._condition.wait(GROUP_LINGER_SECONDS)
            group: list[_Ticket] = []
            spans = size = 0
            while self._queue:
                ticket = self._queue[0]
                rows = ticket.rows
                if group and (spans + rows > MAX_GROUP_SPANS or size + ticket.size > MAX_GROUP_BYTES):
                    break
                group.append(self._queue.pop(0))
                spans += rows
                size += ticket.size
            self._writer_busy = bool(group)
            return group

    def _write_loop(self) -> None:
        while True:
            group = self._take_group()
            if not group:
                return  # closing and drained
            try:
                self._write_group(group)
            except BaseException as error:  # never leave a receiver waiting forever
                logger.error("sink writer failed: %s", describe_exception(error))
                for ticket in group:
                    if not ticket.finished:
                        ticket.finish(StoreError(f"write failed: {error}"))
            finally:
                # Idle before anyone is answered: a client that sends its next export as soon
                # as it has the answer finds the writer free (the direct path), not "under load".
                with self._condition:
                    self._pending_bytes -= sum(ticket.size for ticket in group)
                    self._writer_busy = False
                for ticket in group:
                    if not ticket.finished:
                        ticket.finish(StoreError("write failed"))
                    ticket.release()

    def _write_group(self, tickets: list[_Ticket]) -> None:
        fresh: dict[str, list[_Ticket]] = {}
        with self._state_lock:
            for ticket in tickets:
                if ticket.token in self._recent_batches:
                    self._counters["batches_duplicate"] += 1
                    ticket.finish()
                else:
                    fresh.setdefault(ticket.token, []).append(ticket)  # same batch twice in one group: once
        parts: dict[str, TableSet] = {}
        for token, same in fresh.items():
            parts[token] = same[0].batch.tables.without_contents(self._recent_contents)
        if not parts:
            return
        stored: set[str] = set()
        try:
            self._store_or_spool(list(parts), merge_tables(parts.values()), stored)
        except StoreError as error:
            if len(parts) == 1:
                self._count("store_errors")
                for ticket in fresh[next(iter(parts))]:
                    ticket.finish(error)
                return
            # One bad batch must not fail its neighbours: write them one by one,
            # but not into the tables the group was stored in already.
            for token, part in parts.items():
                try:
                    self._store_or_spool([token], part, set(stored))
                except StoreError as single_error:
                    self._count("store_errors")
                    for ticket in fresh[token]:
                        ticket.finish(single_error)
                else:
                    for ticket in fresh[token]:
                        ticket.finish()
            return
        except Backpressure as error:
            for token in parts:
                for ticket in fresh[token]:
                    ticket.finish(error)
            return
        for token in parts:
            for ticket in fresh[token]:
                ticket.finish()

    def _store_or_spool(self, batch_tokens: list[str], tables: TableSet, stored: set[str] | None = None) -> None:
        """Make ``tables`` durable: in the store, else in the spool. Raises StoreError or Backpressure.

        ``stored``: tables not to insert (their rows are in the store), and
        the tables inserted are added to it."""
        token = group_token(batch_tokens)
        if time.monotonic() >= self._store_down_until:
            try:
                self._insert(tables, token, set() if stored is None else stored)
            except StoreUnavailable as error:
                self._mark_down(error)
            else:
                self._made_durable(batch_tokens, tables)
                return
        try:
            self.spool.write(SpooledGroup(token, batch_tokens, tables))
        except SpoolFull as error:
            self._count("backpressure")
            raise Backpressure(f"store unavailable and {error}") from None
        except OSError as error:
            self._count("backpressure")
            raise Backpressure(f"store unavailable and the spool cannot be written: {error}") from None
        self._count("batches_spooled", len(batch_tokens))
        self._made_durable(batch_tokens, tables, stored=False)
        self._replay_wake.set()

    def _insert(self, tables: TableSet, token: str, stored: set[str]) -> None:
        """Insert every table of ``tables`` not in ``stored`` (adding each one inserted to it).

        On a store with two lanes the request tables and the others are
        inserted at the same time. The error of a lane that failed is raised
        once both are done (the other lane's tables are in ``stored``): a
        StoreUnavailable first, as the group is then retried whole under the
        same token, each table's repeat dropped by its deduplication.
        """
        items = [(name, table) for name, table in tables.non_empty() if name not in stored]
        two_lanes = self._second_lane is not None
        first = [item for item in items if not two_lanes or item[0] in FIRST_LANE_TABLES]
        second = [item for item in items if two_lanes and item[0] not in FIRST_LANE_TABLES]
        beside = self._second_lane.submit(self._insert_lane, second, token, 1, stored) if second else None
        errors: list[BaseException] = []
        try:
            self._insert_lane(first, token, 0, stored)
        except BaseException as error:
            errors.append(error)
        if beside is not None and beside.exception() is not None:  # exception() waits for it
            errors.append(beside.exception())
        if errors:
            # An unexpected error before a StoreUnavailable before a StoreError.
            raise min(errors, key=lambda error: (isinstance(error, StoreError),
                                                 not isinstance(error, StoreUnavailable)))

    def _insert_lane(self, items: list[tuple[str, Any]], token: str, lane: int, stored: set[str]) -> None:
        for name, table in items:
            started = time.perf_counter()
            self.store.insert(name, table, dedup_token=token, lane=lane)
            elapsed = time.perf_counter() - started
            with self._state_lock:
                stored.add(name)
                self._counters["inserts"] += 1
                self._counters["insert_seconds_total"] += elapsed
                self._counters["insert_seconds_last"] = elapsed

    def _made_durable(self, batch_tokens: list[str], tables: TableSet, *, stored: bool = True) -> None:
        with self._state_lock:
            for token in batch_tokens:
                self._recent_batches.add(token)
            for key in tables.content_keys:
                self._recent_contents.add(key)
            if stored:
                self._counters["spans_stored"] += tables.spans
                self._counters["requests_stored"] += tables.requests
                self._counters["genai_events_stored"] += tables.genai_events
                self._counters["log_records_stored"] += tables.log_records
                self._counters["metric_points_stored"] += tables.metric_points
                self._counters["contents_written"] += len(tables.content_keys)
                self._counters["groups_written"] += 1
                self._store_down_until = 0.0
                self._retry_delay = STORE_RETRY_INITIAL_SECONDS

    def _mark_down(self, error: BaseException) -> None:
        with self._state_lock:
            self._counters["store_unavailable"] += 1
            self._store_down_until = time.monotonic() + self._retry_delay
            self._retry_delay = min(self._retry_delay * 2, STORE_RETRY_MAX_SECONDS)
        logger.warning("store unavailable, spooling: %s", describe_store_error(error))

    # --- replay ------------------------------------------------------------

    def replay_spool(self, *, linger: bool = False, deadline: float | None = None) -> int:
        """Move spooled batches into the store, oldest first, several files per insert; returns the files moved.

        First the groups an interrupted run was inserting (their intents),
        each under its recorded token; then the rest, in groups bounded like
        the writer's. Stops at the first StoreUnavailable, or at ``deadline``
        (``time.monotonic()``). ``linger``: leave a young, small spool for
        later so that it fills (the replay thread under load). A file whose
        rows the store rejects for good (StoreError) or that cannot be read
        is moved to ``corrupt/`` so it does not block the rest.
        """
        replayed = 0
        with self._replay_lock:
            for intent in self.spool.intents():
                if self._replay_stops(deadline):
                    return replayed
                try:
                    token, paths = self.spool.read_intent(intent)
                except SpoolCorrupt as error:
                    logger.error("spool intent %s is unreadable (%s); its files replay on their own",
                                 intent.name, error)
                    self.spool.remove_intent(intent)
                    continue
                moved = self._replay_group(paths, token, intent)
                if moved < 0:
                    return replayed
                replayed += moved
            while not self._replay_stops(deadline):
                if linger and (self.spool.oldest_age_seconds() < SPOOL_GROUP_LINGER_SECONDS
                               and self.spool.depth_bytes < SPOOL_GROUP_FULL_BYTES and self._others_coming()):
                    break
                paths = self._next_group()
                if not paths:
                    break
                moved = self._replay_group(paths)
                if moved < 0:
                    break
                replayed += moved
        return replayed

    def _replay_stops(self, deadline: float | None) -> bool:
        now = time.monotonic()
        return now < self._store_down_until or (deadline is not None and now >= deadline)

    def _next_group(self) -> list:
        """The oldest spool files, within the group bounds (at least one)."""
        group, size = [], 0
        for path in self.spool.pending():
            file_size = self.spool.size_of(path)
            if group and (size + file_size > MAX_GROUP_BYTES or len(group) * SPOOL_FILE_SPANS_GUESS > MAX_GROUP_SPANS):
                break
            group.append(path)
            size += file_size
        return group

    def _replay_group(self, paths: list, token: str | None = None, intent=None,
                      stored: frozenset[str] = frozenset()) -> int:
        """Insert ``paths`` as one group, but not into the tables in ``stored``; the files moved, or -1
        when the store is unavailable (stop)."""
        groups: list[tuple] = []
        seen: set[str] = set()
        for path in paths:
            try:
                group = self.spool.read(path)
            except FileNotFoundError:
                continue
            except (SpoolCorrupt, OSError, ValueError, KeyError) as error:
                logger.error("spool file %s is unreadable (%s); moved aside", path.name, describe_exception(error))
                self.spool.quarantine(path)
                self._count("spool_corrupt")
                continue
            if group.batch_tokens and seen.issuperset(group.batch_tokens):
                groups.append((path, None))  # the same batch spooled twice (a concurrent resend): insert once
                continue
            seen.update(group.batch_tokens)
            groups.append((path, group))
        loaded = [(path, group) for path, group in groups if group is not None]
        if not loaded:
            for path, _ in groups:
                self.spool.remove(path)
            if intent is not None:
                self.spool.remove_intent(intent)
            return len(groups)
        if token is None:
            if len(loaded) == 1:
                token = loaded[0][1].token  # as the file was written: the same token as any earlier attempt
            else:
                token = group_token([batch for _, group in loaded for batch in group.batch_tokens])
                intent = self.spool.write_intent(token, [path for path, _ in groups])
        tables = loaded[0][1].tables if len(loaded) == 1 else merge_tables(group.tables for _, group in loaded)
        inserted = set(stored)
        try:
            self._insert(tables, token, inserted)
        except StoreUnavailable as error:
            self._mark_down(error)
            return -1  # the intent stays: the next pass inserts the same files under the same token
        except StoreError as error:
            if intent is not None:
                self.spool.remove_intent(intent)
            if len(loaded) == 1:
                path = loaded[0][0]
                logger.error("store rejects spool file %s (%s); moved aside", path.name, describe_store_error(error))
                self.spool.quarantine(path)
                self._count("spool_corrupt")
                return 0
            # One bad file must not hold back the others: one by one, each under its own
            # token, but not into the tables the group was stored in already.
            moved = 0
            for path, _ in loaded:
                result = self._replay_group([path], stored=frozenset(inserted))
                if result < 0:
                    return -1
                moved += result
            return moved
        self.spool.remove_all([path for path, _ in groups])
        if intent is not None:
            self.spool.remove_intent(intent)
        batch_tokens = [batch for _, group in loaded for batch in group.batch_tokens]
        self._made_durable(batch_tokens, tables)
        self._count("batches_replayed", len(batch_tokens))
        return len(groups)

    def _replay_loop(self) -> None:
        while True:
            with self._condition:
                closing = self._closing
            if closing and not self._writer.is_alive():
                return
            if self.spool.depth_files:
                try:
                    self.replay_spool(linger=not closing)
                except Exception as error:  # keep replaying later; the files stay on disk
                    logger.error("spool replay failed: %s", describe_exception(error))
            wait = REPLAY_POLL_SECONDS
            if self.spool.depth_files:
                now = time.monotonic()
                wait = SPOOL_GROUP_LINGER_SECONDS - self.spool.oldest_age_seconds()
                if not self._others_coming():
                    wait = 0.0
                if now < self._store_down_until:
                    wait = self._store_down_until - now
                wait = max(0.01, min(REPLAY_POLL_SECONDS, wait))
            self._replay_wake.wait(wait)
            self._replay_wake.clear()


def open_sink(
    store: Store,
    *,
    data_dir: str,
    spool_max_bytes: int = DEFAULT_SPOOL_MAX_BYTES,
    spool_max_files: int = DEFAULT_SPOOL_MAX_FILES,
) -> Sink:
    """A running sink writing to ``store``, spooling under ``data_dir/spool``.

    Files left in the spool by an earlier run (a crash, an outage) are
    replayed before it returns (for at most ``STARTUP_REPLAY_SECONDS``),
    the rest in the background.
    """
    spool = Spool(os.path.join(data_dir, "spool"), max_bytes=spool_max_bytes, max_files=spool_max_files)
    sink = Sink(store, spool)
    if spool.depth_files:
        sink.replay_spool(deadline=time.monotonic() + STARTUP_REPLAY_SECONDS)
    return sink
