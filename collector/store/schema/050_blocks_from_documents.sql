-- promptprism schema, migration 050: `blocks` and `request_content` are read from `request_docs`.
-- Placeholders (string.Template): ${db} database, ${ttl_days} retention.
--
-- Since migration 048 a request's blocks and content references travel in
-- its document (`request_docs`), and migration 049 copied every request
-- stored before it there. The tables that held them are dropped: the write
-- path no longer fills them, and a request object reads its document. This
-- takes `blocks` (~176 B per request on the 1 M-request store of
-- benchmarks/reads.py) and `request_content` (~110 B) off the disk.
--
-- `blocks` stays as a view of the same name and columns, one row per block
-- (the document's block arrays, ARRAY JOINed), so that the panels, the
-- insight queries and anyone's own SQL read it as before. It is a view:
-- no FINAL (a document not merged with its copy yet gives its blocks twice;
-- readers that must count each once take LIMIT 1 BY request_id, index), and
-- a time filter prunes by day partition and the parts' start range, then
-- parses the documents of what is left.
DROP TABLE IF EXISTS ${db}.blocks;

CREATE VIEW IF NOT EXISTS ${db}.blocks AS
SELECT started_at, trace_id, request_id, d.service AS service, d.model AS model, d.process_kind AS process_kind,
       d.conversation_id AS conversation_id, `index`, name, layer, stability, source, start, `end`, size, sha256,
       content_sha256, redacted
FROM (
    SELECT started_at, trace_id, request_id,
           JSONExtract(doc, 'Tuple(service String, model String, process_kind String, conversation_id String, block_index Array(UInt32), block_names Array(String), block_layers Array(String), block_stabilities Array(String), block_sources Array(String), block_starts Array(UInt64), block_ends Array(UInt64), block_sizes Array(UInt64), block_sha256 Array(String), block_content_sha256 Array(String), block_redacted Array(Bool))') AS d
    FROM ${db}.request_docs
)
ARRAY JOIN d.block_index AS `index`, d.block_names AS name, d.block_layers AS layer, d.block_stabilities AS stability,
           d.block_sources AS source, d.block_starts AS start, d.block_ends AS `end`, d.block_sizes AS size,
           d.block_sha256 AS sha256, d.block_content_sha256 AS content_sha256, d.block_redacted AS redacted;

DROP TABLE IF EXISTS ${db}.request_content
