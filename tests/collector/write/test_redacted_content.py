"""Redacted content end to end: decoded spans → reassemble → rows → sink →
store → read side.

The sender's redaction hook changes captured text but keeps the original's
size and sha256 on the wire. The text is stored under the hash of what was
stored, so a service that redacts and one that does not, sending the same
original text on the same day, each read back their own text.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from promptprism.collector.read import lookups
from promptprism.collector.write.convert import ConvertedExport
from promptprism.collector.write.reassemble import reassemble
from promptprism.collector.write.rows import build_tables, content_sha256
from promptprism.collector.write.sink import open_sink
from promptprism.wire import names
from promptprism.collector.write.documents import document_inputs

from ..prompt_spans import block_events, decoded_span, prompt_attributes, sha
from ..write_path_samples import converted_export

SECRET_LINE = "Use the key sk-live-4f9a2c7d1e8b for the billing API.\n"
REDACTED_LINE = "Use the key [REDACTED:api_key] for the billing API.\n"
PARTS = [
    ("identity", "identity", "static", "You are Prism, a billing assistant.\n"),
    ("credentials", "knowledge", "static", SECRET_LINE),
    ("question", "state", "turn", "What did I pay in March?\n"),
]
TOOL_TEXT = '{"name":"charge","description":"Charge card 4242-4242-4242-4242"}'
REDACTED_TOOL_TEXT = '{"name":"charge","description":"Charge card [REDACTED:card]"}'
REDACTING, KEEPING = "b1b1b1b1b1b1b1b1", "c2c2c2c2c2c2c2c2"


def now_ns() -> int:
    # Recent: rows older than the retention are dropped by the TTL on insert.
    return time.time_ns() - 3_600 * 10**9


def tool_event(text: str, *, redacted: bool) -> dict:
    attributes = {names.TOOL_NAME: "charge", names.TOOL_SIZE: len(TOOL_TEXT.encode()),
                  names.TOOL_SHA256: sha(TOOL_TEXT), names.TOOL_CONTENT: text}
    if redacted:
        attributes[names.TOOL_REDACTED] = True
    return attributes


def request_span(span_id: str, service: str, started_at_ns: int, *, redact: bool):
    """One request with the secret in block 1 and the tool; ``redact`` as the default hook would."""
    prompt, events = block_events(PARTS)
    if redact:
        events[1][names.BLOCK_CONTENT] = REDACTED_LINE
        events[1][names.BLOCK_REDACTED] = True
    span = decoded_span(prompt_attributes(prompt, len(events)), events, span_id=span_id)
    span.events.append(dataclasses.replace(span.events[0], name=names.EVENT_TOOL_DEFINITION,
                                           attributes=tool_event(REDACTED_TOOL_TEXT if redact else TOOL_TEXT,
                                                                 redacted=redact)))
    return dataclasses.replace(span, service=service, resource_attributes={"service.name": service},
                               start_time_ns=started_at_ns, end_time_ns=started_at_ns + 250_000_000)


def batch_of(span) -> ConvertedExport:
    records, _ = reassemble([span])
    return converted_export([span], records, sha(span.span_id))


# --- rows: the key of stored text ----------------------------------------------

def test_redacted_text_is_keyed_by_its_own_hash_and_the_block_keeps_the_original():
    start = now_ns()
    spans = [request_span(REDACTING, "redacting-app", start, redact=True),
             request_span(KEEPING, "keeping-app", start + 1000, redact=False)]
    records, unmapped = reassemble(spans)
    assert unmapped == {} and all(record.mapped for record in records)
    redacting, keeping = records
    assert redacting.blocks[1].redacted and not keeping.blocks[1].redacted
    assert redacting.tools[0].redacted and not keeping.tools[0].redacted
    assert content_sha256(redacting.blocks[1]) == sha(REDACTED_LINE)
    assert content_sha256(keeping.blocks[1]) == sha(SECRET_LINE) == keeping.blocks[1].sha256
    assert content_sha256(redacting.tools[0]) == sha(REDACTED_TOOL_TEXT)

    tables = build_tables(spans, records)
    # A request's blocks are arrays of its document (migration 048), in index order.
    documents = document_inputs(tables.tables["request_docs"]).to_pylist()
    credentials = [(document["block_sha256"][index], document["block_content_sha256"][index],
                    document["block_redacted"][index])
                   for document in documents for index, name in enumerate(document["block_names"])
                   if name == "credentials"]
    # Both blocks keep the wire digest (diff and cache queries compare it); each
    # points at its own text ('': the text as sent, under sha256 itself).
    assert credentials == [(sha(SECRET_LINE), sha(REDACTED_LINE), True), (sha(SECRET_LINE), "", False)]
    # A request's tools are arrays of its document (migration 048; of its row from 046), as `tools` rows
    # held them before.
    requests = document_inputs(tables.tables["request_docs"]).to_pylist()
    assert [(row["tool_sha256"], row["tool_content_sha256"], row["tool_redacted"]) for row in requests] == [
        ([sha(TOOL_TEXT)], [sha(REDACTED_TOOL_TEXT)], [True]), ([sha(TOOL_TEXT)], [""], [False])]
    assert tables.tables["tools"].num_rows == 0
    # `contents` keys: the first 16 bytes of the digest, raw
    stored = {row["sha256"].hex(): row["content"] for row in tables.tables["contents"].to_pylist()}
    assert stored[sha(REDACTED_LINE)[:32]] == REDACTED_LINE and stored[sha(SECRET_LINE)[:32]] == SECRET_LINE
    assert stored[sha(REDACTED_TOOL_TEXT)[:32]] == REDACTED_TOOL_TEXT and stored[sha(TOOL_TEXT)[:32]] == TOOL_TEXT
    assert len(stored) == 2 + 2 + 2  # the two shared blocks once, both texts of the secret and of the tool

    # contents holds every block and tool text, so otel_traces does not.
    for attributes in tables.tables["otel_traces"].column("Events.Attributes").to_pylist():
        for event in attributes:
            keys = dict(event)
            assert names.BLOCK_CONTENT not in keys and names.TOOL_CONTENT not in keys


def test_a_redacted_flag_without_content_flags_nothing():
    prompt, events = block_events(PARTS, content=False)
    events[1][names.BLOCK_REDACTED] = True
    records, _ = reassemble([decoded_span(prompt_attributes(prompt, len(events)), events)])
    assert records[0].mapped and not records[0].blocks[1].redacted
    documents = document_inputs(build_tables([], records).tables["request_docs"])
    assert documents.column("block_content_sha256").to_pylist() == [["", "", ""]]


# --- the whole path: each request reads back its own text -----------------------

@pytest.mark.parametrize("redacting_first", [True, False], ids=["redacting-first", "keeping-first"])
def test_same_original_text_redacted_by_one_service_and_not_by_another(store, tmp_path, redacting_first):
    start = now_ns()
    redacting = request_span(REDACTING, "redacting-app", start, redact=True)
    keeping = request_span(KEEPING, "keeping-app", start + 1000, redact=False)
    sink = open_sink(store, data_dir=str(tmp_path))
    try:
        # Two exports on the same day; the sink's recent-content set sees both.
        for span in ([redacting, keeping] if redacting_first else [keeping, redacting]):
            sink.accept(batch_of(span))
    finally:
        sink.close()

    shown = lookups.request(store, REDACTING)
    prompt = shown["prompt"]
    assert prompt["problems"] == [] and all(block["problems"] == [] for block in prompt["blocks"])
    credentials = prompt["blocks"][1]
    assert credentials["content"] == REDACTED_LINE and credentials["redacted"] is True
    assert credentials["sha256"] == sha(SECRET_LINE) and credentials["size"] == len(SECRET_LINE.encode())
    assert [block["redacted"] for block in prompt["blocks"]] == [False, True, False]
    assert prompt["text"] == PARTS[0][3] + REDACTED_LINE + PARTS[2][3] and prompt["redacted"] is True
    assert shown["tools"][0]["content"] == REDACTED_TOOL_TEXT and shown["tools"][0]["redacted"] is True
    assert SECRET_LINE not in str(shown) and "4242-4242" not in str(shown)

    shown = lookups.request(store, KEEPING)
    prompt = shown["prompt"]
    assert prompt["problems"] == [] and all(block["problems"] == [] for block in prompt["blocks"])
    assert prompt["blocks"][1]["content"] == SECRET_LINE and prompt["blocks"][1]["redacted"] is False
    assert prompt["text"] == "".join(text for *_, text in PARTS) and prompt["redacted"] is False
    assert shown["tools"][0]["content"] == TOOL_TEXT and shown["tools"][0]["redacted"] is False

    # The wire digests still match across the two, so a diff sees the same prompt.
    diff = lookups.diff(store, REDACTING, KEEPING)
    assert diff["identical_prompt"] is True


def test_the_inspector_labels_redacted_text(store, tmp_path):
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from promptprism.collector.read.inspector import inspector_routes

    sink = open_sink(store, data_dir=str(tmp_path))
    try:
        sink.accept(batch_of(request_span(REDACTING, "redacting-app", now_ns(), redact=True)))
    finally:
        sink.close()
    page = TestClient(Starlette(routes=inspector_routes(store))).get(f"/requests/{REDACTING}").text
    assert page.count('class="badge redacted"') == 2  # the block and the tool
    assert "[REDACTED:api_key]" in page and "sk-live" not in page
    assert "Stored block map problems" not in page
