-- promptprism schema, migration 008: what each GenAI log event contributes to
-- its request, computed once, at ingest, in Python; SQL only aggregates it.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- The collector computes each event's contribution when it receives it
-- (collector/conventions/events.py) and stores it in these columns; the
-- read side (read/events.py) and the views below combine the stored
-- columns of a request's events, the same way:
--   contribution         'details' (operation-details event: the span's own
--                        content attributes, the newest wins per attribute),
--                        'input' (one input message), 'output' (one output message)
--   system_instructions, input_messages, output_messages
--                        the attributes a 'details' event carries (JSON text; NULL: not carried)
--   message, message_index, message_has_parts
--                        an 'input' or 'output' event's one message (JSON text),
--                        its place in the response, whether it carries content
--   instructions_text    the text of a 'details' event's system instructions
--   system_text          the system and developer text of a 'details' event's input
--                        messages, or of an 'input' event's system or developer message
--   contribution_version the rule that computed them; 0 for rows written before
--                        this migration until the next step (009) computes theirs
-- The expression 004 computed in SQL (system_prompt_parts) goes, with the views
-- that read it; they are created again over the new columns.
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS contribution LowCardinality(String) DEFAULT '';
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS system_instructions Nullable(String) CODEC(ZSTD(3));
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS input_messages Nullable(String) CODEC(ZSTD(3));
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS output_messages Nullable(String) CODEC(ZSTD(3));
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS message Nullable(String) CODEC(ZSTD(3));
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS message_index Int64 DEFAULT 0;
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS message_has_parts Bool DEFAULT false;
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS instructions_text Nullable(String) CODEC(ZSTD(3));
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS system_text Nullable(String) CODEC(ZSTD(3));
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS contribution_version UInt8 DEFAULT 0;

DROP TABLE IF EXISTS ${db}.prompt_blocks;
DROP TABLE IF EXISTS ${db}.prompt_requests;
DROP TABLE IF EXISTS ${db}.event_prompts;
ALTER TABLE ${db}.genai_events DROP COLUMN IF EXISTS system_prompt_parts;

-- One row per request whose GenAI events carry a system prompt: its size in
-- bytes, hash and source attribute. The newest event with system
-- instructions, when they have text; else the newest operation-details input
-- messages (even without a system message: they replace the older
-- per-message events); else the system and developer messages of the input
-- events in time order, joined by a blank line. FINAL collapses a re-sent record.
CREATE VIEW IF NOT EXISTS ${db}.event_prompts AS
SELECT trace_id, span_id, source, length(assumeNotNull(text)) AS prompt_bytes,
       lower(hex(SHA256(assumeNotNull(text)))) AS prompt_sha256
FROM (
    SELECT
        trace_id, span_id,
        argMaxIf(tuple(instructions_text), (timestamp, sequence), system_instructions IS NOT NULL).1 AS instructions,
        argMaxIf(tuple(system_text), (timestamp, sequence),
                 contribution = 'details' AND input_messages IS NOT NULL).1 AS details_text,
        countIf(contribution = 'details' AND input_messages IS NOT NULL) > 0 AS has_details_messages,
        arrayStringConcat(arrayMap(message -> message.3, arraySort(
            groupArrayIf((timestamp, sequence, assumeNotNull(system_text)),
                         contribution = 'input' AND system_text IS NOT NULL))), '\n\n') AS messages_text,
        countIf(contribution = 'input' AND system_text IS NOT NULL) > 0 AS has_messages_text,
        multiIf(instructions IS NOT NULL, instructions, has_details_messages, details_text,
                has_messages_text, messages_text, NULL) AS text,
        if(instructions IS NOT NULL, 'gen_ai.system_instructions', 'gen_ai.input.messages') AS source
    FROM ${db}.genai_events FINAL
    WHERE contribution != ''
    GROUP BY trace_id, span_id
)
WHERE text IS NOT NULL AND text != '';

-- `requests` with the system prompt of event-only requests filled in, under
-- the same conditions as read/events.py: the span has no block map and no blocks,
-- and a prompt hash on the span (if any) matches the text. Such a request
-- has prompt_bytes, prompt_sha256 and block_count 1 as the API serves it;
-- prompt_from_events and prompt_source say where they came from. Read it
-- without FINAL: the view applies it.
CREATE VIEW IF NOT EXISTS ${db}.prompt_requests AS
SELECT
    r.* REPLACE (
        if(prompt_from_events, e.prompt_bytes, r.prompt_bytes) AS prompt_bytes,
        if(prompt_from_events, e.prompt_sha256, r.prompt_sha256) AS prompt_sha256,
        if(prompt_from_events, toUInt32(1), r.block_count) AS block_count
    ),
    NOT r.mapped AND r.block_count = 0 AND e.prompt_bytes > 0
        AND (r.prompt_sha256 = '' OR lower(r.prompt_sha256) = e.prompt_sha256) AS prompt_from_events,
    if(prompt_from_events, e.source, '') AS prompt_source
FROM ${db}.requests AS r FINAL
LEFT JOIN ${db}.event_prompts AS e ON e.trace_id = r.trace_id AND e.span_id = r.request_id;

-- `blocks` plus the one unmapped block of each event-only request, named and
-- labelled as reassembly labels a whole prompt without a map (name `system`,
-- layer and stability `unknown`, source the attribute the text came from).
-- Read it without FINAL: the view applies it.
CREATE VIEW IF NOT EXISTS ${db}.prompt_blocks AS
SELECT started_at, trace_id, request_id, service, model, process_kind, conversation_id,
       `index`, name, layer, stability, source, start, `end`, size, sha256
FROM ${db}.blocks FINAL
UNION ALL
SELECT started_at, trace_id, request_id, service, model, process_kind, conversation_id,
       toUInt32(0) AS `index`, toLowCardinality('system') AS name, toLowCardinality('unknown') AS layer,
       toLowCardinality('unknown') AS stability, toLowCardinality(prompt_source) AS source,
       toUInt64(0) AS start, prompt_bytes AS `end`, prompt_bytes AS size, prompt_sha256 AS sha256
FROM ${db}.prompt_requests
WHERE prompt_from_events
