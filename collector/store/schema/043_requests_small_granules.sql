-- promptprism schema, migration 043: `requests` in granules of 1,024 rows, compressed in blocks from 4 KB.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- The API reads a request's row by its key (GET /api/requests/{id}) or by its
-- trace (GET /api/traces/{id}): one row of 55 columns. With granules of 8,192
-- rows and compressed blocks of at least 64 KB, that read decompressed every
-- column's whole granule — ~8 MB for one row, most of a point read's ~20 ms of
-- CPU on 1 M requests. In granules of 1,024 rows whose columns are compressed
-- in blocks from 4 KB (a small column's granule no longer shares a block with
-- seven others) a point read costs ~15 ms and a trace's rows ~14 instead of
-- ~20, for ~3 % more bytes of this table (~6 B per request).
--
-- index_granularity cannot be changed in place, so the table is rebuilt
-- (staging table, copy, EXCHANGE TABLES, catch-up copy, drop; on a cluster
-- ON CLUSTER, the copies through the Distributed tables), as migrations 023
-- and 040 rebuilt `contents`. `request_ids_mv` follows the name: after the
-- exchange it reads the new table (ClickHouse 24.8 and 26.9 alike). The
-- catch-up copies the rows received after the newest one copied (a row
-- inserted while the copy ran); `received_at` is copied as it was, so the
-- rollup job recomputes nothing. It copies the whole table once: allow for
-- the time and twice the disk of `requests` while it runs. A run interrupted
-- anywhere can run again. The columns are those of `requests` after
-- migration 042: a later column belongs in a migration numbered after this one.
DROP TABLE IF EXISTS ${db}.requests__rebuild;

CREATE TABLE IF NOT EXISTS ${db}.requests__rebuild
(
    started_at DateTime64(9, 'UTC') CODEC(Delta(8), ZSTD(1)),
    trace_id String CODEC(ZSTD(1)),
    request_id String CODEC(ZSTD(1)),
    parent_span_id String CODEC(ZSTD(1)),
    duration_ns UInt64 CODEC(ZSTD(1)),
    span_name LowCardinality(String),
    status_code LowCardinality(String),
    status_message String CODEC(ZSTD(1)),
    service LowCardinality(String),
    scope_name LowCardinality(String),
    operation LowCardinality(String),
    provider LowCardinality(String),
    model LowCardinality(String),
    response_model LowCardinality(String),
    response_id String CODEC(ZSTD(1)),
    finish_reasons Array(LowCardinality(String)),
    conversation_id String CODEC(ZSTD(1)),
    message_id String CODEC(ZSTD(1)),
    process_kind LowCardinality(String),
    process_id String CODEC(ZSTD(1)),
    run_id String CODEC(ZSTD(1)),
    run_mode LowCardinality(String),
    attempt Int32,
    record_id String CODEC(ZSTD(1)),
    schema_version UInt16,
    prompt_bytes UInt64,
    prompt_sha256 String CODEC(ZSTD(1)),
    mapped Bool,
    unmapped_reason LowCardinality(String),
    template_name LowCardinality(String),
    template_origin LowCardinality(String),
    declared_block_count UInt32,
    block_count UInt32,
    dialect LowCardinality(String),
    body_sha256 String CODEC(ZSTD(1)),
    bytes_system UInt64,
    bytes_tools UInt64,
    bytes_messages UInt64,
    bytes_framing UInt64,
    bytes_total UInt64,
    tools_count UInt32,
    tools_catalog_sha256 String CODEC(ZSTD(1)),
    messages_count UInt32,
    tokens_estimate UInt64,
    context_window UInt64,
    headroom_tokens Int64,
    reasoning_effort LowCardinality(String),
    temperature Nullable(Float64),
    input_tokens Nullable(Int64),
    output_tokens Nullable(Int64),
    cache_read_tokens Nullable(Int64),
    cache_creation_tokens Nullable(Int64),
    merged_span_ids Array(String),
    attributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    resource_attributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    received_at DateTime64(3, 'UTC') DEFAULT now64(3) CODEC(Delta(8), ZSTD(1)),
    lineage_key UInt64 MATERIALIZED sipHash64(if(conversation_id != '', tuple('conversation', conversation_id, toString(service), toString(provider), toString(model), toString(process_kind), ''), tuple('trace', trace_id, toString(service), toString(provider), toString(model), toString(process_kind), process_id))),
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_request_id request_id TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_conversation conversation_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_prompt_sha256 prompt_sha256 TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_received_at received_at TYPE minmax GRANULARITY 1,
    INDEX idx_message_id message_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_run_id run_id TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(started_at)
ORDER BY (service, toStartOfHour(started_at), trace_id, request_id)
TTL toDateTime(started_at) + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000, index_granularity = 1024,
         min_compress_block_size = 4096, max_compress_block_size = 65536;

-- Columns by name: a store's column order depends on the migrations that added them.
INSERT INTO ${db}.requests__rebuild (
    started_at, trace_id, request_id, parent_span_id, duration_ns, span_name, status_code,
    status_message, service, scope_name, operation, provider, model, response_model, response_id,
    finish_reasons, conversation_id, message_id, process_kind, process_id, run_id, run_mode,
    attempt, record_id, schema_version, prompt_bytes, prompt_sha256, mapped, unmapped_reason,
    template_name, template_origin, declared_block_count, block_count, dialect, body_sha256,
    bytes_system, bytes_tools, bytes_messages, bytes_framing, bytes_total, tools_count,
    tools_catalog_sha256, messages_count, tokens_estimate, context_window, headroom_tokens,
    reasoning_effort, temperature, input_tokens, output_tokens, cache_read_tokens,
    cache_creation_tokens, merged_span_ids, attributes, resource_attributes, received_at)
SELECT
    started_at, trace_id, request_id, parent_span_id, duration_ns, span_name, status_code,
    status_message, service, scope_name, operation, provider, model, response_model, response_id,
    finish_reasons, conversation_id, message_id, process_kind, process_id, run_id, run_mode,
    attempt, record_id, schema_version, prompt_bytes, prompt_sha256, mapped, unmapped_reason,
    template_name, template_origin, declared_block_count, block_count, dialect, body_sha256,
    bytes_system, bytes_tools, bytes_messages, bytes_framing, bytes_total, tools_count,
    tools_catalog_sha256, messages_count, tokens_estimate, context_window, headroom_tokens,
    reasoning_effort, temperature, input_tokens, output_tokens, cache_read_tokens,
    cache_creation_tokens, merged_span_ids, attributes, resource_attributes, received_at
FROM ${db}.requests;

EXCHANGE TABLES ${db}.requests AND ${db}.requests__rebuild;

INSERT INTO ${db}.requests (
    started_at, trace_id, request_id, parent_span_id, duration_ns, span_name, status_code,
    status_message, service, scope_name, operation, provider, model, response_model, response_id,
    finish_reasons, conversation_id, message_id, process_kind, process_id, run_id, run_mode,
    attempt, record_id, schema_version, prompt_bytes, prompt_sha256, mapped, unmapped_reason,
    template_name, template_origin, declared_block_count, block_count, dialect, body_sha256,
    bytes_system, bytes_tools, bytes_messages, bytes_framing, bytes_total, tools_count,
    tools_catalog_sha256, messages_count, tokens_estimate, context_window, headroom_tokens,
    reasoning_effort, temperature, input_tokens, output_tokens, cache_read_tokens,
    cache_creation_tokens, merged_span_ids, attributes, resource_attributes, received_at)
SELECT
    started_at, trace_id, request_id, parent_span_id, duration_ns, span_name, status_code,
    status_message, service, scope_name, operation, provider, model, response_model, response_id,
    finish_reasons, conversation_id, message_id, process_kind, process_id, run_id, run_mode,
    attempt, record_id, schema_version, prompt_bytes, prompt_sha256, mapped, unmapped_reason,
    template_name, template_origin, declared_block_count, block_count, dialect, body_sha256,
    bytes_system, bytes_tools, bytes_messages, bytes_framing, bytes_total, tools_count,
    tools_catalog_sha256, messages_count, tokens_estimate, context_window, headroom_tokens,
    reasoning_effort, temperature, input_tokens, output_tokens, cache_read_tokens,
    cache_creation_tokens, merged_span_ids, attributes, resource_attributes, received_at
FROM ${db}.requests__rebuild
WHERE received_at > (SELECT max(received_at) FROM ${db}.requests);

DROP TABLE IF EXISTS ${db}.requests__rebuild;
