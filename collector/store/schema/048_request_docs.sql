-- promptprism schema, migration 048: every request as one document, in conversation order.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- GET /api/traces/{id} read six tables and ~100 columns in four statements
-- (`requests`, `blocks`, `tools`, `request_content`, the members of each
-- request's conversation for its predecessor, then `contents`); ClickHouse
-- spends ~6 ms of CPU on each table a statement reads and ~0.25 ms on each
-- column, whatever the rows (README "Read performance";
-- docs/thread-documents.md). `request_docs` holds a request as its keys and
-- one JSON document: its row as the read side selects it, its tool and block
-- arrays in index order, its content references (migration 047's object,
-- or null). It is sorted like `request_content`, by thread (conversation id,
-- else trace id) and start, so a trace's requests and the earlier requests
-- of their conversations — among which each finds its predecessor — are one
-- read of one key range per thread, and a conversation's turns, which
-- repeat each other's keys, lie side by side for ZSTD.
--
-- An INSERT names typed columns, as it does for `requests`: every column but
-- the keys is EPHEMERAL (not stored, cannot be read) and the store packs
-- them into `doc` (its DEFAULT). `content_refs` is EPHEMERAL too, packed
-- from the twenty content-reference columns of migration 021 unless the
-- INSERT gives it (migration 049 copies the stored object). A field added to
-- the request record later adds its EPHEMERAL column here and a new `doc`
-- DEFAULT that names it (README "Adding a field to the request record").
--
-- `trace_threads` gives a trace's threads and the time range of its
-- requests in each, to the second (a view fills it from every insert; min
-- and max stay right whatever the order rows arrive in). The document is
-- compressed with ZSTD(6): 399 against 421 B per request at ZSTD(3) on
-- benchmarks/storage.py's traffic. `request_ids` gains the
-- conversation id ('' for none: the thread is then the trace), so a request
-- found by id is one read of its thread in `request_docs`.
CREATE TABLE IF NOT EXISTS ${db}.request_docs
(
    thread String DEFAULT if(conversation_id != '', conversation_id, trace_id) CODEC(ZSTD(1)),
    started_at DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    request_id String CODEC(ZSTD(1)),
    trace_id String CODEC(ZSTD(1)),
    parent_span_id String EPHEMERAL,
    duration_ns UInt64 EPHEMERAL,
    span_name LowCardinality(String) EPHEMERAL,
    status_code LowCardinality(String) EPHEMERAL,
    status_message String EPHEMERAL,
    service LowCardinality(String) EPHEMERAL,
    scope_name LowCardinality(String) EPHEMERAL,
    operation LowCardinality(String) EPHEMERAL,
    provider LowCardinality(String) EPHEMERAL,
    model LowCardinality(String) EPHEMERAL,
    response_model LowCardinality(String) EPHEMERAL,
    response_id String EPHEMERAL,
    finish_reasons Array(LowCardinality(String)) EPHEMERAL,
    conversation_id String EPHEMERAL,
    message_id String EPHEMERAL,
    process_kind LowCardinality(String) EPHEMERAL,
    process_id String EPHEMERAL,
    run_id String EPHEMERAL,
    run_mode LowCardinality(String) EPHEMERAL,
    attempt Int32 EPHEMERAL,
    record_id String EPHEMERAL,
    schema_version UInt16 EPHEMERAL,
    prompt_bytes UInt64 EPHEMERAL,
    prompt_sha256 String EPHEMERAL,
    mapped Bool EPHEMERAL,
    unmapped_reason LowCardinality(String) EPHEMERAL,
    template_name LowCardinality(String) EPHEMERAL,
    template_origin LowCardinality(String) EPHEMERAL,
    declared_block_count UInt32 EPHEMERAL,
    dialect LowCardinality(String) EPHEMERAL,
    body_sha256 String EPHEMERAL,
    bytes_system UInt64 EPHEMERAL,
    bytes_tools UInt64 EPHEMERAL,
    bytes_messages UInt64 EPHEMERAL,
    bytes_framing UInt64 EPHEMERAL,
    bytes_total UInt64 EPHEMERAL,
    tools_count UInt32 EPHEMERAL,
    tools_catalog_sha256 String EPHEMERAL,
    messages_count UInt32 EPHEMERAL,
    tokens_estimate UInt64 EPHEMERAL,
    context_window UInt64 EPHEMERAL,
    headroom_tokens Int64 EPHEMERAL,
    reasoning_effort LowCardinality(String) EPHEMERAL,
    temperature Nullable(Float64) EPHEMERAL,
    input_tokens Nullable(Int64) EPHEMERAL,
    output_tokens Nullable(Int64) EPHEMERAL,
    cache_read_tokens Nullable(Int64) EPHEMERAL,
    cache_creation_tokens Nullable(Int64) EPHEMERAL,
    merged_span_ids Array(String) EPHEMERAL,
    attributes Map(LowCardinality(String), String) EPHEMERAL,
    resource_attributes Map(LowCardinality(String), String) EPHEMERAL,
    block_count UInt32 EPHEMERAL,
    tool_names Array(String) EPHEMERAL,
    tool_sizes Array(UInt64) EPHEMERAL,
    tool_sha256 Array(String) EPHEMERAL,
    tool_content_sha256 Array(String) EPHEMERAL,
    tool_redacted Array(Bool) EPHEMERAL,
    block_index Array(UInt32) EPHEMERAL,
    block_names Array(LowCardinality(String)) EPHEMERAL,
    block_layers Array(LowCardinality(String)) EPHEMERAL,
    block_stabilities Array(LowCardinality(String)) EPHEMERAL,
    block_sources Array(LowCardinality(String)) EPHEMERAL,
    block_starts Array(UInt64) EPHEMERAL,
    block_ends Array(UInt64) EPHEMERAL,
    block_sizes Array(UInt64) EPHEMERAL,
    block_sha256 Array(String) EPHEMERAL,
    block_content_sha256 Array(String) EPHEMERAL,
    block_redacted Array(Bool) EPHEMERAL,
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
    content_refs String EPHEMERAL if(system_instructions_form + input_messages_form + output_messages_form + template_variables_form = 0, 'null', toJSONString(CAST(tuple(
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
        'Tuple(system_instructions_form UInt8, system_instructions_names Array(String), system_instructions_keys Array(String), system_instructions_raw Array(UInt8), system_instructions_finish_reasons Array(String), input_messages_form UInt8, input_messages_names Array(String), input_messages_keys Array(String), input_messages_raw Array(UInt8), input_messages_finish_reasons Array(String), output_messages_form UInt8, output_messages_names Array(String), output_messages_keys Array(String), output_messages_raw Array(UInt8), output_messages_finish_reasons Array(String), template_variables_form UInt8, template_variables_names Array(String), template_variables_keys Array(String), template_variables_raw Array(UInt8), template_variables_finish_reasons Array(String))'))),
    merged_spans UInt32 DEFAULT length(merged_span_ids),
    doc String DEFAULT concat(substring(toJSONString(CAST(tuple(
        parent_span_id,
        duration_ns,
        span_name,
        status_code,
        status_message,
        service,
        scope_name,
        operation,
        provider,
        model,
        response_model,
        response_id,
        finish_reasons,
        conversation_id,
        message_id,
        process_kind,
        process_id,
        run_id,
        run_mode,
        attempt,
        record_id,
        schema_version,
        prompt_bytes,
        prompt_sha256,
        mapped,
        unmapped_reason,
        template_name,
        template_origin,
        declared_block_count,
        dialect,
        body_sha256,
        bytes_system,
        bytes_tools,
        bytes_messages,
        bytes_framing,
        bytes_total,
        tools_count,
        tools_catalog_sha256,
        messages_count,
        tokens_estimate,
        context_window,
        headroom_tokens,
        reasoning_effort,
        temperature,
        input_tokens,
        output_tokens,
        cache_read_tokens,
        cache_creation_tokens,
        merged_span_ids,
        attributes,
        resource_attributes,
        block_count,
        tool_names,
        tool_sizes,
        tool_sha256,
        tool_content_sha256,
        tool_redacted,
        block_index,
        block_names,
        block_layers,
        block_stabilities,
        block_sources,
        block_starts,
        block_ends,
        block_sizes,
        block_sha256,
        block_content_sha256,
        block_redacted),
        'Tuple(parent_span_id String, duration_ns UInt64, span_name String, status_code String, status_message String, service String, scope_name String, operation String, provider String, model String, response_model String, response_id String, finish_reasons Array(String), conversation_id String, message_id String, process_kind String, process_id String, run_id String, run_mode String, attempt Int32, record_id String, schema_version UInt16, prompt_bytes UInt64, prompt_sha256 String, mapped Bool, unmapped_reason String, template_name String, template_origin String, declared_block_count UInt32, dialect String, body_sha256 String, bytes_system UInt64, bytes_tools UInt64, bytes_messages UInt64, bytes_framing UInt64, bytes_total UInt64, tools_count UInt32, tools_catalog_sha256 String, messages_count UInt32, tokens_estimate UInt64, context_window UInt64, headroom_tokens Int64, reasoning_effort String, temperature Nullable(Float64), input_tokens Nullable(Int64), output_tokens Nullable(Int64), cache_read_tokens Nullable(Int64), cache_creation_tokens Nullable(Int64), merged_span_ids Array(String), attributes Map(String, String), resource_attributes Map(String, String), block_count UInt32, tool_names Array(String), tool_sizes Array(UInt64), tool_sha256 Array(String), tool_content_sha256 Array(String), tool_redacted Array(Bool), block_index Array(UInt32), block_names Array(String), block_layers Array(String), block_stabilities Array(String), block_sources Array(String), block_starts Array(UInt64), block_ends Array(UInt64), block_sizes Array(UInt64), block_sha256 Array(String), block_content_sha256 Array(String), block_redacted Array(Bool))')), 1, -1), ',"content_refs":', content_refs, '}') CODEC(ZSTD(6))
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(started_at)
ORDER BY (thread, started_at, request_id)
TTL toDateTime(started_at) + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000, index_granularity = 256;

CREATE TABLE IF NOT EXISTS ${db}.trace_threads
(
    trace_id String CODEC(ZSTD(1)),
    thread String CODEC(ZSTD(1)),
    first_start SimpleAggregateFunction(min, DateTime('UTC')) CODEC(ZSTD(1)),
    last_start SimpleAggregateFunction(max, DateTime('UTC')) CODEC(ZSTD(1))
)
ENGINE = AggregatingMergeTree
PARTITION BY toMonday(first_start)
ORDER BY (trace_id, thread)
TTL toDateTime(first_start) + INTERVAL ${ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.trace_threads_mv TO ${db}.trace_threads AS
SELECT trace_id, thread, toDateTime(min(started_at), 'UTC') AS first_start,
       toDateTime(max(started_at), 'UTC') AS last_start
FROM ${db}.request_docs
GROUP BY trace_id, thread;

ALTER TABLE ${db}.request_ids ADD COLUMN IF NOT EXISTS conversation_id String DEFAULT '' CODEC(ZSTD(1));

DROP TABLE IF EXISTS ${db}.request_ids_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.request_ids_mv TO ${db}.request_ids AS
SELECT request_id, started_at, service, trace_id, conversation_id FROM ${db}.requests
