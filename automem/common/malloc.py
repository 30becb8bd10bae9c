"""glibc allocator settings of a long-running process: fewer arenas, free pages handed back.

A service process runs many threads (the event loop, ``asyncio.to_thread`` workers, the
embedding runs, the vector store's pool). glibc gives each thread that meets lock contention
its own malloc arena (up to 8 per core) and keeps the pages freed inside an arena mapped, so
after a burst of work (a 100k-memory build) the resident set stays at the burst's peak:
1.81 GiB at the end of the build against 1.42 GiB for the same data after a restart
(docs/benchmarks.md, "Memory and disk at 100k"). :func:`limit_arenas` bounds the arenas
(glibc's ``mallopt(M_ARENA_MAX)``, the same knob as the ``MALLOC_ARENA_MAX`` environment
variable, which only acts when set before the process starts) and :func:`trim` returns the free
pages of every arena to the kernel (``malloc_trim(0)``, glibc >= 2.8 also releases whole free
pages inside the heaps, not only the top). Both are documented in mallopt(3) and malloc_trim(3).

On a C library without these functions (musl, macOS) both do nothing and return False.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger(__name__)

#: mallopt(3) parameter number of M_ARENA_MAX in glibc's <malloc.h>.
M_ARENA_MAX = -8


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (has ``malloc_trim`` and ``mallopt``), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not (hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt")):
        return None
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    return libc


def limit_arenas(count: int) -> bool:
    """At most ``count`` malloc arenas for the threads made from now on (``count`` >= 1; 0
    leaves glibc's default of 8 per core). Returns True when glibc accepted it."""
    libc = _libc()
    if libc is None or count <= 0:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, int(count)))


def trim() -> bool:
    """Hand the free pages of every malloc arena back to the kernel. ctypes releases the GIL
    for the call, but it takes each arena's lock while it walks it: run it off the event loop
    (``asyncio.to_thread``). Returns True when memory was released."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.malloc_trim(0))
