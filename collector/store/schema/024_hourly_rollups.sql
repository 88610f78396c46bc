-- promptprism schema, migration 024: hourly rollups for the dashboard panels and insight queries.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- The growth and cache panels aggregated raw block rows at read time: on a
-- 1 M-request store a 7-day growth panel took 2–19 s and the cache panels
-- ran over the read side's 1 GiB memory limit (a window function over every
-- request of 8 days with its block arrays). These tables hold the same
-- aggregates per hour.
--
-- They are NOT materialized views. A provider call can be written again as a
-- richer replacement row with the same key (issue 11: the second span of one
-- call arriving in a later export), and a span re-sent under a new
-- deduplication token is collapsed by the ReplacingMergeTree `requests` but
-- would be summed twice by a view; a cache verdict also needs the previous
-- request of the lineage, which may arrive in another batch. So the
-- collector's rollup job (collector/read/insight/rollups.py) recomputes whole
-- hours from the deduplicated rows (FINAL over those hours only) whenever an
-- hour received rows, and writes every row of one computation with the same
-- `computed_at`; `rollup_hours` then records that computation. Readers use,
-- per hour, only the rows of the newest recorded computation, only for whole
-- hours inside their window, and analyse everything else (the current hour,
-- the edges of a window, hours the job has not done yet) from raw rows, so an
-- answer is the raw computation's whatever the job's progress.
-- The data tables are ReplacingMergeTree versioned by computed_at so that
-- repeated computations of an hour collapse on merge.

-- One row per computation of an hour (all three data tables at once).
CREATE TABLE IF NOT EXISTS ${db}.rollup_hours
(
    hour DateTime('UTC'),
    computed_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(computed_at)
PARTITION BY toDate(hour)
ORDER BY hour
TTL hour + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1;

-- When the job last ran (it looks for rows received since then).
CREATE TABLE IF NOT EXISTS ${db}.rollup_runs
(
    job LowCardinality(String),
    ran_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(ran_at)
ORDER BY job;

-- Prompt bytes per hour, lineage and part (a block's name, layer and
-- stability; one "(unmapped)" part for a prompt without a map): the growth
-- series and the lineage-matched growth attribution.
CREATE TABLE IF NOT EXISTS ${db}.prompt_parts_hourly
(
    hour DateTime('UTC'),
    computed_at DateTime64(3, 'UTC'),
    service LowCardinality(String),
    model LowCardinality(String),
    process_kind LowCardinality(String),
    lineage_key UInt64,
    name LowCardinality(String),
    layer LowCardinality(String),
    stability LowCardinality(String),
    bytes UInt64
)
ENGINE = ReplacingMergeTree(computed_at)
PARTITION BY toDate(hour)
ORDER BY (hour, service, model, process_kind, lineage_key, name, layer, stability)
TTL hour + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1;

-- Requests with a system prompt per hour and lineage: the denominators.
CREATE TABLE IF NOT EXISTS ${db}.prompt_requests_hourly
(
    hour DateTime('UTC'),
    computed_at DateTime64(3, 'UTC'),
    service LowCardinality(String),
    model LowCardinality(String),
    process_kind LowCardinality(String),
    lineage_key UInt64,
    requests UInt64
)
ENGINE = ReplacingMergeTree(computed_at)
PARTITION BY toDate(hour)
ORDER BY (hour, service, model, process_kind, lineage_key)
TTL hour + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1;

-- Cache verdicts per hour, lineage columns, the block that broke the cache
-- (empty: no break) and the turn block placed before stable blocks (empty:
-- none): the cache series, the blocks that broke the cache, the misordered
-- blocks.
CREATE TABLE IF NOT EXISTS ${db}.cache_hourly
(
    hour DateTime('UTC'),
    computed_at DateTime64(3, 'UTC'),
    service LowCardinality(String),
    provider LowCardinality(String),
    model LowCardinality(String),
    process_kind LowCardinality(String),
    break_block LowCardinality(String),
    break_stability LowCardinality(String),
    misplaced_block LowCardinality(String),
    displaced_block LowCardinality(String),
    requests UInt64,
    follow_ups UInt64,
    breaks UInt64,
    misordered UInt64,
    provider_misses UInt64,
    bytes_rewritten UInt64,
    expected_prefix_tokens_sum UInt64,
    cache_read_tokens_sum Int64,
    cache_read_reported UInt64,
    stable_bytes_after_turn_sum UInt64,
    conversations AggregateFunction(uniqExact, String),
    break_trace_id String,
    misordered_trace_id String
)
ENGINE = ReplacingMergeTree(computed_at)
PARTITION BY toDate(hour)
ORDER BY (hour, service, provider, model, process_kind, break_block, break_stability, misplaced_block, displaced_block)
TTL hour + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1;

-- SPEC §4 lineage, as collector/read/lineage.py's LINEAGE_SQL hashed
-- (LINEAGE_KEY_SQL; a test holds them side by side): stored, because hashing
-- five strings per row costs more than the rest of a cache analysis.
ALTER TABLE ${db}.requests ADD COLUMN IF NOT EXISTS lineage_key UInt64 MATERIALIZED sipHash64(if(conversation_id != '', tuple('conversation', conversation_id, toString(service), toString(provider), toString(model), toString(process_kind), ''), tuple('trace', trace_id, toString(service), toString(provider), toString(model), toString(process_kind), process_id)));

-- The job finds the hours that received rows since its last run.
ALTER TABLE ${db}.requests ADD INDEX IF NOT EXISTS idx_received_at received_at TYPE minmax GRANULARITY 1;

-- Rows written before this migration (a mutation: it runs in the background on a server).
ALTER TABLE ${db}.requests MATERIALIZE COLUMN lineage_key;
ALTER TABLE ${db}.requests MATERIALIZE INDEX idx_received_at
