-- promptprism schema, migration 041: otel_traces' attribute columns compressed with ZSTD(6).
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- The exporter's DDL (migration 002) compresses every column with ZSTD(1).
-- Two columns hold most of the table's bytes: `Events.Attributes` (the block
-- and tool events' metadata: names, layers, digests, sizes, repeated by every
-- request of a service) and `SpanAttributes`. ZSTD(6) finds those repeats
-- that level 1 misses: on the benchmark's traffic (benchmarks/storage.py) the
-- table went from ~464 to ~345 B per request, for ~5 ms more CPU per 1,024
-- spans inserted (21 → 26 ms, median of 20 inserts of the same rows, merges
-- stopped: ~1 % of converting an export). Reads decompress as fast at any
-- level. The
-- columns, their types and what Grafana reads are unchanged; parts written
-- before take the codec when they merge.
ALTER TABLE ${db}.otel_traces MODIFY COLUMN `Events.Attributes` CODEC(ZSTD(6));

ALTER TABLE ${db}.otel_traces MODIFY COLUMN SpanAttributes CODEC(ZSTD(6))
