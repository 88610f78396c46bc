"""System prompts that arrived as OTLP log events, as SQL readers see them.

What each GenAI event contributes is computed once, at ingest
(conventions/events.py), and stored; the read side's loader combines a
request's stored contributions in Python (read/events.py), the views of
migration 008 (`event_prompts`, `prompt_requests`, `prompt_blocks`) combine
the same columns in SQL for every SQL reader — the insight queries, so the
API insight routes, the CLI, the overview page and the Grafana panels. Both
must give the same system prompt: one unmapped block with the size and hash
the API serves. Each case here is written through the real write path (SDK
log records → decode → split → contributions → rows → store) and read both
ways.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

import pytest

from promptprism.collector.read.insight import report
from promptprism.collector.read.insight.queries import QUERIES, STORE
from promptprism.collector.read.insight.report import Filters, Window
from promptprism.collector.conventions.system_prompt import WHOLE_PROMPT_BLOCK_NAME, WHOLE_PROMPT_LAYER
from promptprism.wire import names

from ...event_samples import BLOCK_FIELDS, SERVICE, api_prompt, genai_events, span_record, view_prompt, write_events
from ...log_samples import OPENAI_V2_EVENTS, OPENAI_V2_SPAN_INPUT, OPENAI_V2_SPAN_OUTPUT, SYSTEM_PROMPT, \
    logs_payload
from ...write_path_samples import write_records
from .snapshots import window_snapshot

DETAILS = names.EVENT_INFERENCE_DETAILS
UNICODE_PROMPT = "Réponds en français. 回答は簡潔に。 🍵"


def details(**attributes) -> tuple:
    """An operation-details event: the content as span-shaped attributes, no body."""
    return (DETAILS, None, {names.GEN_AI_OPERATION_NAME: "chat", **attributes})


def system_message(content) -> tuple:
    return (names.EVENT_SYSTEM_MESSAGE, {"content": content})


def user_message(content) -> tuple:
    return (names.EVENT_USER_MESSAGE, {"content": content})


@dataclass(frozen=True)
class Case:
    name: str
    events: tuple
    expected: str | None  # the system prompt text, None when the events carry none
    span_sha256: str = ""  # promptprism.prompt.sha256 on the span, when it declares one


CASES = [
    Case("openai-v2 older events", OPENAI_V2_EVENTS, SYSTEM_PROMPT),
    Case("multi-byte text", (system_message(UNICODE_PROMPT), user_message("hi")), UNICODE_PROMPT),
    Case("text parts: text before content, other parts skipped",
         (system_message([{"type": "text", "text": "A", "content": "ignored"}, {"type": "image_url", "url": "x"},
                          "B", {"content": "C"}, {"type": "text", "text": None, "content": "ignored"}]),),
         "ABC"),
    Case("developer role from the event name", (("gen_ai.developer.message", {"content": "Be terse."}),),
         "Be terse."),
    Case("system role from the body wins over the event name",
         ((names.EVENT_USER_MESSAGE, {"role": "system", "content": "From the body."}), user_message("hi")),
         "From the body."),
    Case("body that is the content itself", ((names.EVENT_SYSTEM_MESSAGE, "Plain body."),), "Plain body."),
    Case("several system messages in order, empty ones left out",
         (system_message("First."), user_message("hi"), system_message(""), system_message("Second.")),
         "First.\n\nSecond."),
    Case("content capture off", ((names.EVENT_SYSTEM_MESSAGE, None), (names.EVENT_USER_MESSAGE, None)), None),
    Case("no system message", (user_message("hi"),), None),
    Case("details: input messages as a JSON string",
         (details(**{names.GEN_AI_INPUT_MESSAGES: OPENAI_V2_SPAN_INPUT,
                     names.GEN_AI_OUTPUT_MESSAGES: OPENAI_V2_SPAN_OUTPUT}),),
         SYSTEM_PROMPT),
    Case("details: structured input messages, content strings and parts",
         (details(**{names.GEN_AI_INPUT_MESSAGES: [
             {"role": "system", "content": "One."},
             {"role": "user", "content": "hi"},
             {"role": "developer", "parts": [{"type": "text", "content": "Two"}, {"type": "text", "text": "!"}]},
         ]}),),
         "One.\n\nTwo!"),
    Case("details: system instructions as a JSON string of parts",
         (details(**{names.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps([{"type": "text", "content": UNICODE_PROMPT}]),
                     names.GEN_AI_INPUT_MESSAGES: OPENAI_V2_SPAN_INPUT}),),
         UNICODE_PROMPT),
    Case("details: structured system instructions",
         (details(**{names.GEN_AI_SYSTEM_INSTRUCTIONS: [{"type": "text", "content": "X"},
                                                         {"type": "text", "content": "Y"}]}),),
         "XY"),
    Case("details: system instructions as plain text", (details(**{names.GEN_AI_SYSTEM_INSTRUCTIONS: "[Be kind."}),),
         "[Be kind."),
    Case("details: instructions without text fall through to the messages",
         (details(**{names.GEN_AI_SYSTEM_INSTRUCTIONS: [{"type": "image", "url": "x"}],
                     names.GEN_AI_INPUT_MESSAGES: OPENAI_V2_SPAN_INPUT}),),
         SYSTEM_PROMPT),
    Case("details: input messages without a system message replace the older events",
         (system_message("Older."), details(**{names.GEN_AI_INPUT_MESSAGES: [{"role": "user", "content": "hi"}]})),
         None),
    Case("details: instructions win over older events",
         (system_message("Older."), details(**{names.GEN_AI_SYSTEM_INSTRUCTIONS: "Newer."})), "Newer."),
    Case("a prompt hash on the span that matches the text",
         OPENAI_V2_EVENTS, SYSTEM_PROMPT, span_sha256=hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest().upper()),
    Case("a prompt hash on the span that does not match the text", OPENAI_V2_EVENTS, None, span_sha256="0" * 64),
]


def test_the_views_serve_the_prompt_the_api_serves(store):
    now_ns = time.time_ns()
    payloads = []
    for number, case in enumerate(CASES, start=1):
        trace_id, span_id = 0x7E57 << 64 | number, 0x5A00 + number
        write_records(store, [span_record(trace_id, span_id, now_ns, span_sha256=case.span_sha256)])
        payloads.append(write_events(store, case.events, trace_id, span_id))
    # The first request's records again, re-sent in a later export beside another
    # request's (so not dropped at the door as an identical insert): FINAL collapses them.
    write_records(store, [], genai_events=genai_events(payloads[0]) + genai_events(payloads[1]))

    for number, case in enumerate(CASES, start=1):
        span_id = 0x5A00 + number
        served = api_prompt(store, span_id)
        row, blocks = view_prompt(store, span_id)
        if case.expected is None:
            assert served["bytes"] == 0 and served["blocks"] == [], case.name
            assert (row["prompt_bytes"], row["block_count"], row["prompt_from_events"]) == (0, 0, False), case.name
            assert blocks == [], case.name
            continue
        expected = case.expected.encode("utf-8")
        assert served["text"] == case.expected, case.name
        assert (served["bytes"], served["sha256"]) == (len(expected), hashlib.sha256(expected).hexdigest()), case.name
        assert (row["prompt_bytes"], row["prompt_sha256"], row["block_count"], row["prompt_from_events"]) == \
            (served["bytes"], served["sha256"], served["block_count"], True), case.name
        assert blocks == [{field: block[field] for field in BLOCK_FIELDS} for block in served["blocks"]], case.name
        assert (blocks[0]["name"], blocks[0]["layer"]) == (WHOLE_PROMPT_BLOCK_NAME, WHOLE_PROMPT_LAYER), case.name


def test_a_prompt_on_the_span_and_a_block_map_are_left_as_they_are(store, now_ns):
    from . import scenario

    mapped = scenario.records(now_ns)[0]
    on_span = span_record(0xC0FFEE, 0xC0FFEE, now_ns, **{names.GEN_AI_INPUT_MESSAGES: OPENAI_V2_SPAN_INPUT})
    write_records(store, [mapped, on_span])
    # Events naming these spans change nothing: the span's own prompt wins, as in the API.
    write_events(store, (system_message("Not this."),), int(mapped.trace_id, 16), int(mapped.request_id, 16))
    write_events(store, (system_message("Not this."),), 0xC0FFEE, 0xC0FFEE)
    for record in (mapped, on_span):
        row, blocks = view_prompt(store, int(record.request_id, 16))
        assert (row["prompt_bytes"], row["prompt_sha256"], row["block_count"], row["prompt_from_events"]) == \
            (record.prompt_bytes, record.prompt_sha256, len(record.blocks), False)
        assert [block["sha256"] for block in blocks] == [block.sha256 for block in record.blocks]


# --- the insight queries ---------------------------------------------------------------------

# Columns that name the request rather than describe its prompt.
IDENTITY_COLUMNS = {"trace_id", "request_id", "example_trace_id", "previous_request_id", "service",
                    "conversation_id"}
TURNS = 3


def _conversation(store, *, service: str, through_events: bool, now_ns: int) -> list[int]:
    """A conversation of TURNS requests with the same system prompt, its content on
    the span (latest conventions) or as log events (older ones); the span ids."""
    span_ids = []
    base = 0xE0 if through_events else 0x50
    for turn in range(TURNS):
        trace_id, span_id = base << 64 | turn, base << 8 | turn
        extra = {names.GEN_AI_CONVERSATION_ID: f"{service}-conversation",
                 names.REQUEST_CONTEXT_WINDOW: 128_000, names.REQUEST_TOKENS_ESTIMATE: 5_000 + turn,
                 names.REQUEST_HEADROOM_TOKENS: 123_000 - turn}
        if not through_events:
            extra |= {names.GEN_AI_INPUT_MESSAGES: OPENAI_V2_SPAN_INPUT, names.GEN_AI_OUTPUT_MESSAGES: OPENAI_V2_SPAN_OUTPUT}
        started_at_ns = now_ns - (TURNS - turn) * 60 * 10**9
        write_records(store, [span_record(trace_id, span_id, started_at_ns, service=service, **extra)])
        if through_events:
            write_events(store, OPENAI_V2_EVENTS, trace_id, span_id, service=service)
        span_ids.append(span_id)
    return span_ids


def _answers(store, service: str, window: Window) -> dict[str, list[dict]]:
    params = {"since": window.since, "until": window.until, "bucket_seconds": 3600, "dimension": "name",
              "limit": 100, **Filters(service=service).as_params()}
    known = window_snapshot(store, window.since, window.until)
    return {name: [{key: value for key, value in row.items() if key not in IDENTITY_COLUMNS}
                   for row in report.run(store, name, params, known=known)]
            for name in QUERIES}


@pytest.mark.clickhouse  # every insight query, on ClickHouse 24.8 too (tests/conftest.py)
def test_every_insight_query_answers_for_event_prompts_as_for_span_prompts(store, now_ns):
    on_span = _conversation(store, service="span-app", through_events=False, now_ns=now_ns)
    through_events = _conversation(store, service="events-app", through_events=True, now_ns=now_ns)
    window = Window.parse("1d", now=now_ns // 10**9)
    assert _answers(store, "events-app", window) == _answers(store, "span-app", window)

    # And what they say is the prompt the API serves for each request.
    prompt = SYSTEM_PROMPT.encode("utf-8")
    for span_id in [*on_span, *through_events]:
        served = api_prompt(store, span_id)
        assert (served["bytes"], served["sha256"]) == (len(prompt), hashlib.sha256(prompt).hexdigest())
    # Growth compares a lineage with itself: a window that puts the first turn in the previous period.
    now = now_ns // 10**9
    growth = report.growth(store, Window(now - 150, now), Filters(service="events-app"))
    [part] = growth["attribution"]
    assert (part["series"], part["current_bytes"], part["previous_bytes"], part["current_requests"],
            part["previous_requests"]) == ("(unmapped)", len(prompt), len(prompt), TURNS - 1, 1)
    requests = report.run(store, "requests_table", {"since": window.since, "until": window.until, "limit": 100,
                                                    **Filters(service="events-app").as_params()})
    assert [(row["request_id"], row["prompt_bytes"], row["block_count"]) for row in requests] == \
        [(f"{span_id:016x}", len(prompt), 1) for span_id in reversed(through_events)]
    headroom = report.headroom(store, window, Filters(service="events-app"))
    assert len(headroom["requests"]) == TURNS
    cache = report.cache(store, window, Filters(service="events-app"))
    # A prompt without a block map has no stabilities to analyse, whichever way it came.
    assert cache["requests"] == [] and cache["counts"]["follow_ups"] == 0


def test_a_log_that_arrives_before_its_span_counts_once_the_span_is_stored(store, now_ns):
    window = Window.parse("1d", now=now_ns // 10**9)
    write_events(store, OPENAI_V2_EVENTS, 0xAB << 64, 0xAB)
    assert report.growth(store, window, Filters(service=SERVICE))["series"] == []
    write_records(store, [span_record(0xAB << 64, 0xAB, now_ns - 10**9)])
    [point] = report.growth(store, window, Filters(service=SERVICE))["series"]
    assert point["bytes_per_request"] == len(SYSTEM_PROMPT.encode("utf-8"))


def test_events_stored_before_migration_004_are_counted(schema_before, now_ns):
    """Rows written under migration 003 get their contribution from migration 009."""
    from promptprism.collector.store.migrations import migrate
    from promptprism.collector.write.rows import build_tables

    from ...store.older_schema import write_as_of

    with schema_before(4) as store:  # migrations up to 003
        write_as_of(store, build_tables([], [span_record(0xD1 << 64, 0xD1, now_ns - 10**9)], genai_events=genai_events(
            logs_payload(OPENAI_V2_EVENTS, trace_id=0xD1 << 64, span_id=0xD1))))
        assert migrate(store, up_to=4) == ["004_event_prompts.sql"]
        migrate(store)  # the later ones too: the read side's queries need their columns
        row, [block] = view_prompt(store, 0xD1)
        served = api_prompt(store, 0xD1)
        assert (row["prompt_bytes"], row["prompt_sha256"]) == (served["bytes"], served["sha256"])
        assert block["size"] == len(SYSTEM_PROMPT.encode("utf-8"))


def test_insight_sql_reads_unmapped_prompts_through_the_views():
    """A prompt that arrived as log events is an unmapped request's: the queries read prompt sizes through
    prompt_requests, which fills them in; `requests` and `blocks` are read directly only for mapped requests
    (the cache analysis, the blocks of the growth parts) and by key or lineage."""
    for query in QUERIES.values():
        sql = query.render(STORE)
        assert " FINAL" not in sql, query.name
        if query.name.startswith(("growth_", "headroom_", "requests_")):
            assert ".prompt_requests" in sql, query.name
        for table in (".requests ", ".blocks "):
            for position in [index for index in range(len(sql)) if sql.startswith(table, index)]:
                following = sql[position:position + 400]
                assert "mapped" in following or "lineage_key" in following, (query.name, following)


@pytest.mark.parametrize(("event_name", "body", "attributes", "prompt"), [
    (names.EVENT_SYSTEM_MESSAGE, "", "", None),
    # A body that is not JSON text (ingest always stores JSON) is taken as the message's content.
    (names.EVENT_SYSTEM_MESSAGE, "not json", "not json", "not json"),
    (names.EVENT_SYSTEM_MESSAGE, '{"content": [1, null, {"type": 3}, {"text": 5}]}', "", None),
    (names.EVENT_SYSTEM_MESSAGE, '{"role": 5, "content": {"type": "text", "text": null}}', "", None),
    (names.EVENT_SYSTEM_MESSAGE, "[[[[[]]]]]", "", None),
    (DETAILS, "", '{"gen_ai.input.messages": 7, "gen_ai.system_instructions": {"type": 1}}', None),
    (DETAILS, "", '{"gen_ai.input.messages": "[{\\"role\\": \\"system\\"", "gen_ai.system_instructions": null}',
     None),
    ("gen_ai..message", "{}", "[]", None),
])
def test_odd_events_insert_and_add_only_the_prompt_they_carry(store, event_name, body, attributes, prompt):
    """What an event contributes is computed at ingest: no event may make that, or the insert, fail."""
    from promptprism.collector.conventions.events import contribute
    from promptprism.collector.record import GenAIEvent

    event = GenAIEvent(time.time_ns(), "ab" * 16, "cd" * 8, 0, event_name, SERVICE, "", body, attributes, "e" * 64)
    contribute(event)
    write_records(store, [], genai_events=[event])
    assert store.query("SELECT count() AS events FROM {db:Identifier}.genai_events", {"db": store.database}) == \
        [{"events": 1}]
    found = store.query("SELECT prompt_bytes, prompt_sha256 FROM {db:Identifier}.event_prompts", {"db": store.database})
    expected = [] if prompt is None else [{"prompt_bytes": len(prompt.encode()),
                                           "prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest()}]
    assert found == expected
