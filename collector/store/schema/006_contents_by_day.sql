-- promptprism schema, migration 006: `contents` keyed by (day, sha256).
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- 001 created `contents` PARTITION BY day but ORDER BY sha256 alone. Merges
-- never cross partitions, so every day's row was still stored, but FINAL
-- deduplicates by the sorting key across partitions: a text stored on seven
-- days read back as the newest day's row only, and the read side, which
-- looks text up by (day, sha256), found nothing for the six older days. With
-- the day in the sorting key, FINAL keeps one row per (day, sha256): the
-- identity of a row, as the TTL needs it (a request on day D finds its text
-- in partition D, which lives exactly as long as the request).
--
-- ClickHouse cannot change a sorting key in place (MODIFY ORDER BY only
-- appends new columns), so the table is rebuilt: a new table under a staging
-- name, every stored row copied (without FINAL: each day's row is still
-- there), the two swapped atomically (EXCHANGE TABLES), rows the old table
-- received during the copy copied again (duplicates collapse: same key,
-- same text), the old table dropped.
--
-- Every run starts from a clean staging table, so a run interrupted at any
-- statement converges when it is applied again: it rebuilds whatever
-- `contents` is by then. Rows another collector writes between the copy and
-- the swap are lost only if the run is interrupted right after the swap.
-- The rebuilt table takes its TTL from PROMPTPRISM_RETENTION_DAYS; a
-- retention changed by hand (docs/operations.md) is to be set there as well.
-- The drops are not SYNC: chdb 2.1.1 (ClickHouse 24.8) fails a synchronous
-- drop; an Atomic database frees the name at once and the disk a little later.
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
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000;

INSERT INTO ${db}.contents__rebuild (day, sha256, size, content)
SELECT day, sha256, size, content FROM ${db}.contents;

EXCHANGE TABLES ${db}.contents AND ${db}.contents__rebuild;

INSERT INTO ${db}.contents (day, sha256, size, content)
SELECT day, sha256, size, content FROM ${db}.contents__rebuild;

DROP TABLE IF EXISTS ${db}.contents__rebuild
