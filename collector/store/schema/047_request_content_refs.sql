-- promptprism schema, migration 047: a request's content references in one column.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- A request object (GET /api/requests/{id}, GET /api/traces/{id}) reads its
-- `request_content` row: twenty columns, five per content field (migration
-- 021: how the field was split, member names, item keys, plain-string flags,
-- finish reasons). ClickHouse spends a fraction of a millisecond per column
-- a query reads, however few its rows (analysing it, opening its files,
-- decompressing a block of it): on 1 M requests reading the twenty cost ~20
-- ms of CPU against ~8 for one column (README "Read performance"). They are
-- now one String, `content_refs`: the same values as one JSON object
-- (toJSONString of a named tuple), each key as its 32 hex characters (the
-- digest's first 16 bytes, migration 040; a 64-character digest spooled by
-- an older collector: its first 32). A thread's rows repeat each other's
-- key lists, which ZSTD finds in the JSON as it did in the arrays (1 M
-- requests: 110 against 114 B per request).
--
-- The twenty columns stay in the table as EPHEMERAL: an INSERT names them as
-- before (the write path and spool files written by older collectors are
-- unchanged) and ClickHouse packs them into `content_refs` (its DEFAULT);
-- they are not stored and cannot be read.
--
-- The table is rebuilt (staging table, copy, EXCHANGE TABLES, catch-up copy,
-- drop; on a cluster ON CLUSTER, the copies through the Distributed tables),
-- as migration 040 rebuilt it. The copy reads `content_refs`, which the first
-- statement adds to the table being replaced as a DEFAULT computed when read
-- (no part is rewritten): a run interrupted after the exchange reads the
-- stored column of the new table instead and can run again. It copies the
-- whole table twice (the copy, then the catch-up, whose rows collapse with
-- the copy's when parts merge): allow for the time and three times the disk
-- of `request_content` (~6 % of the store) until then.
ALTER TABLE ${db}.request_content ADD COLUMN IF NOT EXISTS content_refs String DEFAULT toJSONString(CAST(tuple(
        system_instructions_form,
        system_instructions_names,
        arrayMap(key -> if(length(key) = 16, lower(hex(key)), lower(substring(key, 1, 32))), system_instructions_keys),
        system_instructions_raw,
        CAST(system_instructions_finish_reasons, 'Array(String)'),
        input_messages_form,
        input_messages_names,
        arrayMap(key -> if(length(key) = 16, lower(hex(key)), lower(substring(key, 1, 32))), input_messages_keys),
        input_messages_raw,
        CAST(input_messages_finish_reasons, 'Array(String)'),
        output_messages_form,
        output_messages_names,
        arrayMap(key -> if(length(key) = 16, lower(hex(key)), lower(substring(key, 1, 32))), output_messages_keys),
        output_messages_raw,
        CAST(output_messages_finish_reasons, 'Array(String)'),
        template_variables_form,
        template_variables_names,
        arrayMap(key -> if(length(key) = 16, lower(hex(key)), lower(substring(key, 1, 32))), template_variables_keys),
        template_variables_raw,
        CAST(template_variables_finish_reasons, 'Array(String)')),
        'Tuple(system_instructions_form UInt8, system_instructions_names Array(String), system_instructions_keys Array(String), system_instructions_raw Array(UInt8), system_instructions_finish_reasons Array(String), input_messages_form UInt8, input_messages_names Array(String), input_messages_keys Array(String), input_messages_raw Array(UInt8), input_messages_finish_reasons Array(String), output_messages_form UInt8, output_messages_names Array(String), output_messages_keys Array(String), output_messages_raw Array(UInt8), output_messages_finish_reasons Array(String), template_variables_form UInt8, template_variables_names Array(String), template_variables_keys Array(String), template_variables_raw Array(UInt8), template_variables_finish_reasons Array(String))')) CODEC(ZSTD(1));

DROP TABLE IF EXISTS ${db}.request_content__rebuild;

CREATE TABLE IF NOT EXISTS ${db}.request_content__rebuild
(
    thread String CODEC(ZSTD(1)),
    started_at DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    request_id String CODEC(ZSTD(1)),
    system_instructions_form UInt8 EPHEMERAL,
    system_instructions_names Array(String) EPHEMERAL,
    system_instructions_keys Array(String) EPHEMERAL,
    system_instructions_raw Array(UInt8) EPHEMERAL,
    system_instructions_finish_reasons Array(LowCardinality(String)) EPHEMERAL,
    input_messages_form UInt8 EPHEMERAL,
    input_messages_names Array(String) EPHEMERAL,
    input_messages_keys Array(String) EPHEMERAL,
    input_messages_raw Array(UInt8) EPHEMERAL,
    input_messages_finish_reasons Array(LowCardinality(String)) EPHEMERAL,
    output_messages_form UInt8 EPHEMERAL,
    output_messages_names Array(String) EPHEMERAL,
    output_messages_keys Array(String) EPHEMERAL,
    output_messages_raw Array(UInt8) EPHEMERAL,
    output_messages_finish_reasons Array(LowCardinality(String)) EPHEMERAL,
    template_variables_form UInt8 EPHEMERAL,
    template_variables_names Array(String) EPHEMERAL,
    template_variables_keys Array(String) EPHEMERAL,
    template_variables_raw Array(UInt8) EPHEMERAL,
    template_variables_finish_reasons Array(LowCardinality(String)) EPHEMERAL,
    content_refs String DEFAULT toJSONString(CAST(tuple(
        system_instructions_form,
        system_instructions_names,
        arrayMap(key -> if(length(key) = 16, lower(hex(key)), lower(substring(key, 1, 32))), system_instructions_keys),
        system_instructions_raw,
        CAST(system_instructions_finish_reasons, 'Array(String)'),
        input_messages_form,
        input_messages_names,
        arrayMap(key -> if(length(key) = 16, lower(hex(key)), lower(substring(key, 1, 32))), input_messages_keys),
        input_messages_raw,
        CAST(input_messages_finish_reasons, 'Array(String)'),
        output_messages_form,
        output_messages_names,
        arrayMap(key -> if(length(key) = 16, lower(hex(key)), lower(substring(key, 1, 32))), output_messages_keys),
        output_messages_raw,
        CAST(output_messages_finish_reasons, 'Array(String)'),
        template_variables_form,
        template_variables_names,
        arrayMap(key -> if(length(key) = 16, lower(hex(key)), lower(substring(key, 1, 32))), template_variables_keys),
        template_variables_raw,
        CAST(template_variables_finish_reasons, 'Array(String)')),
        'Tuple(system_instructions_form UInt8, system_instructions_names Array(String), system_instructions_keys Array(String), system_instructions_raw Array(UInt8), system_instructions_finish_reasons Array(String), input_messages_form UInt8, input_messages_names Array(String), input_messages_keys Array(String), input_messages_raw Array(UInt8), input_messages_finish_reasons Array(String), output_messages_form UInt8, output_messages_names Array(String), output_messages_keys Array(String), output_messages_raw Array(UInt8), output_messages_finish_reasons Array(String), template_variables_form UInt8, template_variables_names Array(String), template_variables_keys Array(String), template_variables_raw Array(UInt8), template_variables_finish_reasons Array(String))')) CODEC(ZSTD(1))
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(started_at)
ORDER BY (thread, started_at, request_id)
TTL toDateTime(started_at) + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000, index_granularity = 1024;

INSERT INTO ${db}.request_content__rebuild (thread, started_at, request_id, content_refs)
SELECT thread, started_at, request_id, content_refs FROM ${db}.request_content;

EXCHANGE TABLES ${db}.request_content AND ${db}.request_content__rebuild;

-- Rows written while the copy ran (the copy of a row already copied collapses with it).
INSERT INTO ${db}.request_content (thread, started_at, request_id, content_refs)
SELECT thread, started_at, request_id, content_refs FROM ${db}.request_content__rebuild;

DROP TABLE IF EXISTS ${db}.request_content__rebuild
