"""The demo's simulated application: a week of conversations, worker tasks and nightly compactions.

Requests go through the real OpenAI and Anthropic clients, instrumented by
promptprism, to the fake provider; each turn runs on a simulated clock, so
spans are backdated over the week. The story's text lives in
:mod:`.scenario`; the command, progress display and export in
``cli.demo``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from .scenario import (
    AGENT_TEMPLATE,
    CHANNEL_TOOLS,
    COMPACTOR_OVERRIDE,
    COMPACTOR_TEMPLATE,
    CONTEXT_WINDOWS,
    ESCALATION_PROMPT,
    IDENTITY,
    INSTRUCTIONS,
    LEGACY_AGENT_TEMPLATE,
    QUICK_REPLY_PROMPT,
    SERVICES,
    SKILLS_BY_DAY,
    USER_MESSAGES,
    USERS,
    WORKER_TEMPLATE,
    WORKER_TOOLS,
)

if TYPE_CHECKING:  # the command owns the budget and its progress display
    from ..cli.demo import Budget
    from ...instrumentation import TemplateCatalog


def demo_catalog() -> "TemplateCatalog":
    """The demo application's templates with its overrides (``promptprism template show NAME --demo``)."""
    from ...instrumentation import TemplateCatalog

    catalog = TemplateCatalog({"agent.system": AGENT_TEMPLATE, "worker.system": WORKER_TEMPLATE,
                               "compactor.system": COMPACTOR_TEMPLATE})
    catalog.set_override("agent.system", LEGACY_AGENT_TEMPLATE, scope="web-legacy")
    catalog.set_override("compactor.system", COMPACTOR_OVERRIDE)
    return catalog

# A turn's simulated clock advances by this much; a day never runs past its last hour.
SECONDS_PER_TURN = 95
SECONDS_IN_DAY = 86_400
# Every simulated day starts this long before "now" minus whole days, so
# today's traffic is still in the past when the demo ends.
DAY_START_SECONDS_AGO = 6 * 3600
# About one channel turn in four spawns a background task on the worker.
WORKER_TASK_SHARE = 0.25
# Mobile turns answered by the hand-written (unmapped) quick-reply prompt.
QUICK_REPLY_SHARE = 0.4
# Conversations folded into memory per night (the longest ones).
MAX_COMPACTIONS_PER_DAY = 2


# --- backdating ------------------------------------------------------------------------------
# How far in the past the span being started belongs; set per simulated turn.
_backdate_ns: contextvars.ContextVar[int] = contextvars.ContextVar("promptprism_demo_backdate", default=0)


@contextlib.contextmanager
def backdated(seconds_ago: float) -> Iterator[None]:
    token = _backdate_ns.set(int(seconds_ago * 1e9))
    try:
        yield
    finally:
        _backdate_ns.reset(token)


def simulated_now() -> int:
    """The simulated clock (Unix ns): now, moved back by the current turn's offset."""
    return time.time_ns() - _backdate_ns.get()


@contextlib.contextmanager
def simulated_span(tracer: Any, name: str) -> Iterator[Any]:
    """``tracer.start_as_current_span(name)`` on the simulated clock."""
    from opentelemetry import trace

    span = tracer.start_span(name, start_time=simulated_now())
    try:
        with trace.use_span(span, end_on_exit=False):
            yield span
    finally:
        span.end(simulated_now())


# --- the simulated application --------------------------------------------------------------


@dataclass
class Conversation:
    conversation_id: str
    user: str
    scope: str  # channel scope: web, mobile, web-legacy
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DemoResult:
    requests: int
    example_trace_id: str | None
    traces: list[str]


class DemoApplication:
    def __init__(self, *, provider: Any, tracer_providers: dict[str, Any], capture_content: bool,
                 budget: Budget, rng: random.Random, run_tag: str):
        import anthropic
        import openai

        from promptprism.instrumentation.providers import instrument_anthropic, instrument_openai

        self.provider = provider
        # In every conversation and batch-run id: a second demo run starts new
        # conversations instead of continuing the first run's (the seed only
        # repeats the traffic's shape).
        self.run_tag = run_tag
        self.budget = budget
        self.rng = rng
        self.tracers = {kind: tracer_providers[kind].get_tracer("promptprism.demo") for kind in SERVICES}
        # Requests start on the simulated clock: the week's traffic is backdated.
        options = {"capture_content": capture_content, "context_window": CONTEXT_WINDOWS, "clock": simulated_now}
        # max_retries=0: the fake provider's errors are part of the story; the
        # compactor's own repair attempt is what retries.
        self.channel_client = instrument_openai(
            openai.OpenAI(base_url=provider.openai_base_url, api_key="demo", max_retries=0),
            tracer_provider=tracer_providers["channel"], **options)
        self.compactor_client = instrument_openai(
            openai.OpenAI(base_url=provider.openai_base_url, api_key="demo", max_retries=0),
            tracer_provider=tracer_providers["compactor"], **options)
        self.worker_client = instrument_anthropic(
            anthropic.AsyncAnthropic(base_url=provider.anthropic_base_url, api_key="demo", max_retries=0),
            tracer_provider=tracer_providers["worker"], **options)
        self.catalog = demo_catalog()
        self.memory: dict[str, list[str]] = {user: [f"{user} works at the studio."] for user in USERS}
        self.traces: list[str] = []
        self.example_trace_id: str | None = None
        self.worker_tasks = 0
        self.repaired_once = False
        # One loop for every worker task: the async client's connections belong to it.
        self.loop = asyncio.new_event_loop()

    def conversation_id(self, index: int) -> str:
        return f"conv-{self.run_tag}-{index + 1:03d}"

    # --- prompts ------------------------------------------------------------------------

    def skills_for(self, day_index: int) -> str:
        return "\n".join(f"- {text}" for since, _, text in SKILLS_BY_DAY if day_index >= since)

    def agent_prompt(self, conversation: Conversation, day_index: int, clock: str, open_tasks: int):
        from promptprism.instrumentation import block, inline

        values = [
            block("identity", IDENTITY, layer="identity", stability="static", source="config/identity.md"),
            block("instructions", INSTRUCTIONS, layer="instructions", stability="static", source="config/rules.md"),
            block("skills", self.skills_for(day_index), layer="skills", stability="static", source="skills/"),
            inline("user_name", conversation.user, stability="session"),
            block("memory", "\n".join(f"- {note}" for note in self.memory[conversation.user]), layer="memory",
                  stability="session", source="memory-store"),
            block("state", f"Local time {clock}. Open tasks: {open_tasks}.", layer="state", stability="turn",
                  source="runtime"),
        ]
        return self.catalog.render("agent.system", values, scope=conversation.scope)

    # --- channel: OpenAI Chat Completions ----------------------------------------------------

    def channel_turn(self, conversation: Conversation, day_index: int, turn: int, clock: str) -> None:
        from opentelemetry import trace

        from promptprism.instrumentation import correlation

        message_id = f"msg-{uuid.uuid4().hex[:12]}"
        text = self.rng.choice(USER_MESSAGES)
        process_id = "channel-2" if conversation.scope == "mobile" else "channel-1"
        with correlation(conversation_id=conversation.conversation_id, message_id=message_id,
                         process_kind="channel", process_id=process_id), \
                simulated_span(self.tracers["channel"], "handle message") as turn_span:
            trace_id = format(turn_span.get_span_context().trace_id, "032x")
            self.traces.append(trace_id)
            conversation.history.append({"role": "user", "content": text})
            if conversation.scope == "mobile" and self.rng.random() < QUICK_REPLY_SHARE:
                self._quick_reply(conversation)
                return
            prompt = self.agent_prompt(conversation, day_index, clock, open_tasks=self.rng.randint(0, 6))
            messages = [{"role": "system", "content": prompt.text}, *conversation.history]
            wants_tool = turn % 3 == 1
            if wants_tool and self.budget.take():
                answer = self.channel_client.chat.completions.create(
                    model="gpt-4.1", messages=messages, tools=CHANNEL_TOOLS, tool_choice="required")
                call = answer.choices[0].message.tool_calls[0]
                tool_messages = [
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": call.id, "type": "function",
                         "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
                    {"role": "tool", "tool_call_id": call.id,
                     "content": f'{{"results": ["{call.function.name} ok", "3 items", "updated {clock}"]}}'},
                ]
                messages += tool_messages
                conversation.history += tool_messages
                if self.example_trace_id is None or conversation.scope == "web":
                    self.example_trace_id = trace_id
            if not self.budget.take():
                return
            if turn % 2 == 0:
                stream = self.channel_client.chat.completions.create(
                    model="gpt-4.1", messages=messages, tools=CHANNEL_TOOLS, stream=True,
                    stream_options={"include_usage": True})
                reply = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
            else:
                answer = self.channel_client.chat.completions.create(model="gpt-4.1", messages=messages,
                                                                     tools=CHANNEL_TOOLS)
                reply = answer.choices[0].message.content or ""
            conversation.history.append({"role": "assistant", "content": reply})

    def _quick_reply(self, conversation: Conversation) -> None:
        # Hand-written, not rendered through promptprism: recorded unmapped (not_rendered).
        if not self.budget.take():
            return
        answer = self.channel_client.chat.completions.create(
            model="gpt-4.1-mini", messages=[{"role": "system", "content": QUICK_REPLY_PROMPT},
                                            conversation.history[-1]])
        conversation.history.append({"role": "assistant", "content": answer.choices[0].message.content or ""})

    # --- worker: Anthropic Messages (async, streamed, tool loop) -----------------------------------

    async def worker_task(self, conversation: Conversation, day_index: int) -> None:
        from promptprism.instrumentation import block, correlation, inline

        self.worker_tasks += 1
        task = self.rng.choice(["Reconcile this month's card transactions with the receipts.",
                                "Collect the Lumen kickoff decisions into one page.",
                                "Compare the two print quotes and recommend one."])
        with correlation(conversation_id=conversation.conversation_id, process_kind="worker",
                         process_id=f"worker-{1 + self.worker_tasks % 2}"), \
                simulated_span(self.tracers["worker"], "background task") as task_span:
            self.traces.append(format(task_span.get_span_context().trace_id, "032x"))
            if self.worker_tasks % 4 == 0:
                system: Any = ESCALATION_PROMPT  # not rendered through promptprism
            else:
                knowledge = "## Reference material\n" + "\n\n".join(f"### {title}\n{body}" for title, body in (
                    ("Studio handbook §4 Expenses", "Receipts within 30 days. Project codes: LUM, ARC, INT."),
                    ("Lumen kickoff notes", "Logo: keep the serif; palette v3; launch in week " +
                     str(20 + day_index) + "."),
                )) + "\n\n"
                prompt = self.catalog.render("worker.system", [
                    block("identity", IDENTITY, layer="identity", stability="static", source="config/identity.md"),
                    inline("user_name", conversation.user, stability="session"),
                    block("knowledge", knowledge, layer="knowledge", stability="turn", source="retrieval"),
                    block("task", f"## Task\n{task}", layer="task", stability="turn", source="queue"),
                ])
                system = [{"type": "text", "text": prompt.text, "cache_control": {"type": "ephemeral"}}]
            messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
            if not self.budget.take():
                return
            first = await self.worker_client.messages.create(
                model="claude-demo-sonnet", max_tokens=2048, system=system, messages=messages,
                tools=WORKER_TOOLS, tool_choice={"type": "any"},
                thinking={"type": "enabled", "budget_tokens": 1024})
            tool_use = next(part for part in first.content if part.type == "tool_use")
            messages += [
                {"role": "assistant", "content": [{"type": "tool_use", "id": tool_use.id, "name": tool_use.name,
                                                   "input": tool_use.input}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id,
                                              "content": "Row 1: LUM 240.00 EUR receipt ok\nRow 2: ARC 88.50 EUR "
                                                         "receipt missing\n" * 3}]},
            ]
            if not self.budget.take():
                return
            stream = await self.worker_client.messages.create(
                model="claude-demo-sonnet", max_tokens=2048, system=system, messages=messages,
                tools=WORKER_TOOLS, stream=True)
            async for _ in stream:
                pass

    # --- compactor: OpenAI Responses, batch run with a repair attempt --------------------------

    def compact(self, conversation: Conversation, day_index: int, run_id: str) -> None:
        import openai

        from promptprism.instrumentation import block, correlation, inline

        transcript = [{"role": message["role"] if message["role"] in ("user", "assistant") else "user",
                       "content": message.get("content") or "(tool call)"} for message in conversation.history
                      if message["role"] != "tool"]
        prompt = self.catalog.render("compactor.system", [
            inline("user_name", conversation.user, stability="session"),
            block("memory", "\n".join(f"- {note}" for note in self.memory[conversation.user]), layer="memory",
                  stability="session", source="memory-store"),
        ])
        # One nightly run hits a provider error and is repaired by a second attempt.
        attempts = ["o4-mini"]
        if day_index == 1 and not self.repaired_once:
            self.repaired_once = True
            attempts = ["o4-mini-fail-500", "o4-mini"]
        for attempt, model in enumerate(attempts):
            with correlation(conversation_id=conversation.conversation_id, process_kind="compactor",
                             process_id="compactor-1", run_id=run_id, run_mode="batch", attempt=attempt,
                             record_id=conversation.conversation_id), \
                    simulated_span(self.tracers["compactor"], "compact conversation") as span:
                self.traces.append(format(span.get_span_context().trace_id, "032x"))
                if not self.budget.take():
                    return
                try:
                    self.compactor_client.responses.create(model=model, instructions=prompt.text, input=transcript,
                                                           reasoning={"effort": "low"})
                except openai.APIStatusError:
                    continue
            note = f"Day {day_index + 1}: asked about {self.rng.choice(['calendar', 'notes', 'travel', 'receipts'])}."
            self.memory[conversation.user].append(note)
            return

    # --- the week ----------------------------------------------------------------------------

    def run(self, days: int) -> DemoResult:
        from .fake_provider import PrefixCache

        scopes = ["web", "mobile", "web-legacy"]
        conversations = [Conversation(self.conversation_id(index), USERS[index % len(USERS)], scopes[index % 3])
                         for index in range(len(USERS) * 2)]
        turns = {conversation.conversation_id: 0 for conversation in conversations}
        for day_index in range(days):
            days_ago = days - 1 - day_index
            # Provider caches expire within minutes: every simulated day starts cold.
            self.provider.cache = PrefixCache()
            # Spread what is left evenly over the days that are left, keeping
            # room for the nightly compaction run.
            remaining_days = days - day_index
            share = (self.budget.total - self.budget.sent) // remaining_days
            day_end = self.budget.sent + max(1, share - MAX_COMPACTIONS_PER_DAY)
            if remaining_days == 1:
                day_end = self.budget.total
            elapsed = 0
            while self.budget.sent < day_end:
                for conversation in conversations:
                    if self.budget.sent >= day_end:
                        break
                    seconds_ago = days_ago * SECONDS_IN_DAY + DAY_START_SECONDS_AGO - min(
                        elapsed, DAY_START_SECONDS_AGO - 60)
                    clock = time.strftime("%a %H:%M", time.localtime(time.time() - seconds_ago))
                    turn = turns[conversation.conversation_id]
                    turns[conversation.conversation_id] += 1
                    with backdated(seconds_ago):
                        self.channel_turn(conversation, day_index, turn, clock)
                        if self.rng.random() < WORKER_TASK_SHARE and self.budget.sent < day_end:
                            self.loop.run_until_complete(self.worker_task(conversation, day_index))
                    elapsed += SECONDS_PER_TURN
            # The nightly batch run, an hour after the day's last turn.
            run_id = f"compact-{self.run_tag}-day-{day_index + 1}"
            longest = sorted(conversations, key=lambda conversation: -len(conversation.history))
            for conversation in longest[:MAX_COMPACTIONS_PER_DAY]:
                if len(conversation.history) > 4 and not self.budget.exhausted:
                    with backdated(max(days_ago * SECONDS_IN_DAY + DAY_START_SECONDS_AGO - elapsed - 3600, 30)):
                        self.compact(conversation, day_index, run_id)
                    # The history is folded into memory; the next day starts short.
                    conversation.history = conversation.history[-2:]
        self.loop.run_until_complete(self.worker_client.close())
        self.loop.close()
        return DemoResult(self.budget.sent, self.example_trace_id or (self.traces[-1] if self.traces else None),
                          self.traces)
