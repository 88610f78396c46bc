-- promptprism schema, migration 025: bloom filters on the list's exact-match filters.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- `GET /api/requests?message_id=` and `?run_id=` read the whole column of
-- every day without them (1 M requests: ~100 ms and ~60 ms of CPU for the
-- list, as much again for its count); a bloom filter skips the granules that
-- cannot hold the value, as the ones on trace_id and conversation_id do.
-- About a byte per request each.
ALTER TABLE ${db}.requests ADD INDEX IF NOT EXISTS idx_message_id message_id TYPE bloom_filter(0.01) GRANULARITY 1;
ALTER TABLE ${db}.requests ADD INDEX IF NOT EXISTS idx_run_id run_id TYPE bloom_filter(0.01) GRANULARITY 1;

-- Rows written before this migration (a mutation: it runs in the background on a server).
ALTER TABLE ${db}.requests MATERIALIZE INDEX idx_message_id;
ALTER TABLE ${db}.requests MATERIALIZE INDEX idx_run_id
