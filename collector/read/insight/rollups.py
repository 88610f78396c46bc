"""The collector's rollup job: recompute the hourly rollups of every hour that received rows.

The growth and cache panels read whole hours from ``prompt_parts_hourly``,
``prompt_requests_hourly`` and ``cache_hourly`` (migration 024) and the rest
of their window from raw rows (``hours``). This job fills those tables. Why
a job and not materialized views: a provider call may be written again as a
richer replacement row with the same key (issue 11), and a span re-sent
under a new deduplication token is collapsed by the ReplacingMergeTree
``requests`` but would be counted twice by a view; a cache verdict also
needs the previous request of its lineage, which may arrive in another
batch. So the job recomputes whole hours from the deduplicated rows (FINAL
over those hours only) and writes every row of one computation with the same
``computed_at``, then records the computation in ``rollup_hours``; readers
take each hour's newest recorded computation, so a recomputation replaces
the previous one as a whole and a job that stops halfway leaves the older
one in force.

Which hours: every hour that received rows since the last run (a late span,
a replacement row, a GenAI log event carrying a prompt), the hours of later
requests of the same lineages within a day (a late span changes its
successor's cache verdict), and the hours that became complete since then.
An hour is computed only once it is complete: SETTLE_SECONDS after it ended.
The first run (after the migration) computes every hour there is.
Idempotent: running it twice, or on two collectors, writes the same rows
again with a newer ``computed_at``.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from ...store.base import Store, StoreError
from ..lineage import LINEAGE_KEY_SQL  # noqa: F401  (the key the rollups group by: requests.lineage_key)
from .cache_queries import cache_analysis
from .named_query import Dialect, InsightQuery

logger = logging.getLogger(__name__)

# Spans are exported when a request ends, in batches of a few seconds; two
# minutes after its end an hour has received nearly all its rows. A later row
# makes the hour dirty again and the next run recomputes it.
SETTLE_SECONDS = 120
# Rows are looked for from this long before the last run started: an insert
# that began before the run (its received_at is its start) but committed after
# it is still found.
OVERLAP_SECONDS = 300
# The collector runs the job this often: a rollup hour is at most this late
# after a late row arrives (readers see the older computation meanwhile).
INTERVAL_SECONDS = 60
# Hours recomputed per statement: the cache analysis of an hour reads a day
# before it (the previous request of each lineage); six hours keep a
# statement's memory well under the read side's 1 GiB on a busy store.
HOURS_PER_STATEMENT = 6
JOB_NAME = "hourly"

# The job's rendering of the shared SQL: the hours listed, no filters.
JOB = Dialect(
    "job",
    slots={"db": "{db:Identifier}", "from": "toDateTime({first_hour:Int64}, 'UTC')",
           "to": "toDateTime({last_hour:Int64} + 3600, 'UTC')", "filters": "1 = 1",
           "conversation_filter": "1 = 1"},
    column_slots={"time_filter": "1 = 1"},
)
_HOURS = ("toStartOfHour(started_at) IN "
          "(SELECT toDateTime(arrayJoin(JSONExtract({{hours}}, 'Array(Int64)')), 'UTC'))")
_HOURS_RANGE = "started_at >= {{from}} AND started_at < {{to}}"
# FINAL only within a day partition: `requests` and `request_docs` have the
# start in their sorting key, so a row and its copies never sit in two
# partitions (a merged call's document keeps its thread: write.duplicates).
_FINAL_SETTINGS = "SETTINGS do_not_merge_across_partitions_select_final = 1"


# A request's blocks from its document (migration 048), in index order.
_BLOCK_ARRAYS = ("Tuple(block_names Array(String), block_layers Array(String), block_stabilities Array(String), "
                 "block_sizes Array(UInt64))")


def _job_sql(sql: str) -> str:
    return InsightQuery(name="job", title="", description="", panel="none",
                        sql=sql.replace("{{hours}}", "{hours:String}"), params=()).render(JOB)


# The deduplicated requests of the hours, with the system prompt of an
# event-only request filled in (as the view prompt_requests does).
_JOB_REQUESTS = f"""
    job_requests AS (
        SELECT
            started_at, request_id, lineage_key, service, model, process_kind, mapped,
            NOT mapped AND block_count = 0 AND event_prompt_bytes > 0
                AND (prompt_sha256 = '' OR lower(prompt_sha256) = event_prompt_sha256) AS prompt_from_events,
            if(prompt_from_events, event_prompt_bytes, prompt_bytes) AS request_prompt_bytes
        FROM (
            SELECT started_at, request_id, trace_id, lineage_key, service, model, process_kind, mapped,
                   prompt_bytes, prompt_sha256, block_count
            FROM {{{{db}}}}.requests FINAL
            WHERE {_HOURS_RANGE} AND {_HOURS}
        ) AS hour_requests
        LEFT JOIN (
            SELECT trace_id, span_id AS request_id, prompt_bytes AS event_prompt_bytes,
                   prompt_sha256 AS event_prompt_sha256
            FROM {{{{db}}}}.event_prompts
            WHERE span_id IN (SELECT request_id FROM {{{{db}}}}.requests
                              WHERE {_HOURS_RANGE} AND {_HOURS} AND NOT mapped AND block_count = 0)
        ) AS events USING (trace_id, request_id)
    )"""

PROMPT_PARTS_RECOMPUTE = _job_sql(f"""
INSERT INTO {{{{db}}}}.prompt_parts_hourly
    (hour, computed_at, service, model, process_kind, lineage_key, name, layer, stability, bytes)
WITH {_JOB_REQUESTS}
SELECT toStartOfHour(started_at) AS part_hour, fromUnixTimestamp64Milli({{computed_at_ms:Int64}}, 'UTC'),
       service, model, process_kind, lineage_key, part_name, part_layer, part_stability, sum(size)
FROM (
    SELECT started_at, service, model, process_kind, lineage_key, part_name, part_layer, part_stability, size
    FROM (SELECT request_id, started_at, service, model, process_kind, lineage_key FROM job_requests WHERE mapped)
        AS mapped_requests
    INNER JOIN (
        SELECT request_id, part.1 AS part_name, part.2 AS part_layer, part.3 AS part_stability, part.4 AS size
        FROM (
            SELECT request_id, JSONExtract(doc, '{_BLOCK_ARRAYS}') AS request_blocks
            FROM {{{{db}}}}.request_docs FINAL
            WHERE {_HOURS_RANGE} AND {_HOURS}
        )
        ARRAY JOIN arrayZip(request_blocks.1, request_blocks.2, request_blocks.3, request_blocks.4) AS part
    ) AS request_blocks USING (request_id)
    UNION ALL
    SELECT started_at, service, model, process_kind, lineage_key, '(unmapped)', '(unmapped)', '(unmapped)',
           request_prompt_bytes
    FROM job_requests
    WHERE NOT mapped AND request_prompt_bytes > 0
)
GROUP BY part_hour, service, model, process_kind, lineage_key, part_name, part_layer, part_stability
{_FINAL_SETTINGS}
""")

PROMPT_REQUESTS_RECOMPUTE = _job_sql(f"""
INSERT INTO {{{{db}}}}.prompt_requests_hourly (hour, computed_at, service, model, process_kind, lineage_key, requests)
WITH {_JOB_REQUESTS}
SELECT toStartOfHour(started_at) AS request_hour, fromUnixTimestamp64Milli({{computed_at_ms:Int64}}, 'UTC'),
       service, model, process_kind, lineage_key, count()
FROM job_requests
WHERE mapped OR request_prompt_bytes > 0
GROUP BY request_hour, service, model, process_kind, lineage_key
{_FINAL_SETTINGS}
""")

# Every verdict of every request that started in the hours, counted per hour,
# lineage columns, the part that broke the cache and the misplaced turn block.
CACHE_RECOMPUTE = _job_sql(f"""
INSERT INTO {{{{db}}}}.cache_hourly (hour, computed_at, service, provider, model, process_kind,
    break_block, break_stability, misplaced_block, displaced_block,
    requests, follow_ups, breaks, misordered, provider_misses, bytes_rewritten,
    expected_prefix_tokens_sum, cache_read_tokens_sum, cache_read_reported, stable_bytes_after_turn_sum,
    conversations, break_trace_id, misordered_trace_id)
SELECT
    toStartOfHour(started_at) AS verdict_hour, fromUnixTimestamp64Milli({{computed_at_ms:Int64}}, 'UTC'),
    service, provider, model, process_kind,
    if(cache_break, changed_block, '') AS break_name, if(cache_break, changed_stability, '') AS break_stability_name,
    misplaced_block, displaced_block,
    count(), countIf(has_previous), countIf(cache_break), countIf(turn_before_stable), countIf(provider_missed),
    sum(rewritten_bytes), sumIf(expected_prefix_tokens, cache_break),
    sumIf(ifNull(cache_read_tokens, 0), cache_break), countIf(cache_break AND cache_read_tokens IS NOT NULL),
    sum(stable_bytes_after_turn), uniqExactStateIf(conversation_id, cache_break),
    anyIf(trace_id, cache_break), anyIf(trace_id, turn_before_stable)
FROM ({cache_analysis(_HOURS, "lineage_key IN (SELECT lineage_key FROM {{db}}.requests WHERE mapped AND "
                      + _HOURS_RANGE + " AND " + _HOURS + ")", final=True)})
GROUP BY verdict_hour, service, provider, model, process_kind, break_name, break_stability_name,
         misplaced_block, displaced_block
{_FINAL_SETTINGS}
""")

RECORD_COMPUTED = _job_sql("""
INSERT INTO {{db}}.rollup_hours (hour, computed_at)
SELECT toDateTime(arrayJoin(JSONExtract({{hours}}, 'Array(Int64)')), 'UTC'),
       fromUnixTimestamp64Milli({computed_at_ms:Int64}, 'UTC')
""")

# Hours that received rows since a moment, and the hours of later requests of
# the same lineages within a day.
DIRTY_HOURS = """
WITH arrivals AS (
    SELECT lineage_key, started_at FROM {db:Identifier}.requests
    WHERE received_at >= fromUnixTimestamp64Milli({since_ms:Int64}, 'UTC')
)
SELECT DISTINCT toInt64(toUnixTimestamp(dirty_hour)) AS hour
FROM (
    SELECT toStartOfHour(started_at) AS dirty_hour FROM arrivals
    UNION ALL
    SELECT toStartOfHour(started_at) AS dirty_hour FROM {db:Identifier}.requests
    WHERE mapped AND lineage_key IN (SELECT lineage_key FROM arrivals)
      AND started_at > (SELECT min(started_at) FROM arrivals)
      AND started_at <= (SELECT max(started_at) FROM arrivals) + INTERVAL 1 DAY
    UNION ALL
    -- a GenAI log event can carry a request's system prompt; it lies within
    -- its span, which may have started in the hour before
    SELECT arrayJoin([toStartOfHour(timestamp), toStartOfHour(timestamp) - INTERVAL 1 HOUR]) AS dirty_hour
    FROM {db:Identifier}.genai_events
    WHERE received_at >= fromUnixTimestamp64Milli({since_ms:Int64}, 'UTC')
)
ORDER BY hour
"""

ALL_HOURS = """
SELECT DISTINCT toInt64(toUnixTimestamp(toStartOfHour(started_at))) AS hour
FROM {db:Identifier}.requests
ORDER BY hour
"""

LAST_RUN = """
SELECT toInt64(toUnixTimestamp64Milli(max(ran_at))) AS ran_at_ms, count() AS runs
FROM {db:Identifier}.rollup_runs WHERE job = {job:String}
"""

NOW = "SELECT toInt64(toUnixTimestamp64Milli(now64(3))) AS now_ms"

RECORD_RUN = """
INSERT INTO {db:Identifier}.rollup_runs (job, ran_at)
VALUES ({job:String}, fromUnixTimestamp64Milli({ran_at_ms:Int64}, 'UTC'))
"""


def hours_to_compute(store: Store, now_ms: int, *, settle_seconds: int = SETTLE_SECONDS) -> list[int]:
    """The complete hours (Unix seconds) to recompute now."""
    last = store.query(LAST_RUN, {"db": store.database, "job": JOB_NAME})[0]
    if not int(last["runs"]):
        found = {int(row["hour"]) for row in store.query(ALL_HOURS, {"db": store.database})}
    else:
        since_ms = int(last["ran_at_ms"]) - OVERLAP_SECONDS * 1000
        found = {int(row["hour"]) for row in store.query(DIRTY_HOURS, {"db": store.database, "since_ms": since_ms})}
        # hours that became complete since the last run (their rows may all have arrived before it)
        completed_since = (since_ms // 1000 - settle_seconds) // 3600 * 3600 - 3600
        found.update(range(completed_since, now_ms // 1000 - settle_seconds - 3600 + 1, 3600))
    return sorted(hour for hour in found if hour + 3600 + settle_seconds <= now_ms // 1000)


def recompute(store: Store, hours: list[int], computed_at_ms: int) -> None:
    """Recompute ``hours`` (Unix seconds, hour starts) in statements of HOURS_PER_STATEMENT."""
    for start in range(0, len(hours), HOURS_PER_STATEMENT):
        chunk = hours[start:start + HOURS_PER_STATEMENT]
        params: dict[str, Any] = {"db": store.database, "first_hour": min(chunk), "last_hour": max(chunk),
                                  "hours": json.dumps(chunk), "computed_at_ms": computed_at_ms}
        for statement in (PROMPT_PARTS_RECOMPUTE, PROMPT_REQUESTS_RECOMPUTE, CACHE_RECOMPUTE):
            store.execute(statement, params)
        # recorded last: readers switch to this computation only once all of it is written
        store.execute(RECORD_COMPUTED, params)


def run_once(store: Store, *, settle_seconds: int = SETTLE_SECONDS, now_ms: int | None = None) -> list[int]:
    """One run of the job; the hours recomputed. ``now_ms``: the store's clock (default its own; a
    benchmark store of generated traffic dated ahead of the machine's clock reads it as of later)."""
    if now_ms is None:
        now_ms = int(store.query(NOW)[0]["now_ms"])
    hours = hours_to_compute(store, now_ms, settle_seconds=settle_seconds)
    recompute(store, hours, now_ms)
    store.execute(RECORD_RUN, {"db": store.database, "job": JOB_NAME, "ran_at_ms": now_ms})
    return hours


class RollupJob:
    """Runs the job every INTERVAL_SECONDS on its own thread, until stopped."""

    def __init__(self, store: Store, *, interval_seconds: float = INTERVAL_SECONDS):
        self.store = store
        self.interval_seconds = interval_seconds
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rollups", daemon=True)

    def start(self) -> "RollupJob":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.ident is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stopped.wait(self.interval_seconds):
            try:
                run_once(self.store)
            except StoreError as error:  # the store is down or busy: the next run catches up
                logger.warning("hourly rollups not recomputed this time: %s", type(error).__name__)
            except Exception:  # never let the thread die: the panels fall back to raw rows
                logger.exception("hourly rollups failed")
