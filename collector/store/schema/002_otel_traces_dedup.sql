-- promptprism schema, migration 002: every span in `otel_traces`, and
-- insert deduplication on every table.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.

-- `otel_traces`, its trace-id lookup table and the view that fills it are
-- the OpenTelemetry Collector ClickHouse exporter's DDL (sqltemplates/
-- traces_table.sql, traces_id_ts_lookup_table.sql, traces_id_ts_lookup_mv.sql;
-- the bloom-filter variant, engine MergeTree / AggregatingMergeTree, TTL
-- `toDateTime(Timestamp) + toIntervalDay(N)`), so the Grafana ClickHouse
-- plugin's trace view and other tools read this store unchanged. The only
-- addition is the table setting non_replicated_deduplication_window: the
-- exporter's ORDER BY has no span id, so a resent span can only be dropped
-- at insert time (insert_deduplication_token), not by a Replacing engine.
-- 10000 remembered inserts cover a spool replay after an outage: between the
-- lost answer and the replay, inserts are at most a few per second.
CREATE TABLE IF NOT EXISTS ${db}.otel_traces
(
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(T64, ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    ResourceAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2), CAST(ResourceAttributes, 'Array(Tuple(String, String))')),
    SpanAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2), CAST(SpanAttributes, 'Array(Tuple(String, String))')),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,
    INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
)
ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
TTL toDateTime(Timestamp) + toIntervalDay(${ttl_days})
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000;

CREATE TABLE IF NOT EXISTS ${db}.otel_traces_trace_id_ts
(
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime) CODEC(ZSTD(1)),
    End SimpleAggregateFunction(max, DateTime) CODEC(ZSTD(1))
)
ENGINE = AggregatingMergeTree()
PARTITION BY toStartOfWeek(Start)
ORDER BY (TraceId)
TTL toDateTime(Start) + toIntervalDay(${ttl_days})
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.otel_traces_trace_id_ts_mv
TO ${db}.otel_traces_trace_id_ts
AS SELECT
    TraceId,
    min(Timestamp) AS Start,
    max(Timestamp) AS End
FROM ${db}.otel_traces
WHERE TraceId != ''
GROUP BY TraceId;

-- promptprism's own tables are ReplacingMergeTree (readers use FINAL), and
-- now also drop a resent insert at the door, so FINAL rarely has work to do.
ALTER TABLE ${db}.requests MODIFY SETTING non_replicated_deduplication_window = 10000;
ALTER TABLE ${db}.blocks MODIFY SETTING non_replicated_deduplication_window = 10000;
ALTER TABLE ${db}.tools MODIFY SETTING non_replicated_deduplication_window = 10000;
ALTER TABLE ${db}.contents MODIFY SETTING non_replicated_deduplication_window = 10000;

-- "Which requests carried this block / this prompt?" (cache-break and
-- growth queries) look rows up by hash.
ALTER TABLE ${db}.blocks ADD INDEX IF NOT EXISTS idx_sha256 sha256 TYPE bloom_filter(0.01) GRANULARITY 1;
ALTER TABLE ${db}.requests ADD INDEX IF NOT EXISTS idx_prompt_sha256 prompt_sha256 TYPE bloom_filter(0.01) GRANULARITY 1;

-- When the collector wrote the row (not when the span started): lets
-- dashboards show ingest lag and lets an operator find what a replay added.
ALTER TABLE ${db}.requests ADD COLUMN IF NOT EXISTS received_at DateTime64(3, 'UTC') DEFAULT now64(3) CODEC(Delta, ZSTD(1))
