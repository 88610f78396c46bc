# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Request documents in one C pass: ``documents.documents_python``, compiled.

The inputs are read where pyarrow keeps them, through the Arrow C data
interface (``__arrow_c_array__``): offsets, values and validity bitmaps of
each column, no Python object per value. Each document is written straight
into one Arrow ``string`` array's buffers. A column of a layout this pass
does not read (another Arrow type than ``rows.request_docs_table`` lays out),
a content key that is not 16 bytes, a column past 2 GiB: it returns None and
the caller runs the definition (tests/collector/write/test_documents.py
compares both on generated tables). Floats, rare (a request's temperature),
are spelled by the definition's ``json_float``.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Resize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, strcmp

import pyarrow as pa

from .documents import (BOOL, CONTENT_REF_KINDS, DOCUMENT_KINDS, FLOAT, INTEGER, KEY, MAP, STRING,
                        json_float)

cdef extern from *:
    """
    #ifndef ARROW_C_DATA_INTERFACE
    #define ARROW_C_DATA_INTERFACE
    struct ArrowSchema {
      const char* format; const char* name; const char* metadata; int64_t flags; int64_t n_children;
      struct ArrowSchema** children; struct ArrowSchema* dictionary;
      void (*release)(struct ArrowSchema*); void* private_data;
    };
    struct ArrowArray {
      int64_t length; int64_t null_count; int64_t offset; int64_t n_buffers; int64_t n_children;
      const void** buffers; struct ArrowArray** children; struct ArrowArray* dictionary;
      void (*release)(struct ArrowArray*); void* private_data;
    };
    #endif
    """
    struct ArrowSchema:
        const char* format
        int64_t n_children
        ArrowSchema** children
    struct ArrowArray:
        int64_t length
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void** buffers
        ArrowArray** children

cdef int64_t MAX_OFFSET = 2**31 - 1  # Arrow's `string` layout: 32-bit offsets
cdef object STRING_TYPE = pa.string()
cdef object from_buffers = pa.Array.from_buffers
cdef object py_buffer = pa.py_buffer

# Value kinds in C.
cdef enum:
    K_STRING = 1
    K_INTEGER = 2
    K_FLOAT = 3
    K_BOOL = 4
    K_MAP = 5
    K_KEY = 6


class _Fallback(Exception):
    pass


cdef struct Values:
    # One Arrow array's buffers, as read: a string/binary (offsets + data), fixed-width integers,
    # float64, or bits (bool); its validity (NULL: all valid) and its offset into them.
    const uint8_t* validity
    const int32_t* offsets
    const uint8_t* data
    int64_t offset
    int width  # bytes of an integer value; 0 for a string; -1 for bits; 8 for a double too
    bint signed


cdef struct Column:
    int kind
    bint array
    bint nullable
    Values top  # the column itself (for an array: its list offsets, in `top.offsets`)
    Values items  # an array's elements; a map's keys
    Values map_values  # a map's values
    const char* prefix  # `,"name":`
    Py_ssize_t prefix_length


cdef inline bint valid(const Values* values, int64_t row):
    cdef int64_t bit
    if values.validity == NULL:
        return True
    bit = values.offset + row
    return (values.validity[bit >> 3] >> (bit & 7)) & 1


cdef int read_values(ArrowSchema* schema, ArrowArray* array, Values* out, int kind) except -1:
    """``out`` ← the buffers of an array of ``kind`` (the element kind of a list), in the layout
    pyarrow gives each; another layout raises _Fallback."""
    cdef const char* format = schema.format
    out.validity = <const uint8_t*>array.buffers[0]
    out.offset = array.offset
    out.offsets = NULL
    out.data = NULL
    out.signed = False
    if kind == K_STRING or kind == K_KEY:
        if not (strcmp(format, b"u") == 0 or (kind == K_KEY and strcmp(format, b"z") == 0)):
            raise _Fallback()
        out.offsets = <const int32_t*>array.buffers[1]
        out.data = <const uint8_t*>array.buffers[2]
        out.width = 0
        return 0
    if kind == K_BOOL:
        if strcmp(format, b"b") != 0:
            raise _Fallback()
        out.data = <const uint8_t*>array.buffers[1]
        out.width = -1
        return 0
    if kind == K_FLOAT:
        if strcmp(format, b"g") != 0:
            raise _Fallback()
        out.data = <const uint8_t*>array.buffers[1]
        out.width = 8
        return 0
    if kind == K_INTEGER:
        if format[0] == 0 or format[1] != 0:
            raise _Fallback()
        if format[0] == c'C':
            out.width = 1
        elif format[0] == c'S':
            out.width = 2
        elif format[0] == c'I':
            out.width = 4
        elif format[0] == c'L':
            out.width = 8
        elif format[0] == c'c':
            out.width, out.signed = 1, True
        elif format[0] == c's':
            out.width, out.signed = 2, True
        elif format[0] == c'i':
            out.width, out.signed = 4, True
        elif format[0] == c'l':
            out.width, out.signed = 8, True
        else:
            raise _Fallback()
        out.data = <const uint8_t*>array.buffers[1]
        return 0
    raise _Fallback()


cdef class _Output:
    """The documents' bytes (a bytearray grown by doubling) and their offsets."""
    cdef bytearray data
    cdef char* start  # the bytearray's buffer, and its size: read once per growth, not per write
    cdef Py_ssize_t capacity
    cdef Py_ssize_t used
    cdef bytearray offsets

    def __cinit__(self, Py_ssize_t rows, Py_ssize_t capacity):
        self.data = bytearray(max(capacity, 64))
        self.start = PyByteArray_AS_STRING(self.data)
        self.capacity = len(self.data)
        self.used = 0
        self.offsets = bytearray(4 * (rows + 1))

    cdef char* grow(self, Py_ssize_t more) except NULL:
        cdef Py_ssize_t capacity = self.capacity
        while self.used + more > capacity:
            capacity *= 2
        PyByteArray_Resize(self.data, capacity)
        self.start = PyByteArray_AS_STRING(self.data)
        self.capacity = capacity
        return self.start + self.used

    cdef inline char* reserve(self, Py_ssize_t more) except NULL:
        if self.used + more > self.capacity:
            return self.grow(more)
        return self.start + self.used

    cdef inline int put(self, const char* text, Py_ssize_t length) except -1:
        memcpy(self.reserve(length), text, length)
        self.used += length
        return 0


# Bytes a JSON string writes escaped: 0 none, 1 a two-character escape (its letter in SHORT), 2 \u00XX,
# 3 a lead byte of U+2028 / U+2029 (E2 80 A8 / A9) to look at.
cdef uint8_t ESCAPE[256]
cdef char SHORT[256]
cdef const char* HEX_UPPER = b"0123456789ABCDEF"
cdef const char* HEX_LOWER = b"0123456789abcdef"


cdef void _tables():
    cdef int byte
    for byte in range(256):
        ESCAPE[byte] = 0
        SHORT[byte] = 0
    for byte in range(0x20):
        ESCAPE[byte] = 2
    for byte, letter in ((0x22, c'"'), (0x5C, c'\\'), (0x2F, c'/'), (0x08, c'b'), (0x0C, c'f'),
                         (0x0A, c'n'), (0x0D, c'r'), (0x09, c't')):
        ESCAPE[byte] = 1
        SHORT[byte] = letter
    ESCAPE[0xE2] = 3


_tables()


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* Where the bytes that need no escape end, from `at`: 8 at a time while none of them is below
       0x20, '"', '\\', '/' or 0x80 and above (one of those is then looked at byte by byte). */
    static inline Py_ssize_t promptprism_plain_run(const uint8_t* text, Py_ssize_t at, Py_ssize_t length,
                                                   const uint8_t* escape) {
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        while (at + 8 <= length) {
            uint64_t v;
            memcpy(&v, text + at, 8);
            uint64_t below = (v - ones * 0x20) & ~v;
            uint64_t quote = v ^ (ones * 0x22), backslash = v ^ (ones * 0x5C), slash = v ^ (ones * 0x2F);
            uint64_t found = below | ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash)
                             | ((slash - ones) & ~slash) | v;
            if (found & highs) break;
            at += 8;
        }
        while (at < length && escape[text[at]] == 0) at++;
        return at;
    }
    """
    Py_ssize_t plain_run "promptprism_plain_run" (const uint8_t* text, Py_ssize_t at, Py_ssize_t length,
                                                  const uint8_t* escape)


cdef int put_string(_Output out, const uint8_t* text, Py_ssize_t length) except -1:
    """``"text"`` escaped as ClickHouse writes a String in JSON (``documents.json_string``)."""
    cdef char* at = out.reserve(2 + 6 * length)  # the most it can take: every byte as \u00XX
    cdef Py_ssize_t n = 0, i = 0
    cdef uint8_t byte, kind
    at[n] = c'"'
    n += 1
    cdef Py_ssize_t run
    while i < length:
        run = plain_run(text, i, length, ESCAPE)  # the bytes written as they are, copied at once
        if run > i:
            memcpy(at + n, text + i, run - i)
            n += run - i
            i = run
            if i == length:
                break
        byte = text[i]
        kind = ESCAPE[byte]
        i += 1
        if kind == 1:
            at[n] = c'\\'
            at[n + 1] = SHORT[byte]
            n += 2
        elif kind == 2:
            at[n] = c'\\'
            at[n + 1] = c'u'
            at[n + 2] = c'0'
            at[n + 3] = c'0'
            at[n + 4] = HEX_UPPER[byte >> 4]
            at[n + 5] = HEX_UPPER[byte & 15]
            n += 6
        elif i + 1 < length and text[i] == 0x80 and (text[i + 1] == 0xA8 or text[i + 1] == 0xA9):
            # U+2028 / U+2029 (E2 80 A8 / A9): its escape, 6 bytes in place of its 3
            at[n] = c'\\'
            at[n + 1] = c'u'
            at[n + 2] = c'2'
            at[n + 3] = c'0'
            at[n + 4] = c'2'
            at[n + 5] = c'8' if text[i + 1] == 0xA8 else c'9'
            n += 6
            i += 2
        else:
            at[n] = <char>byte
            n += 1
    at[n] = c'"'
    out.used += n + 1
    return 0


cdef char DIGIT_PAIRS[200]


cdef void _pairs():
    cdef int n
    for n in range(100):
        DIGIT_PAIRS[2 * n] = <char>(48 + n // 10)
        DIGIT_PAIRS[2 * n + 1] = <char>(48 + n % 10)


_pairs()


cdef inline int put_unsigned(_Output out, uint64_t value, bint negative) except -1:
    """``value`` in decimal (after a '-' when ``negative``), written back to front two digits at a time."""
    cdef char digits[24]
    cdef int at = 24, pair
    cdef char* to
    while value >= 100:
        pair = <int>(value % 100) * 2
        value //= 100
        at -= 2
        digits[at] = DIGIT_PAIRS[pair]
        digits[at + 1] = DIGIT_PAIRS[pair + 1]
    if value >= 10:
        pair = <int>value * 2
        at -= 2
        digits[at] = DIGIT_PAIRS[pair]
        digits[at + 1] = DIGIT_PAIRS[pair + 1]
    else:
        at -= 1
        digits[at] = <char>(48 + value)
    if negative:
        at -= 1
        digits[at] = c'-'
    to = out.reserve(24 - at)
    memcpy(to, digits + at, 24 - at)
    out.used += 24 - at
    return 0


cdef int put_integer(_Output out, const Values* values, int64_t row) except -1:
    cdef int64_t at = values.offset + row
    cdef int64_t signed_value
    if values.signed:
        if values.width == 1:
            signed_value = (<const int8_t*>values.data)[at]
        elif values.width == 2:
            signed_value = (<const int16_t*>values.data)[at]
        elif values.width == 4:
            signed_value = (<const int32_t*>values.data)[at]
        else:
            signed_value = (<const int64_t*>values.data)[at]
        if signed_value < 0:
            return put_unsigned(out, <uint64_t>(-(signed_value + 1)) + 1, True)
        return put_unsigned(out, <uint64_t>signed_value, False)
    if values.width == 1:
        return put_unsigned(out, values.data[at], False)
    if values.width == 2:
        return put_unsigned(out, (<const uint16_t*>values.data)[at], False)
    if values.width == 4:
        return put_unsigned(out, (<const uint32_t*>values.data)[at], False)
    return put_unsigned(out, (<const uint64_t*>values.data)[at], False)


cdef inline int put_text(_Output out, const Values* values, int64_t row) except -1:
    cdef int64_t at = values.offset + row
    cdef int32_t start, stop
    if not valid(values, row):
        return out.put(b'""', 2)
    start = values.offsets[at]
    stop = values.offsets[at + 1]
    return put_string(out, values.data + start, stop - start)


cdef int put_key(_Output out, const Values* values, int64_t row) except -1:
    cdef int64_t at = values.offset + row
    cdef int32_t start, stop, i
    cdef char* to
    cdef uint8_t byte
    start = values.offsets[at] if valid(values, row) else 0
    stop = values.offsets[at + 1] if valid(values, row) else 0
    if stop - start != 16:
        raise _Fallback()  # a key of another length: the definition spells it
    to = out.reserve(34)
    to[0] = c'"'
    for i in range(16):
        byte = values.data[start + i]
        to[1 + 2 * i] = HEX_LOWER[byte >> 4]
        to[2 + 2 * i] = HEX_LOWER[byte & 15]
    to[33] = c'"'
    out.used += 34
    return 0


cdef int put_scalar(_Output out, int kind, const Values* values, int64_t row, const Values* map_values) except -1:
    """One value that is not NULL (or a NULL that takes its type's default)."""
    cdef int64_t at = values.offset + row
    cdef bint is_valid = valid(values, row)
    if kind == K_STRING:
        return put_text(out, values, row)
    if kind == K_INTEGER:
        if not is_valid:
            return out.put(b"0", 1)
        return put_integer(out, values, row)
    if kind == K_BOOL:
        if is_valid and (values.data[at >> 3] >> (at & 7)) & 1:
            return out.put(b"true", 4)
        return out.put(b"false", 5)
    if kind == K_KEY:
        return put_key(out, values, row)
    if kind == K_FLOAT:
        text = json_float((<const double*>values.data)[at])
        return out.put(<bytes>text, len(<bytes>text))
    raise _Fallback()


cdef inline int put_char(_Output out, char character) except -1:
    out.reserve(1)[0] = character
    out.used += 1
    return 0


cdef int put_column(_Output out, Column* column, int64_t row) except -1:
    cdef int64_t at, first, last, item
    cdef Values* top = &column.top
    out.put(column.prefix, column.prefix_length)
    if column.kind == K_MAP:
        out.put(b"{", 1)
        if valid(top, row):
            at = top.offset + row
            first, last = top.offsets[at], top.offsets[at + 1]
            for item in range(first, last):
                if item != first:
                    put_char(out, c',')
                put_text(out, &column.items, item)
                put_char(out, c':')
                put_text(out, &column.map_values, item)
        return out.put(b"}", 1)
    if column.array:
        put_char(out, c'[')
        if valid(top, row):
            at = top.offset + row
            first, last = top.offsets[at], top.offsets[at + 1]
            if column.kind == K_STRING:
                for item in range(first, last):
                    if item != first:
                        put_char(out, c',')
                    put_text(out, &column.items, item)
            elif column.kind == K_INTEGER:
                for item in range(first, last):
                    if item != first:
                        put_char(out, c',')
                    if valid(&column.items, item):
                        put_integer(out, &column.items, item)
                    else:
                        put_char(out, c'0')
            else:
                for item in range(first, last):
                    if item != first:
                        put_char(out, c',')
                    put_scalar(out, column.kind, &column.items, item, NULL)
        return put_char(out, c']')
    if not valid(top, row) and (column.nullable or column.kind == K_FLOAT):
        return out.put(b"null", 4)
    return put_scalar(out, column.kind, top, row, NULL)


cdef int _kind_code(str kind) except -1:
    if kind == STRING:
        return K_STRING
    if kind == INTEGER:
        return K_INTEGER
    if kind == FLOAT:
        return K_FLOAT
    if kind == BOOL:
        return K_BOOL
    if kind == MAP:
        return K_MAP
    if kind == KEY:
        return K_KEY
    raise _Fallback()


cdef class _Columns:
    """A record batch's columns of ``kinds``, read through the C data interface; it keeps the
    capsules (and so the arrays' buffers) alive while the documents are written."""
    cdef Column* columns
    cdef Py_ssize_t count
    cdef list keep

    def __dealloc__(self):
        if self.columns != NULL:
            PyMem_Free(self.columns)


cdef _Columns read_columns(object batch, list kinds, dict nullable, bint first_opens):
    cdef _Columns found = _Columns.__new__(_Columns)
    cdef Py_ssize_t n
    cdef Column* column
    cdef ArrowSchema* schema
    cdef ArrowArray* array
    cdef bytes prefix
    found.keep = []
    found.count = len(kinds)
    found.columns = <Column*>PyMem_Malloc(sizeof(Column) * found.count)
    if found.columns == NULL:
        raise MemoryError()
    for n in range(found.count):
        name, kind, is_array = kinds[n]
        column = &found.columns[n]
        column.kind = _kind_code(kind)
        column.array = is_array
        column.nullable = nullable[name]
        prefix = (b"{" if (n == 0 and first_opens) else b",") + b'"' + name.encode() + b'":'
        found.keep.append(prefix)
        column.prefix = prefix
        column.prefix_length = len(prefix)
        capsules = batch.column(name).__arrow_c_array__()
        found.keep.append(capsules)
        schema = <ArrowSchema*>PyCapsule_GetPointer(capsules[0], b"arrow_schema")
        array = <ArrowArray*>PyCapsule_GetPointer(capsules[1], b"arrow_array")
        if column.kind == K_MAP:
            # map<string, string>: a list of struct<key, value>
            if strcmp(schema.format, b"+m") != 0 or schema.children[0].n_children != 2:
                raise _Fallback()
            column.top.validity = <const uint8_t*>array.buffers[0]
            column.top.offsets = <const int32_t*>array.buffers[1]
            column.top.offset = array.offset
            if array.children[0].offset != 0:
                raise _Fallback()
            read_values(schema.children[0].children[0], array.children[0].children[0], &column.items, K_STRING)
            read_values(schema.children[0].children[1], array.children[0].children[1], &column.map_values, K_STRING)
        elif is_array:
            if strcmp(schema.format, b"+l") != 0:
                raise _Fallback()
            column.top.validity = <const uint8_t*>array.buffers[0]
            column.top.offsets = <const int32_t*>array.buffers[1]
            column.top.offset = array.offset
            read_values(schema.children[0], array.children[0], &column.items, column.kind)
        else:
            read_values(schema, array, &column.top, column.kind)
    return found


def documents(table):
    """``documents.documents_python`` of ``table`` as an Arrow ``string`` array, or None to run it."""
    from .documents import _NULLABLE as nullable
    try:
        chunks = [_documents(batch, nullable) for batch in table.to_batches()]
    except _Fallback:
        return None
    if not chunks:
        return pa.array([], STRING_TYPE)
    return chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks)


cdef object _documents(object batch, dict nullable):
    cdef _Columns body = read_columns(batch, DOCUMENT_KINDS, nullable, True)
    cdef _Columns references = read_columns(batch, CONTENT_REF_KINDS, nullable, True)
    cdef int64_t rows = batch.num_rows, row
    cdef Py_ssize_t n
    cdef _Output out = _Output(rows, rows * 2048)
    cdef int32_t* offsets = <int32_t*>PyByteArray_AS_STRING(out.offsets)
    cdef bint any_content
    cdef Column* form
    for n in range(references.count):  # a form is one byte (UInt8): read as such below
        if references.columns[n].kind == K_INTEGER and not references.columns[n].array and references.columns[n].top.width != 1:
            raise _Fallback()
    offsets[0] = 0
    for row in range(rows):
        for n in range(body.count):
            put_column(out, &body.columns[n], row)
        out.put(b',"content_refs":', 16)
        any_content = False
        for n in range(references.count):
            form = &references.columns[n]
            if (form.kind == K_INTEGER and not form.array and form.top.width == 1 and valid(&form.top, row)
                    and form.top.data[form.top.offset + row]):
                any_content = True
                break
        if not any_content:
            out.put(b"null", 4)
        else:
            for n in range(references.count):
                put_column(out, &references.columns[n], row)
            out.put(b"}", 1)
        out.put(b"}", 1)
        if out.used > MAX_OFFSET:
            raise _Fallback()
        offsets[row + 1] = <int32_t>out.used
    PyByteArray_Resize(out.data, out.used)
    return from_buffers(STRING_TYPE, rows, [None, py_buffer(out.offsets), py_buffer(out.data)])
