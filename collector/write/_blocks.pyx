# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Reassembly's per-block checks, compiled: the same answer as ``reassemble.validate_blocks``.

A 512-span export carries ~20k block events; reading and checking each one
in Python was a third of the conversion (README, "Ingest throughput"). This
is the same algorithm, step for step, over the same objects: the block
event attributes the walk decoded, the same ``Block`` objects out, the same
first failing check and reason. Anything it does not take in C — an
integer beyond 64 bits, attributes that are not a plain ``dict`` — makes it
return None and the caller runs the pure-Python definition, which stays the
one reference (tests/collector/write/test_blocks_compiled.py checks that both
give equal results on generated block maps).
"""

import hashlib

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    bint PyUnicode_IS_COMPACT_ASCII(object text)
    void* PyUnicode_DATA(object text)
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    object PyMemoryView_FromMemory(char* memory, Py_ssize_t size, int flags)
    int PyBUF_READ
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t

cdef extern from "_slotted.h":
    ctypedef struct promptprism_slotted:
        pass
    int promptprism_slotted_init(promptprism_slotted* layout, object type, object descriptors)
    object promptprism_slotted_new(const promptprism_slotted* layout, PyObject** values)
    PyObject* promptprism_slot(const promptprism_slotted* layout, object instance, Py_ssize_t i)

from ...wire import names as _names
from .._slotted import slot_descriptors
from ..otlp.model import SpanEvent
from ..record import Block

# Blocks are made, and events read, at their slots (_slotted.h) when the classes are plain enough
# for that to be what the class would do; else through the class, as the definition does.
cdef promptprism_slotted BLOCK_LAYOUT, EVENT_LAYOUT
_BLOCK_FIELDS = ("index", "name", "layer", "stability", "source", "start", "end", "size", "sha256", "content",
                 "redacted")
_block_descriptors = slot_descriptors(Block, _BLOCK_FIELDS)
BLOCKS_MADE_AT_SLOTS = (_block_descriptors is not None
                        and promptprism_slotted_init(&BLOCK_LAYOUT, Block, _block_descriptors) == 0)
_event_descriptors = slot_descriptors(SpanEvent, ("time_ns", "name", "attributes"))
EVENTS_READ_AT_SLOTS = (_event_descriptors is not None
                        and promptprism_slotted_init(&EVENT_LAYOUT, SpanEvent, _event_descriptors) == 0)
cdef bint blocks_at_slots = BLOCKS_MADE_AT_SLOTS, events_at_slots = EVENTS_READ_AT_SLOTS
cdef Py_ssize_t EVENT_ATTRIBUTES = 2
cdef Py_ssize_t BLOCK_SIZE = 7, BLOCK_SHA256 = 8, BLOCK_CONTENT = 9, BLOCK_REDACTED = 10

cdef str PROMPT_BYTES = _names.PROMPT_BYTES
cdef str PROMPT_BLOCK_COUNT = _names.PROMPT_BLOCK_COUNT
cdef str PROMPT_SHA256 = _names.PROMPT_SHA256
cdef str INDEX = _names.BLOCK_INDEX
cdef str START = _names.BLOCK_START
cdef str END = _names.BLOCK_END
cdef str SIZE = _names.BLOCK_SIZE
cdef str NAME = _names.BLOCK_NAME
cdef str LAYER = _names.BLOCK_LAYER
cdef str SOURCE = _names.BLOCK_SOURCE
cdef str SHA256 = _names.BLOCK_SHA256
cdef str STABILITY = _names.BLOCK_STABILITY
cdef str CONTENT = _names.BLOCK_CONTENT
cdef str REDACTED = _names.BLOCK_REDACTED
cdef frozenset STABILITIES = frozenset(_names.STABILITIES)
cdef str STABILITY_UNKNOWN = _names.STABILITY_UNKNOWN
cdef str BAD_ATTRIBUTES = _names.UNMAPPED_BAD_ATTRIBUTES
cdef str INCOMPLETE = _names.UNMAPPED_INCOMPLETE
cdef str BAD_RANGE = _names.UNMAPPED_BAD_RANGE
cdef str EMPTY_BLOCK = _names.UNMAPPED_EMPTY_BLOCK
cdef str NOT_TILING = _names.UNMAPPED_NOT_TILING
cdef str UTF8_BOUNDARY = _names.UNMAPPED_UTF8_BOUNDARY
cdef str HASH_MISMATCH = _names.UNMAPPED_HASH_MISMATCH
cdef str REPLACEMENT_CHARACTER = "\ufffd"
cdef Py_ssize_t SHA256_HEX_LENGTH = 64

cdef object sha256 = hashlib.sha256

# Block text already hashed in this export: id(str) → (the str, its UTF-8 size, the digest it
# matched). The walk hands out one str for a text that recurs in an export (a static block in
# every request: ``_walk.Texts``), so its digest is checked once, not in every request. The str
# is held here, so its id cannot be another's while the entry lives; ``forget_verified`` (when
# each export's reassembly is done) lets them go. A str is immutable: the same str with the same
# size and digest would hash the same again. Conversions in several threads of one process
# (``ingest_workers = 0``) share it: one clearing it only costs the others a hash again.
cdef dict verified = {}
cdef Py_ssize_t hashed = 0  # block texts hashed in this process (for tests: ``hashed_count``)
# The whole prompt's digest, prefix by prefix: a trie whose edges are block texts (by id, the str
# held as ``verified`` holds it) and whose nodes hold the sha256 state after that sequence of
# texts. Requests of an export usually share their first blocks (the static system prompt, the
# session's): their whole-prompt digest hashes only what follows the longest prefix seen before
# in the export, where hashing every prompt whole was ~7 % of a conversion (10 MB per 512-span
# export of benchmarks/ingest.py). Only prefixes of texts that recur in the export are kept (a
# text checked before: ``verified``), so a prompt of texts of its own costs no copies (keeping
# every prefix doubled the checks' time on an export of unique texts). A node's state is never
# updated in place (a copy is extended), so a prefix's state stays what its texts hashed to. Let
# go of with ``verified``.
cdef dict prefixes = {}  # id(text) → (text, state after it, its children: the same kind of dict)
# Block events read in this export: id(their attributes' dict) → (the dict, the Block made of it,
# its index, start, end and size). The walk hands out one dict for an event's attributes that
# recur byte for byte (a static block at the same place in each request: ``_walk``'s
# ``Context.event_attributes``); nothing changes a dict or a Block once made, so the Block is the
# same for every request that has that event. The dict is held, so its id is not another's while
# the entry lives. Let go of with ``verified``.
cdef dict parsed = {}
cdef Py_ssize_t whole_bytes = 0  # bytes the whole-prompt digests hashed (for tests: ``whole_hashed_bytes``)


def forget_verified():
    """Let go of the block text hashed so far (``verified``), of the prompts' prefixes and of the block
    events read; called once per export."""
    verified.clear()
    prefixes.clear()
    parsed.clear()


def verified_count():
    """How many texts ``verified`` holds (for tests)."""
    return len(verified)


def parsed_count():
    """How many block events ``parsed`` holds (for tests)."""
    return len(parsed)


def hashed_count():
    """How many block texts the checks have hashed in this process (for tests)."""
    return hashed


def whole_hashed_bytes():
    """How many bytes the whole-prompt digests have hashed in this process (for tests)."""
    return whole_bytes


def kept_prefix_count():
    """How many prefix states the trie keeps now (for tests)."""
    cdef Py_ssize_t count = 0
    pending = [prefixes]
    while pending:
        for entry in (<dict>pending.pop()).values():
            count += 1
            pending.append((<tuple>entry)[2])
    return count


class _Fallback(Exception):
    """A value this pass leaves to the pure-Python definition."""


cdef inline int64_t small(object value) except? -1:
    # An int (type checked by the caller) as a C integer; beyond 64 bits → the Python path.
    try:
        return <int64_t>value
    except OverflowError:
        raise _Fallback()


cdef inline bint lowercase_hex(str text):
    # `len(text) == 64 and not text.strip("0123456789abcdef")`, as reassemble checks it. Only an
    # ASCII string can be that; its characters are read as the bytes CPython keeps them in.
    cdef Py_ssize_t i
    cdef const unsigned char* data
    cdef unsigned char char
    if PyUnicode_GET_LENGTH(text) != SHA256_HEX_LENGTH or not PyUnicode_IS_COMPACT_ASCII(text):
        return False
    data = <const unsigned char*>PyUnicode_DATA(text)
    for i in range(SHA256_HEX_LENGTH):
        char = data[i]
        if not ((c'0' <= char <= c'9') or (c'a' <= char <= c'f')):
            return False
    return True


def validate_blocks(dict attributes, list events, object dropped_events):
    """``reassemble.validate_blocks``: ``(blocks, "")`` or ``([], reason)``; None → use the Python definition."""
    try:
        return _validate(attributes, events, dropped_events)
    except _Fallback:
        return None


cdef inline object event_attributes_of(object event):
    cdef PyObject* found
    if events_at_slots and type(event) is SpanEvent:
        found = promptprism_slot(&EVENT_LAYOUT, event, EVENT_ATTRIBUTES)
        if found is not NULL:
            return <object>found
    return event.attributes


cdef inline object make_block(object index, object name, object layer, object stability, object source,
                              object start, object end, object size, object digest, object content,
                              object redacted):
    cdef PyObject* values[11]
    if not blocks_at_slots:
        return Block(index, name, layer, stability, source, start, end, size, digest, content, redacted)
    values[0], values[1], values[2] = <PyObject*>index, <PyObject*>name, <PyObject*>layer
    values[3], values[4], values[5] = <PyObject*>stability, <PyObject*>source, <PyObject*>start
    values[6], values[7], values[8] = <PyObject*>end, <PyObject*>size, <PyObject*>digest
    values[9], values[10] = <PyObject*>content, <PyObject*>redacted
    return promptprism_slotted_new(&BLOCK_LAYOUT, values)


cdef object _validate(dict attributes, list events, object dropped_events):
    cdef object prompt_bytes_value = attributes.get(PROMPT_BYTES)
    cdef object declared = attributes.get(PROMPT_BLOCK_COUNT)
    if type(prompt_bytes_value) is not int or prompt_bytes_value < 0 or type(declared) is not int or declared < 0:
        return [], BAD_ATTRIBUTES
    if dropped_events > 0 or len(events) < declared:
        return [], INCOMPLETE
    if len(events) > declared:
        return [], BAD_ATTRIBUTES
    cdef int64_t prompt_bytes = small(prompt_bytes_value)
    cdef Py_ssize_t count = len(events)
    # Each block's index, start, end and size as C integers, for the checks after the sort.
    cdef int64_t* numbers = <int64_t*>PyMem_Malloc(max(count, 1) * 4 * sizeof(int64_t))
    if numbers is NULL:
        raise MemoryError()
    try:
        return _checked(attributes, events, count, prompt_bytes, numbers)
    finally:
        PyMem_Free(numbers)


cdef object _checked(dict attributes, list events, Py_ssize_t count, int64_t prompt_bytes, int64_t* numbers):
    cdef Py_ssize_t n, at
    cdef list blocks = []
    cdef list order = None
    cdef bint in_order = True
    cdef int64_t previous = 0, index_value
    cdef PyObject* found
    cdef dict event_attributes
    cdef object index, start, end, size, name, layer, source, digest, content, stability, redacted, known, block
    for n in range(count):
        event_attributes_object = event_attributes_of(events[n])
        if type(event_attributes_object) is not dict:
            raise _Fallback()
        event_attributes = <dict>event_attributes_object
        known = parsed.get(id(event_attributes))
        if known is not None and (<tuple>known)[0] is event_attributes:  # read before in this export
            block, index, start, end, size = (<tuple>known)[1:]
        else:
            # The keys every valid block event has; a missing one makes the event (and the map) invalid.
            found = PyDict_GetItem(event_attributes, INDEX)
            if found is NULL:
                return [], BAD_ATTRIBUTES
            index = <object>found
            found = PyDict_GetItem(event_attributes, START)
            if found is NULL:
                return [], BAD_ATTRIBUTES
            start = <object>found
            found = PyDict_GetItem(event_attributes, END)
            if found is NULL:
                return [], BAD_ATTRIBUTES
            end = <object>found
            found = PyDict_GetItem(event_attributes, SIZE)
            if found is NULL:
                return [], BAD_ATTRIBUTES
            size = <object>found
            found = PyDict_GetItem(event_attributes, NAME)
            if found is NULL:
                return [], BAD_ATTRIBUTES
            name = <object>found
            found = PyDict_GetItem(event_attributes, LAYER)
            if found is NULL:
                return [], BAD_ATTRIBUTES
            layer = <object>found
            found = PyDict_GetItem(event_attributes, SOURCE)
            if found is NULL:
                return [], BAD_ATTRIBUTES
            source = <object>found
            found = PyDict_GetItem(event_attributes, SHA256)
            if found is NULL:
                return [], BAD_ATTRIBUTES
            digest = <object>found
            if type(index) is not int or type(start) is not int or type(end) is not int or type(size) is not int:
                return [], BAD_ATTRIBUTES
            found = PyDict_GetItem(event_attributes, CONTENT)
            content = None if found is NULL else <object>found
            if not (type(name) is str and type(layer) is str and type(source) is str and type(digest) is str):
                return [], BAD_ATTRIBUTES
            if content is not None and type(content) is not str:
                return [], BAD_ATTRIBUTES
            if not lowercase_hex(<str>digest):
                digest = (<str>digest).lower()
                if not lowercase_hex(<str>digest):
                    return [], BAD_ATTRIBUTES
            found = PyDict_GetItem(event_attributes, STABILITY)
            stability = None if found is NULL else <object>found
            if not isinstance(stability, str) or stability not in STABILITIES:
                stability = STABILITY_UNKNOWN
            found = PyDict_GetItem(event_attributes, REDACTED)
            # The flag only means something beside content: without text there is nothing redacted to show.
            redacted = content is not None and found is not NULL and <object>found is True
            block = make_block(index, name, layer, stability, source, start, end, size, digest, content, redacted)
            parsed[id(event_attributes)] = (event_attributes, block, index, start, end, size)
        index_value = small(index)
        # Beyond 64 bits → the definition (which would find the range wrong or the map not tiling).
        numbers[4 * n], numbers[4 * n + 1], numbers[4 * n + 2] = index_value, small(start), small(end)
        numbers[4 * n + 3] = small(size)
        if n and index_value < previous:
            in_order = False
        previous = index_value
        blocks.append(block)
    if not in_order:  # a stable sort by index, as reassemble's (equal indexes keep their order and fail below)
        order = sorted(range(count), key=[numbers[4 * n] for n in range(count)].__getitem__)
        blocks = [blocks[at] for at in order]

    cdef int64_t position = 0, block_start, block_end
    for n in range(count):
        at = n if order is None else <Py_ssize_t>order[n]
        if numbers[4 * at] != n:
            return [], BAD_ATTRIBUTES
        block_start, block_end = numbers[4 * at + 1], numbers[4 * at + 2]
        if (block_start < 0 or block_end < block_start or block_end > prompt_bytes
                or numbers[4 * at + 3] != block_end - block_start):
            return [], BAD_RANGE
        if block_start == block_end:
            return [], EMPTY_BLOCK
        if block_start != position:
            return [], NOT_TILING
        position = block_end
    if position != prompt_bytes:
        return [], NOT_TILING
    reason = _check_content(blocks, attributes)
    return ([], reason) if reason else (blocks, "")


cdef inline object block_field(object block, Py_ssize_t field, str name):
    # A field of a block this module made: at its slot when made there, else by name.
    if blocks_at_slots:
        return <object>promptprism_slot(&BLOCK_LAYOUT, block, field)
    return getattr(block, name)


cdef str _check_content(list blocks, dict attributes):
    """Hash and UTF-8 checks of captured content; redacted content is skipped (reassemble._check_content)."""
    global hashed, whole_bytes
    cdef object whole = None  # the digest state of the prompt so far (None: nothing yet)
    cdef dict node = prefixes  # where that prefix is in the trie
    # While every text so far recurs in the export, the prefix is looked up and kept in the trie
    # (``whole`` may then be a kept state: extended only as a copy); from the first text seen for
    # the first time, the prompt is hashed on in place, its own: a prefix with a text no other
    # request has is nobody else's prefix.
    cdef bint in_trie = True, recurring
    cdef bint complete = True
    cdef object block, content, encoded, size, digest, known, entry
    cdef const char* utf8
    cdef Py_ssize_t length
    for block in blocks:
        content = block_field(block, BLOCK_CONTENT, "content")
        if content is None or block_field(block, BLOCK_REDACTED, "redacted"):
            complete = False  # the whole prompt's digest cannot be checked: no need to go on with it
            continue
        # The text's UTF-8 form as CPython keeps it beside the str (made once, then reused by
        # pyarrow when the rows lay the text out), hashed where it lies: no bytes object.
        try:
            utf8 = PyUnicode_AsUTF8AndSize(content, &length)
        except UnicodeEncodeError:  # lone surrogate: half a character
            return UTF8_BOUNDARY
        encoded = PyMemoryView_FromMemory(<char*>utf8, length, PyBUF_READ)
        size, digest = block_field(block, BLOCK_SIZE, "size"), block_field(block, BLOCK_SHA256, "sha256")
        known = verified.get(id(content))
        recurring = known is not None and (<tuple>known)[0] is content  # checked before in this export
        if not recurring or (<tuple>known)[1] != size or (<tuple>known)[2] != digest:
            if length == size:
                hashed += 1
            if length != size or sha256(encoded).hexdigest() != digest:
                if (<str>content).startswith(REPLACEMENT_CHARACTER) or (<str>content).endswith(REPLACEMENT_CHARACTER):
                    return UTF8_BOUNDARY
                return HASH_MISMATCH
            verified[id(content)] = (content, size, digest)
        if not complete:
            continue
        if not in_trie:
            whole.update(encoded)
            whole_bytes += length
            continue
        entry = node.get(id(content))
        if entry is not None and (<tuple>entry)[0] is content:  # this prefix was hashed before
            whole, node = (<tuple>entry)[1], (<tuple>entry)[2]
            continue
        whole = sha256() if whole is None else whole.copy()
        whole.update(encoded)
        whole_bytes += length
        if recurring:
            entry = (content, whole, {})
            node[id(content)] = entry
            node = (<tuple>entry)[2]
        else:
            in_trie = False
    prompt_sha256 = attributes.get(PROMPT_SHA256)
    if complete and blocks and isinstance(prompt_sha256, str) and prompt_sha256:
        if whole.hexdigest() != prompt_sha256.lower():
            return HASH_MISMATCH
    return ""
