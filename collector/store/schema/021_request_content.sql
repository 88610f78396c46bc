-- promptprism schema, migration 021: captured content stored once, content-addressed.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- Until now `requests` held each request's captured content as JSON text
-- (system_instructions, input_messages, output_messages, template_variables)
-- and `otel_traces` held it again in the span's attributes. An agent's
-- conversation of N turns sends its whole history every turn, so N turns
-- stored O(N²) message text, twice. Now each content field is split into
-- items — the messages of a JSON array, the values of a JSON object (string
-- values as their plain text, so a template variable equal to a block's text
-- is the block's own row), else the whole text — and each item's text is
-- stored once per day in `contents` under its sha256 (write/rows.py,
-- split_content). `request_content` holds, per request, the keys of its items
-- in order (record.content_columns: <field>_form, _names, _keys, _raw,
-- _finish_reasons: an answer's finish_reason apart, so that the answer is the
-- same item as in the next request's history) and
-- the read side joins them back into the same JSON value (read/content.py).
-- `otel_traces` keeps the span with those attributes replaced by one,
-- promptprism.content.moved, naming them.
--
-- Sorted by thread (conversation id, else trace id) and time: a request's
-- history is the previous request's plus a few messages, so neighbouring rows
-- share their key lists and the key columns compress to about one key per
-- new message. A request's row is read by that key (the request row gives
-- thread, start and id).
CREATE TABLE IF NOT EXISTS ${db}.request_content
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

-- Rows written before this migration: each field's text whole (form 3), under
-- one key; their messages are not split (new rows are). Copies of a request
-- not merged yet collapse in both targets.
INSERT INTO ${db}.contents (day, sha256, size, content)
SELECT toDate(started_at), lower(hex(SHA256(text))), length(text), text
FROM ${db}.requests
ARRAY JOIN [system_instructions, input_messages, output_messages, template_variables] AS text
WHERE text != '';

INSERT INTO ${db}.request_content (thread, started_at, request_id,
     system_instructions_form, system_instructions_keys, system_instructions_raw,
     input_messages_form, input_messages_keys, input_messages_raw,
     output_messages_form, output_messages_keys, output_messages_raw,
     template_variables_form, template_variables_keys, template_variables_raw)
SELECT if(conversation_id != '', conversation_id, trace_id), started_at, request_id,
       if(system_instructions = '', 0, 3), if(system_instructions = '', [], [lower(hex(SHA256(system_instructions)))]),
       if(system_instructions = '', [], [0]),
       if(input_messages = '', 0, 3), if(input_messages = '', [], [lower(hex(SHA256(input_messages)))]),
       if(input_messages = '', [], [0]),
       if(output_messages = '', 0, 3), if(output_messages = '', [], [lower(hex(SHA256(output_messages)))]),
       if(output_messages = '', [], [0]),
       if(template_variables = '', 0, 3), if(template_variables = '', [], [lower(hex(SHA256(template_variables)))]),
       if(template_variables = '', [], [0])
FROM ${db}.requests
WHERE system_instructions != '' OR input_messages != '' OR output_messages != '' OR template_variables != '';

-- One statement, so the four go together: a run interrupted before it copies
-- again (the copies collapse), and no run finds some of them gone.
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS system_instructions, DROP COLUMN IF EXISTS input_messages,
    DROP COLUMN IF EXISTS output_messages, DROP COLUMN IF EXISTS template_variables
