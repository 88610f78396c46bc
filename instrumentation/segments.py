"""Sentinels → blocks: the block model of a rendered prompt (SPEC §2).

A template renders with every declared value wrapped in sentinels (by the
Jinja2 ``finalize`` hook, see ``templates.py``); :func:`split_marked` cuts the
rendered text on the sentinels and builds the block map while it strips them,
so the text and its map come out of one pass over one render. Prompts built in
code (:class:`PromptBuilder`) know their boundaries directly.

Offsets are UTF-8 byte offsets, half-open. A map is only attached to a prompt
whose blocks tile its bytes (checked as the map is built; :func:`tiling_problem`
checks any map); otherwise the prompt is *unmapped* with a reason from
``names.UNMAPPED_*`` and its text is still exact.

Every prompt built here is remembered in a small LRU registry so that a
provider-client wrapper that only sees the outgoing request body can find the
map again with :func:`lookup_rendered`.

Rendering sits on the application's hot path, so this module avoids per-render
work it can do once: a :class:`Value` carries its sentinel-wrapped form from
creation, and digests are computed when a prompt is recorded, not rendered.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections import OrderedDict
from functools import cached_property
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from . import names

# --- sentinels ---------------------------------------------------------------
# ASCII record/unit separators around a per-process nonce: a value can only
# collide by containing the whole sentinel, which never leaves this process.
# ASCII keeps an ASCII prompt in CPython's one-byte string form, where the split
# measured ~3x faster than with private-use characters. A marked value renders
# as SENTINEL key SENTINEL text SENTINEL, so one C-level str.split yields
# [prose, key, text, prose, key, text, prose, …].
_NONCE = secrets.token_hex(4)
SENTINEL = f"\x1e{_NONCE}\x1f"

_STABILITY_RANK = {stability: rank for rank, stability in enumerate(names.STABILITIES)}
_UNKNOWN_RANK = len(names.STABILITIES)
_STABILITY_BY_RANK = (*names.STABILITIES, names.STABILITY_UNKNOWN)


def least_stable(*stabilities: str) -> str:
    """The least stable of ``stabilities`` (``turn`` beats ``session`` beats ``static``)."""
    return _STABILITY_BY_RANK[max(_STABILITY_RANK.get(stability, _UNKNOWN_RANK) for stability in stabilities)]


def normalize_stability(stability: str) -> str:
    """``stability`` if it is one of SPEC §2's, else ``unknown``."""
    return stability if stability in _STABILITY_RANK else names.STABILITY_UNKNOWN


def contains_sentinel(text: str) -> bool:
    return SENTINEL in text


def wrap(key: str, text: str) -> str:
    """``text`` marked for :func:`split_marked` under ``key`` (a value's name, or a position)."""
    return f"{SENTINEL}{key}{SENTINEL}{text}{SENTINEL}"


# --- declared values ---------------------------------------------------------


class MarkedValue(str):
    """A declared value's text on its way through Jinja2.

    ``finalize`` swaps it for its sentinel-wrapped form only if it reaches
    ``{{ … }}`` unchanged; any filter or operation turns it into a plain ``str``
    (``|length`` counts the real text, ``|upper`` yields prose with exact text).
    """

    __slots__ = ("wrapped",)
    wrapped: str


def finalize(value: Any) -> Any:
    """Jinja2 ``finalize`` hook: wrap marked values in sentinels, pass everything else through."""
    if value.__class__ is MarkedValue:
        return value.wrapped
    return value


class Value:
    """One value injected into a prompt, with the metadata its block carries.

    ``inline`` values are woven into a sentence: they stay inside the
    surrounding prose block and only make it less stable. Create values with
    :func:`block` and :func:`inline`; treat them as immutable.
    """

    __slots__ = ("name", "text", "layer", "stability", "source", "inline", "marked", "collides", "metadata")

    def __init__(self, name: str, text: str, layer: str, stability: str = names.STABILITY_TURN,
                 source: str = "", inline: bool = False):
        self.name = name
        self.text = text = str(text)
        self.layer = layer
        self.stability = normalize_stability(stability)
        self.source = source
        self.inline = inline
        self.collides = SENTINEL in text
        self.marked = MarkedValue(text)
        self.marked.wrapped = wrap(name, text)
        self.metadata = (name, layer, self.stability, source)  # a block's fields, ready for _build

    def __repr__(self) -> str:
        kind = "inline" if self.inline else "block"
        return f"{kind}({self.name!r}, {self.text!r}, layer={self.layer!r}, stability={self.stability!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Value) and all(
            getattr(self, attribute) == getattr(other, attribute)
            for attribute in ("name", "text", "layer", "stability", "source", "inline"))

    __hash__ = None  # type: ignore[assignment]


def block(name: str, text: str, *, layer: str, stability: str = names.STABILITY_TURN, source: str = "") -> Value:
    """A value that becomes its own block wherever the template outputs it unchanged."""
    return Value(name, text, layer, stability, source, False)


def inline(name: str, text: str, *, stability: str = names.STABILITY_TURN, source: str = "") -> Value:
    """A value that stays part of the surrounding prose block (a path, a flag, a name)."""
    return Value(name, text, names.LAYER_TEMPLATE, stability, source, True)


# --- blocks and prompts ------------------------------------------------------


class Block(NamedTuple):
    """One block of a prompt: ``content`` is exactly the prompt's UTF-8 bytes ``[start, end)``."""

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
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()


class Template(NamedTuple):
    """Which template a prompt came from and the override layer it resolved from."""

    name: str
    origin: str  # names.ORIGIN_*
    scope: str | None = None


class SegmentedPrompt:
    """A prompt's exact text and, when trustworthy, its block map.

    ``blocks`` is empty exactly when ``unmapped_reason`` is set. ``variables``
    are the template variables (context and declared values), recorded only
    when content capture is on. Treat instances as immutable.
    """

    def __init__(self, text: str, blocks: tuple[Block, ...] | None, unmapped_reason: str | None = None,
                 template: Template | None = None, *, context: Mapping[str, Any] | None = None,
                 values: Sequence[Value] = (), byte_length: int | None = None,
                 pieces: tuple[list[str], list[tuple[str, str, str, str]], bool] | None = None):
        self.text = text
        # Either the blocks, or the validated pieces they are made from on first
        # use: building Block objects is deferred from rendering to recording.
        self._blocks = blocks
        self._pieces = pieces
        self.unmapped_reason = unmapped_reason
        self.template = template
        self._context = context
        self._values = values
        self.byte_length = byte_length if byte_length is not None else _byte_length(text)

    @property
    def mapped(self) -> bool:
        return self.unmapped_reason is None

    @property
    def blocks(self) -> tuple[Block, ...]:
        blocks = self._blocks
        if blocks is None:
            texts, metadata, ascii_only = self._pieces  # type: ignore[misc]
            made = []
            start = 0
            for index, content in enumerate(texts):
                end = start + (len(content) if ascii_only else len(content.encode("utf-8")))
                made.append(Block(index, *metadata[index], start, end, content))
                start = end
            blocks = self._blocks = tuple(made)
        return blocks

    @cached_property
    def sha256(self) -> str:
        """Hex digest of the prompt's UTF-8 bytes (computed on first use: recording, not rendering)."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @cached_property
    def variables(self) -> dict[str, Any]:
        return {**(self._context or {}), **{value.name: value.text for value in self._values}}

    def __repr__(self) -> str:
        state = f"{len(self.blocks)} blocks" if self.mapped else f"unmapped: {self.unmapped_reason}"
        return f"SegmentedPrompt({self.text[:40]!r}…, {self.byte_length} bytes, {state})"

    def append_section(self, name: str, text: str, *, layer: str, stability: str = names.STABILITY_TURN,
                       source: str = "", separator: str = "") -> SegmentedPrompt:
        """This prompt with ``text`` added at the end as a block of its own.

        ``separator`` (e.g. ``"\\n\\n"``) goes between, as template prose.
        Returns a new prompt (remembered for :func:`lookup_rendered`); empty
        ``text`` adds nothing.
        """
        if not text:
            return self
        section = Value(name, text, layer, stability, source)
        values = (*self._values, section)
        if not self.mapped:
            return unmapped(self.text + separator + text, self.unmapped_reason, template=self.template,
                            context=self._context, values=values)
        texts = [current.content for current in self.blocks]
        metadata = [(current.name, current.layer, current.stability, current.source) for current in self.blocks]
        if separator:
            prose_name, prose_source = _prose_identity(self.template)
            if metadata and metadata[-1][1] == names.LAYER_TEMPLATE and metadata[-1][0] == prose_name:
                texts[-1] += separator  # adjacent prose merges
            else:
                texts.append(separator)
                metadata.append((prose_name, names.LAYER_TEMPLATE, names.STABILITY_STATIC, prose_source))
        texts.append(text)
        metadata.append((name, layer, section.stability, source))
        return _build(texts, metadata, self.template, self._context, values)


def _byte_length(text: str) -> int:
    # str.isascii() is O(1) in CPython: ASCII prompts skip the encode.
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def unmapped(text: str, reason: str, *, template: Template | None = None, context: Mapping[str, Any] | None = None,
             values: Sequence[Value] = (), register: bool = True) -> SegmentedPrompt:
    """A prompt recorded without a block map, for ``reason`` (a ``names.UNMAPPED_*``).

    ``register=False`` keeps it out of :func:`lookup_rendered` (text promptprism did not render).
    """
    prompt = SegmentedPrompt(text, (), reason, template, context=context, values=values)
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
    if expected_start != byte_length:
        return names.UNMAPPED_NOT_TILING
    return None


def _build(texts: list[str], metadata: list[tuple[str, str, str, str]], template: Template | None,
           context: Mapping[str, Any] | None, values: Sequence[Value]) -> SegmentedPrompt:
    """Blocks from ``texts`` and their ``(name, layer, stability, source)``, validated and remembered.

    Callers pass only non-empty texts, so the blocks tile by construction; the
    final offset is still checked against the text's byte length.
    """
    text = "".join(texts)
    ascii_only = text.isascii()
    if ascii_only:
        byte_length = covered = len(text)
    else:
        byte_length = len(text.encode("utf-8"))
        covered = sum(len(content.encode("utf-8")) for content in texts)
    if covered != byte_length or len(texts) != len(metadata) or not all(texts):
        return unmapped(text, names.UNMAPPED_NOT_TILING, template=template, context=context, values=values)
    prompt = SegmentedPrompt(text, None, None, template, context=context, values=values, byte_length=byte_length,
                             pieces=(texts, metadata, ascii_only))
    remember(prompt)
    return prompt


_CODE_PROSE = (names.LAYER_TEMPLATE, "code")


def _prose_identity(template: Template | None) -> tuple[str, str]:
    """Name and source of the template's own text: named after the template."""
    if template is None:
        return _CODE_PROSE
    return template.name, f"template:{template.name}:{template.origin}"


def split_marked(rendered: str, values: Mapping[str, Value], *, template: Template | None,
                 template_stability: str = names.STABILITY_STATIC, context: Mapping[str, Any] | None = None
                 ) -> SegmentedPrompt | None:
    """Cut a render whose values went through :func:`finalize` into blocks, stripping the sentinels.

    ``values`` maps each key inside the sentinels to its declaration, so output
    order may differ from evaluation order (macros, ``{% set %}``,
    inheritance). Inline values join the prose run around them and make it as
    unstable as they are (even when empty: the text around them still varies
    with them); empty block values vanish and the prose on both sides merges.

    Returns ``None`` when the sentinels are not as :func:`finalize` wrote them
    (a filter cut or changed captured output): the caller must not guess a map.
    """
    parts = rendered.split(SENTINEL)
    count = len(parts)
    if count % 3 != 1:
        return None
    prose_name, prose_source = _prose_identity(template)
    template_rank = _STABILITY_RANK.get(template_stability, _UNKNOWN_RANK)
    texts: list[str] = []
    metadata: list[tuple[str, str, str, str]] = []
    prose = parts[0]
    prose_rank = template_rank
    lookup = values.get
    for index in range(1, count, 3):
        value = lookup(parts[index])
        value_text = parts[index + 1]
        if value is None or value_text != value.text:
            return None
        if value.inline:
            prose += value_text
            rank = _STABILITY_RANK.get(value.stability, _UNKNOWN_RANK)
            if rank > prose_rank:
                prose_rank = rank
        elif value_text:
            if prose:
                texts.append(prose)
                metadata.append((prose_name, names.LAYER_TEMPLATE, _STABILITY_BY_RANK[prose_rank], prose_source))
            prose = ""
            prose_rank = template_rank
            texts.append(value_text)
            metadata.append(value.metadata)
        prose += parts[index + 2]
    if prose:
        texts.append(prose)
        metadata.append((prose_name, names.LAYER_TEMPLATE, _STABILITY_BY_RANK[prose_rank], prose_source))
    return _build(texts, metadata, template, context, tuple(values.values()))


# --- prompts built in code ---------------------------------------------------


class PromptBuilder:
    """Builds a prompt from static text, values and inline values, without a template.

    >>> builder = PromptBuilder()
    >>> builder.add_text("You are a helpful assistant.\\n").add_value(
    ...     block("memory", "User likes tea.", layer="memory", stability="session")).build().text
    'You are a helpful assistant.\\nUser likes tea.'
    """

    def __init__(self, *, template: Template | None = None, stability: str = names.STABILITY_STATIC):
        self._template = template
        self._stability = normalize_stability(stability)
        self._pieces: list[str | Value] = []

    def add_text(self, text: str) -> PromptBuilder:
        """Static text: part of the prose block around it."""
        self._pieces.append(text)
        return self

    def add_value(self, value: Value) -> PromptBuilder:
        """A declared value: its own block, or part of the prose when ``value.inline``."""
        self._pieces.append(value)
        return self

    def append_section(self, name: str, text: str, *, layer: str, stability: str = names.STABILITY_TURN,
                       source: str = "") -> PromptBuilder:
        """A section added after the rest: a block of its own."""
        return self.add_value(Value(name, text, layer, stability, source))

    def build(self) -> SegmentedPrompt:
        # The same rules as a template render: run the pieces through the sentinel split.
        # Keyed by position, not name: a builder may add two sections with the same name.
        values = {str(position): piece for position, piece in enumerate(self._pieces) if isinstance(piece, Value)}
        if any(value.collides for value in values.values()) or any(
                SENTINEL in piece for piece in self._pieces if not isinstance(piece, Value)):
            text = "".join(piece.text if isinstance(piece, Value) else piece for piece in self._pieces)
            return unmapped(text, names.UNMAPPED_SENTINEL_COLLISION, template=self._template,
                            values=tuple(values.values()))
        rendered = "".join(wrap(str(position), piece.text) if isinstance(piece, Value) else piece
                           for position, piece in enumerate(self._pieces))
        prompt = split_marked(rendered, values, template=self._template, template_stability=self._stability)
        assert prompt is not None  # no sentinel anywhere but ours, so the split cannot fail
        return prompt


def build_prompt(parts: Iterable[str | Value], *, template: Template | None = None,
                 stability: str = names.STABILITY_STATIC) -> SegmentedPrompt:
    """A prompt from a sequence of static strings and :class:`Value` objects."""
    builder = PromptBuilder(template=template, stability=stability)
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

# Keyed by the text itself: equivalent to keying by its sha256 (the text is
# held by the prompt anyway) but costs a string hash instead of a digest on
# every render.
_registry: OrderedDict[str, SegmentedPrompt] = OrderedDict()
_registry_lock = threading.Lock()


def remember(prompt: SegmentedPrompt) -> None:
    with _registry_lock:
        _registry[prompt.text] = prompt
        _registry.move_to_end(prompt.text)
        if len(_registry) > REGISTRY_CAPACITY:
            _registry.popitem(last=False)


def lookup_rendered(text: str) -> SegmentedPrompt | None:
    """The prompt most recently built through promptprism with exactly ``text``, if still remembered."""
    with _registry_lock:
        found = _registry.get(text)
        if found is not None:
            _registry.move_to_end(text)
    return found
