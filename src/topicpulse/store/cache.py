"""A small read-through cache for what every chat of a round reads alike: the papers of the
round and their catalogue tags. At 100,000 chats the same 1,500 papers are read for each alert
and digest; from the cache they cost a dict lookup instead of a query (bench/bench_scale.py).

Entries are immutable values (frozen dataclasses, tuples of them). The store clears a cache
when it writes what the cache holds; entries also expire after ``TTL`` seconds of monotonic
time, for writes by another process (a CLI backfill beside the bot)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

V = TypeVar("V")

TTL = 300.0  # seconds an entry is trusted
SIZE = 20_000  # entries kept (a few days of announcements); the oldest go first


class ReadCache(Generic[V]):
    """id → value, bounded, cleared on writes, expiring."""

    def __init__(
        self, *, ttl: float = TTL, size: int = SIZE, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl, self.size, self._clock = ttl, size, clock
        self._values: dict[int, V] = {}
        self._born = clock()
        self.hits = self.misses = 0
        self.generation = 0  # how many times it was cleared (another process follows it)

    def split(self, ids: Iterable[int]) -> tuple[dict[int, V], list[int]]:
        """(the cached values of ``ids``, the ids not cached)."""
        if self._clock() - self._born > self.ttl:
            self.clear()
        found: dict[int, V] = {}
        missing: list[int] = []
        for i in ids:
            if i in self._values:
                found[i] = self._values[i]
            else:
                missing.append(i)
        self.hits += len(found)
        self.misses += len(missing)
        return found, missing

    def put(self, values: dict[int, V]) -> None:
        if len(self._values) + len(values) > self.size:
            self.clear()  # (a whole new generation: cheaper than tracking age per entry)
        self._values.update(values)

    def clear(self) -> None:
        self._values.clear()
        self._born = self._clock()
        self.generation += 1
