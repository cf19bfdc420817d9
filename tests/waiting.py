"""Waiting for a condition instead of sleeping "long enough" for it."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

#: Real seconds before a wait gives up. A safety net against a hang, not a speed requirement:
#: generous enough that a slow or loaded machine never reaches it when the code works.
TIMEOUT = 60.0


async def wait_for(
    predicate: Callable[[], object | Awaitable[object]],
    *,
    timeout: float = TIMEOUT,
    what: str | Callable[[], str] = "the condition",
    poll: float = 0.01,
) -> None:
    """Wait until ``predicate()`` (a function or a coroutine function) returns something true.

    Fails (``AssertionError`` naming ``what``) only if that does not happen within ``timeout``.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if loop.time() >= deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout}s waiting for {described}")
        await asyncio.sleep(poll)
