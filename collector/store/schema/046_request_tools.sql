-- promptprism schema, migration 046: a request's tool definitions on its own row.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- A request object (GET /api/requests/{id}, GET /api/traces/{id}) showed its
-- tools from `tools`, a table of ten rows per request read beside `blocks`:
-- each table a query reads costs ClickHouse milliseconds of planning before
-- it reads a row (README "Read performance"). The tools now travel with the
-- request's row, one array element per definition in index order
-- (record.REQUEST_TOOL_COLUMNS), and `tools` holds only what cannot: rows
-- written before this migration, whose arrays are empty, and tool
-- definitions that came in log records after their request's row was
-- written. The read side looks there for a request whose arrays are empty.
-- A service's requests repeat the same definitions row after row, which
-- ZSTD stores for about what the rows of `tools` took.
ALTER TABLE ${db}.requests ADD COLUMN IF NOT EXISTS tool_names Array(String) CODEC(ZSTD(1)) AFTER tools_catalog_sha256;
ALTER TABLE ${db}.requests ADD COLUMN IF NOT EXISTS tool_sizes Array(UInt64) CODEC(ZSTD(1)) AFTER tool_names;
ALTER TABLE ${db}.requests ADD COLUMN IF NOT EXISTS tool_sha256 Array(String) CODEC(ZSTD(1)) AFTER tool_sizes;
ALTER TABLE ${db}.requests ADD COLUMN IF NOT EXISTS tool_content_sha256 Array(String) CODEC(ZSTD(1)) AFTER tool_sha256;
ALTER TABLE ${db}.requests ADD COLUMN IF NOT EXISTS tool_redacted Array(Bool) CODEC(ZSTD(1)) AFTER tool_content_sha256
