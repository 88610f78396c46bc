# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""A compiled walk over OTLP trace protobuf bytes → the same ``DecodedSpan``s as ``traces.decode_request``.

The receive path's hottest loop is reading every attribute of every block
event (README "The collector", throughput: 811k ``WhichOneof`` calls per 512-span export).
This walks the wire format once, in C, straight into the Python objects the
reference path builds from upb messages — same dicts, same types, the
resource's attribute dict shared by its spans — so everything downstream
(reassemble, rows) is unchanged and the rows are identical.

It handles the shape SDKs send and nothing else: any field it does not know,
a wire type it does not expect, a singular message field given twice (proto
merge semantics), invalid UTF-8, an invalid id, a value nested to the bound —
anything unusual — and ``decode_traces`` returns None, so the caller runs the
reference path (``traces.decode_request`` over upb), which decides what is
rejected and why. That keeps one definition of the edge cases; the property
test (tests/collector/otlp/test_walk.py) checks that both give equal results.
"""

from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memset

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL

cdef extern from "Python.h":
    # A dict made with room for ``minused`` items: an event's attributes, presized to the
    # previous event's count, are not resized while filled. CPython's own (not the limited
    # API); Cython's generated code makes its dict literals with it too.
    dict _PyDict_NewPresized(Py_ssize_t minused)

cdef extern from "_slotted.h":
    ctypedef struct promptprism_slotted:
        pass
    int promptprism_slotted_init(promptprism_slotted* layout, object type, object descriptors)
    object promptprism_slotted_new(const promptprism_slotted* layout, PyObject** values)

from .model import SPAN_KINDS as _SPAN_KINDS, STATUS_CODES as _STATUS_CODES, DecodedSpan, SpanEvent, SpanLink

from ._parse import MAX_TIME_NS as _MAX_TIME_NS, MAX_VALUE_DEPTH as _MAX_VALUE_DEPTH, SERVICE_NAME as _SERVICE_NAME
from ._parse import SPAN_ID_BYTES as _SPAN_ID_BYTES, TRACE_ID_BYTES as _TRACE_ID_BYTES
from .._slotted import slot_descriptors

# ~20k events per 512 × 40 export: each made at its slots (_slotted.h) rather than through the
# dataclass's __init__, when SpanEvent is plain enough for that to be the same object.
cdef promptprism_slotted EVENT_LAYOUT
_event_descriptors = slot_descriptors(SpanEvent, ("time_ns", "name", "attributes"))
EVENTS_MADE_AT_SLOTS = (_event_descriptors is not None
                        and promptprism_slotted_init(&EVENT_LAYOUT, SpanEvent, _event_descriptors) == 0)
cdef bint events_at_slots = EVENTS_MADE_AT_SLOTS

# The bounds of _parse, as C values (one definition: read from there at import).
cdef int MAX_VALUE_DEPTH = _MAX_VALUE_DEPTH
cdef Py_ssize_t TRACE_ID_BYTES = _TRACE_ID_BYTES
cdef Py_ssize_t SPAN_ID_BYTES = _SPAN_ID_BYTES
cdef uint64_t MAX_TIME_NS = _MAX_TIME_NS

cdef tuple SPAN_KINDS = _SPAN_KINDS
cdef tuple STATUS_CODES = _STATUS_CODES
cdef str SERVICE_NAME = _SERVICE_NAME

cdef enum:  # protobuf wire types
    VARINT = 0
    FIXED64 = 1
    LENGTH_DELIMITED = 2
    FIXED32 = 5


class Unusual(Exception):
    """Something this walk leaves to the reference path."""


cdef struct Field:
    uint32_t number
    int wire_type
    uint64_t value  # varint and fixed values
    Py_ssize_t start  # length-delimited: the value's extent
    Py_ssize_t stop


cdef int read_varint(const unsigned char* data, Py_ssize_t* position, Py_ssize_t end, uint64_t* out) except -1:
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char byte
    while True:
        if position[0] >= end or shift > 63:
            raise Unusual()
        byte = data[position[0]]
        position[0] += 1
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            out[0] = result
            return 0
        shift += 7


cdef int next_field(const unsigned char* data, Py_ssize_t* position, Py_ssize_t end, Field* field) except -1:
    cdef uint64_t tag, length
    read_varint(data, position, end, &tag)
    if tag >> 32 or (tag >> 3) == 0:
        raise Unusual()
    field.number = <uint32_t>(tag >> 3)
    field.wire_type = <int>(tag & 7)
    if field.wire_type == VARINT:
        read_varint(data, position, end, &field.value)
    elif field.wire_type == LENGTH_DELIMITED:
        read_varint(data, position, end, &length)
        if length > <uint64_t>(end - position[0]):
            raise Unusual()
        field.start = position[0]
        field.stop = position[0] + <Py_ssize_t>length
        position[0] = field.stop
    elif field.wire_type == FIXED64:
        if end - position[0] < 8:
            raise Unusual()
        field.value = 0
        memcpy(&field.value, data + position[0], 8)  # little-endian on every platform we build for
        position[0] += 8
    elif field.wire_type == FIXED32:
        if end - position[0] < 4:
            raise Unusual()
        field.value = 0
        memcpy(&field.value, data + position[0], 4)
        position[0] += 4
    else:
        raise Unusual()
    return 0


cdef inline int expect(Field* field, int wire_type) except -1:
    if field.wire_type != wire_type:
        raise Unusual()
    return 0


cdef inline str text(const unsigned char* data, Field* field):
    # Strict UTF-8, as upb checks proto3 strings; a failure raises UnicodeDecodeError (→ reference path).
    return PyUnicode_DecodeUTF8(<const char*>(data + field.start), field.stop - field.start, NULL)


cdef extern from *:
    """
    /* A long non-ASCII str decoded from UTF-8 keeps those bytes as its UTF-8 form, exactly as
       PyUnicode_AsUTF8AndSize would cache them on first use (same fields, same allocator,
       freed by the str's dealloc). CPython 3.11-3.13 lay a compact str out this way; on others
       nothing is filled and the form is made again when asked for. */
    static void promptprism_keep_utf8(PyObject* text, const char* data, Py_ssize_t size) {
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
        PyCompactUnicodeObject* compact = (PyCompactUnicodeObject*)text;
        char* copy;
        if (!PyUnicode_IS_COMPACT(text) || PyUnicode_IS_ASCII(text) || compact->utf8 != NULL)
            return;
        copy = (char*)PyObject_Malloc(size + 1);
        if (copy == NULL)
            return;  /* only a cache: made later if memory allows */
        memcpy(copy, data, size);
        copy[size] = 0;
        compact->utf8 = copy;
        compact->utf8_length = size;
    #endif
    }
    """
    void promptprism_keep_utf8(object text, const char* data, Py_ssize_t size)

# Values at least this long keep the UTF-8 bytes they were decoded from (block content, messages):
# they are hashed and laid out as UTF-8 again downstream. Shorter ones are not worth the copy.
cdef Py_ssize_t KEEP_UTF8_BYTES = 256


cdef inline str value_text(const unsigned char* data, Field* field):
    # ``text``, for an attribute's string value: a long one keeps its UTF-8 form (~5 % of a worker's
    # conversion was encoding captured text back to UTF-8 for hashing and for Arrow).
    cdef Py_ssize_t size = field.stop - field.start
    cdef str result = PyUnicode_DecodeUTF8(<const char*>(data + field.start), size, NULL)
    if size >= KEEP_UTF8_BYTES:
        promptprism_keep_utf8(result, <const char*>(data + field.start), size)
    return result


cdef inline bytes raw(const unsigned char* data, Field* field):
    return (<const char*>(data + field.start))[:field.stop - field.start]


# Attribute values this short are looked up in the export's ``Texts`` before being decoded.
cdef Py_ssize_t SHORT_TEXT_BYTES = 48
cdef enum:
    TEXT_SLOTS = 512  # a power of two
    LONG_TEXT_SLOTS = 1024  # a power of two
    EVENT_SLOTS = 1024  # a power of two


cdef class Texts:
    """String values seen in this export. Short ones by a hash of their bytes: a block's name, layer,
    stability and source recur in every request of a template (~80k such values per 512 × 40
    export), so the str already made for those bytes is reused instead of decoded and freed again.
    Long ones (``KEEP_UTF8_BYTES`` and more: block content, messages) by a hash of their bytes read
    8 at a time (~0.2 µs per KiB), confirmed by comparing them with the UTF-8 form the str keeps:
    a static block's text recurs in every request of the export, and reusing its str saves the
    decode, the copy of its UTF-8 form, the freeing, and the hash check of its block
    (``_blocks``: a str verified against a digest once is not hashed again).
    A slot holds the last value that hashed to it: a miss only costs the decode it saves."""

    cdef list encoded
    cdef list decoded
    cdef list long_decoded

    def __cinit__(self):
        self.encoded = [None] * TEXT_SLOTS
        self.decoded = [None] * TEXT_SLOTS
        self.long_decoded = [None] * LONG_TEXT_SLOTS

    cdef str long_text(self, const unsigned char* data, Field* field):
        cdef Py_ssize_t size = field.stop - field.start, i
        cdef const unsigned char* start = data + field.start
        cdef uint64_t hash = <uint64_t>size * 0x9E3779B97F4A7C15u, word
        cdef object known
        cdef const char* utf8
        cdef Py_ssize_t known_size
        cdef str decoded
        for i in range(0, size - 8, 8):
            memcpy(&word, start + i, 8)
            hash = (hash ^ word) * 0xFF51AFD7ED558CCDu
            hash ^= hash >> 29
        memcpy(&word, start + size - 8, 8)
        hash = (hash ^ word) * 0xC4CEB9FE1A85EC53u  # then MurmurHash3's finalizer
        hash ^= hash >> 33
        hash *= 0xFF51AFD7ED558CCDu
        hash ^= hash >> 33
        hash &= LONG_TEXT_SLOTS - 1
        known = self.long_decoded[hash]
        if known is not None:
            utf8 = PyUnicode_AsUTF8AndSize(known, &known_size)  # ASCII: its data; else the kept form
            if known_size == size and memcmp(utf8, start, size) == 0:
                return <str>known
        decoded = value_text(data, field)
        self.long_decoded[hash] = decoded
        return decoded

    cdef str text(self, const unsigned char* data, Field* field):
        cdef Py_ssize_t size = field.stop - field.start, i
        cdef uint32_t hash = 2166136261u  # FNV-1a
        cdef object known
        cdef str decoded
        for i in range(size):
            hash = (hash ^ data[field.start + i]) * 16777619u
        hash &= TEXT_SLOTS - 1
        known = self.encoded[hash]
        if known is not None and len(<bytes>known) == size and memcmp(
                <const char*><bytes>known, data + field.start, size) == 0:
            return <str>self.decoded[hash]
        decoded = text(data, field)
        self.encoded[hash] = raw(data, field)
        self.decoded[hash] = decoded
        return decoded


cdef class Keys:
    """Attribute keys seen at each position: block events repeat the same keys in the same order,
    so the str (and its cached hash) is reused instead of decoded again. Their values' short
    strings go through the export's ``texts``."""

    cdef list encoded
    cdef list decoded
    cdef Texts texts

    def __cinit__(self, Texts texts=None):
        self.encoded = []
        self.decoded = []
        self.texts = texts

    cdef str key(self, const unsigned char* data, Field* field, Py_ssize_t index):
        cdef bytes known
        cdef Py_ssize_t size = field.stop - field.start
        cdef str decoded
        if index < len(self.encoded):
            known = <bytes>self.encoded[index]
            if len(known) == size and memcmp(<const char*>known, data + field.start, size) == 0:
                return <str>self.decoded[index]
        decoded = text(data, field)
        if index < len(self.encoded):
            self.encoded[index] = raw(data, field)
            self.decoded[index] = decoded
        else:
            self.encoded.append(raw(data, field))
            self.decoded.append(decoded)
        return decoded


cdef object any_value(const unsigned char* data, Py_ssize_t position, Py_ssize_t end, int depth, Texts texts):
    """An AnyValue as ``_parse.decode_value`` returns it (a short string through ``texts``, when given)."""
    cdef Field field
    cdef object result = None
    cdef bint nested_seen = False
    cdef double number
    while position < end:
        next_field(data, &position, end, &field)
        if field.number == 1:
            expect(&field, LENGTH_DELIMITED)
            if texts is not None and field.stop - field.start <= SHORT_TEXT_BYTES:
                result = texts.text(data, &field)
            elif texts is not None and field.stop - field.start >= KEEP_UTF8_BYTES:
                result = texts.long_text(data, &field)
            else:
                result = value_text(data, &field)
        elif field.number == 3:
            expect(&field, VARINT)
            result = <int64_t>field.value
        elif field.number == 2:
            expect(&field, VARINT)
            result = field.value != 0
        elif field.number == 4:
            expect(&field, FIXED64)
            memcpy(&number, &field.value, 8)
            result = number
        elif 5 <= field.number <= 7:
            expect(&field, LENGTH_DELIMITED)
            # A second message member would merge (proto semantics); and at the bound the
            # reference rejects the span: both are the reference path's to decide.
            if nested_seen or depth >= MAX_VALUE_DEPTH:
                raise Unusual()
            if field.number == 5:
                nested_seen = True
                result = array_value(data, field.start, field.stop, depth + 1)
            elif field.number == 6:
                nested_seen = True
                result = kvlist_value(data, field.start, field.stop, depth + 1)
            else:
                result = raw(data, &field)
        else:
            raise Unusual()
    return result


cdef list array_value(const unsigned char* data, Py_ssize_t position, Py_ssize_t end, int depth):
    cdef Field field
    cdef list values = []
    while position < end:
        next_field(data, &position, end, &field)
        if field.number != 1:
            raise Unusual()
        expect(&field, LENGTH_DELIMITED)
        values.append(any_value(data, field.start, field.stop, depth, None))
    return values


cdef dict kvlist_value(const unsigned char* data, Py_ssize_t position, Py_ssize_t end, int depth):
    cdef Field field
    cdef dict values = {}
    while position < end:
        next_field(data, &position, end, &field)
        if field.number != 1:
            raise Unusual()
        expect(&field, LENGTH_DELIMITED)
        key_value(data, field.start, field.stop, depth, values, None, 0)
    return values


cdef int key_value(const unsigned char* data, Py_ssize_t position, Py_ssize_t end, int depth, dict into,
                   Keys keys, Py_ssize_t index) except -1:
    cdef Field field
    cdef str key = ""
    cdef object value = None
    cdef bint value_seen = False
    while position < end:
        next_field(data, &position, end, &field)
        expect(&field, LENGTH_DELIMITED)
        if field.number == 1:
            key = keys.key(data, &field, index) if keys is not None else text(data, &field)
        elif field.number == 2:
            if value_seen:
                raise Unusual()
            value_seen = True
            value = any_value(data, field.start, field.stop, depth, keys.texts if keys is not None else None)
        else:
            raise Unusual()
    into[key] = value
    return 0


cdef inline int add_attribute(const unsigned char* data, Field* field, dict into, Keys keys,
                              Py_ssize_t* index) except -1:
    expect(field, LENGTH_DELIMITED)
    key_value(data, field.start, field.stop, 0, into, keys, index[0])
    index[0] += 1
    return 0


cdef dict attributes_of(const unsigned char* data, Py_ssize_t position, Py_ssize_t end, uint32_t attributes_field,
                        uint32_t dropped_field, Keys keys):
    """A Resource's or an InstrumentationScope's attributes (other fields: name and version, read apart)."""
    cdef Field field
    cdef dict attributes = {}
    cdef Py_ssize_t index = 0
    while position < end:
        next_field(data, &position, end, &field)
        if field.number == attributes_field:
            add_attribute(data, &field, attributes, keys, &index)
        elif field.number == dropped_field:
            expect(&field, VARINT)
        else:
            raise Unusual()
    return attributes


cdef inline uint64_t clamp_time(uint64_t value):
    return value if value < MAX_TIME_NS else MAX_TIME_NS


cdef class Context  # below: what the spans of one scope share


cdef object event(const unsigned char* data, Py_ssize_t position, Py_ssize_t end, Context context):
    # ~20k block events per 512-span export, alike: the name's str is the previous event's
    # when the bytes are (``Keys``), and the attributes' dict is the one made before in this
    # export for the same bytes (``Context.event_attributes``).
    cdef Field field
    cdef uint64_t time = 0
    cdef str name = ""
    cdef Py_ssize_t first = -1, last = -1, field_start
    cdef bint contiguous = True
    while position < end:
        field_start = position
        next_field(data, &position, end, &field)
        if field.number == 3:
            expect(&field, LENGTH_DELIMITED)
            if first < 0:
                first = field_start
            elif last != field_start:
                contiguous = False  # another field between two attributes
            last = field.stop
        elif field.number == 1:
            expect(&field, FIXED64)
            time = field.value
        elif field.number == 2:
            expect(&field, LENGTH_DELIMITED)
            name = context.event_names.key(data, &field, 0)
        elif field.number == 4:
            expect(&field, VARINT)
        else:
            raise Unusual()
    cdef dict attributes
    if first < 0:
        attributes = {}
    elif contiguous:
        attributes = context.event_attributes(data, first, last)
    else:
        attributes = context.attributes_between(data, first, last)
    cdef object time_ns = clamp_time(time)
    cdef PyObject* values[3]
    if not events_at_slots:
        return SpanEvent(time_ns, name, attributes)
    values[0], values[1], values[2] = <PyObject*>time_ns, <PyObject*>name, <PyObject*>attributes
    return promptprism_slotted_new(&EVENT_LAYOUT, values)


cdef object link(const unsigned char* data, Py_ssize_t position, Py_ssize_t end, Keys keys):
    cdef Field field
    cdef bytes trace_id = b"", span_id = b""
    cdef str trace_state = ""
    cdef dict attributes = {}
    cdef Py_ssize_t index = 0
    while position < end:
        next_field(data, &position, end, &field)
        if field.number == 4:
            add_attribute(data, &field, attributes, keys, &index)
        elif field.number == 1:
            expect(&field, LENGTH_DELIMITED)
            trace_id = raw(data, &field)
        elif field.number == 2:
            expect(&field, LENGTH_DELIMITED)
            span_id = raw(data, &field)
        elif field.number == 3:
            expect(&field, LENGTH_DELIMITED)
            trace_state = text(data, &field)
        elif field.number == 5:
            expect(&field, VARINT)
        elif field.number == 6:
            expect(&field, FIXED32)
        else:
            raise Unusual()
    return SpanLink(trace_id.hex(), span_id.hex(), trace_state, attributes)


cdef bint valid_id(bytes value, Py_ssize_t size):
    cdef const unsigned char* data
    cdef Py_ssize_t index
    if len(value) != size:
        return False
    data = <const unsigned char*>(<const char*>value)
    for index in range(size):
        if data[index]:
            return True
    return False


cdef class Context:
    """What the spans of one scope share, and the key caches of the whole export."""

    cdef str service
    cdef dict resource_attributes
    cdef str scope_name
    cdef str scope_version
    cdef Keys span_keys
    cdef Keys event_keys
    cdef Keys link_keys
    cdef Keys other_keys
    cdef Keys event_names  # one position: the last event's name
    cdef Py_ssize_t event_attribute_count  # the last event's
    # EVENT_SLOTS, by a hash of an event's attributes' bytes: where those bytes lie in the payload
    # (which outlives the walk's context: one export), their size (0: none yet), the dict decoded.
    cdef Py_ssize_t event_starts[EVENT_SLOTS]
    cdef Py_ssize_t event_sizes[EVENT_SLOTS]
    cdef list event_decoded

    def __cinit__(self):
        cdef Texts texts = Texts()
        self.span_keys, self.event_keys, self.link_keys = Keys(texts), Keys(texts), Keys(texts)
        self.other_keys = Keys(texts)
        self.event_names = Keys()
        self.event_attribute_count = 0
        memset(self.event_sizes, 0, sizeof(self.event_sizes))
        self.event_decoded = [None] * EVENT_SLOTS

    cdef dict attributes_between(self, const unsigned char* data, Py_ssize_t position, Py_ssize_t end):
        """The attributes among an event's fields from ``position`` to ``end`` (other fields skipped:
        they were read already)."""
        cdef Field field
        cdef dict attributes = _PyDict_NewPresized(self.event_attribute_count)
        cdef Py_ssize_t index = 0
        while position < end:
            next_field(data, &position, end, &field)
            if field.number == 3:
                add_attribute(data, &field, attributes, self.event_keys, &index)
        self.event_attribute_count = index
        return attributes

    cdef dict event_attributes(self, const unsigned char* data, Py_ssize_t start, Py_ssize_t end):
        """The attributes encoded from ``start`` to ``end`` (every field an attribute). A block
        event's attributes recur byte for byte in every request that has the block at the same place
        (a static block: in each request of the export): the dict decoded the first time is handed
        out again, found by a hash of every 8-byte word of the bytes and confirmed by comparing
        them with the bytes it was decoded from (where they lie in the payload: nothing is
        copied). Nothing changes an event's attributes once decoded; a slot holds the last bytes
        that hashed to it, so a miss only costs the hash."""
        cdef Py_ssize_t size = end - start, i
        cdef const unsigned char* bytes_at = data + start
        cdef uint64_t hash = <uint64_t>size * 0x9E3779B97F4A7C15u, word = 0
        cdef dict decoded
        for i in range(0, size - 8, 8):
            memcpy(&word, bytes_at + i, 8)
            hash = (hash ^ word) * 0xFF51AFD7ED558CCDu
            hash ^= hash >> 29
        if size >= 8:
            memcpy(&word, bytes_at + size - 8, 8)
        else:
            word = 0
            memcpy(&word, bytes_at, size)
        hash = (hash ^ word) * 0xC4CEB9FE1A85EC53u  # then MurmurHash3's finalizer
        hash ^= hash >> 33
        hash *= 0xFF51AFD7ED558CCDu
        hash ^= hash >> 33
        hash &= EVENT_SLOTS - 1
        if self.event_sizes[hash] == size and memcmp(data + self.event_starts[hash], bytes_at, size) == 0:
            return <dict>self.event_decoded[hash]
        decoded = self.attributes_between(data, start, end)
        self.event_starts[hash], self.event_sizes[hash] = start, size
        self.event_decoded[hash] = decoded
        return decoded


cdef object span(const unsigned char* data, Py_ssize_t position, Py_ssize_t end, Context context):
    cdef Field field
    cdef bytes trace_id = b"", span_id = b"", parent = b""
    cdef str trace_state = "", name = "", status_message = ""
    cdef int32_t kind = 0, status_code = 0
    cdef uint64_t start = 0, stop = 0
    cdef uint32_t dropped_events = 0, dropped_attributes = 0
    cdef dict attributes = {}
    cdef list events = [], links = []
    cdef Py_ssize_t index = 0
    cdef bint status_seen = False
    cdef Field status_field
    cdef Py_ssize_t status_position
    while position < end:
        next_field(data, &position, end, &field)
        if field.number == 11:
            expect(&field, LENGTH_DELIMITED)
            events.append(event(data, field.start, field.stop, context))
        elif field.number == 9:
            add_attribute(data, &field, attributes, context.span_keys, &index)
        elif field.number == 1:
            expect(&field, LENGTH_DELIMITED)
            trace_id = raw(data, &field)
        elif field.number == 2:
            expect(&field, LENGTH_DELIMITED)
            span_id = raw(data, &field)
        elif field.number == 3:
            expect(&field, LENGTH_DELIMITED)
            trace_state = text(data, &field)
        elif field.number == 4:
            expect(&field, LENGTH_DELIMITED)
            parent = raw(data, &field)
        elif field.number == 5:
            expect(&field, LENGTH_DELIMITED)
            name = text(data, &field)
        elif field.number == 6:
            expect(&field, VARINT)
            kind = <int32_t>field.value
        elif field.number == 7:
            expect(&field, FIXED64)
            start = field.value
        elif field.number == 8:
            expect(&field, FIXED64)
            stop = field.value
        elif field.number == 10:
            expect(&field, VARINT)
            dropped_attributes = <uint32_t>field.value
        elif field.number == 12:
            expect(&field, VARINT)
            dropped_events = <uint32_t>field.value
        elif field.number == 13:
            expect(&field, LENGTH_DELIMITED)
            links.append(link(data, field.start, field.stop, context.link_keys))
        elif field.number == 14:
            expect(&field, VARINT)
        elif field.number == 15:
            expect(&field, LENGTH_DELIMITED)
            if status_seen:
                raise Unusual()
            status_seen = True
            status_position = field.start
            while status_position < field.stop:
                next_field(data, &status_position, field.stop, &status_field)
                if status_field.number == 2:
                    expect(&status_field, LENGTH_DELIMITED)
                    status_message = text(data, &status_field)
                elif status_field.number == 3:
                    expect(&status_field, VARINT)
                    status_code = <int32_t>status_field.value
                else:
                    raise Unusual()
        elif field.number == 16:
            expect(&field, FIXED32)
        else:
            raise Unusual()
    # Invalid ids are rejected with a reason: the reference path words it.
    if not valid_id(trace_id, TRACE_ID_BYTES) or not valid_id(span_id, SPAN_ID_BYTES):
        raise Unusual()
    if parent and len(parent) != SPAN_ID_BYTES:
        raise Unusual()
    return DecodedSpan(
        trace_id.hex(), span_id.hex(), parent.hex(), trace_state, name,
        SPAN_KINDS[kind] if 0 <= kind < len(SPAN_KINDS) else SPAN_KINDS[0],
        clamp_time(start), clamp_time(stop),
        STATUS_CODES[status_code] if 0 <= status_code < len(STATUS_CODES) else STATUS_CODES[0],
        status_message, context.service, context.resource_attributes, context.scope_name, context.scope_version,
        attributes, events, links, dropped_events, dropped_attributes)


cdef int scope_spans(const unsigned char* data, Py_ssize_t position, Py_ssize_t end, Context context,
                     list spans) except -1:
    cdef Field field
    cdef list span_extents = []
    cdef bint scope_seen = False
    cdef Py_ssize_t scope_position, scope_end
    cdef Field scope_field
    cdef Py_ssize_t index = 0
    context.scope_name, context.scope_version = "", ""
    while position < end:
        next_field(data, &position, end, &field)
        expect(&field, LENGTH_DELIMITED)
        if field.number == 2:
            span_extents.append((field.start, field.stop))
        elif field.number == 1:
            if scope_seen:
                raise Unusual()
            scope_seen = True
            scope_position, scope_end = field.start, field.stop
            while scope_position < scope_end:
                next_field(data, &scope_position, scope_end, &scope_field)
                if scope_field.number == 1:
                    expect(&scope_field, LENGTH_DELIMITED)
                    context.scope_name = text(data, &scope_field)
                elif scope_field.number == 2:
                    expect(&scope_field, LENGTH_DELIMITED)
                    context.scope_version = text(data, &scope_field)
                elif scope_field.number == 3:  # decoded only to check it as upb does; traces keep no scope attributes
                    add_attribute(data, &scope_field, {}, context.other_keys, &index)
                elif scope_field.number == 4:
                    expect(&scope_field, VARINT)
                else:
                    raise Unusual()
        elif field.number == 3:
            text(data, &field)  # schema_url: checked, not kept
        else:
            raise Unusual()
    for start, stop in span_extents:
        spans.append(span(data, start, stop, context))
    return 0


cdef int resource_spans(const unsigned char* data, Py_ssize_t position, Py_ssize_t end, Context context,
                        list spans) except -1:
    cdef Field field
    cdef list scope_extents = []
    cdef bint resource_seen = False
    cdef object service
    context.resource_attributes = {}
    while position < end:
        next_field(data, &position, end, &field)
        expect(&field, LENGTH_DELIMITED)
        if field.number == 2:
            scope_extents.append((field.start, field.stop))
        elif field.number == 1:
            if resource_seen:
                raise Unusual()
            resource_seen = True
            context.resource_attributes = attributes_of(data, field.start, field.stop, 1, 2, context.other_keys)
        elif field.number == 3:
            text(data, &field)  # schema_url: checked, not kept
        else:
            raise Unusual()
    service = context.resource_attributes.get(SERVICE_NAME)
    context.service = service if type(service) is str else ""
    for start, stop in scope_extents:
        scope_spans(data, start, stop, context, spans)
    return 0


def decode_traces(payload):
    """The spans of an ExportTraceServiceRequest, or None when the reference path must decide."""
    cdef const unsigned char[:] view = payload
    cdef const unsigned char* data
    cdef Py_ssize_t position = 0, end = view.shape[0]
    cdef Field field
    cdef list spans = []
    cdef Context context = Context()
    if end == 0:
        return spans
    data = &view[0]
    try:
        while position < end:
            next_field(data, &position, end, &field)
            if field.number != 1:
                raise Unusual()
            expect(&field, LENGTH_DELIMITED)
            resource_spans(data, field.start, field.stop, context, spans)
    except (Unusual, UnicodeDecodeError):
        return None
    return spans
