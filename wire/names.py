"""Every name promptprism puts on the wire, spelled once.

Both ends import this module: the instrumentation writes these keys, the
collector reads them. It imports nothing, so reading a constant loads no
Jinja2, no OpenTelemetry SDK and no collector dependency. README "The request span on the wire"
lists the ``promptprism.*`` names and the ``gen_ai.*`` names come from the
OpenTelemetry GenAI semantic conventions; anything added here that the
README table does not list is marked "(promptprism extension)". Renaming a
listed name needs a ``SCHEMA_VERSION`` bump. Settings (environment variables and their
values) are not wire names: they live with the code that reads them.
"""

SCHEMA_VERSION = 1

# --- OpenTelemetry GenAI semantic conventions -------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_SYSTEM = "gen_ai.system"  # older conventions; read, never written
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"  # (not yet in semconv; read if present)
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
# Older spellings some instrumentations still send; read, never written.
GEN_AI_USAGE_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
GEN_AI_USAGE_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
ERROR_TYPE = "error.type"  # general semconv: the exception class of a failed request
# Legacy flattened content: gen_ai.prompt.N.role / .content, gen_ai.completion.N.*
GEN_AI_PROMPT_PREFIX = "gen_ai.prompt."
GEN_AI_COMPLETION_PREFIX = "gen_ai.completion."

# gen_ai.operation.name values
OPERATION_CHAT = "chat"
OPERATION_TEXT_COMPLETION = "text_completion"
OPERATION_GENERATE_CONTENT = "generate_content"
# Operations that are not an LLM request (no prompt is sent): the collector
# stores their spans in otel_traces but makes no request record of them.
OPERATION_EXECUTE_TOOL = "execute_tool"
OPERATION_INVOKE_AGENT = "invoke_agent"
OPERATION_CREATE_AGENT = "create_agent"

# gen_ai.provider.name values
PROVIDER_OPENAI = "openai"
PROVIDER_ANTHROPIC = "anthropic"

# GenAI content log events (other instrumentations; see the OTLP logs issue)
EVENT_SYSTEM_MESSAGE = "gen_ai.system.message"
EVENT_USER_MESSAGE = "gen_ai.user.message"
EVENT_ASSISTANT_MESSAGE = "gen_ai.assistant.message"
EVENT_TOOL_MESSAGE = "gen_ai.tool.message"
EVENT_CHOICE = "gen_ai.choice"
EVENT_INFERENCE_DETAILS = "gen_ai.client.inference.operation.details"
# The older events are named gen_ai.<role>.message; a role other than the four
# above (OpenAI's `developer`) arrives under the same pattern.
EVENT_MESSAGE_PREFIX = "gen_ai."
EVENT_MESSAGE_SUFFIX = ".message"
# Where log records carried their event name before OTLP had a field for it.
EVENT_NAME_ATTRIBUTE = "event.name"

# --- promptprism span attributes (README "The request span on the wire") -----
SCHEMA_VERSION_ATTR = "promptprism.schema_version"
PROMPT_BYTES = "promptprism.prompt.bytes"
PROMPT_SHA256 = "promptprism.prompt.sha256"
PROMPT_BLOCK_COUNT = "promptprism.prompt.block_count"
PROMPT_MAPPED = "promptprism.prompt.mapped"
PROMPT_UNMAPPED_REASON = "promptprism.prompt.unmapped_reason"
# Which captured content was left out for being over the size cap (string array:
# "template variables", "block memory", "tool lookup", "input messages", …).
CONTENT_OMITTED = "promptprism.content.omitted"
PROMPT_TEMPLATE_NAME = "promptprism.prompt.template.name"
PROMPT_TEMPLATE_ORIGIN = "promptprism.prompt.template.origin"
# Template variables, captured only with content on (promptprism extension):
# one JSON object string {name: value}.
PROMPT_TEMPLATE_VARIABLES = "promptprism.prompt.template.variables"

REQUEST_DIALECT = "promptprism.request.dialect"
REQUEST_BODY_SHA256 = "promptprism.request.body_sha256"
REQUEST_BYTES_SYSTEM = "promptprism.request.bytes.system"
REQUEST_BYTES_TOOLS = "promptprism.request.bytes.tools"
REQUEST_BYTES_MESSAGES = "promptprism.request.bytes.messages"
REQUEST_BYTES_FRAMING = "promptprism.request.bytes.framing"
REQUEST_TOOLS_COUNT = "promptprism.request.tools.count"
REQUEST_TOOLS_CATALOG_SHA256 = "promptprism.request.tools.catalog_sha256"
# Manifest fields beyond the span attribute table (promptprism extension).
REQUEST_BYTES_TOTAL = "promptprism.request.bytes.total"
REQUEST_BYTES_TOOL_RESULTS = "promptprism.request.bytes.tool_results"  # subset of messages
REQUEST_BYTES_ATTACHMENTS = "promptprism.request.bytes.attachments"  # subset of messages
REQUEST_MESSAGES_COUNT = "promptprism.request.messages.count"
REQUEST_TOKENS_ESTIMATE = "promptprism.request.tokens.estimate"
REQUEST_CONTEXT_WINDOW = "promptprism.request.context_window"
REQUEST_HEADROOM_TOKENS = "promptprism.request.headroom_tokens"
REQUEST_REASONING_EFFORT = "promptprism.request.reasoning_effort"
REQUEST_MANIFEST_SCHEMA_VERSION = "promptprism.request.manifest.schema_version"
# Anthropic's `thinking.budget_tokens` (promptprism extension): a budget, not an effort word.
REQUEST_REASONING_BUDGET_TOKENS = "promptprism.request.reasoning_budget_tokens"
# Where the request went, without the URL itself (promptprism extension):
# `loopback` / `private` / `public` and a fingerprint of scheme://host:port.
REQUEST_ENDPOINT_HOST_CLASS = "promptprism.request.endpoint.host_class"
REQUEST_ENDPOINT_FINGERPRINT = "promptprism.request.endpoint.fingerprint"

MESSAGE_ID = "promptprism.message.id"
PROCESS_KIND = "promptprism.process.kind"
PROCESS_ID = "promptprism.process.id"
RUN_ID = "promptprism.run.id"
RUN_MODE = "promptprism.run.mode"
ATTEMPT = "promptprism.attempt"
RECORD_ID = "promptprism.record.id"

# --- span events (README "The request span on the wire") -------------------
EVENT_PROMPT_BLOCK = "promptprism.prompt.block"
BLOCK_INDEX = "promptprism.block.index"
BLOCK_NAME = "promptprism.block.name"
BLOCK_LAYER = "promptprism.block.layer"
BLOCK_STABILITY = "promptprism.block.stability"
BLOCK_SOURCE = "promptprism.block.source"
BLOCK_START = "promptprism.block.start"
BLOCK_END = "promptprism.block.end"
BLOCK_SIZE = "promptprism.block.size"
BLOCK_SHA256 = "promptprism.block.sha256"
BLOCK_CONTENT = "promptprism.block.content"
# true when .content was redacted before export: its sha256 still describes
# the original bytes, so the collector skips the content checks (promptprism extension).
BLOCK_REDACTED = "promptprism.block.redacted"

EVENT_TOOL_DEFINITION = "promptprism.tool.definition"
TOOL_NAME = "promptprism.tool.name"
TOOL_SIZE = "promptprism.tool.size"
TOOL_SHA256 = "promptprism.tool.sha256"
TOOL_CONTENT = "promptprism.tool.content"
TOOL_REDACTED = "promptprism.tool.redacted"  # as BLOCK_REDACTED (promptprism extension)

# --- value vocabularies ------------------------------------------------------
STABILITY_STATIC = "static"
STABILITY_SESSION = "session"
STABILITY_TURN = "turn"
STABILITY_UNKNOWN = "unknown"
# Ordered most stable first: a prose block takes the least stable of its parts.
STABILITIES = (STABILITY_STATIC, STABILITY_SESSION, STABILITY_TURN)

LAYER_TEMPLATE = "template"  # the template's own prose between injected values

ORIGIN_BUILTIN = "builtin"
ORIGIN_GLOBAL = "global"
ORIGIN_SCOPE = "scope"

DIALECT_CHAT_COMPLETIONS = "chat-completions"
DIALECT_ANTHROPIC_MESSAGES = "anthropic-messages"
DIALECT_OPENAI_RESPONSES = "openai-responses"
DIALECTS = (DIALECT_CHAT_COMPLETIONS, DIALECT_ANTHROPIC_MESSAGES, DIALECT_OPENAI_RESPONSES)

RUN_MODE_ONLINE = "online"
RUN_MODE_BATCH = "batch"

# Unmapped reasons. The instrumentation and the collector share these so that
# a dashboard can group by them.
UNMAPPED_SENTINEL_COLLISION = "sentinel_collision"  # a value contained a sentinel
UNMAPPED_NOT_TILING = "not_tiling"  # gaps, overlaps, or not ending at the prompt length
UNMAPPED_EMPTY_BLOCK = "empty_block"
UNMAPPED_BAD_RANGE = "bad_range"  # start/end/size inconsistent or outside the prompt
UNMAPPED_HASH_MISMATCH = "hash_mismatch"  # block content does not match its sha256
UNMAPPED_UTF8_BOUNDARY = "utf8_boundary"  # a boundary splits a multi-byte character
UNMAPPED_INCOMPLETE = "incomplete"  # fewer block events than block_count (SDK dropped some)
UNMAPPED_BAD_ATTRIBUTES = "bad_attributes"  # a block event missing or mistyping a field
UNMAPPED_NO_BLOCKS = "no_blocks"  # another instrumentation: no promptprism events at all
UNMAPPED_RENDER_ERROR = "render_error"  # the segmented render failed; text kept, map dropped
UNMAPPED_NOT_RENDERED = "not_rendered"  # the app did not render this prompt through promptprism
UNMAPPED_REASONS = (
    UNMAPPED_SENTINEL_COLLISION,
    UNMAPPED_NOT_TILING,
    UNMAPPED_EMPTY_BLOCK,
    UNMAPPED_BAD_RANGE,
    UNMAPPED_HASH_MISMATCH,
    UNMAPPED_UTF8_BOUNDARY,
    UNMAPPED_INCOMPLETE,
    UNMAPPED_BAD_ATTRIBUTES,
    UNMAPPED_NO_BLOCKS,
    UNMAPPED_RENDER_ERROR,
    UNMAPPED_NOT_RENDERED,
)

# Instrumentation scope name of the library's own tracer: on the wire as the
# spans' scope name.
TRACER_NAME = "promptprism.instrumentation"
