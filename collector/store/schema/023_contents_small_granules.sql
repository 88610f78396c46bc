-- promptprism schema, migration 023: `contents` in granules of 128 rows.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- A request's text is read by key, (day, sha256), and its keys are random:
-- each lands in another granule. With the default 8,192 rows a granule of
-- text is ~8 MB to decompress for one ~1 KB row, and a request of ~100 keys
-- (its blocks, tools and messages) read ~130–190 ms of CPU of `contents` on a
-- 1 M-request store (benchmarks/reads.py) — most of GET /api/traces/{id}.
-- 128 rows (~130 KB) make each key one small read, for a few per cent more
-- bytes (the sparse index and smaller compressed blocks: the design measured
-- +9 % over 8,192 rows, +2 % over 256).
--
-- index_granularity cannot be changed in place, so the table is rebuilt the
-- way migration 006 rebuilt it (staging table, copy, EXCHANGE TABLES,
-- catch-up copy, drop; on a cluster ON CLUSTER, the copy through the
-- Distributed tables). It copies the whole table once: allow for the time
-- and twice the disk of `contents` while it runs.
DROP TABLE IF EXISTS ${db}.contents__rebuild;

CREATE TABLE IF NOT EXISTS ${db}.contents__rebuild
(
    day Date,
    sha256 String,
    size UInt64,
    content String CODEC(ZSTD(3))
)
ENGINE = ReplacingMergeTree
PARTITION BY day
ORDER BY (day, sha256)
TTL day + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000, index_granularity = 128;

INSERT INTO ${db}.contents__rebuild (day, sha256, size, content)
SELECT day, sha256, size, content FROM ${db}.contents;

EXCHANGE TABLES ${db}.contents AND ${db}.contents__rebuild;

INSERT INTO ${db}.contents (day, sha256, size, content)
SELECT day, sha256, size, content FROM ${db}.contents__rebuild;

DROP TABLE IF EXISTS ${db}.contents__rebuild
