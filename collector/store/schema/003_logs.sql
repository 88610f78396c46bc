-- promptprism schema, migration 003: OTLP logs.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.

-- GenAI content events from other instrumentations (gen_ai.<role>.message,
-- gen_ai.choice, gen_ai.client.inference.operation.details), one row per
-- log record. The read side joins them to their request by (trace_id,
-- span_id) when it loads the request, so a log may land before or after its
-- span, in any batch, at any replica. ORDER BY starts with the join key so
-- that lookup reads a few granules. A re-sent record has the same
-- record_sha256 and collapses under FINAL; insert deduplication drops a
-- re-sent batch at the door as on the other tables.
-- `sequence` is the record's position in its export: it orders records whose
-- timestamps are equal (the SDK may stamp a burst of messages alike).
CREATE TABLE IF NOT EXISTS ${db}.genai_events
(
    timestamp DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    trace_id String CODEC(ZSTD(1)),
    span_id String CODEC(ZSTD(1)),
    sequence UInt32,
    event_name LowCardinality(String),
    service LowCardinality(String),
    scope_name LowCardinality(String),
    body String CODEC(ZSTD(3)),
    attributes String CODEC(ZSTD(3)),
    record_sha256 String CODEC(ZSTD(1)),
    received_at DateTime64(3, 'UTC') DEFAULT now64(3) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(timestamp)
ORDER BY (trace_id, span_id, record_sha256)
TTL toDateTime(timestamp) + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000;

-- Every other log record, in the OpenTelemetry Collector ClickHouse
-- exporter's `otel_logs` layout (sqltemplates/logs_table.sql: engine
-- MergeTree, TTL on TimestampTime), so the Grafana ClickHouse plugin's logs
-- view and other tools read it unchanged. As for otel_traces, the one
-- addition is non_replicated_deduplication_window: the exporter's ORDER BY
-- has no record identity, so a re-sent batch can only be dropped at insert.
CREATE TABLE IF NOT EXISTS ${db}.otel_logs
(
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TimestampTime DateTime DEFAULT toDateTime(Timestamp),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    TraceFlags UInt8,
    SeverityText LowCardinality(String) CODEC(ZSTD(1)),
    SeverityNumber UInt8,
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    Body String CODEC(ZSTD(1)),
    ResourceSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion LowCardinality(String) CODEC(ZSTD(1)),
    ScopeAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    LogAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    EventName String CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_key mapKeys(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_value mapValues(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_log_attr_key mapKeys(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_log_attr_value mapValues(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_body Body TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
)
ENGINE = MergeTree()
PARTITION BY toDate(TimestampTime)
PRIMARY KEY (ServiceName, TimestampTime)
ORDER BY (ServiceName, TimestampTime, Timestamp)
TTL TimestampTime + toIntervalDay(${ttl_days})
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000
