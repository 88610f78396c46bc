"""Migration 049: the requests stored before migration 048, as `request_docs` rows.

Each request row of `requests`, with its blocks from `blocks` (as arrays in
index order) and its content references from `request_content` (the
object migration 047 stores), is inserted into `request_docs`, whose
DEFAULT packs them into the document exactly as it packs a new row. An
hour at a time, so that memory stays bounded on a store of millions of
requests a day; each day's progress is logged.

Running the step again (an interrupted start-up) copies the same rows
again: `request_docs` is a ReplacingMergeTree on (thread, started_at,
request_id), so a copy collapses with the first when parts merge, and
readers take one row per request until then. Rows the collector writes
while the copy runs are in both tables already: they collapse the same way.
The `request_ids` rows of requests of a conversation are written again with
its id (that newer copy is the one a merge keeps and the one the reader
prefers).

On a cluster the statements read the Distributed tables (`GLOBAL` joins:
`request_content` is sharded by thread, not by trace).
"""

from __future__ import annotations

import logging
import time

from ..base import Store

logger = logging.getLogger("promptprism.collector.store.migrations")

# Stored columns of `request_docs`; every other column of `requests` (as of migration 048, which this
# copy follows whatever columns later migrations add) is an EPHEMERAL input of its document.
_KEYS = ("started_at", "request_id", "trace_id")
_INPUTS = (
    'parent_span_id', 'duration_ns', 'span_name', 'status_code', 'status_message', 'service', 'scope_name',
    'operation', 'provider', 'model', 'response_model', 'response_id', 'finish_reasons', 'conversation_id',
    'message_id', 'process_kind', 'process_id', 'run_id', 'run_mode', 'attempt', 'record_id', 'schema_version',
    'prompt_bytes', 'prompt_sha256', 'mapped', 'unmapped_reason', 'template_name', 'template_origin',
    'declared_block_count', 'dialect', 'body_sha256', 'bytes_system', 'bytes_tools', 'bytes_messages',
    'bytes_framing', 'bytes_total', 'tools_count', 'tools_catalog_sha256', 'messages_count', 'tokens_estimate',
    'context_window', 'headroom_tokens', 'reasoning_effort', 'temperature', 'input_tokens', 'output_tokens',
    'cache_read_tokens', 'cache_creation_tokens', 'merged_span_ids', 'attributes', 'resource_attributes',
    'block_count', 'tool_names', 'tool_sizes', 'tool_sha256', 'tool_content_sha256', 'tool_redacted',
)
# The block arrays of `request_docs` (migration 048) ← the `blocks` column each is made of.
BLOCK_ARRAYS = (
    ("block_index", "`index`"), ("block_names", "toString(name)"), ("block_layers", "toString(layer)"),
    ("block_stabilities", "toString(stability)"), ("block_sources", "toString(source)"),
    ("block_starts", "start"), ("block_ends", "`end`"), ("block_sizes", "size"), ("block_sha256", "sha256"),
    ("block_content_sha256", "content_sha256"), ("block_redacted", "redacted"),
)


def _statement(database: str) -> str:
    inputs = list(_INPUTS)
    blocks = [name for name, _ in BLOCK_ARRAYS]
    target = ", ".join(f"`{name}`" for name in [*_KEYS, *inputs, *blocks, "content_refs"])
    # One tuple per block, sorted by index (the first element), then one array per field.
    tuples = ", ".join(value for _, value in BLOCK_ARRAYS)
    unpacked = ", ".join(f"arrayMap(t -> t.{position}, parts) AS {name}"
                         for position, (name, _) in enumerate(BLOCK_ARRAYS, start=1))
    return f"""
INSERT INTO {database}.request_docs ({target})
SELECT {", ".join(f"r.`{name}`" for name in [*_KEYS, *inputs])},
       {", ".join(f"if(b.request_id = '', [], b.{name})" for name in blocks)},
       if(c.content_refs = '', 'null', c.content_refs)
FROM {database}.requests AS r
GLOBAL LEFT JOIN (
    SELECT request_id, {unpacked}
    FROM (
        SELECT request_id, arraySort(groupArray(tuple({tuples}))) AS parts
        FROM (
            SELECT * FROM {database}.blocks
            WHERE toDate(started_at) = {{day:Date}}
              AND toStartOfHour(started_at) = toDateTime({{hour:Int64}}, 'UTC')
            LIMIT 1 BY request_id, `index`
        )
        GROUP BY request_id
    )
) AS b ON b.request_id = r.request_id
GLOBAL LEFT JOIN (
    SELECT request_id, any(content_refs) AS content_refs FROM {database}.request_content
    WHERE toDate(started_at) = {{day:Date}}
      AND toStartOfHour(started_at) = toDateTime({{hour:Int64}}, 'UTC')
    GROUP BY request_id
) AS c ON c.request_id = r.request_id
WHERE toDate(r.started_at) = {{day:Date}}
  AND toStartOfHour(r.started_at) = toDateTime({{hour:Int64}}, 'UTC')
"""


_HOURS = """
SELECT toString(toDate(started_at)) AS day, toInt64(toUnixTimestamp(toStartOfHour(started_at))) AS hour,
       count() AS requests
FROM {db:Identifier}.requests
GROUP BY day, hour
ORDER BY day, hour
"""

_REQUEST_IDS = """
INSERT INTO {db:Identifier}.request_ids (request_id, started_at, service, trace_id, conversation_id)
SELECT request_id, started_at, service, trace_id, conversation_id
FROM {db:Identifier}.requests
WHERE toDate(started_at) = {day:Date} AND conversation_id != ''
"""


def apply(store: Store) -> None:
    hours = store.query(_HOURS, {"db": store.database})
    if not hours:
        return
    statement = _statement(store.database)
    days = sorted({row["day"] for row in hours})
    total = sum(int(row["requests"]) for row in hours)
    logger.info("migration 049: copying %d requests of %d days into request_docs", total, len(days))
    started, copied = time.monotonic(), 0
    for number, day in enumerate(days, start=1):
        for row in (row for row in hours if row["day"] == day):
            store.execute(statement, {"day": day, "hour": int(row["hour"])})
            copied += int(row["requests"])
        store.execute(_REQUEST_IDS, {"db": store.database, "day": day})
        logger.info("migration 049: day %s done (%d of %d days, %d of %d requests, %.0f s)",
                    day, number, len(days), copied, total, time.monotonic() - started)
