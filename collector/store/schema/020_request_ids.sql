-- promptprism schema, migration 020: a lookup table from request id to where the request is stored.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- `requests`, `blocks` and `tools` are sorted by (service, hour, …): a time
-- window prunes by key, but a request id alone names no key range, and FINAL
-- (which a ReplacingMergeTree read needs for exact answers) turns off the
-- bloom filters. `GET /api/requests/{id or prefix}` therefore reads this
-- table first: sorted by the id, a prefix reads one granule per day partition
-- (startsWith on the sorting key), and the row gives the request's service,
-- start and trace — the sorting key of its `requests`, `blocks` and `tools`
-- rows, so the next reads are primary-key point reads.
-- Filled by a materialized view from every insert into `requests` (the
-- inserts carry deduplicate_blocks_in_dependent_materialized_views, so a
-- re-sent batch is dropped here too) and backfilled once below; readers take
-- LIMIT 1 BY request_id, never FINAL. The start is part of the sorting key so
-- that a row's key fixes its day partition (see 006).
CREATE TABLE IF NOT EXISTS ${db}.request_ids
(
    request_id String CODEC(ZSTD(1)),
    started_at DateTime64(9, 'UTC') CODEC(ZSTD(1)),
    service LowCardinality(String),
    trace_id String CODEC(ZSTD(1))
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(started_at)
ORDER BY (request_id, started_at)
TTL toDateTime(started_at) + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.request_ids_mv TO ${db}.request_ids AS
SELECT request_id, started_at, service, trace_id FROM ${db}.requests;

-- Rows written before this migration (a row the view also saw collapses with it).
INSERT INTO ${db}.request_ids (request_id, started_at, service, trace_id)
SELECT request_id, started_at, service, trace_id FROM ${db}.requests
