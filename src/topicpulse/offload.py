"""CPU-heavy work in a separate process, so the bot's event loop never waits for it.

A worker *thread* is not enough for pure-Python work: parsing a 1.6 MB arXiv page or drawing a
chart holds the GIL for tens to hundreds of milliseconds, and every reply the event loop is
writing meanwhile waits for the GIL again at each step (measured with bench/bench_replies.py:
24 store reads for /list took 1.3 s while pages were parsed in a thread, 10 ms with the parsing
in another process). So that work goes to a small shared pool of worker processes (started on
first use with ``spawn``: no copy of the bot's threads or connections), which keep their
imports and caches between calls. The workers run at a lower CPU priority (``nice``): on a
small machine a round's parsing and matching then take the cores the event loop leaves idle,
rather than the other way round. If a worker dies, the pool is replaced and the call runs
again once; if that fails too, the call runs in a thread as before.

Training readers' tastes (``insight.taste``) has a pool of its own, one process (``TRAINING``),
started on the first training: only it imports numpy, scipy and scikit-learn (≈ 75 MB a
process) and keeps the training caches, where both general workers would otherwise each hold
a copy, and a user's chart never queues behind a batch of trainings. Training comes in bursts
(readers rating, then nothing for hours), so that process stops once it has had nothing to do
for ``LINGER`` seconds, and its memory (≈ 190 MB with its caches) goes back to the machine;
the next training starts it again (about a second, once).

In a delivery burst, the next chats' digests and alerts are assembled in a process of their
own too (``ASSEMBLY``, ``delivery.prefetch``), so the event loop only sends; it stops after an
hour without bursts.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

WORKERS = 2  # a user's chart never queues behind a whole round's matching
NICENESS = 10  # how much lower the workers' CPU priority is than the bot's (0 = the same)
GENERAL, TRAINING = "general", "training"  # the pools, and how many processes each has
ASSEMBLY = "assembly"  # digests and alerts assembled ahead in a burst (delivery.prefetch)
_SIZES = {GENERAL: WORKERS, TRAINING: 1, ASSEMBLY: 1}
# a pool listed here stops after this many seconds with no calls
LINGER = {TRAINING: 60.0, ASSEMBLY: 3600.0}  # (assembly: digests fall due hourly)
_pools: dict[str, ProcessPoolExecutor] = {}
_lock = threading.Lock()
_in_flight: dict[str, int] = {}  # calls running, per pool
_retiring: dict[str, asyncio.TimerHandle] = {}  # a lingering pool's stop, while it is idle


def _executor(name: str = GENERAL) -> ProcessPoolExecutor:
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ProcessPoolExecutor(
                max_workers=_SIZES[name],
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_lower_priority,
            )
        return pool


def pool_if_started(name: str) -> ProcessPoolExecutor | None:
    """The pool's executor if it runs (for a simulation telling its calls apart)."""
    return _pools.get(name)


def _lower_priority() -> None:
    """In each worker, at start: yield the CPU to the bot's event loop when both want it."""
    if hasattr(os, "nice"):  # not on Windows
        try:
            os.nice(NICENESS)
        except OSError:  # a container may forbid it: the worker then runs at the bot's priority
            log.info("could not lower the worker's priority")


def _discard(broken: ProcessPoolExecutor) -> None:
    with _lock:
        for name, pool in list(_pools.items()):
            if pool is broken:
                del _pools[name]
    broken.shutdown(wait=False, cancel_futures=True)


def _importable(fn: Callable[..., Any]) -> bool:
    """Whether the worker can import ``fn`` by name (a module-level function can; a closure,
    e.g. a test's stand-in, cannot and runs in a thread instead)."""
    try:
        pickle.dumps(fn)
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True


async def run(fn: Callable[..., T], *args: Any, pool: str = GENERAL) -> T:
    """``fn(*args)`` in a worker process of ``pool`` (its arguments must pickle)."""
    if not _importable(fn):
        return await asyncio.to_thread(fn, *args)
    loop = asyncio.get_running_loop()
    if (stop := _retiring.pop(pool, None)) is not None:
        stop.cancel()
    _in_flight[pool] = _in_flight.get(pool, 0) + 1
    try:
        for attempt in range(2):
            executor = _executor(pool)
            try:
                return await loop.run_in_executor(executor, fn, *args)
            except BrokenProcessPool:
                log.warning("the worker process died; starting a new one (try %d)", attempt + 1)
                _discard(executor)
        return await asyncio.to_thread(fn, *args)
    finally:
        _in_flight[pool] -= 1
        if pool in LINGER and not _in_flight[pool] and not loop.is_closed():
            _retiring[pool] = loop.call_later(LINGER[pool], _retire, pool)


def _retire(name: str) -> None:
    """Stop an idle pool's processes (the next call starts new ones)."""
    _retiring.pop(name, None)
    if _in_flight.get(name):
        return
    with _lock:
        pool = _pools.pop(name, None)
    if pool is not None:
        log.info("the %s worker process had nothing to do: stopped", name)
        pool.shutdown(wait=False)


def shutdown() -> None:
    """Stop the worker processes (at exit they are stopped anyway)."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for stop in _retiring.values():
        stop.cancel()
    _retiring.clear()
    for pool in pools:
        pool.shutdown(wait=True, cancel_futures=True)
