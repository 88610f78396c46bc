"""Decoded spans → request records. Pure: no I/O, no clock, no globals.

A span becomes a ``RequestRecord`` when it is an LLM request, whichever
instrumentation sent it (``conventions.detection``); every convention fills
the record (``conventions``), and two spans of one provider call become one
record (``duplicates``). Its block map is validated byte for byte (README "The collector",
"What becomes a request record");
a map that fails any check is dropped and the record is stored unmapped with
the reason (``names.UNMAPPED_*``), never with a wrong map. One bad span never
affects its neighbours.
"""

from __future__ import annotations

import hashlib
from operator import itemgetter
from typing import Iterable

from ...wire import names
from .. import conventions
from ..conventions.system_prompt import (
    WHOLE_PROMPT_BLOCK_NAME,
    WHOLE_PROMPT_LAYER,
    system_prompt_text,
    whole_prompt,
)
from ..otlp.attribute_text import otel_attribute_string
from ..otlp.model import DecodedSpan, SpanEvent
from ..record import Block, RequestRecord, ToolDefinition
from .duplicates import merge_duplicates

try:  # reassembly's per-block checks, compiled (setup.py builds it beside the OTLP walk)
    from ._blocks import forget_verified as _forget_verified
    from ._blocks import validate_blocks as _compiled_validate_blocks
except ImportError:  # pure Python: the same answers, slower (README, "Ingest throughput")
    _compiled_validate_blocks = None

    def _forget_verified() -> None:
        pass

SHA256_HEX_LENGTH = 64
# `text.strip(_HEX_DIGITS)` is empty exactly when every character is a
# lowercase hex digit: one C call instead of a set test per character.
_HEX_DIGITS = "0123456789abcdef"
REPLACEMENT_CHARACTER = "\ufffd"  # what a lenient decoder leaves of a split character

_STABILITIES = frozenset(names.STABILITIES)
_EVENT_PROMPT_BLOCK, _EVENT_TOOL_DEFINITION = names.EVENT_PROMPT_BLOCK, names.EVENT_TOOL_DEFINITION

# Attributes the conventions turn into fields, and those the block map below reads:
# none of them is copied into the record's `attributes` as well.
_CONSUMED = conventions.CONSUMED | {names.PROMPT_MAPPED, names.PROMPT_UNMAPPED_REASON}
_CONSUMED_PREFIXES = conventions.CONSUMED_PREFIXES


def reassemble(spans: Iterable[DecodedSpan]) -> tuple[list[RequestRecord], dict[str, int]]:
    """Every request span's record, and how many records are unmapped, by reason."""
    spans = spans if isinstance(spans, list) else list(spans)
    records: list[RequestRecord] = []
    unmapped: dict[str, int] = {}
    try:
        for span in spans:
            record = build_record(span)
            if record is not None:
                records.append(record)
    finally:
        _forget_verified()  # the block text whose digest was checked once in this export (_blocks)
    records = merge_duplicates(records, spans)
    for record in records:
        if not record.mapped:
            unmapped[record.unmapped_reason] = unmapped.get(record.unmapped_reason, 0) + 1
    return records, unmapped


is_request = conventions.is_request  # which spans are LLM requests: conventions.detection


def build_record(span: DecodedSpan) -> RequestRecord | None:
    if not is_request(span):
        return None
    attributes = span.attributes
    record = RequestRecord(
        trace_id=span.trace_id, request_id=span.span_id, parent_span_id=span.parent_span_id,
        started_at_ns=span.start_time_ns, duration_ns=max(0, span.end_time_ns - span.start_time_ns),
        span_name=span.name, status_code=span.status_code, status_message=span.status_message,
        service=span.service, scope_name=span.scope_name,
        resource_attributes={key: otel_attribute_string(value) for key, value in span.resource_attributes.items()},
    )
    _copy_fields(attributes, record)
    events = span.events
    block_events = [event for event in events if event.name == _EVENT_PROMPT_BLOCK]
    # Usually every event is a block event (~20k per 512-span export): no second pass then.
    tool_events = [] if len(block_events) == len(events) else [
        event for event in events if event.name == _EVENT_TOOL_DEFINITION]
    if tool_events:  # promptprism's own tool events win over any other convention's definitions
        record.tools = [_tool(index, event.attributes) for index, event in enumerate(tool_events)]

    mapped_flag = attributes.get(names.PROMPT_MAPPED)
    if mapped_flag is False:
        declared = attributes.get(names.PROMPT_UNMAPPED_REASON)
        reason = declared if isinstance(declared, str) and declared else names.UNMAPPED_NOT_RENDERED
    elif block_events or names.PROMPT_BLOCK_COUNT in attributes or mapped_flag is True:
        blocks, reason = validate_blocks(attributes, block_events, span.dropped_events_count)
        if not reason:
            record.blocks, record.mapped = blocks, True
            return record
    else:  # no promptprism map at all: another instrumentation, or a span without a prompt
        reason = names.UNMAPPED_NOT_RENDERED if record.schema_version else names.UNMAPPED_NO_BLOCKS
    record.unmapped_reason = reason
    _whole_prompt_block(attributes, record)
    return record


def validate_blocks(attributes: dict, events: list[SpanEvent], dropped_events: int) -> tuple[list[Block], str]:
    """The block map, or ``([], reason)`` at the first check it fails.

    The compiled pass (``_blocks.pyx``) when it is built and takes the values
    (it hands anything unusual back); ``validate_blocks_python`` is the definition."""
    if _compiled_validate_blocks is not None and type(attributes) is dict and type(events) is list:
        result = _compiled_validate_blocks(attributes, events, dropped_events)
        if result is not None:
            return result
    return validate_blocks_python(attributes, events, dropped_events)


def validate_blocks_python(attributes: dict, events: list[SpanEvent],
                           dropped_events: int) -> tuple[list[Block], str]:
    """The block map, or ``([], reason)`` at the first check it fails (the pure-Python definition)."""
    prompt_bytes = attributes.get(names.PROMPT_BYTES)
    declared = attributes.get(names.PROMPT_BLOCK_COUNT)
    if type(prompt_bytes) is not int or prompt_bytes < 0 or type(declared) is not int or declared < 0:
        return [], names.UNMAPPED_BAD_ATTRIBUTES
    if dropped_events > 0 or len(events) < declared:
        return [], names.UNMAPPED_INCOMPLETE
    if len(events) > declared:
        return [], names.UNMAPPED_BAD_ATTRIBUTES
    parsed = []
    for event in events:
        block = _block(event.attributes)
        if block is None:
            return [], names.UNMAPPED_BAD_ATTRIBUTES
        parsed.append(block)
    parsed.sort(key=_first)  # stable: equal indexes keep their order and fail below
    blocks = [block for _, block in parsed]
    position = 0
    for expected_index, block in enumerate(blocks):
        if block.index != expected_index:
            return [], names.UNMAPPED_BAD_ATTRIBUTES
        start, end = block.start, block.end
        if start < 0 or end < start or end > prompt_bytes or block.size != end - start:
            return [], names.UNMAPPED_BAD_RANGE
        if start == end:
            return [], names.UNMAPPED_EMPTY_BLOCK
        if start != position:
            return [], names.UNMAPPED_NOT_TILING
        position = end
    if position != prompt_bytes:
        return [], names.UNMAPPED_NOT_TILING
    reason = _check_content(blocks, attributes)
    return ([], reason) if reason else (blocks, "")


def _check_content(blocks: list[Block], attributes: dict) -> str:
    """Hash and UTF-8 checks of captured content; redacted content is skipped."""
    whole = hashlib.sha256()
    complete = True
    for block in blocks:
        content = block.content
        if content is None or block.redacted:
            complete = False
            continue
        try:
            encoded = content.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogate: half a character
            return names.UNMAPPED_UTF8_BOUNDARY
        if len(encoded) != block.size or hashlib.sha256(encoded).hexdigest() != block.sha256:
            if content.startswith(REPLACEMENT_CHARACTER) or content.endswith(REPLACEMENT_CHARACTER):
                return names.UNMAPPED_UTF8_BOUNDARY
            return names.UNMAPPED_HASH_MISMATCH
        whole.update(encoded)
    prompt_sha256 = attributes.get(names.PROMPT_SHA256)
    if complete and blocks and isinstance(prompt_sha256, str) and prompt_sha256:
        if whole.hexdigest() != prompt_sha256.lower():
            return names.UNMAPPED_HASH_MISMATCH
    return ""


# Block event keys bound once: _block runs for every block of every request.
_INDEX, _START, _END, _SIZE = names.BLOCK_INDEX, names.BLOCK_START, names.BLOCK_END, names.BLOCK_SIZE
_NAME, _LAYER, _SOURCE, _SHA256 = names.BLOCK_NAME, names.BLOCK_LAYER, names.BLOCK_SOURCE, names.BLOCK_SHA256
_STABILITY, _CONTENT, _REDACTED = names.BLOCK_STABILITY, names.BLOCK_CONTENT, names.BLOCK_REDACTED


_first = itemgetter(0)
# The keys every valid block event has, read in one C call; a missing one
# (KeyError) makes the event invalid, as a None from .get() would.
_REQUIRED = itemgetter(_INDEX, _START, _END, _SIZE, _NAME, _LAYER, _SOURCE, _SHA256)


def _block(attributes: dict) -> tuple[int, Block] | None:
    """A block event's index and fields, with whether its content was redacted."""
    try:
        index, start, end, size, name, layer, source, sha256 = _REQUIRED(attributes)
    except KeyError:
        return None
    if type(index) is not int or type(start) is not int or type(end) is not int or type(size) is not int:
        return None
    get = attributes.get
    content = get(_CONTENT)
    if not (type(name) is str and type(layer) is str and type(source) is str and type(sha256) is str):
        return None
    if content is not None and type(content) is not str:
        return None
    if len(sha256) != SHA256_HEX_LENGTH or sha256.strip(_HEX_DIGITS):
        sha256 = sha256.lower()
        if len(sha256) != SHA256_HEX_LENGTH or sha256.strip(_HEX_DIGITS):
            return None
    stability = get(_STABILITY)
    if not isinstance(stability, str) or stability not in _STABILITIES:
        stability = names.STABILITY_UNKNOWN
    # The flag only means something beside content: without text there is nothing redacted to show.
    redacted = content is not None and get(_REDACTED) is True
    return index, Block(index, name, layer, stability, source, start, end, size, sha256, content, redacted)


def _tool(index: int, attributes: dict) -> ToolDefinition:
    name, size, sha256, content = (attributes.get(names.TOOL_NAME), attributes.get(names.TOOL_SIZE),
                                   attributes.get(names.TOOL_SHA256), attributes.get(names.TOOL_CONTENT))
    content = content if isinstance(content, str) else None
    redacted = content is not None and attributes.get(names.TOOL_REDACTED) is True
    if type(size) is not int or size < 0:  # measured from the text, unless the text is not the original
        size = len(content.encode("utf-8", "replace")) if content is not None and not redacted else 0
    return ToolDefinition(index, name if isinstance(name, str) else "", size,
                          sha256 if isinstance(sha256, str) else "", content, redacted)


def _whole_prompt_block(attributes: dict, record: RequestRecord) -> None:
    """Without a trustworthy map, the system prompt text (when captured) is one block:
    from the GenAI content attributes, else from the content another
    convention filled in (OpenInference's or the AI SDK's messages)."""
    found = system_prompt_text(attributes)
    if found is None and (record.system_instructions or record.input_messages):
        filled = ((names.GEN_AI_SYSTEM_INSTRUCTIONS, record.system_instructions),
                  (names.GEN_AI_INPUT_MESSAGES, record.input_messages))
        found = system_prompt_text({key: value for key, value in filled if value})
    if found is None:
        return
    source, text = found
    prompt = whole_prompt(text, record.prompt_sha256)
    if prompt is None:  # no bytes to measure, or not the prompt the span describes
        return
    encoded, digest = prompt
    record.prompt_bytes, record.prompt_sha256 = len(encoded), digest
    if encoded:
        record.blocks = [Block(0, WHOLE_PROMPT_BLOCK_NAME, WHOLE_PROMPT_LAYER, names.STABILITY_UNKNOWN,
                               source, 0, len(encoded), len(encoded), digest, text)]


def _copy_fields(attributes: dict, record: RequestRecord) -> None:
    """The conventions' fields, and every other attribute as text in ``attributes``."""
    record.attributes = {key: value if value.__class__ is str else otel_attribute_string(value)
                         for key, value in attributes.items()
                         if key not in _CONSUMED and not key.startswith(_CONSUMED_PREFIXES)}
    conventions.fill(attributes, record)

