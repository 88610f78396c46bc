# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""A string column from Python values in one C pass: ``_columns.strings``, compiled.

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
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcpy

import pyarrow as pa

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


cdef object _build(list values, object stringify):
    cdef Py_ssize_t count = len(values), n, length
    cdef bytearray offsets_bytes = bytearray((count + 1) * 4)
    cdef int32_t* offsets = <int32_t*>PyByteArray_AS_STRING(offsets_bytes)
    cdef _Growing data = _Growing(count * 16)
    cdef const char* utf8
    cdef char* out
    cdef object value, kind
    offsets[0] = 0
    for n in range(count):
        value = values[n]
        kind = type(value)
        if kind is int:
            out = data.reserve(24)
            data.used += decimal(out, value)
        else:
            if kind is not str:
                value = stringify(value)
                if type(value) is not str:
                    raise _Fallback()
            utf8 = PyUnicode_AsUTF8AndSize(value, &length)
            out = data.reserve(length)
            memcpy(out, utf8, length)
            data.used += length
        if data.used > MAX_OFFSET:
            raise _Fallback()
        offsets[n + 1] = <int32_t>data.used
    PyByteArray_Resize(data.data, data.used)
    return from_buffers(STRING, count, [None, py_buffer(offsets_bytes), py_buffer(data.data)])
