-- promptprism schema, migration 042: `request_ids` in granules of 1,024 rows.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- A request id names no day, so `GET /api/requests/{id or prefix}` reads one
-- granule of `request_ids` in every day partition (migration 020): 14 on a
-- store of 14 days, 8,192 ids of 4 columns each to find one. With 1,024 rows
-- a lookup on 1 M requests costs ~7 ms of CPU instead of ~12 (a prefix ~7
-- instead of ~10), for ~3 % more bytes of this table (~1 B per request).
--
-- index_granularity cannot be changed in place, so the table is rebuilt
-- (staging table, EXCHANGE TABLES, drop; on a cluster ON CLUSTER). It is the
-- target of `request_ids_mv`, which names its target by identity: the view is
-- dropped first and made again after the exchange, and the table is then
-- filled from `requests` itself, as migration 020 filled it (a row inserted
-- meanwhile, or one the view also wrote, collapses with its copy; readers
-- take LIMIT 1 BY request_id). A run interrupted anywhere can run again.
DROP TABLE IF EXISTS ${db}.request_ids__rebuild;

CREATE TABLE IF NOT EXISTS ${db}.request_ids__rebuild
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
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000, index_granularity = 1024;

DROP TABLE IF EXISTS ${db}.request_ids_mv;

EXCHANGE TABLES ${db}.request_ids AND ${db}.request_ids__rebuild;

CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.request_ids_mv TO ${db}.request_ids AS
SELECT request_id, started_at, service, trace_id FROM ${db}.requests;

INSERT INTO ${db}.request_ids (request_id, started_at, service, trace_id)
SELECT request_id, started_at, service, trace_id FROM ${db}.requests;

DROP TABLE IF EXISTS ${db}.request_ids__rebuild;
