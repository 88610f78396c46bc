"""Sentinels → blocks: the block model of a rendered prompt (README "The request span on the wire").

A template renders with every declared value wrapped in sentinels (by the
Jinja2 ``finalize`` hook, see ``templates.py``); :func:`split_marked` cuts the
rendered text on the sentinels and builds the block map while it strips them,
so the text and its map come out of one pass over one render. Prompts built in
code (:class:`PromptBuilder`) know their boundaries directly.

Offsets are UTF-8 byte offsets, half-open. Text is encoded with
``surrogatepass``, as ``wire.canonical`` does: a lone surrogate (a file name
decoded with ``os.fsdecode``) counts as its three bytes instead of making the
render raise where plain Jinja2 would not. A map is only attached to a prompt
whose blocks tile its bytes (checked as the map is built; :func:`tiling_problem`
checks any map); otherwise the prompt is *unmapped* with a reason from
``names.UNMAPPED_*`` and its text is still exact.

Every prompt built here is remembered in a small LRU registry so that a
provider-client wrapper that only sees the outgoing request body can find the
map again with :func:`lookup_rendered`.

Rendering sits on the application's hot path, so this module avoids per-render
work it can do once or later: a :class:`Value` carries its sentinel-wrapped form
from creation; a render only splits, checks and strips the sentinels (C-level
list operations); the block map, its byte offsets and the digests are built when
a prompt is recorded (:attr:`SegmentedPrompt.blocks`), not when it is rendered.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections import OrderedDict, deque
from contextvars import ContextVar
from functools import cached_property
from typing import Any, Callable, Collection, Iterable, Mapping, NamedTuple, Sequence

from ..wire import names

# --- sentinels ---------------------------------------------------------------
# Shift-out/shift-in around a per-process decimal nonce: a value can only
# collide by containing the whole sentinel, which never leaves this process.
# The characters survive the string filters a template may apply to captured
# output ({% set %} blocks, macro calls), so such a filter cannot turn a
# sentinel into stray text that the split would miss: they are not whitespace
# (|trim, |wordwrap), not line boundaries (|indent; \x1c-\x1e are both), and
# digits have no case (|upper, |title). A filter that changes a key or a value's
# text is caught by the split's check instead.
# ASCII keeps an ASCII prompt in CPython's one-byte string form, where the split
# measured ~3x faster than with private-use characters. A marked value renders
# as SENTINEL key SENTINEL text SENTINEL, so one C-level str.split yields
# [prose, key, text, prose, key, text, prose, …].
# Ten digits: 10^10 (about 2^33) values for an outsider to guess.
NONCE_DIGITS = 10


def _draw_sentinel() -> str:
    return f"\x0e{secrets.randbelow(10 ** NONCE_DIGITS):0{NONCE_DIGITS}d}\x0f"


SENTINEL = _draw_sentinel()

# The sentinel of the render in progress, for join_captured (Jinja2 calls it
# with no way to pass one). SENTINEL except while a template renders again with
# a one-off sentinel (templates.render_segmented, when SENTINEL cannot be
# trusted); a context variable, so concurrent renders never see each other's.
render_sentinel: ContextVar[str] = ContextVar("promptprism_render_sentinel", default=SENTINEL)

_STABILITY_RANK = {stability: rank for rank, stability in enumerate(names.STABILITIES)}
_UNKNOWN_RANK = len(names.STABILITIES)
_STABILITY_BY_RANK = (*names.STABILITIES, names.STABILITY_UNKNOWN)


def least_stable(*stabilities: str) -> str:
    """The least stable of ``stabilities`` (``turn`` beats ``session`` beats ``static``)."""
    return _STABILITY_BY_RANK[max(_STABILITY_RANK.get(stability, _UNKNOWN_RANK) for stability in stabilities)]


def normalize_stability(stability: str) -> str:
    """``stability`` if it is one of the block model's, else ``unknown``."""
    return stability if stability in _STABILITY_RANK else names.STABILITY_UNKNOWN


def contains_sentinel(text: str) -> bool:
    return SENTINEL in text


def wrap(key: str, text: str, sentinel: str = SENTINEL) -> str:
    """``text`` marked for :func:`split_marked` under ``key`` (a value's name, or a position)."""
    return f"{sentinel}{key}{sentinel}{text}{sentinel}"


def one_off_sentinel(*inputs: Any) -> str:
    """A new sentinel that occurs in none of the strings in ``inputs``.

    For a render that cannot use :data:`SENTINEL` (a value holds it, or a split
    on it failed). Strings are searched inside dicts (keys too), lists, tuples
    and sets, however nested; other objects are not looked into (their text
    only exists once a template formats them), but the nonce is drawn after
    they were made, so they could only hold it by guessing NONCE_DIGITS random digits.
    """
    texts: list[str] = []
    pending = list(inputs)
    seen: set[int] = set()
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, (dict, list, tuple, set, frozenset)) and id(item) not in seen:
            # By id, so a container that holds itself is walked once; ids stay
            # unique because every container seen is held by the inputs (not
            # so for items() tuples, hence keys and values separately).
            seen.add(id(item))
            if isinstance(item, dict):
                pending.extend(item.keys())
                pending.extend(item.values())
            else:
                pending.extend(item)
    while True:
        sentinel = _draw_sentinel()
        if sentinel != SENTINEL and not any(sentinel in text for text in texts):
            return sentinel


# --- declared values ---------------------------------------------------------


class MarkedValue(str):
    """A declared value's text on its way through Jinja2.

    ``finalize`` swaps it for its sentinel-wrapped form only if it reaches
    ``{{ … }}`` unchanged; any filter or operation turns it into a plain ``str``
    (``|length`` counts the real text, ``|upper`` yields prose with exact text).
    It also carries what its block needs, so the split can check a render
    against the template's variables directly (no per-render key → value map)
    and lay out blocks without a reference back to its :class:`Value` (which
    would make a reference cycle per value, left to the garbage collector).
    """

    __slots__ = ("wrapped", "inline", "rank", "metadata")
    wrapped: str
    inline: bool
    rank: int  # of its stability, in _STABILITY_RANK
    metadata: tuple[str, str, str, str]  # a block's (name, layer, stability, source)


def finalize(value: Any) -> Any:
    """Jinja2 ``finalize`` hook: wrap marked values in sentinels, pass everything else through.

    Templates compiled by :func:`templates.prompt_environment` inline this same
    check into their generated code instead of calling it (one call per output
    saved); any other environment with this hook calls it and gets the same text.
    """
    if value.__class__ is MarkedValue:
        return value.wrapped
    return value


def join_captured(pieces: Iterable[str]) -> str:
    """Jinja2 ``concat`` hook: join captured output so filters see exact text and outputs keep their blocks.

    Output captured inside a template (``{% set %}`` blocks, macro and
    ``caller()`` bodies, ``{% filter %}`` blocks, ``super()``) holds the
    sentinels of the values in it. As a plain string, a filter over it would
    see them: ``|center`` or ``|wordwrap`` would measure them, ``|length``
    would count them, ``{% if %}`` would find an empty capture non-empty.
    So the capture becomes a :class:`MarkedValue` like a declared value: its
    text is the capture with the sentinels stripped, and only when it reaches
    ``{{ … }}`` unchanged is it output in its marked form, keeping the blocks
    of the values inside. (The top-level render is joined by
    ``templates.render_segmented`` itself, so the split sees every sentinel.)
    The sentinel is the current render's (:data:`render_sentinel`): a one-off
    sentinel's captures must be stripped like the process sentinel's, and a
    value's own copy of the process sentinel is then just its text.
    """
    joined = "".join(pieces)
    sentinel = render_sentinel.get()
    if sentinel not in joined:
        return joined
    parts = joined.split(sentinel)
    if len(parts) % 3 != 1:
        return joined  # not as finalize wrote it: the top-level split will refuse it
    del parts[1::3]
    captured = MarkedValue("".join(parts))
    captured.wrapped = joined
    # A capture is not a declared value and is never looked up as one; should a
    # forged key find it anyway, it lays out as prose.
    captured.inline = True
    captured.rank = _STABILITY_RANK[names.STABILITY_STATIC]
    return captured


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
        self.metadata = (name, layer, self.stability, source)  # a block's fields, ready for _build
        self.marked = self.marked_with(SENTINEL)

    def marked_with(self, sentinel: str) -> MarkedValue:
        """This value's :class:`MarkedValue`, wrapped in ``sentinel`` (:attr:`marked` uses :data:`SENTINEL`)."""
        marked = MarkedValue(self.text)
        marked.wrapped = wrap(self.name, self.text, sentinel)
        marked.inline = self.inline
        marked.rank = _STABILITY_RANK[self.stability] if self.stability in _STABILITY_RANK else _UNKNOWN_RANK
        marked.metadata = self.metadata
        return marked

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
        return hashlib.sha256(self.content.encode("utf-8", "surrogatepass")).hexdigest()


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
                 values: Collection[Value] = (), byte_length: int | None = None,
                 layout: tuple[Callable[..., _Layout], tuple[Any, ...]] | None = None):
        self.text = text
        # Either the blocks, or a function and the validated pieces that make
        # them on first use: the block map is built when a prompt is recorded,
        # not on the render path.
        self._blocks = blocks
        self._layout = layout
        self.unmapped_reason = unmapped_reason
        self.template = template
        self._context = context
        self._values = values
        if byte_length is None:
            # str.isascii() is O(1) in CPython: ASCII prompts skip the encode.
            byte_length = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        self.byte_length = byte_length

    @property
    def mapped(self) -> bool:
        return self.unmapped_reason is None

    @property
    def blocks(self) -> tuple[Block, ...]:
        blocks = self._blocks
        if blocks is None:
            function, arguments = self._layout  # type: ignore[misc]
            texts, metadata = function(*arguments)
            # str.isascii() is O(1): only non-ASCII pieces of a non-ASCII prompt are encoded.
            ascii_only = self.text.isascii()
            made = []
            start = 0
            for index, content in enumerate(texts):
                end = start + (len(content) if ascii_only or content.isascii() else len(content.encode("utf-8", "surrogatepass")))
                made.append(Block(index, *metadata[index], start, end, content))
                start = end
            blocks = self._blocks = tuple(made)
        return blocks

    @cached_property
    def sha256(self) -> str:
        """Hex digest of the prompt's UTF-8 bytes (computed on first use: recording, not rendering)."""
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()

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
        byte_length = len(text.encode("utf-8", "surrogatepass"))
        covered = sum(len(content.encode("utf-8", "surrogatepass")) for content in texts)
    if covered != byte_length or len(texts) != len(metadata) or not all(texts):
        return unmapped(text, names.UNMAPPED_NOT_TILING, template=template, context=context, values=values)
    prompt = SegmentedPrompt(text, None, None, template, context=context, values=values, byte_length=byte_length,
                             layout=(_as_given, (texts, metadata)))
    remember(prompt)
    return prompt


_Layout = tuple[list[str], list[tuple[str, str, str, str]]]  # block texts and their (name, layer, stability, source)


def _as_given(texts: list[str], metadata: list[tuple[str, str, str, str]]) -> _Layout:
    return texts, metadata


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
    (cut short, or around a changed key or text): the caller must not guess a map.
    """
    return split_rendered(rendered, {key: value.marked for key, value in values.items()}, tuple(values.values()),
                          template=template, template_stability=template_stability, context=context)


def split_rendered(rendered: str, marked: Mapping[str, Any], values: Collection[Value], *,
                   template: Template | None, template_stability: str = names.STABILITY_STATIC,
                   context: Mapping[str, Any] | None = None) -> SegmentedPrompt | None:
    """:func:`split_marked` for a template render: ``marked`` are the render's variables.

    Each key inside the sentinels is looked up in ``marked`` (declared values
    are there as their :class:`MarkedValue`) and the text between must equal
    it. Only this check and the stripping happen here, as whole-list operations
    that run in C; the blocks are laid out from the same pieces when first read.
    """
    split = _split_triples(rendered, marked, SENTINEL)
    if split is None:
        return None
    parts, found = split
    # A MarkedValue compares equal to exactly its text.
    if found != parts[2::3]:
        return None
    # What remains is [prose, text, prose, text, …, prose]: the text without sentinels and keys.
    del parts[1::3]
    prompt = SegmentedPrompt("".join(parts), None, None, template, context=context, values=values,
                             layout=(_marked_layout, (parts, found, template, template_stability)))
    remember(prompt)
    return prompt


def strip_sentinels(rendered: str, marked: Mapping[str, Any], sentinel: str,
                    changed: Callable[[Any], str] | None = None) -> str | None:
    """The text of a render on ``sentinel`` with its sentinels and keys stripped, for a prompt recorded unmapped.

    Checked like :func:`split_rendered`: every ``sentinel`` must sit in a
    triple around a key of ``marked`` and that value's text, so nothing of the
    sentinels is left behind. ``changed`` gives the one other text a triple may
    hold: what a transformation of the whole marked form that leaves sentinels
    and keys alone (HTML escaping) makes of the value's text; stripping then
    gives exactly the transformed text. ``None`` for any other shape: what
    Jinja2 alone would have rendered is then unknown.
    """
    split = _split_triples(rendered, marked, sentinel)
    if split is None:
        return None
    parts, found = split
    texts = parts[2::3]
    if found != texts and not (changed is not None and all(
            text == value or text == changed(value) for value, text in zip(found, texts))):
        return None
    del parts[1::3]
    return "".join(parts)


def _split_triples(rendered: str, marked: Mapping[str, Any], sentinel: str) -> tuple[list[str], list[Any]] | None:
    """``rendered`` cut on ``sentinel`` ([prose, key, text, prose, …]) and the value of each key in ``marked``.

    ``None`` when the pieces do not come in triples or a key is not in ``marked``.
    """
    parts = rendered.split(sentinel)
    if len(parts) % 3 != 1:
        return None
    try:
        return parts, list(map(marked.__getitem__, parts[1::3]))
    except KeyError:
        return None


def _marked_layout(parts: list[str], found: list[Any], template: Template | None,
                   template_stability: str) -> _Layout:
    """Blocks of a checked split: ``parts`` is [prose, value text, prose, …], ``found`` the values in order."""
    prose_name, prose_source = _prose_identity(template)
    template_rank = _STABILITY_RANK.get(template_stability, _UNKNOWN_RANK)
    texts: list[str] = []
    metadata: list[tuple[str, str, str, str]] = []
    prose = parts[0]
    prose_rank = template_rank
    for marked, value_text, following in zip(found, parts[1::2], parts[2::2]):
        if marked.__class__ is not MarkedValue or marked.inline:
            # Inline, or (only with a sentinel forged in undeclared context)
            # not a declared value at all: prose either way, the text is the same.
            prose += value_text
            rank = marked.rank if marked.__class__ is MarkedValue else template_rank
            if rank > prose_rank:
                prose_rank = rank
        elif value_text:
            if prose:
                texts.append(prose)
                metadata.append((prose_name, names.LAYER_TEMPLATE, _STABILITY_BY_RANK[prose_rank], prose_source))
            prose = ""
            prose_rank = template_rank
            texts.append(value_text)
            metadata.append(marked.metadata)
        prose += following
    if prose:
        texts.append(prose)
        metadata.append((prose_name, names.LAYER_TEMPLATE, _STABILITY_BY_RANK[prose_rank], prose_source))
    return texts, metadata


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
        collides = any(value.collides for value in values.values()) or any(
            SENTINEL in piece for piece in self._pieces if not isinstance(piece, Value))
        # Some text holding SENTINEL itself would be cut as ours: then the text
        # comes from a split on a one-off sentinel that no piece holds, and the
        # map is withheld, as for a template (README "Instrumenting an application").
        sentinel = one_off_sentinel(
            [piece.text if isinstance(piece, Value) else piece for piece in self._pieces]) if collides else SENTINEL
        rendered = "".join(wrap(str(position), piece.text, sentinel) if isinstance(piece, Value) else piece
                           for position, piece in enumerate(self._pieces))
        if collides:
            text = strip_sentinels(rendered, {key: value.text for key, value in values.items()}, sentinel)
            assert text is not None  # no piece holds the sentinel, so the split cannot fail
            return unmapped(text, names.UNMAPPED_SENTINEL_COLLISION, template=self._template,
                            values=tuple(values.values()))
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
# memory to a few MiB even for 16 KiB prompts (filed and pending prompts
# together at most twice that: 8 MiB).
REGISTRY_CAPACITY = 256

# Keyed by the text itself: equivalent to keying by its sha256 (the text is
# held by the prompt anyway) but costs a string hash instead of a digest.
# Even that hash (~0.4 µs for 2 KB) is kept off the render path: a render only
# appends to _pending (deque.append is atomic, no lock); the next lookup files
# the pending prompts into _registry, oldest first, so the newest prompt with a
# given text wins as before. Both hold at most REGISTRY_CAPACITY prompts.
_registry: OrderedDict[str, SegmentedPrompt] = OrderedDict()
_pending: deque[SegmentedPrompt] = deque(maxlen=REGISTRY_CAPACITY)
_registry_lock = threading.Lock()


def remember(prompt: SegmentedPrompt) -> None:
    _pending.append(prompt)


def _file_pending() -> None:
    """Move rendered prompts into the registry (caller holds ``_registry_lock``)."""
    while _pending:
        prompt = _pending.popleft()  # only lock holders pop, so this cannot find it empty
        _registry[prompt.text] = prompt
        _registry.move_to_end(prompt.text)
        if len(_registry) > REGISTRY_CAPACITY:
            _registry.popitem(last=False)


def lookup_rendered(text: str) -> SegmentedPrompt | None:
    """The prompt most recently built through promptprism with exactly ``text``, if still remembered."""
    with _registry_lock:
        _file_pending()
        found = _registry.get(text)
        if found is not None:
            _registry.move_to_end(text)
    return found
