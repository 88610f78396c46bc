-- promptprism schema, migration 010: one provider call, one request.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- When two instrumentations each trace the same provider call (the anthropic
-- SDK's own span beside OpenInference's or OpenLLMetry's), reassembly keeps
-- one request and lists the other spans here (write.duplicates, declared in
-- record.py); empty on every other row and on rows written before.
ALTER TABLE ${db}.requests ADD COLUMN IF NOT EXISTS merged_span_ids Array(String) AFTER template_variables
