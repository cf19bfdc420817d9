"""Per-key sliding-window limits kept in memory: a user's commands in chat, a client's page
requests on the web."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

MEMORY = 10_000  # keys remembered before the idle ones are forgotten


def admit(
    stamps: dict[K, list[float]],
    key: K,
    now: float,
    limit: int,
    period: float,
    memory: int = MEMORY,
) -> bool:
    """Whether ``key`` may act at ``now``: fewer than ``limit`` admitted in the last ``period``
    seconds. ``stamps`` (the admitted times per key) is updated in place."""
    recent = [t for t in stamps.get(key, []) if now - t < period]
    allowed = len(recent) < limit
    if allowed:
        recent.append(now)
    stamps[key] = recent
    if len(stamps) > memory:
        for idle in [k for k, ts in stamps.items() if not ts or now - ts[-1] >= period]:
            del stamps[idle]
    return allowed
