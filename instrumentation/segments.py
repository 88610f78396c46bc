"""Sentinels → blocks: the block model of a rendered prompt (SPEC §2).

A template renders with every declared value wrapped in sentinels (by the
Jinja2 ``finalize`` hook in ``templates.py``); :func:`split_marked` cuts the
rendered text on the sentinels and builds the block map while it strips them,
so the text and its map come out of one pass over one render. Prompts built in
code (:class:`PromptBuilder`) know their boundaries directly.

Offsets are UTF-8 byte offsets, half-open. A map is only ever attached to a
prompt after :func:`tiling_problem` found nothing wrong with it; otherwise the
prompt is *unmapped* with a reason from ``names.UNMAPPED_*`` and its text is
still exact.

Every rendered prompt is remembered in a small LRU registry keyed by the
sha256 of its text, so a provider-client wrapper that only sees the outgoing
request body can find the map again with :func:`lookup_rendered`.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from . import names

# --- sentinels ---------------------------------------------------------------
# Private-use characters plus a per-process nonce: a value can only collide by
# containing the whole sentinel string, which never leaves this process.
_NONCE = secrets.token_hex(4)
SENTINEL_OPEN = f"\ue000{_NONCE}\ue001"
SENTINEL_SEPARATOR = "\ue002"  # between the slot number and the value text
SENTINEL_CLOSE = f"\ue003{_NONCE}\ue001"
SENTINELS = (SENTINEL_OPEN, SENTINEL_CLOSE)

_STABILITY_RANK = {stability: rank for rank, stability in enumerate(names.STABILITIES)}


def least_stable(*stabilities: str) -> str:
    """The least stable of ``stabilities`` (``turn`` beats ``session`` beats ``static``)."""
    return max(stabilities, key=lambda stability: _STABILITY_RANK.get(stability, len(names.STABILITIES)))


def normalize_stability(stability: str) -> str:
    return stability if stability in _STABILITY_RANK else names.STABILITY_UNKNOWN


def contains_sentinel(text: str) -> bool:
    return SENTINEL_OPEN in text or SENTINEL_CLOSE in text


# --- declared values ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Value:
    """One value injected into a prompt, with the metadata its block carries.

    ``inline`` values are woven into a sentence: they stay inside the
    surrounding prose block and only make it less stable.
    """

    name: str
    text: str
    layer: str
    stability: str = names.STABILITY_TURN
    source: str = ""
    inline: bool = False


def block(name: str, text: str, *, layer: str, stability: str = names.STABILITY_TURN, source: str = "") -> Value:
    """A value that becomes its own block wherever the template outputs it."""
    return Value(name, str(text), layer, stability, source, inline=False)


def inline(name: str, text: str, *, stability: str = names.STABILITY_TURN, source: str = "") -> Value:
    """A value that stays part of the surrounding prose block (a path, a flag, a name)."""
    return Value(name, str(text), names.LAYER_TEMPLATE, stability, source, inline=True)


class MarkedValue(str):
    """A declared value's text on its way through Jinja2.

    ``finalize`` wraps it in sentinels only if it reaches ``{{ … }}`` unchanged;
    any filter or operation turns it into a plain ``str``, whose output then
    counts as prose (exact text, no block of its own).
    """

    __slots__ = ("slot",)
    slot: int


def finalize(value: Any) -> Any:
    """Jinja2 ``finalize`` hook: wrap marked values in sentinels, pass everything else through."""
    if value.__class__ is MarkedValue:
        return f"{SENTINEL_OPEN}{value.slot}{SENTINEL_SEPARATOR}{value}{SENTINEL_CLOSE}"
    return value


def mark(values: Sequence[Value]) -> dict[str, MarkedValue]:
    """Template variables for ``values``: each one a :class:`MarkedValue` pointing back at its slot."""
    marked: dict[str, MarkedValue] = {}
    for slot, value in enumerate(values):
        text = MarkedValue(value.text)
        text.slot = slot
        marked[value.name] = text
    return marked


# --- blocks and prompts ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a prompt: ``content`` is exactly the prompt's bytes ``[start, end)``."""

    index: int
    name: str
    layer: str
    stability: str
    source: str
    start: int
    end: int
    content: str

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def sha256(self) -> str:
        # Computed when recorded rather than at render time: rendering is on the
        # application's hot path, recording happens once per request anyway.
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Template:
    """Which template a prompt came from and the override layer it resolved from."""

    name: str
    origin: str  # names.ORIGIN_*
    scope: str | None = None


@dataclass(frozen=True)
class SegmentedPrompt:
    """A prompt's exact text and, when trustworthy, its block map.

    ``blocks`` is empty exactly when ``unmapped_reason`` is set.
    ``variables`` are the template variables (declared values and context), for
    recording when content capture is on.
    """

    text: str
    blocks: tuple[Block, ...]
    unmapped_reason: str | None = None
    template: Template | None = None
    variables: Mapping[str, Any] = field(default_factory=dict)
    sha256: str = ""
    byte_length: int = 0

    @property
    def mapped(self) -> bool:
        return self.unmapped_reason is None

    def append_section(self, name: str, text: str, *, layer: str, stability: str = names.STABILITY_TURN,
                       source: str = "", separator: str = "") -> SegmentedPrompt:
        """This prompt with ``text`` added at the end as a block of its own.

        ``separator`` (e.g. ``"\\n\\n"``) goes between, as template prose.
        Returns a new prompt (registered for :func:`lookup_rendered`); empty text
        adds nothing.
        """
        if not text:
            return self
        if not self.mapped:
            return unmapped(self.text + separator + text, self.unmapped_reason, template=self.template,
                            variables=self.variables)
        builder = PromptBuilder(template=self.template)
        builder._pieces.extend(
            (piece.content, Value(piece.name, piece.content, piece.layer, piece.stability, piece.source))
            for piece in self.blocks
        )
        builder._variables.update(self.variables)
        if separator:
            builder.add_text(separator)
        builder.add_value(Value(name, text, layer, stability, source))
        return builder.build()


def unmapped(text: str, reason: str, *, template: Template | None = None,
             variables: Mapping[str, Any] | None = None, register: bool = True) -> SegmentedPrompt:
    """A prompt recorded without a block map, for ``reason`` (a ``names.UNMAPPED_*``).

    ``register=False`` keeps it out of :func:`lookup_rendered` (text promptprism did not render).
    """
    encoded = text.encode("utf-8")
    prompt = SegmentedPrompt(text, (), reason, template, dict(variables or {}),
                             hashlib.sha256(encoded).hexdigest(), len(encoded))
    if register:
        remember(prompt)
    return prompt


def tiling_problem(blocks: Sequence[Block], byte_length: int) -> str | None:
    """Why ``blocks`` do not tile ``byte_length`` bytes, or ``None`` when they do."""
    expected_start = 0
    for position, candidate in enumerate(blocks):
        if candidate.index != position or candidate.start != expected_start:
            return names.UNMAPPED_NOT_TILING
        if candidate.end <= candidate.start:
            return names.UNMAPPED_EMPTY_BLOCK
        expected_start = candidate.end
    if expected_start != byte_length or (byte_length and not blocks):
        return names.UNMAPPED_NOT_TILING
    return None


def _assemble(pieces: Sequence[tuple[str, Value]], template: Template | None,
              variables: Mapping[str, Any]) -> SegmentedPrompt:
    """Turn ``(text, metadata)`` pieces into a validated prompt; empty pieces vanish, prose merges."""
    merged: list[list[Any]] = []  # [text, Value] with prose runs joined
    for text, value in pieces:
        if not text:
            continue
        if merged and value.layer == names.LAYER_TEMPLATE and merged[-1][1].layer == names.LAYER_TEMPLATE \
                and value.name == merged[-1][1].name and value.source == merged[-1][1].source:
            previous = merged[-1]
            previous[0] += text
            previous[1] = replace(previous[1], stability=least_stable(previous[1].stability, value.stability))
        else:
            merged.append([text, value])
    full_text = "".join(text for text, _ in merged)
    encoded = full_text.encode("utf-8")
    byte_length = len(encoded)
    # ASCII is the common case: character lengths are byte lengths, no per-block encode.
    ascii_only = byte_length == len(full_text)
    blocks = []
    start = 0
    for index, (text, value) in enumerate(merged):
        end = start + (len(text) if ascii_only else len(text.encode("utf-8")))
        blocks.append(Block(index, value.name, value.layer, normalize_stability(value.stability),
                            value.source, start, end, text))
        start = end
    problem = tiling_problem(blocks, byte_length)
    if problem is not None:
        return unmapped(full_text, problem, template=template, variables=variables)
    prompt = SegmentedPrompt(full_text, tuple(blocks), None, template, variables,
                             hashlib.sha256(encoded).hexdigest(), byte_length)
    remember(prompt)
    return prompt


def prose_value(template: Template | None, stability: str) -> Value:
    """Metadata of the template's own text: layer ``template``, named after the template."""
    name = template.name if template else names.LAYER_TEMPLATE
    source = f"template:{template.name}:{template.origin}" if template else "code"
    return Value(name, "", names.LAYER_TEMPLATE, stability, source)


def split_marked(rendered: str, values: Sequence[Value], *, template: Template | None,
                 template_stability: str, variables: Mapping[str, Any]) -> SegmentedPrompt:
    """Cut a render made with :func:`mark`/:func:`finalize` into blocks, stripping the sentinels.

    The slot number inside each sentinel names the declared value, so output
    order may differ from evaluation order (macros, ``{% set %}``, inheritance).
    Anything malformed yields an unmapped prompt rather than a guessed map.
    """
    prose = prose_value(template, template_stability)
    chunks = rendered.split(SENTINEL_OPEN)
    pieces: list[tuple[str, Value]] = [(chunks[0], prose)]
    texts = [chunks[0]]
    malformed = SENTINEL_CLOSE in chunks[0]
    slot_count = len(values)
    for chunk in chunks[1:]:
        slot_text, separator, rest = chunk.partition(SENTINEL_SEPARATOR)
        value_text, close, trailing = rest.partition(SENTINEL_CLOSE)
        if not separator or not close or not slot_text.isdigit() or int(slot_text) >= slot_count \
                or SENTINEL_CLOSE in trailing:
            malformed = True
            texts.append(chunk)
            continue
        value = values[int(slot_text)]
        texts.append(value_text)
        texts.append(trailing)
        if value.inline:
            pieces.append((value_text, replace(prose, stability=least_stable(template_stability, value.stability))))
        else:
            pieces.append((value_text, value))
        pieces.append((trailing, prose))
    if malformed:
        # Strip what we can so the text stays as close as possible; the map is dropped.
        text = "".join(texts).replace(SENTINEL_CLOSE, "")
        return unmapped(text, names.UNMAPPED_NOT_TILING, template=template, variables=variables)
    return _assemble(_merge_inline(pieces, prose), template, variables)


def _merge_inline(pieces: list[tuple[str, Value]], prose: Value) -> list[tuple[str, Value]]:
    """Give each prose run the least stable stability of the inline values inside it.

    Inline pieces were tagged as prose with their own stability; a run of prose
    between two blocks takes the least stable of all of them, even where an
    inline value rendered empty (the text around it still varies with it).
    """
    result: list[tuple[str, Value]] = []
    run: list[tuple[str, Value]] = []

    def flush() -> None:
        if not run:
            return
        stability = least_stable(*(value.stability for _, value in run))
        run_value = replace(prose, stability=stability)
        result.extend((text, run_value) for text, _ in run)
        run.clear()

    for text, value in pieces:
        if value.layer == names.LAYER_TEMPLATE and value.name == prose.name and value.source == prose.source:
            run.append((text, value))
        elif text:
            flush()
            result.append((text, value))
        # An empty block value vanishes and lets the prose on both sides merge.
    flush()
    return result


# --- prompts built in code ---------------------------------------------------


class PromptBuilder:
    """Builds a prompt from static text, values and inline values, without a template.

    >>> builder = PromptBuilder()
    >>> builder.add_text("You are a helpful assistant.\\n")
    >>> builder.add_value(block("memory", "User likes tea.", layer="memory", stability="session"))
    >>> builder.build().text
    'You are a helpful assistant.\\nUser likes tea.'
    """

    def __init__(self, *, template: Template | None = None, stability: str = names.STABILITY_STATIC):
        self._template = template
        self._prose = prose_value(template, stability)
        self._pieces: list[tuple[str, Value]] = []
        self._variables: dict[str, Any] = {}

    def add_text(self, text: str) -> PromptBuilder:
        """Static text: part of the prose block around it."""
        self._pieces.append((text, self._prose))
        return self

    def add_value(self, value: Value) -> PromptBuilder:
        """A declared value: its own block, or prose when ``value.inline``."""
        self._variables[value.name] = value.text
        if value.inline:
            self._pieces.append((value.text, replace(self._prose, stability=value.stability)))
        else:
            self._pieces.append((value.text, value))
        return self

    def append_section(self, name: str, text: str, *, layer: str, stability: str = names.STABILITY_TURN,
                       source: str = "") -> PromptBuilder:
        return self.add_value(Value(name, text, layer, stability, source))

    def build(self) -> SegmentedPrompt:
        return _assemble(_merge_inline(self._pieces, self._prose), self._template, dict(self._variables))


def build_prompt(parts: Iterable[str | Value], *, template: Template | None = None) -> SegmentedPrompt:
    """A prompt from a sequence of static strings and :class:`Value` objects."""
    builder = PromptBuilder(template=template)
    for part in parts:
        if isinstance(part, Value):
            builder.add_value(part)
        else:
            builder.add_text(part)
    return builder.build()


# --- recently rendered prompts -----------------------------------------------
# Provider wrappers look a prompt up between render and send, usually within
# the same request; 256 covers many concurrent conversations while bounding
# memory to a few MiB even for 16 KiB prompts.
REGISTRY_CAPACITY = 256

_registry: OrderedDict[str, SegmentedPrompt] = OrderedDict()
_registry_lock = threading.Lock()


def remember(prompt: SegmentedPrompt) -> None:
    with _registry_lock:
        _registry[prompt.sha256] = prompt
        _registry.move_to_end(prompt.sha256)
        if len(_registry) > REGISTRY_CAPACITY:
            _registry.popitem(last=False)


def lookup_rendered(text: str) -> SegmentedPrompt | None:
    """The prompt most recently rendered through promptprism with exactly ``text``, if still remembered."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    with _registry_lock:
        found = _registry.get(digest)
        if found is not None:
            _registry.move_to_end(digest)
    if found is not None and found.text != text:
        return None
    return found
