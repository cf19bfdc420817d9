"""The process's heap: what the C allocator keeps after Python and SQLite free their memory.

A long-running bot frees as much as it allocates (a round's papers, a burst's messages), but
glibc's malloc keeps freed pages in its arenas, one per thread that allocated (the store's
reader and writer threads, the thread pool), and hands them back only from the top of each
heap. Over days the process's resident size then climbs in steps with each round, though the
live data does not (bench/bench_scale.py measured ~20 MB a day at 100,000 chats). ``trim``,
run by the daily upkeep, returns every arena's free pages to the system; ``limit_arenas``, at
start, keeps the threads to ``ARENAS`` arenas, so the free pages are not spread over one heap
per thread in the first place (the bot's threads allocate little without the GIL: SQLite's
pages and statements).

``freeze_startup`` is about Python's own collector: its full passes traverse every object that
may hold a reference, and what start-up built (modules, the catalogue, PTB, matplotlib) is most
of them and lives as long as the process; frozen, it is no longer traversed.

``favour_replies``, beside them, is the one other setting of the process: how soon a thread
hands the interpreter's lock to another that waits for it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import sys

log = logging.getLogger(__name__)

SWITCH_INTERVAL = 0.001  # s a busy thread keeps the GIL while another waits (Python's: 0.005)
ARENAS = 2  # glibc's default is 8 per core, one more for each thread that allocates at once
_M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)


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


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap the allocator's arenas (glibc's ``mallopt(M_ARENA_MAX)``); before the threads start,
    so that none has made its own. False where there is no such call."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, arenas))


def freeze_startup() -> None:
    """Once started: collect, then move every object start-up built to the collector's
    permanent generation (``gc.freeze``), out of every later pass."""
    gc.collect()
    gc.freeze()


def favour_replies(interval: float = SWITCH_INTERVAL) -> None:
    """Hand the GIL over sooner (``sys.setswitchinterval``). A user's read ends on a store
    thread, which then waits for the GIL while the event loop works through a round; at
    Python's 5 ms each of a reply's half-dozen reads could wait that long again
    (bench/bench_replies.py --raters 1000: replies during a round at p95 ~2.5× idle, not ~3×)."""
    sys.setswitchinterval(interval)
