"""Migration 009: the contribution of every GenAI event stored before migration 008.

Computed in Python by the rule the collector applies at ingest
(``conventions.events.contribute``), from the stored name, body and
attributes; each event is written again with it. ``genai_events`` is a
ReplacingMergeTree keyed by the event's identity without a version column,
so under FINAL (every reader uses it) the copy inserted last — the one with
its contribution — is the one read, and merges keep it.

Events are read in key order, a page at a time (keyset pagination), so
memory stays bounded and a page written again is never read again. Running
the step twice writes the same rows again: harmless, they collapse.
"""

from __future__ import annotations

from ...conventions.events import CONTRIBUTION_VERSION, contribute
from ...record import GENAI_EVENT_COLUMNS, GenAIEvent
from ..base import Store
from ..declared import DeclaredTable

# Events per page: ~10 MB of bodies at 1 KiB each, one insert per page.
PAGE_EVENTS = 10_000

_PAGE = """
SELECT toUnixTimestamp64Nano(timestamp) AS time_ns, trace_id, span_id, sequence, event_name, service, scope_name,
       body AS body_json, attributes AS attributes_json, record_sha256
FROM {db:Identifier}.genai_events FINAL
WHERE contribution_version < {version:UInt8}
  AND (trace_id, span_id, record_sha256) > ({trace_id:String}, {span_id:String}, {record_sha256:String})
ORDER BY trace_id, span_id, record_sha256
LIMIT {limit:UInt32}
"""


def apply(store: Store) -> None:
    layout = DeclaredTable(GENAI_EVENT_COLUMNS)
    after = {"trace_id": "", "span_id": "", "record_sha256": ""}
    while True:
        rows = store.query(_PAGE, {"db": store.database, "version": CONTRIBUTION_VERSION, "limit": PAGE_EVENTS,
                                   **after})
        if not rows:
            return
        events = [GenAIEvent(**{**row, "time_ns": int(row["time_ns"]), "sequence": int(row["sequence"])})
                  for row in rows]
        for event in events:
            contribute(event)
        store.insert("genai_events", layout.table(events))
        last = events[-1]
        after = {"trace_id": last.trace_id, "span_id": last.span_id, "record_sha256": last.record_sha256}
