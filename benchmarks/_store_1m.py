"""A store of ≥ 1 M requests and ≥ 10 M blocks in promptprism's own schema, built with INSERT … SELECT.

One logical model of agent traffic (``model_sql``, a ``gen.req`` table of one
row per request, from ``numbers()`` inside ClickHouse): 5 services, 11-block
prompts of 8–16 KB (static blocks that change on deploy days, session blocks
per conversation, turn blocks per request), 10 tools per service,
conversations of 20 turns = 26 requests (6 turns call a tool first), whose
history grows every request. ``product_sql`` then writes what the collector
would write for those requests into the tables of a store migrated up to
SCHEMA_VERSION (047; the later migrations, run afterwards, copy every request
into its document and drop ``blocks`` and ``request_content``, as they do on
an upgraded collector's store):
``requests`` (with each request's tools, migration 046), ``blocks``, ``contents`` (block and tool text, each
message once per day), ``request_content`` (each request's message keys, its
template variables pointing at its blocks' text), ``otel_traces`` (the LLM
span with its block and tool events, content moved; a server span per turn);
the materialized views fill ``request_ids`` and ``otel_traces_trace_id_ts``.

Text is pseudo-prose from a word list (it compresses like text). Everything
is deterministic: ids and texts are hashes of (conversation, position).
"""

from __future__ import annotations

import os

HERE = os.path.dirname(os.path.abspath(__file__))

# The schema version whose tables product_sql writes.
SCHEMA_VERSION = 47

REQUESTS_PER_CONVERSATION = 26
# Request k of a conversation → (turn, whether it is the tool-calling first request of its turn).
TOOL_TURNS = (2, 5, 8, 11, 14, 17)


def conversation_shape() -> tuple[list[int], list[int], list[int], list[str]]:
    """Per request position k: turn, input message count, output message index; per message: role."""
    turns, inputs, outputs, roles = [], [], [], []
    for turn in range(20):
        roles.append("user")
        if turn in TOOL_TURNS:
            turns.append(turn)
            inputs.append(len(roles))
            outputs.append(len(roles))  # the tool call
            roles += ["tool_call", "tool"]
        turns.append(turn)
        inputs.append(len(roles))
        outputs.append(len(roles))  # the answer
        roles.append("assistant")
    assert len(turns) == REQUESTS_PER_CONVERSATION
    return turns, inputs, outputs, roles


SERVICES = [
    # name, provider, dialect, main model, second model, kinds, context window, weight (of 100), misordered
    ("support-agent", "anthropic", "anthropic-messages", "claude-sonnet-4-5", "claude-haiku-4-5", ["channel", "compactor"], 200000, 32, 0),
    ("code-assistant", "openai", "openai-responses", "gpt-5", "gpt-5-mini", ["channel"], 400000, 24, 0),
    ("research-worker", "anthropic", "anthropic-messages", "claude-opus-4-1", "claude-opus-4-1", ["worker"], 200000, 14, 0),
    ("email-triage", "openai", "chat-completions", "gpt-4.1-mini", "gpt-4.1-mini", ["worker", "channel"], 1000000, 18, 1),
    ("ops-bot", "openai", "chat-completions", "gpt-5", "gpt-5", ["channel"], 400000, 12, 0),
]
BLOCKS = [  # name, layer, stability, source, min size, max size
    ("identity", "identity", "static", "builtin", 1200, 2600),
    ("template_1", "template", "static", "template", 80, 260),
    ("instructions", "instructions", "static", "config", 2500, 5200),
    ("template_2", "template", "static", "template", 60, 160),
    ("skills", "skills", "static", "skills-dir", 1800, 4200),
    ("template_3", "template", "static", "template", 40, 120),
    ("memory", "memory", "session", "memory-store", 900, 3000),
    ("user_profile", "memory", "session", "crm", 250, 700),
    ("template_4", "template", "static", "template", 40, 100),
    ("knowledge", "knowledge", "turn", "retrieval", 400, 1800),
    ("state", "state", "turn", "app", 120, 380),
]
MISORDERED = [10, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # email-triage: state (turn) first


def sql_array(values) -> str:
    def literal(value):
        if isinstance(value, str):
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        if isinstance(value, (list, tuple)):
            return sql_array(value)
        return str(value)
    return "[" + ", ".join(literal(value) for value in value_list(values)) + "]"


def value_list(values):
    return list(values)


def words() -> list[str]:
    # _traffic.Text(15).words[:3000], saved once.
    with open(os.path.join(HERE, "_words.txt"), encoding="utf-8") as handle:
        return handle.read().split()


def text_expr(seed: str, size: str) -> str:
    """Pseudo-prose of exactly `size` bytes (ASCII) from a seed expression; needs `w` (the word list) in scope."""
    return (f"substring(arrayStringConcat(arrayMap(i -> w[1 + sipHash64({seed}, i) % length(w)], "
            f"range(toUInt32(intDiv({size}, 5) + 2))), ' '), 1, {size})")


def model_sql(requests: int, days: int) -> list[str]:
    turns, inputs, outputs, roles = conversation_shape()
    conversations = requests // REQUESTS_PER_CONVERSATION
    names = [s[0] for s in SERVICES]
    weights = []
    for s in SERVICES:
        weights += [SERVICES.index(s)] * s[7]
    service_of = sql_array(weights)  # 100 buckets → service index (0-based)
    epoch = "toDateTime64('2026-11-23 00:00:00', 9, 'UTC')"
    span_ns = days * 86400 * 10**9 - 3600 * 10**9
    return [
        "CREATE DATABASE IF NOT EXISTS gen",
        "DROP TABLE IF EXISTS gen.req",
        f"""
CREATE TABLE gen.req ENGINE = MergeTree ORDER BY r AS
WITH
    {sql_array(names)} AS service_names,
    {sql_array([s[1] for s in SERVICES])} AS providers,
    {sql_array([s[2] for s in SERVICES])} AS dialects,
    {sql_array([s[3] for s in SERVICES])} AS main_models,
    {sql_array([s[4] for s in SERVICES])} AS second_models,
    {sql_array([s[5] for s in SERVICES])} AS kinds,
    {sql_array([s[6] for s in SERVICES])} AS windows,
    {sql_array([s[8] for s in SERVICES])} AS misordered,
    {service_of} AS service_of,
    {sql_array(turns)} AS turn_of, {sql_array(inputs)} AS inputs_of, {sql_array(outputs)} AS output_of,
    {sql_array([b[0] for b in BLOCKS])} AS bnames, {sql_array([b[1] for b in BLOCKS])} AS blayers,
    {sql_array([b[2] for b in BLOCKS])} AS bstabilities, {sql_array([b[3] for b in BLOCKS])} AS bsources,
    {sql_array([b[4] for b in BLOCKS])} AS bmin, {sql_array([b[5] for b in BLOCKS])} AS bmax,
    {sql_array([i + 1 for i in MISORDERED])} AS misorder
SELECT
    toUInt32(number) AS r,
    toUInt32(intDiv(number, {REQUESTS_PER_CONVERSATION})) AS c,
    toUInt8(number % {REQUESTS_PER_CONVERSATION}) AS k,
    toUInt8(turn_of[k + 1]) AS turn,
    toUInt16(inputs_of[k + 1]) AS input_count,
    toUInt16(output_of[k + 1]) AS output_index,
    toUInt8(service_of[1 + sipHash64('service', c) % 100] + 1) AS s,
    service_names[s] AS service, providers[s] AS provider, dialects[s] AS dialect,
    kinds[s][1 + sipHash64('kind', c) % length(kinds[s])] AS process_kind,
    if(process_kind = 'compactor', second_models[s], main_models[s]) AS model,
    concat(service, '-', lower(hex(toUInt8(sipHash64('pod', c) % 4))), 'a7f3') AS process_id,
    if(process_kind = 'worker', concat('run-', toString(intDiv(c, 40))), '') AS run_id,
    if(process_kind = 'worker', 'batch', '') AS run_mode,
    windows[s] AS context_window,
    concat('conv-', lower(hex(sipHash64('conversation', c)))) AS conversation_id,
    lower(hex(sipHash128('trace', c, turn))) AS trace_id,
    lower(hex(sipHash64('root', c, turn))) AS root_id,
    lower(hex(sipHash64('request', number))) AS request_id,
    concat('msg-', lower(hex(sipHash64('message', c, turn)))) AS message_id,
    {epoch} + toIntervalNanosecond(toInt64(c * ({span_ns} / {conversations})) + toInt64(k) * 85000000000
                                   + toInt64(sipHash64('jitter', number) % 20000000000)) AS started_at,
    toDate(started_at) AS day,
    toUInt64(1500000000 + sipHash64('duration', number) % 12000000000) AS duration_ns,
    -- prompt blocks, in prompt order
    if(misordered[s] = 1, misorder, arrayEnumerate(bnames)) AS order,
    arrayMap(i -> bnames[i], order) AS block_names,
    arrayMap(i -> blayers[i], order) AS block_layers,
    arrayMap(i -> bstabilities[i], order) AS block_stabilities,
    arrayMap(i -> bsources[i], order) AS block_sources,
    -- static blocks: version = deploys (days 3 and 9 for instructions, 6 and 12 for skills, service-shifted)
    arrayMap(i -> toUInt32(multiIf(
        bnames[i] = 'instructions', (toRelativeDayNum(day) - toRelativeDayNum(toDate('2026-11-23')) >= 3 + s) + (toRelativeDayNum(day) - toRelativeDayNum(toDate('2026-11-23')) >= 9 + s),
        bnames[i] = 'skills', (toRelativeDayNum(day) - toRelativeDayNum(toDate('2026-11-23')) >= 6 + s) + (toRelativeDayNum(day) - toRelativeDayNum(toDate('2026-11-23')) >= 12),
        0)), order) AS versions,
    arrayMap((i, v) -> multiIf(
        bstabilities[i] = 'static', concat(service, '/', bnames[i], '/v', toString(v)),
        bstabilities[i] = 'session', concat('c', toString(c), '/', bnames[i]),
        concat('r', toString(number), '/', bnames[i])), order, versions) AS block_seeds,
    arrayMap((i, v) -> toUInt32(multiIf(
        bstabilities[i] = 'static', bmin[i] + sipHash64(service, bnames[i]) % (bmax[i] - bmin[i]) + 600 * v,
        bstabilities[i] = 'session', bmin[i] + sipHash64(c, bnames[i]) % (bmax[i] - bmin[i]),
        bmin[i] + sipHash64(number, bnames[i]) % (bmax[i] - bmin[i]))), order, versions) AS block_sizes,
    arrayMap(seed -> lower(hex(SHA256(seed))), block_seeds) AS block_sha256,
    toUInt64(arraySum(block_sizes)) AS prompt_bytes,
    -- tools: 10 per service
    arrayMap(t -> concat(service, '_tool_', toString(t)), range(10)) AS tool_names,
    arrayMap(t -> toUInt32(300 + sipHash64(service, 'tool', t) % 1200), range(10)) AS tool_sizes,
    arrayMap(name -> lower(hex(SHA256(concat('tool/', name)))), tool_names) AS tool_sha256,
    -- usage and manifest
    toUInt64(prompt_bytes + arraySum(tool_sizes) + input_count * 700 + 200) AS bytes_total,
    toUInt64(intDiv(bytes_total, 4)) AS tokens_estimate,
    toInt64(context_window) - toInt64(tokens_estimate) AS headroom_tokens,
    toInt64(tokens_estimate + sipHash64('in', number) % 100) AS input_tokens,
    toInt64(20 + sipHash64('out', number) % 900) AS output_tokens,
    toInt64(if(k > 0 AND misordered[s] = 0 AND sipHash64('cache', number) % 100 < 85,
               intDiv(arraySum(arraySlice(block_sizes, 1, 9)), 4), 0)) AS cache_read_tokens,
    toInt64(if(cache_read_tokens = 0, intDiv(arraySum(arraySlice(block_sizes, 1, 9)), 4), 0)) AS cache_creation_tokens
FROM numbers({conversations * REQUESTS_PER_CONVERSATION})
""",
    ]


MESSAGE_SIZES = {"user": (40, 380), "assistant": (150, 1250), "tool_call": (60, 140), "tool": (300, 2300)}


def message_key(c: str, j: str) -> str:
    """The content key of message j of conversation c (cheap: a hash of its identity, not of its JSON;
    the read side looks text up by key and does not check it)."""
    return f"substring(SHA256(concat('msg/', toString({c}), '/', toString({j}))), 1, 16)"  # raw, as migration 040 keys


def message_json(c: str, j: str) -> str:
    """SQL for the GenAI-convention JSON of message j of conversation c (needs `w` and `roles` in scope)."""
    parts = []
    for role in ("user", "assistant", "tool_call", "tool"):
        low, span = MESSAGE_SIZES[role]
        text = text_expr(f"{c}, {j}", f"toUInt32({low} + sipHash64('size', {c}, {j}) % {span})")
        if role == "tool_call":
            json = ("concat('{\"role\":\"assistant\",\"parts\":[{\"type\":\"tool_call\",\"id\":\"call_', "
                    f"lower(hex(sipHash64('call', {c}, {j}))), '\",\"name\":\"lookup\",\"arguments\":{{\"q\":\"', "
                    f"{text}, '\"}}}}]}}')")
        elif role == "tool":
            json = ("concat('{\"role\":\"tool\",\"parts\":[{\"type\":\"tool_call_response\",\"id\":\"call_', "
                    f"lower(hex(sipHash64('call', {c}, {j} - 1))), '\",\"response\":\"', {text}, '\"}}]}}')")
        else:
            json = f"concat('{{\"role\":\"{role}\",\"parts\":[{{\"type\":\"text\",\"content\":\"', {text}, '\"}}]}}')"
        parts.append(f"roles[{j} + 1] = '{role}', {json}")
    return f"multiIf({', '.join(parts)}, '')"


def roles_array() -> str:
    return sql_array(conversation_shape()[3])


def content_text(seed: str, size: str) -> str:
    return text_expr(f"{seed}", size)


def product_sql(db: str) -> list[str]:
    w = sql_array(words())
    return [
        f"""
INSERT INTO {db}.requests (started_at, trace_id, request_id, parent_span_id, duration_ns, span_name, status_code,
    status_message, service, scope_name, operation, provider, model, response_model, response_id, finish_reasons,
    conversation_id, message_id, process_kind, process_id, run_id, run_mode, attempt, record_id, schema_version,
    prompt_bytes, prompt_sha256, mapped, unmapped_reason, template_name, template_origin, declared_block_count,
    block_count, dialect, body_sha256, bytes_system, bytes_tools, bytes_messages, bytes_framing, bytes_total,
    tools_count, tools_catalog_sha256, tool_names, tool_sizes, tool_sha256, tool_content_sha256, tool_redacted,
    messages_count, tokens_estimate, context_window, headroom_tokens,
    reasoning_effort, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, attributes,
    resource_attributes)
SELECT
    started_at, trace_id, request_id, root_id, duration_ns, concat('chat ', model), 'Unset', '',
    service, 'promptprism.instrumentation', 'chat', provider, model,
    concat(model, '-20260901'), concat('resp_', lower(hex(sipHash128('resp', r)))), ['stop'],
    conversation_id, message_id, process_kind, process_id, run_id, run_mode, 0, '', 1, prompt_bytes,
    lower(hex(SHA256(arrayStringConcat(block_sha256)))), true, '', concat(service, '.system'), 'builtin', 11, 11,
    dialect, lower(hex(SHA256(concat('body', toString(r))))),
    prompt_bytes + 40, toUInt64(arraySum(tool_sizes)), toUInt64(input_count * 700), 160, bytes_total,
    10, lower(hex(SHA256(service))), tool_names, arrayMap(size -> toUInt64(size), tool_sizes), tool_sha256,
    arrayMap(name -> '', tool_names), arrayMap(name -> false, tool_names),
    input_count, tokens_estimate, context_window, headroom_tokens, '',
    input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens,
    map('gen_ai.request.max_tokens', '8192', 'promptprism.request.endpoint.host_class', 'public'),
    map('service.name', service, 'service.version', '2026.11.3', 'deployment.environment.name', 'production',
        'host.name', process_id, 'telemetry.sdk.language', 'python')
FROM gen.req
SETTINGS max_block_size = 16384, max_insert_threads = 1
""",
        f"""
INSERT INTO {db}.blocks (started_at, trace_id, request_id, service, model, process_kind, conversation_id, `index`,
    name, layer, stability, source, start, `end`, size, sha256, content_sha256, redacted)
SELECT started_at, trace_id, request_id, service, model, process_kind, conversation_id,
       toUInt32(i - 1), block_names[i], block_layers[i], block_stabilities[i], block_sources[i],
       toUInt64(arraySum(arraySlice(block_sizes, 1, i - 1))) AS block_start, block_start + block_sizes[i],
       block_sizes[i], block_sha256[i], '', false
FROM gen.req ARRAY JOIN arrayEnumerate(block_names) AS i
SETTINGS max_block_size = 65536, max_insert_threads = 1
""",
        f"""
INSERT INTO {db}.contents (day, sha256, size, content)
WITH {w} AS w
SELECT day, unhex(substring(sha256, 1, 32)), size, {content_text("seed", "size")}
FROM (
    SELECT DISTINCT day, block_sha256[i] AS sha256, block_seeds[i] AS seed, toUInt64(block_sizes[i]) AS size
    FROM gen.req ARRAY JOIN arrayEnumerate(block_names) AS i
    UNION ALL
    SELECT DISTINCT day, tool_sha256[i], concat('tool/', tool_names[i]), toUInt64(tool_sizes[i])
    FROM gen.req ARRAY JOIN arrayEnumerate(tool_names) AS i
)
SETTINGS max_block_size = 16384, max_insert_threads = 1
""",
        f"""
INSERT INTO {db}.contents (day, sha256, size, content)
WITH {w} AS w, {roles_array()} AS roles
SELECT day, {message_key('c', 'j')}, length(message), message
FROM (SELECT c, j, day, {message_json('c', 'j')} AS message
      FROM (SELECT c, groupUniqArray(day) AS days FROM gen.req GROUP BY c)
      ARRAY JOIN days AS day ARRAY JOIN range(toUInt16(length(roles))) AS j)
SETTINGS max_block_size = 8192, max_insert_threads = 1
""",
        f"""
INSERT INTO {db}.request_content (thread, started_at, request_id, input_messages_form, input_messages_keys,
    input_messages_raw, output_messages_form, output_messages_keys, output_messages_raw,
    output_messages_finish_reasons, template_variables_form, template_variables_names, template_variables_keys,
    template_variables_raw)
SELECT conversation_id, started_at, request_id,
       1, arrayMap(j -> {message_key('c', 'j')}, range(input_count)), arrayMap(j -> toUInt8(0), range(input_count)),
       1, [{message_key('c', 'output_index')}], [0], ['stop'],
       2, ['memory', 'user_profile', 'knowledge', 'state'],
       arrayMap(name -> unhex(substring(block_sha256[indexOf(block_names, name)], 1, 32)),
                ['memory', 'user_profile', 'knowledge', 'state']),
       [1, 1, 1, 1]
FROM gen.req
SETTINGS max_block_size = 16384, max_insert_threads = 1
""",
        f"""
INSERT INTO {db}.otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName,
    ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, StatusMessage,
    `Events.Timestamp`, `Events.Name`, `Events.Attributes`, `Links.TraceId`, `Links.SpanId`, `Links.TraceState`,
    `Links.Attributes`)
SELECT started_at, trace_id, request_id, root_id, '', concat('chat ', model), 'Client', service,
    map('service.name', service, 'service.version', '2026.11.3', 'deployment.environment.name', 'production',
        'host.name', process_id, 'process.pid', '1001', 'telemetry.sdk.language', 'python',
        'telemetry.sdk.name', 'opentelemetry', 'telemetry.sdk.version', '1.45.0'),
    'promptprism.instrumentation', '0.9.0',
    map('gen_ai.operation.name', 'chat', 'gen_ai.provider.name', provider, 'gen_ai.request.model', model,
        'promptprism.schema_version', '1', 'promptprism.request.dialect', dialect,
        'promptprism.request.tools.count', '10', 'gen_ai.conversation.id', conversation_id,
        'promptprism.message.id', message_id, 'promptprism.process.kind', process_kind,
        'promptprism.process.id', process_id, 'promptprism.prompt.bytes', toString(prompt_bytes),
        'promptprism.prompt.sha256', lower(hex(SHA256(arrayStringConcat(block_sha256)))),
        'promptprism.prompt.block_count', '11', 'promptprism.prompt.mapped', 'true',
        'promptprism.prompt.template.name', concat(service, '.system'), 'promptprism.prompt.template.origin', 'builtin',
        'gen_ai.request.max_tokens', '8192',
        'promptprism.request.body_sha256', lower(hex(SHA256(concat('body', toString(r))))),
        'promptprism.request.bytes.total', toString(bytes_total),
        'promptprism.request.messages.count', toString(input_count),
        'gen_ai.response.model', concat(model, '-20260901'),
        'gen_ai.response.id', concat('resp_', lower(hex(sipHash128('resp', r)))),
        'gen_ai.response.finish_reasons', '["stop"]',
        'gen_ai.usage.input_tokens', toString(input_tokens), 'gen_ai.usage.output_tokens', toString(output_tokens),
        'gen_ai.usage.cache_read.input_tokens', toString(cache_read_tokens),
        'promptprism.content.moved', 'gen_ai.input.messages gen_ai.output.messages promptprism.prompt.template.variables'),
    duration_ns, 'Unset', '',
    arrayResize([started_at], 21, started_at),
    arrayConcat(arrayResize(['promptprism.prompt.block'], 11, 'promptprism.prompt.block'),
                arrayResize(['promptprism.tool.definition'], 10, 'promptprism.tool.definition')),
    arrayConcat(
        arrayMap(i -> map('promptprism.block.index', toString(i - 1), 'promptprism.block.name', block_names[i],
                          'promptprism.block.layer', block_layers[i], 'promptprism.block.stability', block_stabilities[i],
                          'promptprism.block.source', block_sources[i],
                          'promptprism.block.start', toString(arraySum(arraySlice(block_sizes, 1, i - 1))),
                          'promptprism.block.end', toString(arraySum(arraySlice(block_sizes, 1, i))),
                          'promptprism.block.size', toString(block_sizes[i]), 'promptprism.block.sha256', block_sha256[i]),
                 arrayEnumerate(block_names)),
        arrayMap(i -> map('promptprism.tool.name', tool_names[i], 'promptprism.tool.size', toString(tool_sizes[i]),
                          'promptprism.tool.sha256', tool_sha256[i]), arrayEnumerate(tool_names))),
    [], [], [], []
FROM gen.req
SETTINGS max_block_size = 16384, max_insert_threads = 1
""",
        f"""
INSERT INTO {db}.otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName,
    ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, StatusMessage)
SELECT min(started_at) - toIntervalMillisecond(3), trace_id, any(root_id), '', '', 'POST /v1/chat', 'Server',
    any(service), map('service.name', any(service), 'service.version', '2026.11.3', 'deployment.environment.name',
    'production'), 'opentelemetry.instrumentation.fastapi', '0.50b0',
    map('http.request.method', 'POST', 'http.route', '/v1/chat', 'http.response.status_code', '200'),
    toUInt64(toUnixTimestamp64Nano(max(started_at)) - toUnixTimestamp64Nano(min(started_at))) + 5000000, 'Unset', ''
FROM gen.req GROUP BY trace_id
SETTINGS max_block_size = 16384, max_insert_threads = 1
""",
    ]
