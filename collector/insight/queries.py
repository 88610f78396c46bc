"""The named insight queries: one SQL text, two renderings.

Each query is written once with a handful of ``{{slot}}`` placeholders and
rendered for one of two front doors:

* ``STORE`` — the collector's API (and through it the CLI and the overview
  page): every value is a bound ClickHouse parameter (``{name:Type}``), the
  database too (``{db:Identifier}``).
* ``GRAFANA`` — the dashboards: the slots become the official ClickHouse
  plugin's macros (``$__timeFilter``, ``$__timeInterval``,
  ``$__conditionalAll`` …) and dashboard variables (``${database}``,
  ``${service:singlequote}`` …).

So a panel, an API answer and a CLI line are the same SQL by construction;
``grafana.py`` builds the dashboard JSON from these objects and a test
checks the committed JSON against it.

Queries read the views ``prompt_requests`` and ``prompt_blocks`` (migration
004), not the ``requests`` and ``blocks`` tables: the views apply ``FINAL``
(the tables are ReplacingMergeTree; a re-sent batch collapses on merge) and
fill in the system prompt of a request whose content arrived as OTLP log
events, as the one unmapped block the API serves for it. So no query needs
to know which way a prompt travelled. Token counts are estimates at
``BYTES_PER_TOKEN``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The usual rule of thumb for English prose and code in BPE tokenizers; the
# manifest's own estimate (requests.tokens_estimate) uses the same ratio.
BYTES_PER_TOKEN = 4

# Breakdowns the growth queries accept, mapped to the column they group by.
DIMENSIONS = {
    "name": "name",
    "layer": "layer",
    "stability": "stability",
    "service": "service",
    "model": "model",
    "process": "process_kind",
}

# Stabilities a provider's prompt cache can reuse across requests.
STABLE = "('static', 'session')"

# The previous request of a conversation may sit before the window; looking
# back a day finds it for every conversation that is still active.
CONVERSATION_LOOKBACK = "INTERVAL 1 DAY"


@dataclass(frozen=True)
class Dialect:
    name: str
    slots: dict[str, str]
    # Slots that take a column argument: {{time_filter:started_at}}.
    column_slots: dict[str, str] = field(default_factory=dict)


STORE = Dialect(
    "store",
    slots={
        "db": "{db:Identifier}",
        "from": "toDateTime({since:Int64}, 'UTC')",
        "to": "toDateTime({until:Int64}, 'UTC')",
        "bucket_seconds": "{bucket_seconds:UInt32}",
        "dimension": "{dimension:String}",
        "limit": "{limit:UInt32}",
        "filters": (
            "({service:String} = '' OR service = {service:String})"
            " AND ({model:String} = '' OR model = {model:String})"
            " AND ({process:String} = '' OR process_kind = {process:String})"
        ),
        "conversation_filter": "({conversation:String} = '' OR conversation_id = {conversation:String})",
    },
    column_slots={
        "time_filter": "{column} >= toDateTime({{since:Int64}}, 'UTC') AND {column} <= toDateTime({{until:Int64}}, 'UTC')",
        "bucket": "toStartOfInterval(toDateTime({column}), INTERVAL {{bucket_seconds:UInt32}} second)",
    },
)

# Dashboard variables the Grafana rendering refers to (grafana.py defines them).
GRAFANA = Dialect(
    "grafana",
    slots={
        "db": "${database}",
        "from": "$__fromTime",
        "to": "$__toTime",
        "bucket_seconds": "$__interval_s",
        "dimension": "${dimension:singlequote}",
        # A table shows the worst offenders first; 500 rows is more than a
        # panel can usefully show and keeps the browser responsive.
        "limit": "500",
        "filters": (
            "$__conditionalAll(service IN (${service:singlequote}), $service)"
            " AND $__conditionalAll(model IN (${model:singlequote}), $model)"
            " AND $__conditionalAll(process_kind IN (${process:singlequote}), $process)"
        ),
        # Conversations are drilled into from the inspector, not the dashboard.
        "conversation_filter": "1 = 1",
    },
    column_slots={
        "time_filter": "$__timeFilter({column})",
        "bucket": "$__timeInterval({column})",
    },
)

_SLOT = re.compile(r"\{\{([a-z_]+)(?::([a-z_]+))?\}\}")


@dataclass(frozen=True)
class InsightQuery:
    """One named query. ``panel`` says how Grafana shows it: ``timeseries``
    queries return ``time`` first, then an optional string series column,
    then numbers; ``table`` and ``stat`` queries return rows."""

    name: str
    title: str
    description: str
    panel: str
    sql: str
    # The parameters the STORE rendering binds (besides db).
    params: tuple[str, ...]

    def render(self, dialect: Dialect) -> str:
        def replace(match: re.Match) -> str:
            slot, column = match.group(1), match.group(2)
            if column is not None:
                return dialect.column_slots[slot].format(column=column)
            return dialect.slots[slot]

        return _SLOT.sub(replace, self.sql).strip()


# --- growth ------------------------------------------------------------------

# Every byte of every system prompt, attributed to a part: its block for
# mapped prompts, one "(unmapped)" part for prompts sent without a map, so the
# parts of a request always add up to its prompt_bytes.
_PROMPT_PARTS = """
    SELECT started_at, request_id, service, model, process_kind,
           toString(name) AS name, toString(layer) AS layer, toString(stability) AS stability,
           size
    FROM {{db}}.prompt_blocks
    WHERE {{window}} AND {{filters}}
      AND request_id IN (SELECT request_id FROM {{db}}.prompt_requests WHERE mapped AND {{window}})
    UNION ALL
    SELECT started_at, request_id, service, model, process_kind,
           '(unmapped)', '(unmapped)', '(unmapped)', prompt_bytes
    FROM {{db}}.prompt_requests
    WHERE {{window}} AND {{filters}} AND NOT mapped AND prompt_bytes > 0
"""

# Requests that carry a system prompt: the denominator of "bytes per request".
_PROMPT_REQUESTS = """
    SELECT started_at, request_id
    FROM {{db}}.prompt_requests
    WHERE {{window}} AND {{filters}} AND (mapped OR prompt_bytes > 0)
"""

_SERIES = """multiIf(
        {{dimension}} = 'layer', layer,
        {{dimension}} = 'stability', stability,
        {{dimension}} = 'service', toString(service),
        {{dimension}} = 'model', toString(model),
        {{dimension}} = 'process', toString(process_kind),
        name)"""


def _with_window(sql: str, window: str) -> str:
    return sql.replace("{{window}}", window)


GROWTH_SERIES = InsightQuery(
    name="growth_series",
    title="Prompt bytes per request by ${dimension}",
    description="Average system-prompt bytes per request in each time bucket, split by block name, "
    "layer, stability, service, model or process kind; the parts of a bucket add up to its average prompt.",
    panel="timeseries",
    sql=f"""
WITH
    parts AS ({_with_window(_PROMPT_PARTS, "{{time_filter:started_at}}")}),
    requests_per_bucket AS (
        SELECT {{{{bucket:started_at}}}} AS time, uniqExact(request_id) AS requests
        FROM ({_with_window(_PROMPT_REQUESTS, "{{time_filter:started_at}}")})
        GROUP BY time
    )
SELECT
    parts_per_bucket.time AS time,
    parts_per_bucket.series AS series,
    round(parts_per_bucket.bytes / requests_per_bucket.requests, 1) AS bytes_per_request
FROM (
    SELECT {{{{bucket:started_at}}}} AS time, {_SERIES} AS series, sum(size) AS bytes
    FROM parts
    GROUP BY time, series
) AS parts_per_bucket
INNER JOIN requests_per_bucket USING (time)
ORDER BY time, series
""",
    params=("since", "until", "bucket_seconds", "dimension", "service", "model", "process"),
)

# The window of the growth comparison: the selected period and the period of
# the same length just before it.
_COMPARISON_WINDOW = (
    "started_at >= {{from}} - ({{to}} - {{from}}) AND started_at <= {{to}}"
)

GROWTH_ATTRIBUTION = InsightQuery(
    name="growth_attribution",
    title="Growth attribution: this period against the one before",
    description="Bytes per request of each part in the selected period and in the period of the same "
    "length before it; contribution_pct is the part's share of the change of the whole prompt, "
    "so the contributions add up to the prompt's change_pct.",
    panel="table",
    sql=f"""
WITH
    {{{{from}}}} AS period_start,
    parts AS ({_with_window(_PROMPT_PARTS, _COMPARISON_WINDOW)}),
    totals AS (
        SELECT
            uniqExactIf(request_id, started_at >= period_start) AS current_requests,
            uniqExactIf(request_id, started_at < period_start) AS previous_requests
        FROM ({_with_window(_PROMPT_REQUESTS, _COMPARISON_WINDOW)})
    ),
    previous_prompt AS (
        SELECT sumIf(size, started_at < period_start) AS previous_bytes FROM parts
    )
SELECT
    series,
    round(if(previous_requests = 0, 0, previous_sum / previous_requests), 1) AS previous_bytes,
    round(if(current_requests = 0, 0, current_sum / current_requests), 1) AS current_bytes,
    round(current_bytes - previous_bytes, 1) AS delta_bytes,
    round(delta_bytes / {BYTES_PER_TOKEN}, 1) AS delta_tokens,
    if(previous_bytes = 0, NULL, round(100 * delta_bytes / previous_bytes, 2)) AS change_pct,
    if(previous_prompt_per_request = 0, NULL,
       round(100 * delta_bytes / previous_prompt_per_request, 2)) AS contribution_pct,
    previous_requests,
    current_requests
FROM (
    SELECT
        {_SERIES} AS series,
        sumIf(size, started_at >= period_start) AS current_sum,
        sumIf(size, started_at < period_start) AS previous_sum
    FROM parts
    GROUP BY series
) AS per_series
CROSS JOIN (
    SELECT current_requests, previous_requests,
           if(previous_requests = 0, 0, previous_bytes / previous_requests) AS previous_prompt_per_request
    FROM totals CROSS JOIN previous_prompt
) AS whole
ORDER BY abs(delta_bytes) DESC, series
""",
    params=("since", "until", "dimension", "service", "model", "process"),
)

GROWTH_TOTAL = InsightQuery(
    name="growth_total",
    title="Prompt change against the previous period",
    description="Average system-prompt bytes per request, this period against the one before.",
    panel="stat",
    sql=f"""
SELECT
    round(sum(previous_bytes), 1) AS previous_bytes,
    round(sum(current_bytes), 1) AS current_bytes,
    round(current_bytes - previous_bytes, 1) AS delta_bytes,
    round(delta_bytes / {BYTES_PER_TOKEN}, 1) AS delta_tokens,
    if(previous_bytes = 0, NULL, round(100 * delta_bytes / previous_bytes, 2)) AS change_pct,
    max(previous_requests) AS previous_requests,
    max(current_requests) AS current_requests
FROM ({GROWTH_ATTRIBUTION.sql})
""",
    params=GROWTH_ATTRIBUTION.params,
)


# --- cache breaks ------------------------------------------------------------

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


# --- context headroom ----------------------------------------------------------

# Only requests whose manifest knew the model's context window.
_HEADROOM_ROWS = """
    SELECT started_at, request_id, trace_id, service, model, process_kind,
           context_window, tokens_estimate, headroom_tokens,
           round(100 * tokens_estimate / context_window, 2) AS used_pct
    FROM {{db}}.prompt_requests
    WHERE {{time_filter:started_at}} AND {{filters}} AND context_window > 0
"""

HEADROOM_SERIES = InsightQuery(
    name="headroom_series",
    title="Context window used, by model",
    description="Per time bucket and model: the largest and the average share of the context window the "
    "request's estimated tokens used, and the smallest headroom left.",
    panel="timeseries",
    sql=f"""
SELECT
    {{{{bucket:started_at}}}} AS time,
    toString(model) AS model,
    max(used_pct) AS max_used_pct,
    round(avg(used_pct), 2) AS avg_used_pct,
    min(headroom_tokens) AS min_headroom_tokens
FROM ({_HEADROOM_ROWS})
GROUP BY time, model
ORDER BY time, model
""",
    params=("since", "until", "bucket_seconds", "service", "model", "process"),
)

HEADROOM_REQUESTS = InsightQuery(
    name="headroom_requests",
    title="Requests closest to the context limit",
    description="Requests with the least headroom first: context window, estimated tokens, headroom.",
    panel="table",
    sql=f"""
SELECT
    started_at AS time, trace_id, request_id, service, model, process_kind,
    context_window, tokens_estimate, headroom_tokens, used_pct
FROM ({_HEADROOM_ROWS})
ORDER BY headroom_tokens ASC, time DESC
LIMIT {{{{limit}}}}
""",
    params=("since", "until", "service", "model", "process", "limit"),
)

# --- requests --------------------------------------------------------------------

REQUESTS_TABLE = InsightQuery(
    name="requests_table",
    title="Requests",
    description="Newest requests with their prompt size, tokens and cache use; the trace id opens the "
    "request in the inspector and the trace in Grafana's trace view.",
    panel="table",
    sql=f"""
SELECT
    started_at AS time, trace_id, request_id, service, model, process_kind, conversation_id,
    prompt_bytes, intDiv(prompt_bytes, {BYTES_PER_TOKEN}) AS prompt_tokens_estimate, block_count,
    mapped, unmapped_reason, input_tokens, output_tokens, cache_read_tokens, headroom_tokens,
    round(duration_ns / 1e6, 1) AS duration_ms
FROM {{{{db}}}}.prompt_requests
WHERE {{{{time_filter:started_at}}}} AND {{{{filters}}}}
ORDER BY time DESC
LIMIT {{{{limit}}}}
""",
    params=("since", "until", "service", "model", "process", "limit"),
)

QUERIES: dict[str, InsightQuery] = {
    query.name: query
    for query in (
        GROWTH_SERIES, GROWTH_ATTRIBUTION, GROWTH_TOTAL,
        CACHE_REQUESTS, CACHE_BREAKS_BY_BLOCK, CACHE_MISORDERED, CACHE_SERIES,
        HEADROOM_SERIES, HEADROOM_REQUESTS,
        REQUESTS_TABLE,
    )
}
