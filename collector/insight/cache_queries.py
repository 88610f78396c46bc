"""Cache queries: which block broke the provider's prompt cache, and which sits in the wrong place.

One analysis compares each mapped request with the previous request of its
conversation, block by block; the queries here group its rows per request,
per changed block, per misplaced turn block and per time bucket.
"""

from __future__ import annotations

from .named_query import BYTES_PER_TOKEN, InsightQuery

# Stabilities a provider's prompt cache can reuse across requests.
STABLE = "('static', 'session')"

# The previous request of a conversation may sit before the window; looking
# back a day finds it for every conversation that is still active.
CONVERSATION_LOOKBACK = "INTERVAL 1 DAY"


# One row per mapped request with its blocks as parallel arrays (in index
# order) and the same arrays of the previous request of its conversation.
# Requests without a conversation id are their own partition: no previous.
_CACHE_ANALYSIS = f"""
    WITH
        block_arrays AS (
            SELECT
                request_id,
                arraySort(groupArray((`index`, toString(name), toString(stability), sha256, size))) AS parts
            FROM {{{{db}}}}.prompt_blocks
            WHERE started_at >= {{{{from}}}} - {CONVERSATION_LOOKBACK} AND started_at <= {{{{to}}}}
            GROUP BY request_id
        ),
        per_request AS (
            SELECT
                r.started_at AS started_at, r.request_id AS request_id, r.trace_id AS trace_id,
                r.service AS service, r.model AS model, r.process_kind AS process_kind,
                r.conversation_id AS conversation_id,
                r.cache_read_tokens AS cache_read_tokens, r.input_tokens AS input_tokens,
                arrayMap(part -> part.2, b.parts) AS names,
                arrayMap(part -> part.3, b.parts) AS stabilities,
                arrayMap(part -> part.4, b.parts) AS hashes,
                arrayMap(part -> part.5, b.parts) AS sizes
            FROM {{{{db}}}}.prompt_requests AS r
            INNER JOIN block_arrays AS b ON b.request_id = r.request_id
            WHERE r.mapped
              AND r.started_at >= {{{{from}}}} - {CONVERSATION_LOOKBACK} AND r.started_at <= {{{{to}}}}
              AND {{{{filters}}}} AND {{{{conversation_filter}}}}
        ),
        with_previous AS (
            SELECT
                *,
                lagInFrame(request_id, 1, '') OVER conversation AS previous_request_id,
                lagInFrame(names) OVER conversation AS previous_names,
                lagInFrame(stabilities) OVER conversation AS previous_stabilities,
                lagInFrame(hashes) OVER conversation AS previous_hashes
            FROM per_request
            WINDOW conversation AS (
                PARTITION BY if(conversation_id = '', request_id, conversation_id)
                ORDER BY started_at, request_id
                ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
        ),
        positions AS (
            SELECT
                *,
                previous_request_id != '' AS has_previous,
                -- the cacheable prefix: the leading run of static and session blocks
                arrayFirstIndex(stability -> stability NOT IN {STABLE}, stabilities) AS first_unstable,
                toInt64(if(first_unstable = 0, length(stabilities), first_unstable - 1)) AS prefix_blocks,
                -- the first block whose hash differs from the previous request's block at that position
                arrayFirstIndex(
                    (hash, position) -> position > length(previous_hashes) OR hash != previous_hashes[position],
                    hashes, arrayEnumerate(hashes)) AS first_differing,
                toInt64(multiIf(NOT has_previous, 0,
                        first_differing > 0, first_differing,
                        length(previous_hashes) > length(hashes), length(hashes) + 1,
                        0)) AS changed_index,
                -- the first turn block that sits before a static or session block
                arrayFirstIndex(
                    (stability, position) -> stability = 'turn' AND arrayExists(
                        (later, later_position) -> later IN {STABLE} AND later_position > position,
                        stabilities, arrayEnumerate(stabilities)),
                    stabilities, arrayEnumerate(stabilities)) AS misplaced_index
            FROM with_previous
        )
    SELECT
        started_at, request_id, trace_id, service, model, process_kind, conversation_id,
        previous_request_id, has_previous,
        length(names) AS blocks,
        prefix_blocks,
        arraySum(arraySlice(sizes, 1, prefix_blocks)) AS prefix_bytes,
        has_previous AND prefix_blocks > 0 AND (changed_index = 0 OR changed_index > prefix_blocks) AS prefix_identical,
        changed_index,
        multiIf(changed_index = 0, '',
                changed_index <= length(names), names[changed_index],
                previous_names[changed_index]) AS changed_block,
        multiIf(changed_index = 0, '',
                changed_index <= length(names), stabilities[changed_index],
                previous_stabilities[changed_index]) AS changed_stability,
        changed_index <= length(names) AND changed_index > 0 AND changed_index > length(previous_hashes) AS changed_is_new,
        -- static and session bytes at or after the first change: a prefix cache
        -- cannot serve them, so the change broke the cache for them
        if(has_previous AND changed_index > 0,
           arraySum((stability, size, position) -> if(stability IN {STABLE} AND position >= changed_index, size, 0),
                    stabilities, sizes, arrayEnumerate(sizes)),
           0) AS rewritten_bytes,
        rewritten_bytes > 0 AS cache_break,
        -- what a prefix cache should have served: the stable prefix up to the first change
        if(has_previous,
           arraySum(arraySlice(sizes, 1, if(changed_index = 0, prefix_blocks, least(prefix_blocks, changed_index - 1)))),
           0) AS expected_cached_bytes,
        intDiv(expected_cached_bytes, {BYTES_PER_TOKEN}) AS expected_cached_tokens,
        misplaced_index > 0 AS turn_before_stable,
        if(misplaced_index = 0, '', names[misplaced_index]) AS misplaced_block,
        -- the stable block it pushed out of the prefix (the first one after it)
        if(misplaced_index = 0, '', names[arrayFirstIndex(
            (stability, position) -> stability IN {STABLE} AND position > misplaced_index,
            stabilities, arrayEnumerate(stabilities))]) AS displaced_block,
        arraySum((stability, size, position) -> if(stability IN {STABLE} AND position > misplaced_index, size, 0),
                 stabilities, sizes, arrayEnumerate(sizes)) * (misplaced_index > 0) AS stable_bytes_after_turn,
        cache_read_tokens,
        input_tokens,
        cache_read_tokens IS NOT NULL AND expected_cached_tokens > 0
            AND cache_read_tokens * 2 < expected_cached_tokens AS provider_missed,
        multiIf(misplaced_index > 0, 'turn_before_stable',
                NOT has_previous, 'first',
                cache_break, 'break',
                provider_missed, 'provider_miss',
                'ok') AS verdict
    FROM positions
    WHERE {{{{time_filter:started_at}}}}
"""

CACHE_REQUESTS = InsightQuery(
    name="cache_requests",
    title="Cache analysis per request",
    description="For each request: its cacheable prefix (leading static and session blocks), whether it is "
    "byte-identical to the previous request of the conversation, the first block whose hash changed, "
    "turn blocks placed before stable blocks, and the provider's reported cache_read_tokens.",
    panel="table",
    sql=f"""
SELECT
    started_at AS time, trace_id, request_id, service, model, conversation_id, verdict,
    changed_block, changed_stability, prefix_blocks, prefix_bytes, prefix_identical,
    expected_cached_tokens, cache_read_tokens, rewritten_bytes,
    misplaced_block, displaced_block, stable_bytes_after_turn, previous_request_id, changed_index, changed_is_new,
    has_previous, cache_break, turn_before_stable, provider_missed, expected_cached_bytes, input_tokens,
    process_kind, blocks
FROM ({_CACHE_ANALYSIS})
ORDER BY time DESC, request_id
LIMIT {{{{limit}}}}
""",
    params=("since", "until", "service", "model", "process", "conversation", "limit"),
)

CACHE_BREAKS_BY_BLOCK = InsightQuery(
    name="cache_breaks_by_block",
    title="Blocks that broke the cache",
    description="Follow-up requests in which a block changed since the previous request of the "
    "conversation with static or session blocks at or after it (bytes a prefix cache could not "
    "serve), grouped by that first changed block.",
    panel="table",
    sql=f"""
SELECT
    changed_block AS block,
    any(changed_stability) AS stability,
    count() AS breaks,
    sum(rewritten_bytes) AS bytes_rewritten,
    intDiv(bytes_rewritten, {BYTES_PER_TOKEN}) AS tokens_rewritten,
    uniqExact(conversation_id) AS conversations,
    any(trace_id) AS example_trace_id
FROM ({_CACHE_ANALYSIS})
WHERE cache_break
GROUP BY changed_block
ORDER BY breaks DESC, bytes_rewritten DESC, block
""",
    params=("since", "until", "service", "model", "process", "conversation"),
)

CACHE_MISORDERED = InsightQuery(
    name="cache_misordered",
    title="Turn blocks placed before stable blocks",
    description="Requests where a turn block (changes every request) sits before static or session "
    "blocks: everything stable after it can never be served from the prompt cache.",
    panel="table",
    sql=f"""
SELECT
    misplaced_block AS block,
    any(displaced_block) AS before_block,
    count() AS requests,
    toUInt64(round(avg(stable_bytes_after_turn))) AS uncacheable_bytes,
    intDiv(uncacheable_bytes, {BYTES_PER_TOKEN}) AS uncacheable_tokens,
    uniqExact(service) AS services,
    any(trace_id) AS example_trace_id
FROM ({_CACHE_ANALYSIS})
WHERE turn_before_stable
GROUP BY misplaced_block
ORDER BY requests DESC, block
""",
    params=("since", "until", "service", "model", "process", "conversation"),
)

CACHE_SERIES = InsightQuery(
    name="cache_series",
    title="Cache breaks over time",
    description="Per time bucket: requests that followed an earlier one in their conversation, those whose "
    "cacheable prefix broke, those with a turn block before stable blocks, and those where the provider "
    "reported far fewer cached tokens than the unchanged prefix should give.",
    panel="timeseries",
    sql=f"""
SELECT
    {{{{bucket:started_at}}}} AS time,
    countIf(has_previous) AS follow_ups,
    countIf(cache_break) AS breaks,
    countIf(turn_before_stable) AS misordered,
    countIf(provider_missed) AS provider_misses
FROM ({_CACHE_ANALYSIS})
GROUP BY time
ORDER BY time
""",
    params=("since", "until", "bucket_seconds", "service", "model", "process", "conversation"),
)
