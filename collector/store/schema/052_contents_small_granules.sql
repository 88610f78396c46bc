-- promptprism schema, migration 052: `contents` in granules of 32 rows, compressed in 16 KB blocks.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- A request object's text is one read of `contents` by (day, key), and its
-- keys are random: each lands in its own granule. With 128-row granules in
-- compressed blocks of up to 1 MB, that read decompressed a block of ~1 MB
-- for each ~0.7 KB text and was the largest part of GET /api/traces/{id}
-- on the 1 M-request store (~15–18 ms of ~45 for ~50 keys; session 17).
-- 32-row granules in 16 KB blocks read the same keys in ~10–13 ms. They
-- compress worse: the text is compressed with ZSTD(6) instead of ZSTD(3)
-- to win back part of it (decompression is as fast at any level), +89 B
-- per request on benchmarks/storage.py's traffic, which otel_traces paid
-- for by leaving out the digests the request documents hold (−157 B;
-- write/rows.py, DOCUMENT_DIGESTS).
--
-- index_granularity cannot be changed in place, so the table is rebuilt the
-- way migrations 006, 023 and 040 rebuilt it (staging table, copy, EXCHANGE
-- TABLES, catch-up copy, drop; on a cluster the same steps ON CLUSTER, the
-- copies through the Distributed tables). It copies the whole table once:
-- allow for the time (~1.5 min for 4 M texts, 1 GB, on 2 cores) and three times the
-- disk of `contents` while it runs (the catch-up copy repeats each text until
-- the day's parts merge; reads take one copy).
DROP TABLE IF EXISTS ${db}.contents__rebuild;

CREATE TABLE IF NOT EXISTS ${db}.contents__rebuild
(
    day Date,
    sha256 String,
    size UInt64,
    content String CODEC(ZSTD(6))
)
ENGINE = ReplacingMergeTree
PARTITION BY day
ORDER BY (day, sha256)
TTL day + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000, index_granularity = 32,
         min_compress_block_size = 16384, max_compress_block_size = 16384;

INSERT INTO ${db}.contents__rebuild (day, sha256, size, content)
SELECT day, sha256, size, content FROM ${db}.contents;

EXCHANGE TABLES ${db}.contents AND ${db}.contents__rebuild;

INSERT INTO ${db}.contents (day, sha256, size, content)
SELECT day, sha256, size, content FROM ${db}.contents__rebuild;

DROP TABLE IF EXISTS ${db}.contents__rebuild
