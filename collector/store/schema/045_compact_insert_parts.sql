-- promptprism schema, migration 045: `otel_traces` and `blocks` write parts under 64 MB compact.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- A part in ClickHouse's wide format is two files per column stream (data and
-- marks) plus its indexes: a part of `otel_traces` is ~128 files (maps and
-- nested columns hold several streams each), of `blocks` ~76. A compact part
-- keeps every column in one data file and one marks file: ~14. Every INSERT of
-- a group of exports writes one part per table, and every merge another, so a
-- group of four 512-span exports created ~270 files and most of the INSERT's
-- CPU went to the kernel creating them: on this project's machine (ext4
-- without a journal, where each new inode is looked for past recently deleted
-- ones) ~24 % of the collector process's CPU was inode allocation, and
-- inserting a group of four exports took ~465 ms with wide parts against
-- ~280 with compact ones (median of 12 groups each, alternating; README
-- "Ingest throughput"). Other file systems pay less for a file, but a few
-- files instead of a hundred are cheaper everywhere.
--
-- Below 64 MB uncompressed (default 10 MB) a part is compact: a group of
-- exports is ~4–5 MB per 512-span export in each of these tables, and the
-- sink's groups hold at most ~8 exports, so what ingest writes is compact and
-- the merges past 64 MB make wide parts, as before, for the reads that scan a
-- column over many rows. Columns, keys, codecs and what any query reads are
-- unchanged; existing parts keep their format until they merge. A later
-- migration that rebuilds either table gives the new table this setting too.
ALTER TABLE ${db}.otel_traces MODIFY SETTING min_bytes_for_wide_part = 67108864;

ALTER TABLE ${db}.blocks MODIFY SETTING min_bytes_for_wide_part = 67108864
