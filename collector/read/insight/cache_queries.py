"""Cache queries: which block broke the provider's prompt cache, and which sits in the wrong place.

One analysis compares each mapped request with the previous request of its
lineage (collector/read/lineage.py: same conversation, service, provider, model
and process kind; without a conversation, trace and process), block by
block, and weighs that against what the provider reported; the queries here
group its rows per request, per changed block, per misplaced turn block and
per time bucket.

The verdict's inputs, all in every row:

* the expected cacheable prefix: the request's tool definitions (providers
  put them before the system prompt and count them in cache reads) and the
  leading static and session blocks — ``expected_prefix_bytes`` and its
  estimate ``expected_prefix_tokens``;
* the provider's ``cache_read_tokens``.

Reported cache reads that cover the expected prefix mean the cache held: no
break, whatever changed since the previous request (another request may have
warmed the cache). When they fall short, the first part in prompt order
(tools, then blocks) whose bytes changed since the previous request of the
lineage, within the expected prefix, broke the cache and is named. Short with
nothing changed there is the provider's doing (cache expired, prefix under
its minimum). Without a reported figure the hashes alone decide.
"""

from __future__ import annotations

from ..lineage import LINEAGE_SQL
from . import hours
from .named_query import BYTES_PER_TOKEN, InsightQuery

# Stabilities a provider's prompt cache can reuse across requests.
STABLE = "('static', 'session')"

# The previous request of a lineage is looked for up to a day before a request
# (it may sit before the window): that finds it for every conversation that is
# still active, and a provider's prompt cache lives minutes, not days.
CONVERSATION_LOOKBACK = "INTERVAL 1 DAY"

# Reported cache reads under this share of the expected prefix, with nothing
# changed in it, are a provider miss. A smaller shortfall is the provider's
# granularity (OpenAI counts cached tokens in steps of 128), not a miss.
PROVIDER_MISS_SHARE = 0.5

# The name the tool definitions go by when they are what changed.
TOOLS_PART = "(tools)"


# One row per mapped request with its blocks as parallel arrays (in index
# order, from its document: migration 048) and the same arrays of the
# previous request of its lineage.
# ``rows``: which analysed requests are returned (a condition on the analysis'
# columns); ``scope``: a condition on ``requests`` that narrows the requests
# read to find the previous ones (the lineages of ``rows``: reading every
# request of the window with its blocks went over the read side's memory
# limit on a 1 M-request store); ``final``: deduplicate the request rows read
# (the rollup job; readers tolerate an unmerged copy instead; a request's
# documents are always read once).
# The block arrays a cache verdict compares, in the order of ``parts``' tuples: index, name, stability, hash,
# size, layer.
_BLOCK_ARRAYS = ("Tuple(block_index Array(UInt32), block_names Array(String), block_stabilities Array(String), "
                 "block_sha256 Array(String), block_sizes Array(UInt64), block_layers Array(String))")


def cache_analysis(rows: str, scope: str = "1 = 1", *, final: bool = False) -> str:
    final_clause = " FINAL" if final else ""
    return f"""
    WITH
        analysed AS (
            SELECT started_at, request_id, trace_id, service, provider, model, process_kind, process_id,
                   conversation_id, cache_read_tokens, input_tokens, bytes_tools, tools_catalog_sha256
            FROM {{{{db}}}}.requests{final_clause}
            WHERE mapped AND {scope}
              AND started_at >= {{{{from}}}} - {CONVERSATION_LOOKBACK} AND started_at <= {{{{to}}}}
              AND {{{{filters}}}} AND {{{{conversation_filter}}}}
        ),
        block_arrays AS (
            SELECT request_id, arraySort(arrayZip(blocks.1, blocks.2, blocks.3, blocks.4, blocks.5, blocks.6)) AS parts
            FROM (
                SELECT request_id, JSONExtract(doc, '{_BLOCK_ARRAYS}') AS blocks
                FROM {{{{db}}}}.request_docs
                WHERE started_at >= {{{{from}}}} - {CONVERSATION_LOOKBACK} AND started_at <= {{{{to}}}}
                  -- the documents' sorting key: the primary key finds the granules of these requests
                  AND (thread, started_at, request_id) IN (
                      SELECT if(conversation_id != '', conversation_id, trace_id), started_at, request_id
                      FROM analysed)
                ORDER BY request_id, merged_spans DESC
                LIMIT 1 BY request_id
            )
        ),
        per_request AS (
            SELECT
                started_at, request_id, trace_id, service, provider, model, process_kind, process_id,
                conversation_id, cache_read_tokens, input_tokens,
                toInt64(bytes_tools) AS tools_bytes, tools_catalog_sha256 AS tools_sha256,
                arrayMap(part -> part.2, parts) AS names,
                arrayMap(part -> part.3, parts) AS stabilities,
                arrayMap(part -> part.4, parts) AS hashes,
                arrayMap(part -> part.5, parts) AS sizes,
                arrayMap(part -> part.6, parts) AS layers
            -- USING: ClickHouse 24.8 finds no join keys in CTE-qualified names
            FROM analysed INNER JOIN block_arrays USING (request_id)
        ),
        with_previous AS (
            SELECT
                *,
                -- the previous request of the lineage, if it started at most a day earlier:
                -- a verdict does not depend on the window it is read in (nor on the hour the
                -- rollup job computed it in)
                if(lagInFrame(started_at) OVER lineage >= started_at - {CONVERSATION_LOOKBACK},
                   lagInFrame(request_id, 1, '') OVER lineage, '') AS previous_request_id,
                lagInFrame(names) OVER lineage AS previous_names,
                lagInFrame(stabilities) OVER lineage AS previous_stabilities,
                lagInFrame(hashes) OVER lineage AS previous_hashes,
                lagInFrame(tools_sha256) OVER lineage AS previous_tools_sha256
            FROM per_request
            WINDOW lineage AS (
                PARTITION BY {LINEAGE_SQL}
                ORDER BY started_at, request_id
                ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
        ),
        positions AS (
            SELECT
                *,
                previous_request_id != '' AS has_previous,
                -- the cacheable prefix: the leading run of static and session blocks
                arrayFirstIndex(stability -> stability NOT IN {STABLE}, stabilities) AS first_unstable,
                -- (both branches Int64: ClickHouse 24.8 has no supertype for UInt64 and Int64)
                if(first_unstable = 0, toInt64(length(stabilities)), toInt64(first_unstable) - 1) AS prefix_blocks,
                has_previous AND tools_sha256 != previous_tools_sha256 AS tools_changed,
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
                    stabilities, arrayEnumerate(stabilities)) AS misplaced_index,
                -- the stable block it pushed out of the prefix: the first one after it that is
                -- not the template's own prose (a heading between them), else the first one
                arrayFirstIndex(
                    (stability, layer, position) -> stability IN {STABLE} AND layer != 'template'
                                                    AND position > misplaced_index,
                    stabilities, layers, arrayEnumerate(stabilities)) AS displaced_injected_index,
                if(displaced_injected_index > 0, displaced_injected_index, arrayFirstIndex(
                    (stability, position) -> stability IN {STABLE} AND position > misplaced_index,
                    stabilities, arrayEnumerate(stabilities))) AS displaced_index
            FROM with_previous
        )
    SELECT
        started_at, request_id, trace_id, service, provider, model, process_kind, conversation_id,
        previous_request_id, has_previous,
        length(names) AS blocks,
        prefix_blocks,
        arraySum(arraySlice(sizes, 1, prefix_blocks)) AS prefix_bytes,
        tools_bytes,
        -- the verdict's inputs: what should come from the cache, and what the provider says did
        tools_bytes + prefix_bytes AS expected_prefix_bytes,
        intDiv(expected_prefix_bytes, {BYTES_PER_TOKEN}) AS expected_prefix_tokens,
        cache_read_tokens,
        cache_read_tokens IS NOT NULL AND cache_read_tokens >= expected_prefix_tokens AS cache_read_covers_prefix,
        has_previous AND expected_prefix_bytes > 0
            AND (tools_changed OR (changed_index > 0 AND changed_index <= prefix_blocks)) AS changed_in_prefix,
        has_previous AND prefix_blocks > 0 AND NOT tools_changed
            AND (changed_index = 0 OR changed_index > prefix_blocks) AS prefix_identical,
        changed_index,
        -- the first part in prompt order that changed: the tool definitions, then the blocks
        multiIf(NOT has_previous, '', tools_changed, '{TOOLS_PART}', changed_index = 0, '',
                changed_index <= length(names), names[changed_index],
                previous_names[changed_index]) AS changed_block,
        multiIf(NOT has_previous, '', tools_changed, 'static', changed_index = 0, '',
                changed_index <= length(names), stabilities[changed_index],
                previous_stabilities[changed_index]) AS changed_stability,
        NOT tools_changed AND changed_index <= length(names) AND changed_index > 0
            AND changed_index > length(previous_hashes) AS changed_is_new,
        changed_in_prefix AND NOT cache_read_covers_prefix AS cache_break,
        -- static and session bytes at or after the change that broke the cache: a
        -- prefix cache cannot serve them
        if(cache_break,
           if(tools_changed, tools_bytes, 0)
           + arraySum((stability, size, position) -> if(stability IN {STABLE}
                                                        AND (tools_changed OR position >= changed_index), size, 0),
                      stabilities, sizes, arrayEnumerate(sizes)),
           0) AS rewritten_bytes,
        -- what a prefix cache should still have served: the expected prefix up to the first change
        if(has_previous AND NOT tools_changed,
           tools_bytes + arraySum(arraySlice(sizes, 1,
               if(changed_index = 0, prefix_blocks, least(prefix_blocks, changed_index - 1)))),
           0) AS expected_cached_bytes,
        intDiv(expected_cached_bytes, {BYTES_PER_TOKEN}) AS expected_cached_tokens,
        misplaced_index > 0 AS turn_before_stable,
        if(misplaced_index = 0, '', names[misplaced_index]) AS misplaced_block,
        if(misplaced_index = 0, '', names[displaced_index]) AS displaced_block,
        arraySum((stability, size, position) -> if(stability IN {STABLE} AND position > misplaced_index, size, 0),
                 stabilities, sizes, arrayEnumerate(sizes)) * (misplaced_index > 0) AS stable_bytes_after_turn,
        input_tokens,
        has_previous AND NOT changed_in_prefix AND cache_read_tokens IS NOT NULL AND expected_prefix_tokens > 0
            AND cache_read_tokens < expected_prefix_tokens * {PROVIDER_MISS_SHARE} AS provider_missed,
        multiIf(misplaced_index > 0, 'turn_before_stable',
                NOT has_previous, 'first',
                cache_break, 'break',
                provider_missed, 'provider_miss',
                'ok') AS verdict
    FROM positions
    WHERE {rows}
"""

# --- readers: the rollup's whole hours plus an analysis of the rest -----------------

# The rest of the window: rows of hours the rollup does not serve, and the
# requests of their lineages (for the previous request of each).
def _unrolled_analysis(plan: hours.Plan) -> str:
    rows = "{{time_filter:started_at}} AND " + plan.not_rolled("started_at")
    scope = ("lineage_key IN (SELECT lineage_key FROM {{db}}.requests WHERE mapped AND "
             + rows + " AND {{filters}} AND {{conversation_filter}})")
    return cache_analysis(rows, scope)


def _with(ctes: list[str]) -> str:
    return "WITH " + ", ".join(ctes) + "\n" if ctes else ""


# Whole hours the rollups serve: none for one conversation (they know none).
_IN_WINDOW = (hours.INSIDE_WINDOW, hours.CONVERSATION_UNSET)

# The newest `limit` requests of the window; only their lineages are analysed.
_NEWEST = """newest AS (
        SELECT request_id, lineage_key FROM {{db}}.requests
        WHERE mapped AND {{time_filter:started_at}} AND {{filters}} AND {{conversation_filter}}
        ORDER BY started_at DESC, request_id
        LIMIT {{limit}}
    )"""
_NEWEST_ANALYSIS = cache_analysis(
    "{{time_filter:started_at}} AND request_id IN (SELECT request_id FROM newest)",
    "lineage_key IN (SELECT lineage_key FROM newest)")

CACHE_REQUESTS = InsightQuery(
    name="cache_requests",
    title="Cache analysis per request",
    description="For each request: the verdict and its inputs — the expected cacheable prefix (tool "
    "definitions and leading static and session blocks, bytes and ≈ tokens) against the provider's reported "
    "cache_read_tokens — the first part that changed since the previous request of its lineage, and turn "
    "blocks placed before stable blocks.",
    panel="table",
    sql=f"""
WITH {_NEWEST}
SELECT
    started_at AS time, trace_id, request_id, service, provider, model, process_kind, conversation_id, verdict,
    changed_block, changed_stability, expected_prefix_bytes, expected_prefix_tokens, cache_read_tokens,
    cache_read_covers_prefix, changed_in_prefix, prefix_blocks, prefix_bytes, tools_bytes, prefix_identical,
    expected_cached_tokens, rewritten_bytes,
    misplaced_block, displaced_block, stable_bytes_after_turn, previous_request_id, changed_index, changed_is_new,
    has_previous, cache_break, turn_before_stable, provider_missed, expected_cached_bytes, input_tokens, blocks
FROM ({_NEWEST_ANALYSIS})
ORDER BY time DESC, request_id
LIMIT {{{{limit}}}}
""",
    params=("since", "until", "service", "model", "process", "conversation", "limit"),
)

def _cache_breaks_by_block(plan: hours.Plan) -> str:
    ctes = plan.ctes(*_IN_WINDOW)
    branches = plan.union(f"""SELECT toString(break_block) AS block, toString(break_stability) AS block_stability, breaks AS block_breaks,
           bytes_rewritten AS block_bytes, expected_prefix_tokens_sum AS expected_sum,
           cache_read_tokens_sum AS read_sum, cache_read_reported AS reported,
           conversations AS block_conversations, break_trace_id AS example
    FROM {{{{db}}}}.cache_hourly
    WHERE {plan.rolled} AND {{{{filters}}}} AND breaks > 0""",
                          f"""-- typed as the rollup's columns: UNION ALL of Int64 and UInt64 is a Variant in 26.x
    -- (named as the rollup branch: without rolled-up hours it is the only one)
    SELECT changed_block AS block, any(changed_stability) AS block_stability, count() AS block_breaks,
           toUInt64(sum(rewritten_bytes)) AS block_bytes, toUInt64(sum(expected_prefix_tokens)) AS expected_sum,
           toInt64(sum(ifNull(cache_read_tokens, 0))) AS read_sum, countIf(cache_read_tokens IS NOT NULL) AS reported,
           uniqExactState(conversation_id) AS block_conversations, any(trace_id) AS example
    FROM ({_unrolled_analysis(plan)})
    WHERE cache_break
    GROUP BY changed_block""")
    return f"""
{_with(ctes)}SELECT
    block,
    any(block_stability) AS stability,
    sum(block_breaks) AS breaks,
    sum(block_bytes) AS bytes_rewritten,
    intDiv(bytes_rewritten, {BYTES_PER_TOKEN}) AS tokens_rewritten,
    toUInt64(round(sum(expected_sum) / breaks)) AS expected_prefix_tokens,
    toUInt64(round(if(sum(reported) = 0, NULL, sum(read_sum) / sum(reported)))) AS reported_cache_read_tokens,
    uniqExactMerge(block_conversations) AS conversations,
    any(example) AS example_trace_id
FROM (
    {branches}
)
GROUP BY block
ORDER BY breaks DESC, bytes_rewritten DESC, block
"""


CACHE_BREAKS_BY_BLOCK = InsightQuery(
    name="cache_breaks_by_block",
    title="Blocks that broke the cache",
    description="Follow-up requests whose reported cache reads fell short of the expected cacheable prefix, "
    "grouped by the first part (tools, then blocks in prompt order) that changed within that prefix since "
    "the previous request of the lineage; with the average expected prefix and reported cache read.",
    panel="table",
    sql=_cache_breaks_by_block(hours.Lookup()),
    build=_cache_breaks_by_block,
    params=("since", "until", "service", "model", "process", "conversation"),
)

def _cache_misordered(plan: hours.Plan) -> str:
    ctes = plan.ctes(*_IN_WINDOW)
    branches = plan.union(f"""SELECT toString(misplaced_block) AS block, toString(displaced_block) AS before,
           toString(service) AS block_service, misordered AS block_requests,
           stable_bytes_after_turn_sum AS stable_bytes, misordered_trace_id AS example
    FROM {{{{db}}}}.cache_hourly
    WHERE {plan.rolled} AND {{{{filters}}}} AND misordered > 0""",
                          f"""SELECT misplaced_block AS block, any(displaced_block) AS before, toString(service) AS block_service,
           count() AS block_requests, toUInt64(sum(stable_bytes_after_turn)) AS stable_bytes, any(trace_id) AS example
    FROM ({_unrolled_analysis(plan)})
    WHERE turn_before_stable
    GROUP BY misplaced_block, service""")
    return f"""
{_with(ctes)}SELECT
    block,
    any(before) AS before_block,
    sum(block_requests) AS requests,
    toUInt64(round(sum(stable_bytes) / requests)) AS uncacheable_bytes,
    intDiv(uncacheable_bytes, {BYTES_PER_TOKEN}) AS uncacheable_tokens,
    uniqExact(block_service) AS services,
    any(example) AS example_trace_id
FROM (
    {branches}
)
GROUP BY block
ORDER BY requests DESC, block
"""


CACHE_MISORDERED = InsightQuery(
    name="cache_misordered",
    title="Turn blocks placed before stable blocks",
    description="Requests where a turn block (changes every request) sits before static or session "
    "blocks: everything stable after it can never be served from the prompt cache.",
    panel="table",
    sql=_cache_misordered(hours.Lookup()),
    build=_cache_misordered,
    params=("since", "until", "service", "model", "process", "conversation"),
)

def _cache_series(plan: hours.Plan) -> str:
    ctes = plan.ctes(*_IN_WINDOW, hours.HOUR_BUCKETS)
    branches = plan.union(f"""SELECT {{{{bucket:hour}}}} AS time, follow_ups AS bucket_follow_ups, breaks AS bucket_breaks,
           misordered AS bucket_misordered, provider_misses AS bucket_provider_misses
    FROM {{{{db}}}}.cache_hourly
    WHERE {plan.rolled} AND {{{{filters}}}}""",
                          f"""-- if(…, 1, 0): a verdict is Nullable (reported tokens may be NULL), NULL counts as false as in countIf
    SELECT {{{{bucket:started_at}}}} AS time, toUInt64(if(has_previous, 1, 0)) AS bucket_follow_ups,
           toUInt64(if(cache_break, 1, 0)) AS bucket_breaks, toUInt64(if(turn_before_stable, 1, 0)) AS bucket_misordered,
           toUInt64(if(provider_missed, 1, 0)) AS bucket_provider_misses
    FROM ({_unrolled_analysis(plan)})""")
    return f"""
{_with(ctes)}SELECT
    time,
    sum(bucket_follow_ups) AS follow_ups,
    sum(bucket_breaks) AS breaks,
    sum(bucket_misordered) AS misordered,
    sum(bucket_provider_misses) AS provider_misses
FROM (
    {branches}
)
GROUP BY time
ORDER BY time
"""


CACHE_SERIES = InsightQuery(
    name="cache_series",
    title="Cache breaks over time",
    description="Per time bucket: requests that followed an earlier one in their lineage, those whose "
    "cache broke (reported cache reads short of the expected prefix, a part of it changed), those with a "
    "turn block before stable blocks, and those where the provider reported far fewer cached tokens than "
    "the unchanged prefix should give.",
    panel="timeseries",
    sql=_cache_series(hours.Lookup()),
    build=_cache_series,
    params=("since", "until", "bucket_seconds", "service", "model", "process", "conversation"),
)

