"""Realistic agent traffic as decoded OTLP spans, deterministic from a seed.

What an application instrumented with promptprism sends with content capture
on (SPEC §3), shaped like production agent traffic rather than the demo:

* several services, each with its own system prompt of 11 blocks
  (8–16 KB: static identity / instructions / skills and template prose,
  session memory and user profile, turn knowledge and state) and ~10 tool
  definitions (JSON schemas, 300–1,500 B);
* conversations of 20 user turns; a turn is one trace (a server span, one
  or two LLM request spans, a tool span when the model called a tool);
  `gen_ai.input.messages` carries the whole history and grows every turn;
* static blocks change on a few deploys during the period (prompt growth),
  and one service places a turn block before its stable blocks (a cache
  misorder) so that every panel has something to show.

Spans are ``promptprism.collector.otlp.model.DecodedSpan`` objects, exactly what
the receiver's decoder hands to reassembly, so the product's own reassembly
and row builders turn them into today's tables. ``demo_traffic`` gives small
demo-like prompts (< 1 KB) for the second storage figure.

Text is pseudo-English from a Zipf vocabulary (zstd -1 compresses it ~3×,
like English prose), so compression figures are not flattered by repeats.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Iterator

from promptprism.collector.otlp.model import DecodedSpan, SpanEvent
from promptprism.wire import names

NS = 1_000_000_000
DAY_NS = 86_400 * NS
# 2026-11-23T00:00:00Z: a Monday, so the diurnal curve starts on a work day.
EPOCH_NS = 1_795_392_000 * NS

# --- text ----------------------------------------------------------------------

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "sho", "vi", "den", "par", "ist", "on", "el", "ex", "ter",
              "quo", "ble", "ran", "cor", "sil", "um", "ad", "fen", "gri", "hal", "jo", "wen", "zy", "bri", "mos")


class Text:
    """Pseudo-English: a 4,000-word Zipf vocabulary, sentences, paragraphs, markdown."""

    def __init__(self, seed: int):
        rng = random.Random(seed)
        words: list[str] = []
        seen = set()
        while len(words) < 4000:
            word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((1, 1, 2, 2, 2, 3, 3, 4))))
            if word not in seen:
                seen.add(word)
                words.append(word)
        # Common English function words at the top of the ranking, as in real prose.
        self.words = ["the", "of", "and", "to", "a", "in", "is", "you", "that", "it", "for", "on", "with",
                      "as", "are", "be", "this", "or", "by", "not", "when", "if", "use", "your", "user"] + words
        weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(self.words))]
        total = 0.0
        self.cumulative = []
        for weight in weights:
            total += weight
            self.cumulative.append(total)

    def sentence(self, rng: random.Random) -> str:
        count = rng.randint(6, 22)
        chosen = rng.choices(self.words, cum_weights=self.cumulative, k=count)
        text = " ".join(chosen)
        return text[0].upper() + text[1:] + rng.choice((".", ".", ".", ".", ",", "?", ":"))[0:1].replace(",", ".")

    def prose(self, rng: random.Random, size: int) -> str:
        parts: list[str] = []
        length = 0
        while length < size:
            sentence = self.sentence(rng)
            parts.append(sentence)
            length += len(sentence) + 1
            if rng.random() < 0.18:
                parts.append("\n\n")
        return " ".join(parts).replace(" \n\n ", "\n\n")[:size].rstrip() or "Ok."

    def markdown(self, rng: random.Random, title: str, size: int) -> str:
        out = [f"## {title}\n"]
        length = len(out[0])
        while length < size:
            if rng.random() < 0.4:
                items = "\n".join(f"- {self.sentence(rng)}" for _ in range(rng.randint(2, 6)))
                out.append(items + "\n")
            else:
                out.append(self.prose(rng, rng.randint(200, 600)) + "\n")
            length += len(out[-1])
        return "\n".join(out)[:size].rstrip()

    def identifier(self, rng: random.Random) -> str:
        return "_".join(rng.choices(self.words[25:600], k=rng.randint(1, 3)))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- services --------------------------------------------------------------------

@dataclass
class BlockSpec:
    name: str
    layer: str
    stability: str
    source: str
    size: tuple[int, int]  # bytes range


# The block layout every service shares (sizes scaled per service): 11 blocks.
LAYOUT = (
    BlockSpec("identity", "identity", "static", "builtin", (1200, 2600)),
    BlockSpec("template_1", "template", "static", "template", (80, 260)),
    BlockSpec("instructions", "instructions", "static", "config", (2500, 5200)),
    BlockSpec("template_2", "template", "static", "template", (60, 160)),
    BlockSpec("skills", "skills", "static", "skills-dir", (1800, 4200)),
    BlockSpec("template_3", "template", "static", "template", (40, 120)),
    BlockSpec("memory", "memory", "session", "memory-store", (900, 3000)),
    BlockSpec("user_profile", "memory", "session", "crm", (250, 700)),
    BlockSpec("template_4", "template", "static", "template", (40, 100)),
    BlockSpec("knowledge", "knowledge", "turn", "retrieval", (400, 1800)),
    BlockSpec("state", "state", "turn", "app", (120, 380)),
)
VARIABLES = ("memory", "user_profile", "knowledge", "state")


@dataclass
class Service:
    name: str
    provider: str
    dialect: str
    models: tuple[str, ...]
    process_kinds: tuple[str, ...]
    weight: float
    context_window: int
    misordered: bool = False  # puts `state` (turn) before `identity` (static)
    statics: dict[str, list[str]] = field(default_factory=dict)  # block name → versions
    deploys: list[tuple[int, str]] = field(default_factory=list)  # (time ns, block name) → next version
    tools: list[tuple[str, str]] = field(default_factory=list)  # (name, definition JSON)
    pods: tuple[str, ...] = ()
    layout: tuple = ()  # BlockSpecs in prompt order; LAYOUT when empty


SERVICES = (
    ("support-agent", "anthropic", "anthropic-messages", ("claude-sonnet-4-5", "claude-haiku-4-5"), ("channel", "compactor"), 0.32, 200_000, False),
    ("code-assistant", "openai", "openai-responses", ("gpt-5", "gpt-5-mini"), ("channel",), 0.24, 400_000, False),
    ("research-worker", "anthropic", "anthropic-messages", ("claude-opus-4-1",), ("worker",), 0.14, 200_000, False),
    ("email-triage", "openai", "chat-completions", ("gpt-4.1-mini",), ("worker", "channel"), 0.18, 1_000_000, True),
    ("ops-bot", "openai", "chat-completions", ("gpt-5",), ("channel",), 0.12, 400_000, False),
)


def _tool_definition(text: Text, rng: random.Random, name: str) -> str:
    size = rng.randint(300, 1500)
    properties = {}
    length = 0
    while length < size * 0.7:
        prop = text.identifier(rng)
        kind = rng.choice(("string", "string", "integer", "boolean", "array"))
        description = text.sentence(rng)
        entry = {"type": kind, "description": description}
        if kind == "array":
            entry["items"] = {"type": "string"}
        properties[prop] = entry
        length += len(prop) + len(description) + 30
    definition = {
        "type": "function",
        "name": name,
        "description": text.prose(rng, rng.randint(80, 300)),
        "parameters": {"type": "object", "properties": properties,
                       "required": list(properties)[: rng.randint(1, max(1, len(properties)))]},
    }
    return json.dumps(definition, ensure_ascii=False)


def build_services(text: Text, rng: random.Random, days: int) -> list[Service]:
    services = []
    for name, provider, dialect, models, kinds, weight, window, misordered in SERVICES:
        scale = rng.uniform(0.75, 1.1)  # 8–16 KB prompts across services
        service = Service(name, provider, dialect, models, kinds, weight, window, misordered)
        for spec in LAYOUT:
            if spec.stability != "static":
                continue
            low, high = spec.size
            size = int(rng.randint(low, high) * scale)
            title = spec.name.replace("_", " ").title()
            body = (text.markdown(rng, title, size) if spec.layer != "template"
                    else text.prose(rng, size) + "\n")
            service.statics[spec.name] = [body]
        # A few deploys over the period: instructions or skills grow by a section.
        for _ in range(rng.randint(1, 3)):
            when = EPOCH_NS + int(rng.uniform(0.5, days - 0.5) * DAY_NS)
            block = rng.choice(("instructions", "skills", "identity"))
            service.deploys.append((when, block))
        service.deploys.sort()
        for when, block in service.deploys:
            previous = service.statics[block][-1]
            service.statics[block].append(previous + "\n" + text.markdown(rng, "Update", rng.randint(300, 900)))
        tool_count = rng.randint(8, 12)
        tool_names = []
        while len(tool_names) < tool_count:
            candidate = text.identifier(rng)
            if candidate not in tool_names:
                tool_names.append(candidate)
        service.tools = [(tool, _tool_definition(text, rng, tool)) for tool in tool_names]
        service.pods = tuple(f"{name}-{rng.getrandbits(24):06x}" for _ in range(4))
        services.append(service)
    return services


def static_version(service: Service, block: str, time_ns: int) -> str:
    applied = sum(1 for when, name in service.deploys if name == block and when <= time_ns)
    return service.statics[block][applied]


# --- spans ---------------------------------------------------------------------------

def _hex(rng: random.Random, bits: int) -> str:
    return f"{rng.getrandbits(bits):0{bits // 4}x}"


RESOURCE_KEYS = ("service.name", "service.version", "deployment.environment.name", "host.name",
                 "process.pid", "telemetry.sdk.language", "telemetry.sdk.name", "telemetry.sdk.version")


def _resource(service: Service, pod: str, pid: int) -> dict:
    return {"service.name": service.name, "service.version": "2026.11.3", "deployment.environment.name": "production",
            "host.name": pod, "process.pid": pid, "telemetry.sdk.language": "python",
            "telemetry.sdk.name": "opentelemetry", "telemetry.sdk.version": "1.45.0"}


def _message(role: str, parts: list[dict]) -> dict:
    return {"role": role, "parts": parts}


@dataclass
class Conversation:
    service: Service
    conversation_id: str
    process_kind: str
    pod: str
    pid: int
    model: str
    run_id: str
    memory: str
    profile: str


def _prompt(service: Service, conversation: Conversation, text: Text, rng: random.Random, time_ns: int,
            turn: int) -> tuple[list[dict], dict]:
    layout = service.layout or LAYOUT
    values = {}
    for spec in layout:
        if spec.name == "memory":
            values["memory"] = conversation.memory
        elif spec.name == "user_profile":
            values["user_profile"] = conversation.profile
        elif spec.name == "knowledge":
            values["knowledge"] = (text.markdown(rng, "Retrieved", rng.randint(*spec.size)) if spec.size[1] > 200
                                   else text.prose(rng, rng.randint(*spec.size)))
        elif spec.name == "state":
            values["state"] = f"turn {turn} · " + text.prose(rng, rng.randint(*spec.size))
    order = list(layout)
    if service.misordered:  # state first: a turn block before every stable block
        order = [spec for spec in layout if spec.name == "state"] + [spec for spec in layout if spec.name != "state"]
    blocks = []
    position = 0
    for index, spec in enumerate(order):
        content = values[spec.name] if spec.name in values else static_version(service, spec.name, time_ns)
        size = len(content.encode("utf-8"))
        blocks.append({"index": index, "spec": spec, "content": content, "start": position, "end": position + size,
                       "size": size, "sha256": sha256_hex(content)})
        position += size
    return blocks, values


def _llm_span(conversation: Conversation, text: Text, rng: random.Random, trace_id: str, parent: str,
              start_ns: int, turn: int, message_id: str, history: list[dict], output: dict,
              finish: str) -> DecodedSpan:
    service = conversation.service
    blocks, variables = _prompt(service, conversation, text, rng, start_ns, turn)
    prompt = "".join(block["content"] for block in blocks)
    prompt_bytes = len(prompt.encode("utf-8"))
    duration = int(rng.uniform(1.5, 14.0) * NS)
    messages_json = json.dumps(history, ensure_ascii=False)
    output_json = json.dumps([output], ensure_ascii=False)
    tools_bytes = sum(len(definition.encode("utf-8")) for _, definition in service.tools) + 2 + len(service.tools)
    messages_bytes = len(messages_json.encode("utf-8"))
    framing = 120
    total = prompt_bytes + 40 + tools_bytes + messages_bytes + framing
    tokens = total // 4
    stable_prefix = sum(block["size"] for block in blocks[: next(
        (i for i, block in enumerate(blocks) if block["spec"].stability == "turn"), len(blocks))])
    cached = stable_prefix // 4 if turn > 1 and not service.misordered and rng.random() < 0.85 else 0
    attributes = {
        names.GEN_AI_OPERATION_NAME: "chat",
        names.GEN_AI_PROVIDER_NAME: service.provider,
        names.GEN_AI_REQUEST_MODEL: conversation.model,
        names.SCHEMA_VERSION_ATTR: 1,
        names.REQUEST_DIALECT: service.dialect,
        names.REQUEST_TOOLS_COUNT: len(service.tools),
        names.GEN_AI_CONVERSATION_ID: conversation.conversation_id,
        names.MESSAGE_ID: message_id,
        names.PROCESS_KIND: conversation.process_kind,
        names.PROCESS_ID: conversation.pod,
        names.PROMPT_BYTES: prompt_bytes,
        names.PROMPT_SHA256: sha256_hex(prompt),
        names.PROMPT_BLOCK_COUNT: len(blocks),
        names.PROMPT_MAPPED: True,
        names.PROMPT_TEMPLATE_NAME: f"{service.name}.system",
        names.PROMPT_TEMPLATE_ORIGIN: "builtin",
        names.PROMPT_TEMPLATE_VARIABLES: json.dumps(variables, ensure_ascii=False),
        names.GEN_AI_INPUT_MESSAGES: messages_json,
        names.GEN_AI_REQUEST_MAX_TOKENS: 8192,
        names.GEN_AI_REQUEST_TEMPERATURE: 0.2,
        names.REQUEST_BODY_SHA256: _hex(rng, 256),
        names.REQUEST_BYTES_SYSTEM: prompt_bytes + 40,
        names.REQUEST_BYTES_TOOLS: tools_bytes,
        names.REQUEST_BYTES_MESSAGES: messages_bytes,
        names.REQUEST_BYTES_FRAMING: framing,
        names.REQUEST_BYTES_TOTAL: total,
        names.REQUEST_TOOLS_CATALOG_SHA256: sha256_hex("".join(definition for _, definition in service.tools)),
        names.REQUEST_MESSAGES_COUNT: len(history),
        names.REQUEST_TOKENS_ESTIMATE: tokens,
        names.REQUEST_CONTEXT_WINDOW: service.context_window,
        names.REQUEST_HEADROOM_TOKENS: service.context_window - tokens,
        names.REQUEST_ENDPOINT_HOST_CLASS: "public",
        names.REQUEST_ENDPOINT_FINGERPRINT: sha256_hex(service.provider)[:16],
        # set when the response arrives
        names.GEN_AI_RESPONSE_MODEL: conversation.model + "-20260901",
        names.GEN_AI_RESPONSE_ID: ("msg_" if service.provider == "anthropic" else "resp_") + _hex(rng, 96),
        names.GEN_AI_RESPONSE_FINISH_REASONS: (finish,),
        names.GEN_AI_USAGE_INPUT_TOKENS: tokens + rng.randint(-50, 50),
        names.GEN_AI_USAGE_OUTPUT_TOKENS: rng.randint(20, 900),
        names.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: cached,
        names.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: 0 if cached else stable_prefix // 4,
        names.GEN_AI_OUTPUT_MESSAGES: output_json,
    }
    if conversation.run_id:
        attributes[names.RUN_ID] = conversation.run_id
        attributes[names.RUN_MODE] = "batch"
    events = []
    for block in blocks:
        spec = block["spec"]
        events.append(SpanEvent(start_ns, names.EVENT_PROMPT_BLOCK, {
            names.BLOCK_INDEX: block["index"], names.BLOCK_NAME: spec.name, names.BLOCK_LAYER: spec.layer,
            names.BLOCK_STABILITY: spec.stability, names.BLOCK_SOURCE: spec.source,
            names.BLOCK_START: block["start"], names.BLOCK_END: block["end"], names.BLOCK_SIZE: block["size"],
            names.BLOCK_SHA256: block["sha256"], names.BLOCK_CONTENT: block["content"]}))
    for tool_name, definition in service.tools:
        events.append(SpanEvent(start_ns, names.EVENT_TOOL_DEFINITION, {
            names.TOOL_NAME: tool_name, names.TOOL_SIZE: len(definition.encode("utf-8")),
            names.TOOL_SHA256: sha256_hex(definition), names.TOOL_CONTENT: definition}))
    return DecodedSpan(
        trace_id=trace_id, span_id=_hex(rng, 64), parent_span_id=parent, trace_state="",
        name=f"chat {conversation.model}", kind="Client", start_time_ns=start_ns, end_time_ns=start_ns + duration,
        status_code="Unset", status_message="", service=service.name,
        resource_attributes=_resource(service, conversation.pod, conversation.pid),
        scope_name="promptprism.instrumentation", scope_version="0.9.0",
        attributes=attributes, events=events, links=[])


def _plain_span(conversation: Conversation, rng: random.Random, trace_id: str, span_id: str, parent: str,
                name: str, kind: str, start_ns: int, end_ns: int, attributes: dict, scope: str) -> DecodedSpan:
    service = conversation.service
    return DecodedSpan(
        trace_id=trace_id, span_id=span_id, parent_span_id=parent, trace_state="", name=name, kind=kind,
        start_time_ns=start_ns, end_time_ns=end_ns, status_code="Unset", status_message="", service=service.name,
        resource_attributes=_resource(service, conversation.pod, conversation.pid), scope_name=scope,
        scope_version="0.50b0", attributes=attributes, events=[], links=[])


def conversation_spans(services: list[Service], text: Text, rng: random.Random, start_ns: int,
                       turns: int = 20) -> Iterator[DecodedSpan]:
    """One conversation: ``turns`` traces, each a server span, 1–2 LLM spans and maybe a tool span."""
    service = rng.choices(services, weights=[service.weight for service in services])[0]
    kind = rng.choice(service.process_kinds)
    pod = rng.choice(service.pods)
    conversation = Conversation(
        service=service, conversation_id=f"conv-{_hex(rng, 64)}", process_kind=kind, pod=pod,
        pid=1000 + service.pods.index(pod), model=service.models[1] if kind == "compactor" else service.models[0],
        run_id=f"run-{start_ns // (6 * 3600 * NS)}" if kind == "worker" else "",
        memory=text.markdown(rng, "Memory", rng.randint(*LAYOUT[6].size)),
        profile=text.prose(rng, rng.randint(*LAYOUT[7].size)))
    history: list[dict] = []
    now = start_ns
    for turn in range(1, turns + 1):
        trace_id = _hex(rng, 128)
        root = _hex(rng, 64)
        message_id = f"msg-{_hex(rng, 64)}"
        turn_start = now
        user = _message("user", [{"type": "text", "content": text.prose(rng, rng.randint(40, 420))}])
        history.append(user)
        llm_spans = []
        if rng.random() < 0.3:  # the model calls a tool first
            tool_name = rng.choice(service.tools)[0]
            call_id = "call_" + _hex(rng, 64)
            arguments = {text.identifier(rng): text.sentence(rng) for _ in range(rng.randint(1, 3))}
            call = _message("assistant", [{"type": "tool_call", "id": call_id, "name": tool_name,
                                           "arguments": arguments}])
            span = _llm_span(conversation, text, rng, trace_id, root, now, turn, message_id, list(history),
                             {**call, "finish_reason": "tool_call"}, "tool_calls")
            llm_spans.append(span)
            now = span.end_time_ns
            tool_end = now + int(rng.uniform(0.05, 2.0) * NS)
            yield _plain_span(conversation, rng, trace_id, _hex(rng, 64), root, f"execute_tool {tool_name}",
                              "Internal", now, tool_end,
                              {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name,
                               "gen_ai.tool.call.id": call_id}, "agent.tools")
            now = tool_end
            result = _message("tool", [{"type": "tool_call_response", "id": call_id,
                                        "response": text.prose(rng, rng.randint(300, 2600))}])
            history += [call, result]
        answer = _message("assistant", [{"type": "text", "content": text.prose(rng, rng.randint(150, 1400))}])
        span = _llm_span(conversation, text, rng, trace_id, root, now, turn, message_id, list(history),
                         {**answer, "finish_reason": "stop"}, "stop")
        llm_spans.append(span)
        now = span.end_time_ns
        history.append(answer)
        yield _plain_span(conversation, rng, trace_id, root, "", "POST /v1/chat", "Server", turn_start - 3_000_000,
                          now + 2_000_000,
                          {"http.request.method": "POST", "http.route": "/v1/chat", "http.response.status_code": 200,
                           "url.scheme": "https", "server.address": f"{service.name}.internal",
                           "user_agent.original": "app/5.2 (iOS 19.1)"}, "opentelemetry.instrumentation.fastapi")
        yield from llm_spans
        now += int(rng.expovariate(1 / 75.0) * NS) + 5 * NS  # the user reads and types


def _diurnal_start(rng: random.Random, days: float) -> int:
    while True:
        offset = rng.uniform(0, days * DAY_NS)
        hour = (offset % DAY_NS) / (3600 * NS)
        weekday = int(offset // DAY_NS) % 7
        weight = (0.25 + 0.75 * max(0.0, 1 - abs(hour - 14) / 8)) * (0.5 if weekday >= 5 else 1.0)
        if rng.random() < weight:
            return EPOCH_NS + int(offset)


def agent_traffic(seed: int, conversations: int, days: int = 7, turns: int = 20) -> Iterator[list[DecodedSpan]]:
    """Conversations in start order, each a list of spans (one conversation per list)."""
    rng = random.Random(seed)
    text = Text(seed)
    services = build_services(text, rng, days)
    starts = sorted(_diurnal_start(rng, days - 0.1) for _ in range(conversations))
    for index, start in enumerate(starts):
        yield list(conversation_spans(services, text, random.Random(seed * 1_000_003 + index), start, turns))


# --- demo-like small prompts (< 1 KB) ---------------------------------------------

DEMO_LAYOUT = (
    BlockSpec("identity", "identity", "static", "builtin", (70, 110)),
    BlockSpec("template", "template", "static", "template", (15, 25)),
    BlockSpec("instructions", "instructions", "static", "config", (30, 60)),
    BlockSpec("memory", "memory", "session", "memory-store", (30, 480)),
    BlockSpec("knowledge", "knowledge", "turn", "retrieval", (30, 60)),
    BlockSpec("state", "state", "turn", "app", (50, 90)),
)


def demo_traffic(seed: int, conversations: int, days: int = 7) -> Iterator[list[DecodedSpan]]:
    """The demo's shape: three services, 6-block prompts under 1 KB, 2 tools, short conversations."""
    rng = random.Random(seed)
    text = Text(seed)
    services = []
    for name in ("assistant", "worker", "gateway"):
        service = Service(name, rng.choice(("openai", "anthropic")), "chat-completions", ("gpt-test",),
                          ("channel",), 1.0, 128_000, layout=DEMO_LAYOUT, pods=(f"{name}-1",))
        service.statics = {spec.name: [text.prose(rng, rng.randint(*spec.size))] for spec in DEMO_LAYOUT
                           if spec.stability == "static"}
        service.tools = [(tool, json.dumps({"name": tool, "description": text.prose(rng, rng.randint(60, 140))}))
                         for tool in ("calendar_lookup", "send_email")]
        services.append(service)
    for index in range(conversations):
        crng = random.Random(seed * 7919 + index)
        service = crng.choice(services)
        conversation = Conversation(service, f"conv-{index:03d}-{_hex(crng, 32)}", "channel", service.pods[0], 1000,
                                    "gpt-test", "", text.prose(crng, crng.randint(30, 480)), "")
        start = _diurnal_start(crng, days - 0.1)
        history: list[dict] = []
        spans = []
        for turn in range(1, crng.randint(2, 5) + 1):
            trace_id = _hex(crng, 128)
            history.append(_message("user", [{"type": "text", "content": text.prose(crng, crng.randint(20, 120))}]))
            answer = _message("assistant", [{"type": "text", "content": text.prose(crng, crng.randint(20, 200))}])
            span = _llm_span(conversation, text, crng, trace_id, "", start, turn, f"msg-{_hex(crng, 64)}",
                             list(history), {**answer, "finish_reason": "stop"}, "stop")
            spans.append(span)
            history.append(answer)
            start = span.end_time_ns + int(crng.uniform(5, 60) * NS)
        yield spans
