# cython: language_level=3
"""A worker keeps the memory a conversion freed, for the next one (and the collector process, an export's).

Converting a 512 × 40 export allocates ~150 MB and frees nearly all of it at
the end. By default both allocators hand much of it back to the kernel at
once — CPython's small-object allocator unmaps each arena (1 MiB) left empty
(~15 per export), glibc trims the top of its heap and unmaps large blocks —
so the next conversion takes it back page by page, each page faulted in and
zeroed by the kernel: ~9,500 page faults per conversion, ~200 with this
module, and a conversion's CPU 0.87× with the worker's GC settings
(0.89–0.93× without them; pairs interleaved in one process; README,
"Ingest throughput"). ``keep_freed_memory`` makes a worker keep it: freed
arenas (and the interpreter's frame-stack chunks, which come from the same
allocator) wait in a bounded cache for the next allocation of
their size, and glibc keeps free space at its heap top and serves blocks up
to that size from the heap. A worker's resident size then stays near the
peak of a conversion instead of dropping between exports (+~40 MiB).
"""

from libc.stddef cimport size_t

cdef extern from "Python.h":
    ctypedef struct PyObjectArenaAllocator:
        void* ctx
        void* (*alloc)(void* ctx, size_t size) noexcept nogil
        void (*free)(void* ctx, void* ptr, size_t size) noexcept nogil
    void PyObject_GetArenaAllocator(PyObjectArenaAllocator* allocator)
    void PyObject_SetArenaAllocator(PyObjectArenaAllocator* allocator)

cdef extern from *:
    """
    #if defined(__GLIBC__)
    #include <malloc.h>
    /* Keep `bytes` free at the top of the heap instead of trimming it, and serve blocks
       below `mmap_bytes` from the heap rather than from mappings of their own. */
    static int promptprism_keep_heap(int bytes, int mmap_bytes) {
        int trimmed = mallopt(M_TRIM_THRESHOLD, bytes);
        int mapped = mallopt(M_MMAP_THRESHOLD, mmap_bytes);
        return trimmed && mapped;
    }
    #else
    static int promptprism_keep_heap(int bytes, int mmap_bytes) { (void)bytes; (void)mmap_bytes; return 0; }
    #endif
    """
    int promptprism_keep_heap(int bytes, int mmap_bytes) nogil

cdef enum:
    CACHE_SLOTS = 1024

cdef PyObjectArenaAllocator _previous
# Freed blocks waiting for reuse: arenas (1 MiB on 3.11) and the interpreter's frame-stack
# chunks (16 KiB and up), which CPython takes from the same allocator.
cdef void* _cache[CACHE_SLOTS]
cdef size_t _sizes[CACHE_SLOTS]
cdef Py_ssize_t _cached = 0
cdef size_t _cached_bytes = 0
cdef size_t _limit = 0  # bytes kept at most
cdef bint _installed = False


cdef void* _alloc(void* ctx, size_t size) noexcept nogil:
    global _cached, _cached_bytes
    cdef Py_ssize_t n = _cached - 1
    cdef void* found
    while n >= 0:  # the most recently freed block of this size
        if _sizes[n] == size:
            found = _cache[n]
            _cached -= 1
            _cache[n], _sizes[n] = _cache[_cached], _sizes[_cached]
            _cached_bytes -= size
            return found
        n -= 1
    return _previous.alloc(_previous.ctx, size)


cdef void _free(void* ctx, void* ptr, size_t size) noexcept nogil:
    global _cached, _cached_bytes
    if _cached < CACHE_SLOTS and _cached_bytes + size <= _limit:
        _cache[_cached], _sizes[_cached] = ptr, size
        _cached += 1
        _cached_bytes += size
        return
    _previous.free(_previous.ctx, ptr, size)


def keep_freed_memory(Py_ssize_t arena_bytes, int heap_bytes):
    """Keep up to ``arena_bytes`` of freed arenas, and (``heap_bytes`` > 0) that much free
    space at the top of glibc's heap, blocks up to that size (at most 32 MiB, glibc's
    bound) served from the heap. Returns whether glibc took its part (False elsewhere, or
    with ``heap_bytes`` <= 0: its settings untouched). Later calls change the arena bound
    (0: keep none, and give back what is kept)."""
    global _limit, _installed, _cached, _cached_bytes
    cdef PyObjectArenaAllocator mine
    _limit = max(0, arena_bytes)
    while _cached and _cached_bytes > _limit:  # a lower bound: give back what it no longer allows
        _cached -= 1
        _cached_bytes -= _sizes[_cached]
        _previous.free(_previous.ctx, _cache[_cached], _sizes[_cached])
    if not _installed:
        PyObject_GetArenaAllocator(&_previous)
        mine.ctx = NULL
        mine.alloc = _alloc
        mine.free = _free
        PyObject_SetArenaAllocator(&mine)
        _installed = True
    if heap_bytes <= 0:
        return False
    return bool(promptprism_keep_heap(heap_bytes, min(heap_bytes, 32 << 20)))


def kept_bytes():
    """Bytes of freed arenas kept for reuse now."""
    return _cached_bytes
