-- promptprism schema, migration 005: stored text keyed by its own hash.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- A block's or tool's `sha256` is the wire value: the digest of the original
-- bytes, which diff, cache-break and growth queries compare. Content the
-- application's redaction hook changed is not those bytes, so `contents`
-- cannot hold it under that digest: a service that redacts and one that does
-- not, sending the same text on the same day, would share one (day, sha256)
-- row and one of them would be shown the other's text. `content_sha256` is
-- the digest of the text `contents` holds for the row ('' when none was
-- stored), and `redacted` says the text is not the original bytes, so the
-- read side does not check it against `sha256` and `size`.
--
-- Rows written before this migration have content_sha256 = '': their text
-- was stored under `sha256`, and readers fall back to it.
ALTER TABLE ${db}.blocks ADD COLUMN IF NOT EXISTS content_sha256 String DEFAULT '' CODEC(ZSTD(1)) AFTER sha256;
ALTER TABLE ${db}.blocks ADD COLUMN IF NOT EXISTS redacted Bool DEFAULT false AFTER content_sha256;
ALTER TABLE ${db}.tools ADD COLUMN IF NOT EXISTS content_sha256 String DEFAULT '' CODEC(ZSTD(1)) AFTER sha256;
ALTER TABLE ${db}.tools ADD COLUMN IF NOT EXISTS redacted Bool DEFAULT false AFTER content_sha256;
