-- promptprism schema, migration 007: the sampling temperature a request asked for.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- gen_ai.request.temperature, declared in record.py; NULL when the span sets
-- none (and on rows written before this migration).
ALTER TABLE ${db}.requests ADD COLUMN IF NOT EXISTS temperature Nullable(Float64) AFTER reasoning_effort
