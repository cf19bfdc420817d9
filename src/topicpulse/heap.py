"""The process's heap: what the C allocator keeps after Python and SQLite free their memory.

A long-running bot frees as much as it allocates (a round's papers, a burst's messages), but
glibc's malloc keeps freed pages in its arenas, one per thread that allocated (the store's
reader and writer threads, the thread pool), and hands them back only from the top of each
heap. Over days the process's resident size then climbs in steps with each round, though the
live data does not (bench/bench_scale.py measured ~20 MB a day at 100,000 chats). ``trim``,
run by the daily upkeep, returns every arena's free pages to the system.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger(__name__)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def trim() -> bool:
    """Give the allocator's free pages back to the system (glibc's ``malloc_trim``); False
    where there is no such call (another C library): nothing to do there."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
