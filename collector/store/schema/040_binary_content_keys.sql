-- promptprism schema, migration 040: content keys as 16 raw bytes.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- `contents` was keyed by the sha256 of its text as 64 hex characters, and
-- `request_content` listed those keys for every item of every request. Random
-- hex hardly compresses: the key column of `contents` took ~240 B per request
-- (more than everything in `requests`), the key lists of `request_content`
-- ~180 B. Both now hold the digest's first 16 bytes, raw
-- (record.stored_content_key), in the same String columns: ~66 and ~95 B per
-- request on the benchmark's traffic (benchmarks/storage.py). The API still
-- shows the blocks' and tools' full hex digests (their own columns); the read
-- side asks `contents` by unhex of the first 32 hex characters.
--
-- The column types do not change, so the tables are rebuilt the way
-- migrations 006 and 023 rebuilt `contents` (staging table, copy with the
-- keys converted, EXCHANGE TABLES, catch-up copy, drop; on a cluster the same
-- steps ON CLUSTER, the copies through the Distributed tables). A key already
-- 16 bytes long is copied as it is, so a run interrupted after the exchange
-- can run again. Allow for the time and twice the disk of both tables while
-- it runs.
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
SELECT day, if(length(sha256) = 16, sha256, unhex(substring(sha256, 1, 32))), size, content FROM ${db}.contents;

EXCHANGE TABLES ${db}.contents AND ${db}.contents__rebuild;

INSERT INTO ${db}.contents (day, sha256, size, content)
SELECT day, if(length(sha256) = 16, sha256, unhex(substring(sha256, 1, 32))), size, content
FROM ${db}.contents__rebuild;

DROP TABLE IF EXISTS ${db}.contents__rebuild;

DROP TABLE IF EXISTS ${db}.request_content__rebuild;

CREATE TABLE IF NOT EXISTS ${db}.request_content__rebuild
(
    thread String CODEC(ZSTD(1)),
    started_at DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    request_id String CODEC(ZSTD(1)),
    system_instructions_form UInt8,
    system_instructions_names Array(String) CODEC(ZSTD(1)),
    system_instructions_keys Array(String) CODEC(ZSTD(1)),
    system_instructions_raw Array(UInt8) CODEC(ZSTD(1)),
    system_instructions_finish_reasons Array(LowCardinality(String)),
    input_messages_form UInt8,
    input_messages_names Array(String) CODEC(ZSTD(1)),
    input_messages_keys Array(String) CODEC(ZSTD(1)),
    input_messages_raw Array(UInt8) CODEC(ZSTD(1)),
    input_messages_finish_reasons Array(LowCardinality(String)),
    output_messages_form UInt8,
    output_messages_names Array(String) CODEC(ZSTD(1)),
    output_messages_keys Array(String) CODEC(ZSTD(1)),
    output_messages_raw Array(UInt8) CODEC(ZSTD(1)),
    output_messages_finish_reasons Array(LowCardinality(String)),
    template_variables_form UInt8,
    template_variables_names Array(String) CODEC(ZSTD(1)),
    template_variables_keys Array(String) CODEC(ZSTD(1)),
    template_variables_raw Array(UInt8) CODEC(ZSTD(1)),
    template_variables_finish_reasons Array(LowCardinality(String))
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(started_at)
ORDER BY (thread, started_at, request_id)
TTL toDateTime(started_at) + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000, index_granularity = 1024;

INSERT INTO ${db}.request_content__rebuild (thread, started_at, request_id,
     system_instructions_form, system_instructions_names, system_instructions_keys, system_instructions_raw,
     system_instructions_finish_reasons,
     input_messages_form, input_messages_names, input_messages_keys, input_messages_raw,
     input_messages_finish_reasons,
     output_messages_form, output_messages_names, output_messages_keys, output_messages_raw,
     output_messages_finish_reasons,
     template_variables_form, template_variables_names, template_variables_keys, template_variables_raw,
     template_variables_finish_reasons)
SELECT thread, started_at, request_id,
       system_instructions_form, system_instructions_names,
       arrayMap(k -> if(length(k) = 16, k, unhex(substring(k, 1, 32))), system_instructions_keys),
       system_instructions_raw, system_instructions_finish_reasons,
       input_messages_form, input_messages_names,
       arrayMap(k -> if(length(k) = 16, k, unhex(substring(k, 1, 32))), input_messages_keys),
       input_messages_raw, input_messages_finish_reasons,
       output_messages_form, output_messages_names,
       arrayMap(k -> if(length(k) = 16, k, unhex(substring(k, 1, 32))), output_messages_keys),
       output_messages_raw, output_messages_finish_reasons,
       template_variables_form, template_variables_names,
       arrayMap(k -> if(length(k) = 16, k, unhex(substring(k, 1, 32))), template_variables_keys),
       template_variables_raw, template_variables_finish_reasons
FROM ${db}.request_content;

EXCHANGE TABLES ${db}.request_content AND ${db}.request_content__rebuild;

INSERT INTO ${db}.request_content (thread, started_at, request_id,
     system_instructions_form, system_instructions_names, system_instructions_keys, system_instructions_raw,
     system_instructions_finish_reasons,
     input_messages_form, input_messages_names, input_messages_keys, input_messages_raw,
     input_messages_finish_reasons,
     output_messages_form, output_messages_names, output_messages_keys, output_messages_raw,
     output_messages_finish_reasons,
     template_variables_form, template_variables_names, template_variables_keys, template_variables_raw,
     template_variables_finish_reasons)
SELECT thread, started_at, request_id,
       system_instructions_form, system_instructions_names,
       arrayMap(k -> if(length(k) = 16, k, unhex(substring(k, 1, 32))), system_instructions_keys),
       system_instructions_raw, system_instructions_finish_reasons,
       input_messages_form, input_messages_names,
       arrayMap(k -> if(length(k) = 16, k, unhex(substring(k, 1, 32))), input_messages_keys),
       input_messages_raw, input_messages_finish_reasons,
       output_messages_form, output_messages_names,
       arrayMap(k -> if(length(k) = 16, k, unhex(substring(k, 1, 32))), output_messages_keys),
       output_messages_raw, output_messages_finish_reasons,
       template_variables_form, template_variables_names,
       arrayMap(k -> if(length(k) = 16, k, unhex(substring(k, 1, 32))), template_variables_keys),
       template_variables_raw, template_variables_finish_reasons
FROM ${db}.request_content__rebuild;

DROP TABLE IF EXISTS ${db}.request_content__rebuild;

-- A block's text as sent is stored under the block's own sha256, so its
-- content_sha256 repeated the 64 characters for nothing (~76 B per request):
-- the write path now leaves it '' whenever it equals sha256, and readers
-- already take sha256 when it is '' (read/request_view.content_key, the
-- fallback for rows older than migration 005). Existing rows are cleared in
-- the background (a mutation of one column); until it is done they read the
-- same either way.
ALTER TABLE ${db}.blocks UPDATE content_sha256 = '' WHERE content_sha256 = sha256;

ALTER TABLE ${db}.tools UPDATE content_sha256 = '' WHERE content_sha256 = sha256
