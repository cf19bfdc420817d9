"""Clocks that tests control, for code that takes a ``clock`` (monotonic seconds) and a ``sleep``
(the rate limiter, the delivery engine, the fake Bot API), so that no test depends on how fast
the machine runs.

* ``VirtualClock``: time stands still until the test moves it. ``await clock.advance(s)`` runs
  ``s`` virtual seconds, waking sleepers in deadline order; ``await clock.run(aw)`` awaits
  ``aw`` and, whenever every task waits on the clock, jumps to the next deadline (a discrete
  event simulation, like trio's autojump clock). For code that waits on nothing but the clock.
* ``SteerableClock``: follows the real monotonic clock (for end-to-end tests, where HTTP and
  the database take real time), but the test can stop it (``freeze``), restart it (``resume``)
  and move it forward at once (``jump``), e.g. to skip a 429's hour-long penalty instead of
  waiting for a short one.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def settle() -> None:
    """Let every task that can run, run, until all of them wait (on the clock, or anything
    else that is not ready yet)."""
    loop = asyncio.get_running_loop()
    # CPython's event loops keep their runnable callbacks in ``_ready``; elsewhere a fixed
    # number of passes (still deterministic: it depends on the code, not on the machine).
    ready = getattr(loop, "_ready", None)
    for _ in range(100_000 if ready is not None else 200):
        await asyncio.sleep(0)
        if ready is not None and not ready:
            return


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class VirtualClock:
    """Virtual monotonic seconds (``clock()``) and a ``sleep`` on them; see the module doc."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []  # a heap
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._order), waiter))
        await waiter

    def next_deadline(self) -> float | None:
        """When the earliest sleeper wakes (None: nobody sleeps)."""
        while self._sleepers and self._sleepers[0][2].done():  # cancelled
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    def _wake_due(self) -> None:
        while (deadline := self.next_deadline()) is not None and deadline <= self.now:
            _wake(heapq.heappop(self._sleepers)[2])

    async def _jump_to(self, deadline: float) -> None:
        self.now = max(self.now, deadline)
        self._wake_due()
        await settle()

    async def advance(self, seconds: float) -> None:
        """Run ``seconds`` of virtual time: sleepers wake in order, each at its deadline."""
        target = self.now + seconds
        await settle()
        while (deadline := self.next_deadline()) is not None and deadline <= target:
            await self._jump_to(deadline)
        await self._jump_to(target)

    async def run(self, awaitable: Awaitable[T], *, limit: float = 86_400.0) -> T:
        """Await ``awaitable``, jumping to the next deadline whenever every task waits on the
        clock. Fails if it would take more than ``limit`` virtual seconds, or if it waits on
        something that is not the clock (a deadlock, here)."""
        task = asyncio.ensure_future(awaitable)
        end = self.now + limit
        try:
            while True:
                await settle()
                if task.done():
                    return task.result()
                deadline = self.next_deadline()
                if deadline is None:
                    raise AssertionError("deadlock: the task waits, and not on the clock")
                if deadline > end:
                    raise AssertionError(f"still not done after {limit} virtual seconds")
                await self._jump_to(deadline)
        finally:
            if not task.done():
                task.cancel()


class SteerableClock:
    """Real monotonic seconds that a test can ``freeze``, ``resume`` and ``jump`` forward;
    ``sleep`` waits until the clock reaches its deadline, however it gets there."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._frozen: float | None = None
        self._waiters: set[asyncio.Future[None]] = set()

    def __call__(self) -> float:
        return self._frozen if self._frozen is not None else time.monotonic() + self._offset

    @property
    def frozen(self) -> bool:
        return self._frozen is not None

    def freeze(self) -> None:
        """Stop the clock: from now on it moves only by ``jump`` (or after ``resume``)."""
        if self._frozen is None:
            self._frozen = self()

    def resume(self) -> None:
        """Let the clock follow real time again, from where it stands."""
        if self._frozen is not None:
            self._offset = self._frozen - time.monotonic()
            self._frozen = None
            self._wake_all()

    def jump(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward at once."""
        if self._frozen is not None:
            self._frozen += seconds
        else:
            self._offset += seconds
        self._wake_all()

    def _wake_all(self) -> None:
        for waiter in list(self._waiters):
            _wake(waiter)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        deadline = self() + seconds
        while (left := deadline - self()) > 0:
            waiter: asyncio.Future[None] = loop.create_future()
            timer = None if self.frozen else loop.call_later(left, _wake, waiter)
            self._waiters.add(waiter)
            try:
                await waiter
            finally:
                self._waiters.discard(waiter)
                if timer is not None:
                    timer.cancel()
