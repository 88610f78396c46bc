"""Bounds on the read side, so that readers cannot starve ingestion (issue 14).

Reads and ingest share the store and two cores. Two bounds keep ingest
going under read load:

- ``ReadGate`` (ASGI middleware on the UI server): at most
  ``MAX_RUNNING_READS`` read requests run at once and ``MAX_WAITING_READS``
  wait; past that the answer is 503 with Retry-After at once, so a burst of
  readers queues briefly instead of piling up work. Sustained, the read side
  runs at most ``READ_TIME_SHARE`` of the time (a budget of read seconds
  that refills at that rate, up to ``READ_TIME_BURST_SECONDS``): a page or
  a dashboard refresh runs at once, readers looping without pause wait
  between reads, and ingest keeps the rest. The budget holds only while
  there is ingest to protect (an export in the last
  ``INGEST_ACTIVE_SECONDS``): with none, a user clicking through the
  inspector is never made to wait for reads nobody competes with.
- ``ReadStore`` (the store the read side is given): every read query runs
  with ``READ_QUERY_SETTINGS`` — one thread, a time limit and a memory
  limit — so one heavy query cannot take both cores or the memory ingest
  needs. The embedded store also serves a waiting insert before waiting
  reads (``store.embedded``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any, Mapping

from starlette.responses import JSONResponse

# Read requests running at once: half the cores, so ingest keeps the other
# half while the read side is busy (one on 2 cores: benchmarks/read_load.py
# measured ingest under 4 readers at 0.60 of its unloaded rate with one, 0.33
# with two, on a shared 2-core machine).
MAX_RUNNING_READS = max(1, (os.cpu_count() or 2) // 2)
# Read requests waiting for a place; a dashboard refresh fires about a dozen
# at once. Past it the reader is told to come back (503 + Retry-After).
MAX_WAITING_READS = 16
# What a busy read side asks the client to wait before retrying.
READ_RETRY_AFTER_SECONDS = 1
# The share of wall time sustained reads may run (one read at a time on 2
# cores: half of one core). A read's seconds are charged when it ends; a read
# starts only while the budget is not overdrawn. benchmarks/read_load.py, four
# readers looping without pause on a busy shared 2-core machine: ingest kept a
# median 0.96 (0.62-1.00, 5 rounds) of its unloaded rate with the budget,
# 0.72 (0.51-0.81, 3 rounds) without (docs/operations.md).
READ_TIME_SHARE = 0.5
# Read seconds that may run back to back before the share applies (a
# dashboard refresh of a dozen panels, a page and its API calls).
READ_TIME_BURST_SECONDS = 3.0
# How long after an export the read budget keeps applying (exporters send
# every few seconds while an application runs: 5 s is the SDK's batch delay).
INGEST_ACTIVE_SECONDS = 10.0
# Paths that are never gated: probes and scrapes are cheap and must answer
# while the read side is busy.
UNGATED_PATHS = frozenset({"/healthz", "/metrics"})
# Settings of every read-side query. One thread: a dashboard query on 2 cores
# must leave one to ingest. 30 s: no page waits longer, and a runaway query
# must not hold the store. 1 GiB: a query past it fails alone, the
# collector process does not.
READ_QUERY_SETTINGS: dict[str, int] = {
    "max_threads": 1,
    "max_execution_time": 30,
    "max_memory_usage": 1024 * 1024 * 1024,
}


class ReadGate:
    """ASGI middleware: a bounded number of read requests run, a bounded number wait, the rest get 503."""

    def __init__(self, app, *, running: int | None = None, waiting: int | None = None,
                 share: float | None = None, burst: float | None = None, clock=time.monotonic, sleep=None,
                 ingest_active=None):
        """``ingest_active``: a function saying whether ingest is under way now; the read budget
        applies only while it says so (None: always)."""
        self.app = app
        self._ingest_active = ingest_active
        self.running = MAX_RUNNING_READS if running is None else running
        self.waiting_limit = MAX_WAITING_READS if waiting is None else waiting
        self.budget = ReadBudget(READ_TIME_SHARE if share is None else share,
                                 READ_TIME_BURST_SECONDS if burst is None else burst, clock)
        self._clock = clock
        self._sleep = sleep or asyncio.sleep
        self._places: asyncio.Semaphore | None = None  # made on the server's event loop
        self.waiting = 0
        self.refused = 0
        self.throttled_seconds = 0.0  # time reads waited for the budget

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in UNGATED_PATHS:
            return await self.app(scope, receive, send)
        if self._places is None:
            self._places = asyncio.Semaphore(self.running)
        if self._places.locked():
            if self.waiting >= self.waiting_limit:
                self.refused += 1
                response = JSONResponse({"error": "the read side is busy, retry later"}, status_code=503,
                                        headers={"Retry-After": str(READ_RETRY_AFTER_SECONDS)})
                return await response(scope, receive, send)
        self.waiting += 1
        try:
            await self._places.acquire()
            try:
                while self._budgeted() and (pause := self.budget.wait_before_start()) > 0:
                    self.throttled_seconds += pause
                    await self._sleep(pause)
            except BaseException:
                self._places.release()
                raise
        finally:
            self.waiting -= 1
        started = self._clock()
        try:
            return await self.app(scope, receive, send)
        finally:
            if self._budgeted():  # reads while nothing is ingested cost ingest nothing
                self.budget.charge(self._clock() - started)
            self._places.release()

    def _budgeted(self) -> bool:
        return self._ingest_active is None or self._ingest_active()


class ReadBudget:
    """Seconds of reading allowed: refills at ``share`` per second up to ``burst``; reads are charged when they end."""

    def __init__(self, share: float, burst: float, clock=time.monotonic):
        if not 0 < share <= 1 or burst < 0:
            raise ValueError(f"read share must be in (0, 1] and burst >= 0, got {share}, {burst}")
        self.share, self.burst, self._clock = share, burst, clock
        self.level = burst
        self._updated = clock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.burst, self.level + (now - self._updated) * self.share)
        self._updated = now

    def wait_before_start(self) -> float:
        """Seconds to wait before the next read may start (0: now)."""
        if self.share >= 1:
            return 0.0
        self._refill()
        return 0.0 if self.level >= 0 else -self.level / self.share

    def charge(self, seconds: float) -> None:
        self._refill()
        self.level -= max(0.0, seconds)


# Settings of every read-side query where the store's ClickHouse has them (looked
# up once in system.settings: an unknown setting fails the query). use_statistics
# = 0: ClickHouse 26.x loads the statistics of every column a query reads to
# order its PREWHERE steps, a file per column; a read by key gains nothing from
# them and a point read of a request row (55 columns, 1 M requests) cost ~3 ms
# less of ~28 without. ClickHouse 24.8 has no such setting (its column
# statistics are off unless a table declares them).
READ_QUERY_SETTINGS_WHERE_KNOWN: dict[str, int] = {"use_statistics": 0}


class ReadStore:
    """The store as the read side sees it: every query with ``READ_QUERY_SETTINGS``
    (and those of ``READ_QUERY_SETTINGS_WHERE_KNOWN`` the store knows)."""

    def __init__(self, store: Any, settings: Mapping[str, int] | None = None,
                 where_known: Mapping[str, int] | None = None):
        self._store = store
        self.settings = dict(READ_QUERY_SETTINGS if settings is None else settings)
        self._where_known = dict(READ_QUERY_SETTINGS_WHERE_KNOWN if where_known is None else where_known)
        self._effective: dict[str, int] | None = None

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return self._store.query(sql, params, settings=self.effective_settings())

    def effective_settings(self) -> dict[str, int]:
        """``settings`` and the settings of ``where_known`` the store has (asked once; a race asks twice)."""
        if self._effective is None:
            known = set()
            if self._where_known:
                known = {row["name"] for row in self._store.query(
                    "SELECT name FROM system.settings WHERE has(JSONExtract({names:String}, 'Array(String)'), name)",
                    {"names": json.dumps(sorted(self._where_known))})}
            self._effective = {**{name: value for name, value in self._where_known.items() if name in known},
                               **self.settings}
        return self._effective

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
