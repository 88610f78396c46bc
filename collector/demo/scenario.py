"""The demo's story: three services of an assistant application, their prompts, users and tools.

Data only; :mod:`.application` plays it against the fake provider and
``promptprism demo`` (``cli.demo``) runs and exports it. Skills arrive on
later days, so growth shows up in the dashboards; one channel scope uses a
legacy template override that puts the per-turn state before the identity
block, so cache breaks show up too.
"""

from __future__ import annotations

# Context windows the manifest's headroom is measured against (tokens).
CONTEXT_WINDOWS = {"gpt-4.1": 1_047_576, "gpt-4.1-mini": 128_000, "o4-mini": 200_000, "claude-demo-sonnet": 200_000}

# The three services (OpenTelemetry service.name), by process kind.
SERVICES = {"channel": "demo-chat-gateway", "worker": "demo-agent-worker", "compactor": "demo-memory-compactor"}

AGENT_TEMPLATE = """You are {{ identity }}.

## How you work
{{ instructions }}

## Skills
{{ skills }}

## What you remember about {{ user_name }}
{{ memory }}

## Right now
{{ state }}"""
# A legacy channel's override: per-turn state first. Every request then
# differs from the first bytes on, so the provider cannot reuse its cache.
LEGACY_AGENT_TEMPLATE = """## Right now
{{ state }}

You are {{ identity }}.

## How you work
{{ instructions }}

## Skills
{{ skills }}

## What you remember about {{ user_name }}
{{ memory }}
"""
WORKER_TEMPLATE = """You are {{ identity }}, working on a background task for {{ user_name }}.

## Tools
Use the tools to gather facts before answering. Never invent file contents; say what you could not verify.

{{ knowledge }}{{ task }}"""
# The worker's per-task blocks carry their own headings, so no template prose
# sits after them: everything stable stays in front, where the cache can reuse it.
COMPACTOR_TEMPLATE = """Summarise the conversation into durable memory notes about {{ user_name }}.

## Existing memory
{{ memory }}
"""
# The operators' global override of the compactor prompt (origin: global).
COMPACTOR_OVERRIDE = """You maintain the long-term memory of a personal assistant.
Write short, factual notes about {{ user_name }}: preferences, commitments, people, dates.
Drop small talk. Never store secrets or payment details.

## Existing memory
{{ memory }}
"""

IDENTITY = "Juniper, a calm and precise personal assistant for a small design studio"
INSTRUCTIONS = """- Answer in the user's language, briefly, and say when you are unsure.
- Use tools for calendars, notes and reminders instead of guessing.
- Confirm before sending messages or booking anything on the user's behalf.
- Keep private details private: never repeat payment data or passwords."""
SKILLS_BY_DAY = [
    (0, "calendar", "Calendar: read and propose meeting times; respect focus blocks and time zones."),
    (0, "notes", "Notes: search and summarise the studio's shared notes; quote the note title."),
    (2, "travel", "Travel planning: compare train and flight options, door to door, with buffers for "
                  "connections; prefer rail under five hours; list the cancellation terms of each option; "
                  "never book without explicit confirmation."),
    (4, "expenses", "Expense reports: collect receipts from the inbox, match them to card transactions, flag "
                    "missing receipts, group by project code and draft the monthly report for approval."),
    (5, "hiring", "Hiring: screen portfolios against the brief, draft neutral rejection and interview emails, "
                  "schedule interviews with the panel and keep candidate data out of shared notes."),
]
USERS = ["Maya", "Jonas", "Priya"]
USER_MESSAGES = [
    "What's on my calendar tomorrow morning?",
    "Can you find the notes from the Lumen kickoff?",
    "Move my 3pm with Sam to Thursday if he's free.",
    "Remind me to send the invoice to Arco on Friday.",
    "Summarise what we decided about the new logo.",
    "Which trains get me to Lyon before noon on the 14th?",
    "Draft a short reply to Elena saying yes to the workshop.",
    "Did I already submit the receipts for March?",
    "What did Jonas say about the print budget?",
    "Block two hours of focus time every morning next week.",
]
QUICK_REPLY_PROMPT = "You write one-line quick replies. Friendly, no emoji, under 20 words."
ESCALATION_PROMPT = "You are the on-call escalation helper. Classify the failure and propose one next step."

CHANNEL_TOOLS = [
    {"type": "function", "function": {"name": "read_calendar", "description": "Events in a time range.",
                                      "parameters": {"type": "object", "properties": {
                                          "start": {"type": "string"}, "end": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "search_notes", "description": "Full-text search in notes.",
                                      "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "create_reminder", "description": "Create a reminder.",
                                      "parameters": {"type": "object", "properties": {
                                          "text": {"type": "string"}, "at": {"type": "string"}}}}},
]
WORKER_TOOLS = [
    {"name": "fetch_document", "description": "Fetch a document from the studio drive by path.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "query_ledger", "description": "Run a read-only query against the expense ledger.",
     "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}},
]
