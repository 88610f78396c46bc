-- promptprism schema, migration 001.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
-- Every table is partitioned by day and carries a TTL: the TTL is the only
-- sweeper, and ttl_only_drop_parts lets ClickHouse drop whole day partitions
-- instead of rewriting parts.
-- ReplacingMergeTree with the span's own identity in ORDER BY makes a resent
-- batch collapse into one record; readers use FINAL (or LIMIT 1 BY).

CREATE TABLE IF NOT EXISTS ${db}.requests
(
    started_at DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
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
    input_tokens Nullable(Int64),
    output_tokens Nullable(Int64),
    cache_read_tokens Nullable(Int64),
    cache_creation_tokens Nullable(Int64),
    system_instructions String CODEC(ZSTD(3)),
    input_messages String CODEC(ZSTD(3)),
    output_messages String CODEC(ZSTD(3)),
    template_variables String CODEC(ZSTD(3)),
    attributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    resource_attributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_request_id request_id TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_conversation conversation_id TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(started_at)
ORDER BY (service, toStartOfHour(started_at), trace_id, request_id)
TTL toDateTime(started_at) + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1;

-- One row per block per request. Content is not here: it is stored once per
-- distinct sha256 (per day) in `contents`.
CREATE TABLE IF NOT EXISTS ${db}.blocks
(
    started_at DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    trace_id String CODEC(ZSTD(1)),
    request_id String CODEC(ZSTD(1)),
    service LowCardinality(String),
    model LowCardinality(String),
    process_kind LowCardinality(String),
    conversation_id String CODEC(ZSTD(1)),
    `index` UInt32,
    name LowCardinality(String),
    layer LowCardinality(String),
    stability LowCardinality(String),
    source LowCardinality(String),
    start UInt64,
    `end` UInt64,
    size UInt64,
    sha256 String CODEC(ZSTD(1)),
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_request_id request_id TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(started_at)
ORDER BY (service, toStartOfHour(started_at), request_id, `index`)
TTL toDateTime(started_at) + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1;

-- One row per tool definition per request; content in `contents` too.
CREATE TABLE IF NOT EXISTS ${db}.tools
(
    started_at DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    trace_id String CODEC(ZSTD(1)),
    request_id String CODEC(ZSTD(1)),
    service LowCardinality(String),
    `index` UInt32,
    name LowCardinality(String),
    size UInt64,
    sha256 String CODEC(ZSTD(1)),
    INDEX idx_request_id request_id TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(started_at)
ORDER BY (service, toStartOfHour(started_at), request_id, `index`)
TTL toDateTime(started_at) + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1;

-- Content-addressed text of blocks and tool definitions: a static system
-- prompt sent 10,000 times a day is one row a day. Keyed by day as well as
-- hash so that the TTL never removes text a younger request still points to:
-- a request on day D finds its text in partition D.
CREATE TABLE IF NOT EXISTS ${db}.contents
(
    day Date,
    sha256 String,
    size UInt64,
    content String CODEC(ZSTD(3))
)
ENGINE = ReplacingMergeTree
PARTITION BY day
ORDER BY sha256
TTL day + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1;
