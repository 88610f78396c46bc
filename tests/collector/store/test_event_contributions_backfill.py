"""Migrations 008 and 009 on a store whose GenAI events were written before them.

The events are written as a collector of migration 007 wrote them (no
contribution columns); 008 adds the columns and the views over them, 009
computes every stored event's contribution in Python. Afterwards the stored
contributions are exactly what ingest computes today, and the API and the
SQL views serve the events' system prompt.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import time

import pytest

from promptprism.collector.otlp.logs import decode_protobuf
from promptprism.collector.read import lookups
from promptprism.collector.record import GENAI_EVENT_COLUMNS
from promptprism.collector.store import migrations
from promptprism.collector.store.migrations import migrate
from promptprism.collector.write.genai_events import split_logs
from promptprism.collector.write.rows import build_tables
from promptprism.wire import names

from ..event_samples import span_record, view_prompt
from ..log_samples import OPENAI_V2_EVENTS, SYSTEM_PROMPT, logs_payload
from .older_schema import stored_columns, write_as_of

DETAILS_PROMPT = "Réponds en français. 🍵"
# (trace id, span id, events): older per-message events; a newer operation-details event.
REQUESTS = [
    (0xB1 << 64, 0xB1, OPENAI_V2_EVENTS),
    (0xB2 << 64, 0xB2, ((names.EVENT_INFERENCE_DETAILS, None, {
        names.GEN_AI_SYSTEM_INSTRUCTIONS: [{"type": "text", "content": DETAILS_PROMPT}],
        names.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "content": "salut"}])}),)),
]
STORED = [column.name for column in GENAI_EVENT_COLUMNS if column.name not in ("timestamp", "body", "attributes")]


def ingested_events():
    events = []
    for trace_id, span_id, sent in REQUESTS:
        events += split_logs(decode_protobuf(logs_payload(sent, trace_id=trace_id, span_id=span_id)).records).genai_events
    return events


def stored_contributions(store) -> list[dict]:
    return store.query(f"SELECT {', '.join(STORED)} FROM {{db:Identifier}}.genai_events FINAL "
                       "ORDER BY trace_id, span_id, record_sha256", {"db": store.database})


@pytest.fixture
def store_before_008(schema_before):
    with schema_before(8) as store:  # migrations up to 007
        now_ns = time.time_ns()
        records = [span_record(trace_id, span_id, now_ns - 10**9) for trace_id, span_id, _ in REQUESTS]
        events = ingested_events()
        write_as_of(store, build_tables([], records, genai_events=events))
        yield store, events


def test_the_backfill_gives_old_events_the_contribution_ingest_gives_new_ones(store_before_008, monkeypatch):
    store, events = store_before_008
    assert "contribution" not in stored_columns(store, "genai_events")
    backfill = importlib.import_module("promptprism.collector.store.schema.009_event_contributions_backfill")
    monkeypatch.setattr(backfill, "PAGE_EVENTS", 2)  # several pages
    assert migrate(store)[:2] == ["008_event_contributions.sql", "009_event_contributions_backfill.py"]

    expected = sorted(({column.name: getattr(event, column.field) for column in GENAI_EVENT_COLUMNS
                        if column.name in STORED} for event in events),
                      key=lambda row: (row["trace_id"], row["span_id"], row["record_sha256"]))
    assert stored_contributions(store) == expected
    for (_, span_id, _), prompt in zip(REQUESTS, (SYSTEM_PROMPT, DETAILS_PROMPT)):
        served = lookups.request(store, f"{span_id:016x}")["prompt"]
        row, [block] = view_prompt(store, span_id)
        digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        assert (served["text"], served["sha256"]) == (prompt, digest)
        assert (row["prompt_bytes"], row["prompt_sha256"], block["size"]) == (len(prompt.encode()), digest,
                                                                               len(prompt.encode()))


def test_running_the_backfill_again_changes_nothing(store_before_008):
    store, _ = store_before_008
    migrate(store)
    before = stored_contributions(store)
    [step] = [migration for migration in migrations.load_migrations(database=store.database, retention_days=30)
              if migration.version == 9]
    step.apply(store)
    assert stored_contributions(store) == before
