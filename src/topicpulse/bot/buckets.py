"""Token buckets on an injectable clock, for pacing sends (``bot.ratelimit``): ``TokenBucket``
(leaky-bucket accounting) and ``PriorityBucket`` (a bucket whose waiters are served by
``Priority``, replies first, and whose last ``reserve`` tokens bulk and low sends never take)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from enum import IntEnum


class Priority(IntEnum):
    """``rate_limit_args`` for ``ExtBot`` methods. Only ``BULK`` and ``LOW`` need passing: PTB
    drops falsy ``rate_limit_args``, so ``REPLY`` (0) is what a call without them gets.
    ``LOW``: what only helps (a rating's tick on a message's buttons), sent when neither a
    reply nor an alert waits; its caller gives up waiting after a while."""

    REPLY = 0
    BULK = 1
    LOW = 2


Clock = Callable[[], float]
"""Monotonic seconds. The default is ``time.monotonic`` (what asyncio's own loop time reads)."""
Sleep = Callable[[float], Awaitable[None]]
"""Waits that many seconds of ``Clock`` time. Default: ``asyncio.sleep``."""

_EPSILON = 1e-9  # tokens: float rounding must not turn "fits now" into a wait of 1e-16 s


class TokenBucket:
    """A leaky bucket: ``level`` drains at ``rate`` per second of ``clock`` time, and a request
    for ``amount`` fits while ``level + amount <= capacity`` (bursts of up to ``capacity``)."""

    __slots__ = ("_clock", "_level", "_updated", "capacity", "rate")

    def __init__(self, rate: float, capacity: float, clock: Clock = time.monotonic) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError("rate and capacity must be positive")
        self.rate = rate
        self.capacity = capacity
        self._clock = clock
        self._level = 0.0
        self._updated = clock()

    def level(self) -> float:
        """What the bucket holds now (what has not drained yet)."""
        now = self._clock()
        if now > self._updated:
            self._level = max(0.0, self._level - (now - self._updated) * self.rate)
            self._updated = now
        return self._level

    def wait_time(self, amount: float = 1.0) -> float:
        """Seconds until ``amount`` fits (0: it fits now)."""
        excess = self.level() + amount - self.capacity
        return excess / self.rate if excess > _EPSILON else 0.0

    def take(self, amount: float = 1.0) -> None:
        """Add ``amount`` (the caller checked that it fits)."""
        self._level = self.level() + amount

    def idle(self) -> bool:
        """Drained completely: the bucket behaves exactly like a new one."""
        return self.level() <= _EPSILON


class PriorityBucket:
    """A leaky bucket whose waiters are served by priority (replies, then bulk, then low; each
    FIFO).

    A bulk or low request is only let through while ``reserve`` capacity stays free after it,
    so a reply finds room at once even when bulk traffic keeps the bucket busy. Time is read from
    ``clock`` and waited for with ``sleep`` (tests inject a virtual clock).
    """

    __slots__ = ("_bucket", "_clock", "_queues", "_reserve", "_sleep", "_timer", "_timer_at")

    def __init__(
        self,
        rate: float,
        burst: float,
        reserve: float = 0.0,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if reserve + 1 > burst:
            raise ValueError("the burst must leave room for one bulk send beside the reserve")
        self._bucket = TokenBucket(rate, burst, clock)
        self._clock = clock
        self._reserve = reserve
        self._sleep = sleep
        self._queues: tuple[deque[asyncio.Future[None]], ...] = tuple(deque() for _ in Priority)
        self._timer: asyncio.Task[None] | None = None  # wakes the queue when its head fits
        self._timer_at = 0.0

    def _need(self, priority: Priority) -> float:
        return 1.0 + (self._reserve if priority != Priority.REPLY else 0.0)

    def waiting(self) -> int:
        return sum(1 for q in self._queues for f in q if not f.done())

    def idle(self) -> bool:
        return not self.waiting() and self._bucket.idle()

    def close(self) -> None:
        """Stop the wake-up timer (the limiter is shutting down)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def acquire(self, priority: Priority = Priority.REPLY) -> None:
        ahead = any(not f.done() for q in self._queues[: priority + 1] for f in q)
        if not ahead and self._bucket.wait_time(self._need(priority)) == 0:
            self._bucket.take()
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues[priority].append(future)
        self._serve()
        try:
            await future
        except asyncio.CancelledError:
            self._serve()  # the head may have been us; a token granted as we left is unused
            raise

    def _serve(self) -> None:
        """Grant tokens to the waiters at the head, highest priority first; if the head does
        not fit yet, come back when it will."""
        while True:
            head: tuple[asyncio.Future[None], Priority] | None = None
            for priority, queue in zip(Priority, self._queues, strict=True):
                while queue and queue[0].done():
                    queue.popleft()
                if queue:
                    head = (queue[0], priority)
                    break
            if head is None:
                self.close()
                return
            future, priority = head
            wait = self._bucket.wait_time(self._need(priority))
            if wait > 0:
                self._wake_in(wait)
                return
            self._bucket.take()
            self._queues[priority].popleft()
            future.set_result(None)

    def _wake_in(self, wait: float) -> None:
        """Serve again after ``wait`` seconds, unless a wake-up is due by then anyway."""
        at = self._clock() + wait
        if self._timer is not None and not self._timer.done():
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = asyncio.get_running_loop().create_task(self._wake(wait))

    async def _wake(self, wait: float) -> None:
        await self._sleep(wait)
        self._timer = None  # (so that _serve does not cancel the task it runs in)
        self._serve()
