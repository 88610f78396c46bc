-- promptprism schema, migration 004: system prompts that travelled as OTLP
-- log events, visible to every SQL reader (insight queries, Grafana).
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- The read side's loader completes a request from its GenAI events in Python
-- (read/events.py: events → span content attributes → reassemble). SQL readers get
-- the same answer from the views below: `prompt_requests` and `prompt_blocks`
-- are `requests` and `blocks` with the system prompt of an event-only request
-- filled in, as one unmapped block with the size and hash the API serves.
-- The join stays at read time: a log may land before or after its span, in
-- any batch, at any replica, and the receiver never waits for the other half.

-- What one event contributes to its request's system prompt, computed by
-- ClickHouse when the row is inserted (and, for rows written before this
-- migration, when they are read): the views then read this small column and
-- not the message history in `body`, which grows with every turn. An array
-- of (kind, text), text NULL when the event carries the attribute but no
-- system text:
--   ('instructions', …)   operation-details event: gen_ai.system_instructions
--   ('input_messages', …) operation-details event: the system and developer
--                         messages of gen_ai.input.messages, joined by a blank line
--   ('message', …)        gen_ai.<role>.message event of role system or developer
-- The text is extracted exactly as read/events.py + system_prompt do it in Python
-- (tests/collector/read/insight/test_event_prompts.py holds the two side by side):
-- a part list's text parts are concatenated; a text part is a string or an
-- object whose `type` is absent or "text"; its text is `content` else `text`
-- in the span conventions, `text` else `content` in the older event bodies.
-- A JSON string that holds an array or object is that array or object.
-- `arrayMap(x -> …, [value])[1]` names a value once instead of repeating it.
ALTER TABLE ${db}.genai_events ADD COLUMN IF NOT EXISTS system_prompt_parts Array(Tuple(kind String, text Nullable(String)))
MATERIALIZED CAST(arrayConcat(
    -- operation-details events; arrayFilter(… [attributes]) is empty for every
    -- other event, so that none of this work is done for them
    arrayFlatten(arrayMap(details -> arrayConcat(
        if(JSONType(details, 'gen_ai.system_instructions') = 'Null', [],
           [('instructions', arrayMap(instructions -> arrayMap(decoded -> multiIf(
                -- a string: JSON text of a part list, or the instructions themselves
                JSONType(instructions) = 'String' AND isValidJSON(decoded) AND JSONType(decoded) IN ('Array', 'Object'),
                    arrayMap(texts -> if(empty(texts), NULL, arrayStringConcat(texts, '')), [arrayMap(text -> assumeNotNull(text), arrayFilter(text -> text IS NOT NULL, arrayMap(part -> multiIf(
                        JSONType(part) = 'String', JSONExtractString(part),
                        JSONType(part) = 'Object' AND (NOT JSONHas(part, 'type') OR (JSONType(part, 'type') = 'String' AND JSONExtractString(part, 'type') = 'text')),
                            multiIf(JSONHas(part, 'content'), if(JSONType(part, 'content') = 'String', JSONExtractString(part, 'content'), NULL),
                                    JSONType(part, 'text') = 'String', JSONExtractString(part, 'text'), NULL),
                        NULL), if(JSONType(decoded) = 'Array', JSONExtractArrayRaw(decoded), [decoded]))))])[1],
                JSONType(instructions) = 'String', decoded,
                JSONType(instructions) IN ('Array', 'Object'),
                    arrayMap(texts -> if(empty(texts), NULL, arrayStringConcat(texts, '')), [arrayMap(text -> assumeNotNull(text), arrayFilter(text -> text IS NOT NULL, arrayMap(part -> multiIf(
                        JSONType(part) = 'String', JSONExtractString(part),
                        JSONType(part) = 'Object' AND (NOT JSONHas(part, 'type') OR (JSONType(part, 'type') = 'String' AND JSONExtractString(part, 'type') = 'text')),
                            multiIf(JSONHas(part, 'content'), if(JSONType(part, 'content') = 'String', JSONExtractString(part, 'content'), NULL),
                                    JSONType(part, 'text') = 'String', JSONExtractString(part, 'text'), NULL),
                        NULL), if(JSONType(instructions) = 'Array', JSONExtractArrayRaw(instructions), [instructions]))))])[1],
                NULL), [JSONExtractString(instructions)])[1], [JSONExtractRaw(details, 'gen_ai.system_instructions')])[1])]),
        if(JSONType(details, 'gen_ai.input.messages') = 'Null', [],
           [('input_messages', arrayMap(messages -> arrayMap(texts -> if(empty(texts), NULL, arrayStringConcat(texts, '\n\n')), [arrayMap(text -> assumeNotNull(text), arrayFilter(text -> text IS NOT NULL, arrayMap(message -> if(
                    JSONType(message, 'role') = 'String' AND JSONExtractString(message, 'role') IN ('system', 'developer'),
                    multiIf(
                        JSONHas(message, 'parts') OR JSONType(message, 'content') != 'String',
                            arrayMap(parts -> arrayMap(texts -> if(empty(texts), NULL, arrayStringConcat(texts, '')), [arrayMap(text -> assumeNotNull(text), arrayFilter(text -> text IS NOT NULL, arrayMap(part -> multiIf(
                                JSONType(part) = 'String', JSONExtractString(part),
                                JSONType(part) = 'Object' AND (NOT JSONHas(part, 'type') OR (JSONType(part, 'type') = 'String' AND JSONExtractString(part, 'type') = 'text')),
                                    multiIf(JSONHas(part, 'content'), if(JSONType(part, 'content') = 'String', JSONExtractString(part, 'content'), NULL),
                                            JSONType(part, 'text') = 'String', JSONExtractString(part, 'text'), NULL),
                                NULL), multiIf(JSONType(parts) = 'Array', JSONExtractArrayRaw(parts), JSONType(parts) = 'Object', [parts], []))))])[1],
                                [JSONExtractRaw(message, if(JSONHas(message, 'parts'), 'parts', 'content'))])[1],
                        JSONExtractString(message, 'content')),
                    NULL), JSONExtractArrayRaw(messages))))])[1],
              -- a string holding a JSON array is the array; anything else holds no messages
              [multiIf(JSONType(details, 'gen_ai.input.messages') = 'Array', JSONExtractRaw(details, 'gen_ai.input.messages'),
                       JSONType(details, 'gen_ai.input.messages') = 'String'
                           AND isValidJSON(JSONExtractString(details, 'gen_ai.input.messages'))
                           AND JSONType(JSONExtractString(details, 'gen_ai.input.messages')) = 'Array',
                           JSONExtractString(details, 'gen_ai.input.messages'),
                       '[]')])[1])])),
        arrayFilter(details -> event_name = 'gen_ai.client.inference.operation.details', [attributes]))),
    -- gen_ai.<role>.message events of role system or developer, with text: the
    -- body is the message (or its content, when not an object), and the body's
    -- own role wins over the event name's. JSONExtractString is '' for a role
    -- that is absent or not a string: one parse of the body for the many
    -- messages that are not system messages, which arrayFilter(… [body]) then
    -- leaves out of the rest of the work.
    arrayFilter(part -> part.2 IS NOT NULL, arrayMap(message -> ('message', arrayMap(content -> multiIf(
            JSONType(content) = 'String', nullIf(JSONExtractString(content), ''),
            JSONType(content) IN ('Array', 'Object'),
                arrayMap(texts -> if(empty(texts), NULL, arrayStringConcat(texts, '')), [arrayMap(text -> assumeNotNull(text), arrayFilter(text -> text IS NOT NULL, arrayMap(part -> multiIf(
                    JSONType(part) = 'String', JSONExtractString(part),
                    JSONType(part) = 'Object' AND (NOT JSONHas(part, 'type') OR (JSONType(part, 'type') = 'String' AND JSONExtractString(part, 'type') = 'text')),
                        multiIf(JSONHas(part, 'text'), if(JSONType(part, 'text') = 'String', JSONExtractString(part, 'text'), NULL),
                                JSONType(part, 'content') = 'String', JSONExtractString(part, 'content'), NULL),
                    NULL), if(JSONType(content) = 'Array', JSONExtractArrayRaw(content), [content]))))])[1],
            NULL), [if(JSONType(message) = 'Object', JSONExtractRaw(message, 'content'), message)])[1]),
        arrayFilter(message -> event_name NOT IN ('gen_ai.client.inference.operation.details', 'gen_ai.choice')
                               AND arrayMap(body_role -> if(body_role != '', body_role,
                                                            replaceRegexpOne(event_name, '^gen_ai\\.(.*)\\.message$$', '\\1')),
                                            [JSONExtractString(message, 'role')])[1] IN ('system', 'developer'),
                    [body])))
), 'Array(Tuple(kind String, text Nullable(String)))');

-- One row per request whose GenAI events carry a system prompt: the text the
-- read side's join would build, as its size in bytes, hash and source
-- attribute. Precedence as in read/events.py: the newest gen_ai.system_instructions
-- with text; else the newest operation-details gen_ai.input.messages (even
-- one without a system message: it replaces the older per-message events);
-- else the older per-message events in time order, joined by a blank line.
-- FINAL collapses a re-sent record. The read side loads at most
-- GENAI_EVENTS_PER_REQUEST_MAX (10,000) events per request; a system message
-- past that many messages of one request is counted here and not there.
CREATE VIEW IF NOT EXISTS ${db}.event_prompts AS
SELECT trace_id, span_id, source, length(assumeNotNull(text)) AS prompt_bytes,
       lower(hex(SHA256(assumeNotNull(text)))) AS prompt_sha256
FROM (
    SELECT
        trace_id, span_id,
        argMaxIf(tuple(part.text), (timestamp, sequence), part.kind = 'instructions').1 AS instructions,
        argMaxIf(tuple(part.text), (timestamp, sequence), part.kind = 'input_messages').1 AS input_messages,
        countIf(part.kind = 'input_messages') > 0 AS has_input_messages,
        arrayStringConcat(arrayMap(message -> message.3, arraySort(
            groupArrayIf((timestamp, sequence, assumeNotNull(part.text)), part.kind = 'message'))), '\n\n') AS messages,
        countIf(part.kind = 'message') > 0 AS has_messages,
        multiIf(instructions IS NOT NULL, instructions, has_input_messages, input_messages,
                has_messages, messages, NULL) AS text,
        if(instructions IS NOT NULL, 'gen_ai.system_instructions', 'gen_ai.input.messages') AS source
    FROM ${db}.genai_events FINAL
    ARRAY JOIN system_prompt_parts AS part
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
-- labelled as reassemble labels a whole prompt without a map (name `system`,
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
