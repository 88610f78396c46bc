-- promptprism schema, migration 051: `requests` keeps what lists, filters, panels and the rollup job read.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- Since migration 048 a request object is read from its document
-- (`request_docs`), which holds every field of the request. The columns only
-- a request object shows — the span and resource attributes, the tool arrays
-- of migration 046, the manifest's hashes and byte classes, the response id,
-- the span's parent, name and scope, … (`record.py`: `document_only`) — are
-- dropped from `requests`: ~95 B per request on disk, which the document
-- stores anyway. Migration 049 copied them into the documents first. A query
-- of your own that read one of them reads it from the document now, e.g.
-- `JSONExtractString(doc, 'response_id') FROM promptprism.request_docs`.
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS parent_span_id;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS span_name;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS scope_name;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS response_id;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS finish_reasons;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS schema_version;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS dialect;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS body_sha256;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS bytes_system;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS bytes_messages;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS bytes_framing;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS reasoning_effort;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS temperature;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS attributes;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS resource_attributes;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS tool_names;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS tool_sizes;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS tool_sha256;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS tool_content_sha256;
ALTER TABLE ${db}.requests DROP COLUMN IF EXISTS tool_redacted
