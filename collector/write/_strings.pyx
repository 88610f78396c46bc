# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""String columns from Python values in one C pass: ``_columns.strings``, compiled, and
``otel_traces``' event columns (``rows.event_columns_python``), compiled.

``otel_traces``' event attribute maps are ~200k keys and ~200k values per
512 × 40 export; making a Python ``str`` of every ``int`` and handing pyarrow
a list of them cost ~27 ms of a worker's conversion. This writes each
value's UTF-8 straight into an Arrow string array's buffers: a ``str`` as it
is, an ``int`` (not ``bool``) in decimal, anything else through
``stringify``, which is exactly what ``_columns.strings`` does. A value it
cannot take (text with a lone surrogate, a column past 2 GiB) makes it
return None, and the caller runs ``strings``, which stays the definition
(tests/collector/write/test_columns.py compares both on generated values).
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Resize
from cpython.dict cimport PyDict_Next
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef extern from "_slotted.h":
    ctypedef struct promptprism_slotted:
        pass
    int promptprism_slotted_init(promptprism_slotted* layout, object type, object descriptors)
    PyObject* promptprism_slot(const promptprism_slotted* layout, object instance, Py_ssize_t i)

import pyarrow as pa

from .._slotted import slot_descriptors
from ..otlp.model import SpanEvent
from ..record import Block

# Events' and blocks' fields read at their slots (_slotted.h) when the classes are plain enough.
cdef promptprism_slotted EVENT_LAYOUT, BLOCK_LAYOUT
_event_descriptors = slot_descriptors(SpanEvent, ("time_ns", "name", "attributes"))
_block_descriptors = slot_descriptors(Block, ("index", "name", "layer", "stability", "source", "start", "end",
                                              "size", "sha256", "content", "redacted"))
FIELDS_READ_AT_SLOTS = (_event_descriptors is not None and _block_descriptors is not None
                        and promptprism_slotted_init(&EVENT_LAYOUT, SpanEvent, _event_descriptors) == 0
                        and promptprism_slotted_init(&BLOCK_LAYOUT, Block, _block_descriptors) == 0)
cdef bint at_slots = FIELDS_READ_AT_SLOTS
cdef enum:  # positions in EVENT_LAYOUT
    EVENT_TIME, EVENT_NAME, EVENT_ATTRIBUTES
cdef enum:  # positions in BLOCK_LAYOUT
    BLOCK_INDEX, BLOCK_NAME, BLOCK_LAYER, BLOCK_STABILITY, BLOCK_SOURCE, BLOCK_START, BLOCK_END, BLOCK_SIZE
    BLOCK_SHA256, BLOCK_CONTENT, BLOCK_REDACTED


cdef inline object field(object instance, object cls, const promptprism_slotted* layout, Py_ssize_t i, str name):
    """``getattr(instance, name)``: at its slot when ``instance`` is exactly ``cls`` and it is set there."""
    cdef PyObject* found
    if at_slots and type(instance) is cls:
        found = promptprism_slot(layout, instance, i)
        if found is not NULL:
            return <object>found
    return getattr(instance, name)


cdef int64_t MAX_OFFSET = 2**31 - 1  # Arrow's `string` layout: 32-bit offsets
cdef object STRING = pa.string()
cdef object from_buffers = pa.Array.from_buffers
cdef object py_buffer = pa.py_buffer


class _Fallback(Exception):
    pass


cdef class _Growing:
    """A bytearray grown by doubling, written with memcpy."""
    cdef bytearray data
    cdef Py_ssize_t used

    def __cinit__(self, Py_ssize_t capacity):
        self.data = bytearray(max(capacity, 16))
        self.used = 0

    cdef inline char* reserve(self, Py_ssize_t more) except NULL:
        cdef Py_ssize_t capacity = len(self.data)
        if self.used + more > capacity:
            while self.used + more > capacity:
                capacity *= 2
            PyByteArray_Resize(self.data, capacity)
        return PyByteArray_AS_STRING(self.data) + self.used


cdef inline Py_ssize_t decimal(char* out, object value) except -1:
    """``str(value)`` of an int into ``out`` (20 bytes); beyond 64 bits → the Python path."""
    cdef int64_t number
    cdef uint64_t magnitude
    cdef char digits[24]
    cdef int count = 0, n
    try:
        number = value
    except OverflowError:
        raise _Fallback()
    if number < 0:
        magnitude = <uint64_t>(-(number + 1)) + 1
    else:
        magnitude = <uint64_t>number
    while True:
        digits[count] = <char>(48 + magnitude % 10)
        count += 1
        magnitude //= 10
        if magnitude == 0:
            break
    n = 0
    if number < 0:
        out[0] = b'-'
        n = 1
    while count:
        count -= 1
        out[n] = digits[count]
        n += 1
    return n


def string_array(list values, stringify):
    """``_columns.strings(values, stringify)`` as a ``pa.StringArray``, or None: use ``strings``."""
    try:
        return _build(values, stringify)
    except (_Fallback, UnicodeEncodeError):
        return None


# --- otel_traces' event columns ----------------------------------------------------------------

cdef object OFFSETS = pa.int32()
cdef object TIMESTAMP = pa.timestamp("ns", tz="UTC")
cdef object map_from_arrays = pa.MapArray.from_arrays
DROP_BLOCK_MAP = 1  # rows.DROP_BLOCK_MAP: the span's block events leave out what the document holds
DROP_TOOL_TEXT = 2  # rows.DROP_TOOL_TEXT: its tool events too, when contents holds the text


cdef class _Column:
    """A string column being written: UTF-8 bytes and int32 offsets, both grown by doubling."""
    cdef _Growing data
    cdef bytearray offsets
    cdef Py_ssize_t count

    def __cinit__(self, Py_ssize_t rows, Py_ssize_t row_bytes):
        self.data = _Growing(rows * row_bytes)
        self.offsets = bytearray((max(rows, 16) + 1) * 4)
        (<int32_t*>PyByteArray_AS_STRING(self.offsets))[0] = 0
        self.count = 0

    cdef inline int append(self, object value, object stringify) except -1:
        """One value, as ``_columns.strings`` writes it: str as is, int in decimal, else ``stringify``."""
        cdef Py_ssize_t length
        cdef const char* utf8
        cdef char* out
        cdef object kind = type(value)
        if kind is int:
            out = self.data.reserve(24)
            self.data.used += decimal(out, value)
        else:
            if kind is not str:
                value = stringify(value)
                if type(value) is not str:
                    raise _Fallback()
            utf8 = PyUnicode_AsUTF8AndSize(value, &length)
            out = self.data.reserve(length)
            memcpy(out, utf8, length)
            self.data.used += length
        if self.data.used > MAX_OFFSET:
            raise _Fallback()
        if (self.count + 2) * 4 > len(self.offsets):
            PyByteArray_Resize(self.offsets, len(self.offsets) * 2)
        self.count += 1
        (<int32_t*>PyByteArray_AS_STRING(self.offsets))[self.count] = <int32_t>self.data.used
        return 0

    cdef int repeat(self, Py_ssize_t first, Py_ssize_t last) except -1:
        """Values ``first`` to ``last - 1`` of this column, appended again."""
        cdef Py_ssize_t begin = (<int32_t*>PyByteArray_AS_STRING(self.offsets))[first]
        cdef Py_ssize_t length = (<int32_t*>PyByteArray_AS_STRING(self.offsets))[last] - begin
        cdef Py_ssize_t used = self.data.used, n
        cdef char* out = self.data.reserve(length)
        cdef int32_t* offsets
        memcpy(out, PyByteArray_AS_STRING(self.data.data) + begin, length)
        self.data.used += length
        if self.data.used > MAX_OFFSET:
            raise _Fallback()
        while (self.count + last - first + 2) * 4 > len(self.offsets):
            PyByteArray_Resize(self.offsets, len(self.offsets) * 2)
        offsets = <int32_t*>PyByteArray_AS_STRING(self.offsets)
        for n in range(first, last):
            self.count += 1
            offsets[self.count] = <int32_t>(used + offsets[n + 1] - begin)
        return 0

    cdef object array(self):
        PyByteArray_Resize(self.offsets, (self.count + 1) * 4)
        PyByteArray_Resize(self.data.data, self.data.used)
        return from_buffers(STRING, self.count, [None, py_buffer(self.offsets), py_buffer(self.data.data)])


cdef object _build(list values, object stringify):
    cdef _Column column = _Column(len(values), 16)
    cdef object value
    for value in values:
        column.append(value, stringify)
    return column.array()


cdef class _Integers:
    """A fixed-width integer column (int32 offsets or int64 times), grown by doubling."""
    cdef bytearray data
    cdef Py_ssize_t count

    def __cinit__(self, Py_ssize_t rows):
        self.data = bytearray(max(rows, 16) * 8)
        self.count = 0

    cdef inline void reserve(self):
        if (self.count + 1) * 8 > len(self.data):
            PyByteArray_Resize(self.data, len(self.data) * 2)

    cdef inline int append32(self, int64_t value) except -1:
        if value > MAX_OFFSET:
            raise _Fallback()
        self.reserve()
        (<int32_t*>PyByteArray_AS_STRING(self.data))[self.count] = <int32_t>value
        self.count += 1
        return 0

    cdef inline int append64(self, object value) except -1:
        cdef int64_t number
        if type(value) is not int:
            raise _Fallback()
        number = value  # OverflowError past 64 bits: handed back (the definition's pa.array raises there)
        self.reserve()
        (<int64_t*>PyByteArray_AS_STRING(self.data))[self.count] = number
        self.count += 1
        return 0

    cdef object array(self, object kind, int width):
        PyByteArray_Resize(self.data, self.count * width)
        return from_buffers(kind, self.count, [None, py_buffer(self.data)])

    cdef object narrowed(self, object kind):
        """Values written as 8 bytes each (``put_unsigned``), as a uint32 column."""
        cdef bytearray narrow = bytearray(max(self.count, 1) * 4)
        cdef uint32_t* out = <uint32_t*>PyByteArray_AS_STRING(narrow)
        cdef int64_t* values = <int64_t*>PyByteArray_AS_STRING(self.data)
        cdef Py_ssize_t n
        for n in range(self.count):
            out[n] = <uint32_t>values[n]
        return from_buffers(kind, self.count, [None, py_buffer(narrow)])


def event_columns(list spans, list drops, str event_prompt_block, frozenset block_held, str block_stability,
                  frozenset stabilities, str event_tool_definition, str tool_content, str tool_sha256, stringify):
    """``rows.event_columns_python``'s answer in one C pass, or None: use that definition.

    ``drops[n]``: what span n's events leave out (``DROP_BLOCK_MAP``: a block event's keys in
    ``block_held``, and ``block_stability`` when its value is a str in ``stabilities``;
    ``DROP_TOOL_TEXT``). Returns the spans' offsets into the events, and the events' times,
    names and attribute maps (values through ``stringify`` as ``_columns.MapColumn``)."""
    try:
        return _event_columns(spans, drops, event_prompt_block, block_held, block_stability, stabilities,
                              event_tool_definition, tool_content, tool_sha256, stringify)
    except (_Fallback, UnicodeEncodeError, OverflowError):
        return None


cdef object _event_columns(list spans, list drops, str event_prompt_block, frozenset block_held,
                           str block_stability, frozenset stabilities, str event_tool_definition,
                           str tool_content, str tool_sha256, object stringify):
    cdef Py_ssize_t span_count = len(spans), n, position
    cdef int drop
    cdef _Integers span_offsets = _Integers(span_count + 1)
    cdef _Integers map_offsets = _Integers(span_count * 8)
    cdef _Integers times = _Integers(span_count * 8)
    cdef _Column names = _Column(span_count * 8, 24)
    cdef _Column keys = _Column(span_count * 64, 24)
    cdef _Column values = _Column(span_count * 64, 32)
    cdef int64_t events = 0, entries = 0, first, last
    cdef dict seen = {}  # id(an event's attributes) → (them, drop, the event's name, first, last entry)
    cdef object span, event, event_list, attributes_object, name, key, value, left_out, sha256, written
    cdef frozenset held
    cdef dict attributes
    cdef PyObject* key_pointer
    cdef PyObject* value_pointer
    if len(drops) != span_count:
        raise _Fallback()
    span_offsets.append32(0)
    map_offsets.append32(0)
    for n in range(span_count):
        span = spans[n]
        drop = drops[n]
        event_list = span.events
        if type(event_list) is not list:
            raise _Fallback()
        for event in <list>event_list:
            name = field(event, SpanEvent, &EVENT_LAYOUT, EVENT_NAME, "name")
            attributes_object = field(event, SpanEvent, &EVENT_LAYOUT, EVENT_ATTRIBUTES, "attributes")
            if type(name) is not str or type(attributes_object) is not dict:
                raise _Fallback()
            times.append64(field(event, SpanEvent, &EVENT_LAYOUT, EVENT_TIME, "time_ns"))
            names.append(name, str)
            attributes = <dict>attributes_object
            # The walk hands out one dict for event attributes that recur byte for byte (a static
            # block in each request): their entries, once written, are copied, not written again.
            written = seen.get(id(attributes))
            if (written is not None and (<tuple>written)[0] is attributes and (<tuple>written)[1] == drop
                    and (<tuple>written)[2] == name):
                first, last = (<tuple>written)[3], (<tuple>written)[4]
                keys.repeat(first, last)
                values.repeat(first, last)
                entries += last - first
                map_offsets.append32(entries)
                events += 1
                continue
            first = entries
            left_out = held = None
            if drop & DROP_BLOCK_MAP and name == event_prompt_block:
                held = block_held
            elif drop & DROP_TOOL_TEXT and tool_content in attributes and name == event_tool_definition:
                sha256 = attributes.get(tool_sha256)
                if isinstance(attributes[tool_content], str) and isinstance(sha256, str) and sha256 != "":
                    left_out = tool_content
            position = 0
            while PyDict_Next(attributes, &position, &key_pointer, &value_pointer):
                key = <object>key_pointer
                value = <object>value_pointer
                if held is not None and (key in held or (key == block_stability and type(value) is str
                                                         and value in stabilities)):
                    continue  # the request's document holds it (rows.BLOCK_HELD)
                if left_out is not None and key == left_out:
                    left_out = None  # that entry only, as MapColumn.add_without
                    continue
                if type(key) is not str:
                    raise _Fallback()
                keys.append(key, str)
                values.append(value, stringify)
                entries += 1
            seen[id(attributes)] = (attributes, drop, name, first, entries)
            map_offsets.append32(entries)
            events += 1
        span_offsets.append32(events)
    return (span_offsets.array(OFFSETS, 4), times.array(TIMESTAMP, 8), names.array(),
            map_from_arrays(map_offsets.array(OFFSETS, 4), keys.array(), values.array()))


# --- blocks' own columns -----------------------------------------------------------------------

cdef object UINT32 = pa.uint32()
cdef object UINT64 = pa.uint64()
cdef object BOOL = pa.bool_()
cdef object bool_array = pa.array


cdef inline int put_unsigned(_Integers column, object value, uint64_t high) except -1:
    """An unsigned integer in range, stored in 8 bytes (narrowed after); anything else is handed back."""
    cdef int64_t number
    if type(value) is not int:
        raise _Fallback()
    number = value  # OverflowError past 64 bits: handed back (integer_array clamps it there)
    if number < 0 or <uint64_t>number > high:
        raise _Fallback()
    column.reserve()
    (<int64_t*>PyByteArray_AS_STRING(column.data))[column.count] = number
    column.count += 1
    return 0


cdef inline int put_text(_Column column, object value) except -1:
    """A ``str`` (anything else is handed back: pa.array would store None as null)."""
    if type(value) is not str:
        raise _Fallback()
    return column.append(value, str)


def block_columns(list blocks, block_type, content_sha256_column):
    """``rows.block_columns_python(blocks)`` in one C pass, or None: use that definition."""
    try:
        return _block_columns(blocks, block_type, content_sha256_column)
    except (_Fallback, UnicodeEncodeError, OverflowError):
        return None


cdef object _block_columns(list blocks, object block_type, object content_sha256_column):
    cdef Py_ssize_t count = len(blocks), n
    cdef _Integers index = _Integers(count), start = _Integers(count), end = _Integers(count)
    cdef _Integers size = _Integers(count)
    cdef _Column name = _Column(count, 16), layer = _Column(count, 12), stability = _Column(count, 8)
    cdef _Column source = _Column(count, 24), sha256 = _Column(count, 64), content_sha256 = _Column(count, 0)
    cdef list redacted = []
    cdef object block, flag, value
    for n in range(count):
        block = blocks[n]
        put_unsigned(index, field(block, Block, &BLOCK_LAYOUT, BLOCK_INDEX, "index"), 0xFFFFFFFF)
        put_unsigned(start, field(block, Block, &BLOCK_LAYOUT, BLOCK_START, "start"),
                     0xFFFFFFFFFFFFFFFF)
        put_unsigned(end, field(block, Block, &BLOCK_LAYOUT, BLOCK_END, "end"), 0xFFFFFFFFFFFFFFFF)
        put_unsigned(size, field(block, Block, &BLOCK_LAYOUT, BLOCK_SIZE, "size"), 0xFFFFFFFFFFFFFFFF)
        put_text(name, field(block, Block, &BLOCK_LAYOUT, BLOCK_NAME, "name"))
        put_text(layer, field(block, Block, &BLOCK_LAYOUT, BLOCK_LAYER, "layer"))
        put_text(stability, field(block, Block, &BLOCK_LAYOUT, BLOCK_STABILITY, "stability"))
        put_text(source, field(block, Block, &BLOCK_LAYOUT, BLOCK_SOURCE, "source"))
        put_text(sha256, field(block, Block, &BLOCK_LAYOUT, BLOCK_SHA256, "sha256"))
        flag = field(block, Block, &BLOCK_LAYOUT, BLOCK_REDACTED, "redacted")
        if type(flag) is not bool:
            raise _Fallback()
        redacted.append(flag)
        # '' for a block stored under its own sha256, i.e. every one not redacted (rows.content_sha256_column)
        if flag or type(block) is not block_type:
            try:
                value = content_sha256_column(block)
            except Exception:  # the definition fails here (or earlier): let it
                raise _Fallback()
            put_text(content_sha256, value)
        else:
            content_sha256.append("", str)
    return {"index": index.narrowed(UINT32), "name": name.array(), "layer": layer.array(),
            "stability": stability.array(), "source": source.array(), "start": start.array(UINT64, 8),
            "end": end.array(UINT64, 8), "size": size.array(UINT64, 8), "sha256": sha256.array(),
            "content_sha256": content_sha256.array(), "redacted": bool_array(redacted, BOOL)}
