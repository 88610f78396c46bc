-- promptprism schema, migration 022: the views the panels and insight queries read, without FINAL.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- `prompt_requests` and `prompt_blocks` (migrations 004, 008) applied FINAL to
-- `requests` and `blocks`: every panel then merged every part of the window
-- on read, and FINAL turns off the skip indexes — a dashboard over 7 days of
-- a 1 M-request store took 4–13 s a panel. The rows they collapsed are copies
-- of a batch re-sent under another deduplication token (a spool replay or an
-- SDK retry resends the same bytes, which inserts drop at the door), so the
-- views now read the tables as they are; a copy not merged yet may count
-- twice in a panel until the parts merge. The API's lookups never read these
-- views (read/queries.py drops a copy by the row's identity).
-- `event_prompts` keeps the newest copy of each event record by its identity
-- (LIMIT 1 BY) instead of FINAL over the whole table.
DROP TABLE IF EXISTS ${db}.prompt_blocks;
DROP TABLE IF EXISTS ${db}.prompt_requests;
DROP TABLE IF EXISTS ${db}.event_prompts;

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
    FROM (
        -- the newest copy of each record (a re-sent one not merged yet), without FINAL
        SELECT * FROM ${db}.genai_events
        WHERE contribution != ''
        ORDER BY received_at DESC
        LIMIT 1 BY trace_id, span_id, record_sha256
    )
    GROUP BY trace_id, span_id
)
WHERE text IS NOT NULL AND text != '';

-- `requests` with the system prompt of event-only requests filled in, under
-- the same conditions as read/events.py: the span has no block map and no blocks,
-- and a prompt hash on the span (if any) matches the text. Such a request
-- has prompt_bytes, prompt_sha256 and block_count 1 as the API serves it;
-- prompt_from_events and prompt_source say where they came from.
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
FROM ${db}.requests AS r
LEFT JOIN ${db}.event_prompts AS e ON e.trace_id = r.trace_id AND e.span_id = r.request_id;

-- `blocks` plus the one unmapped block of each event-only request, named and
-- labelled as reassembly labels a whole prompt without a map (name `system`,
-- layer and stability `unknown`, source the attribute the text came from).
CREATE VIEW IF NOT EXISTS ${db}.prompt_blocks AS
SELECT started_at, trace_id, request_id, service, model, process_kind, conversation_id,
       `index`, name, layer, stability, source, start, `end`, size, sha256
FROM ${db}.blocks
UNION ALL
SELECT started_at, trace_id, request_id, service, model, process_kind, conversation_id,
       toUInt32(0) AS `index`, toLowCardinality('system') AS name, toLowCardinality('unknown') AS layer,
       toLowCardinality('unknown') AS stability, toLowCardinality(prompt_source) AS source,
       toUInt64(0) AS start, prompt_bytes AS `end`, prompt_bytes AS size, prompt_sha256 AS sha256
FROM ${db}.prompt_requests
WHERE prompt_from_events
