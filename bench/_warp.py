"""Virtual time for simulations: an event loop whose clock is real time with the idle gaps cut
out, and a python-telegram-bot request that reaches the fake Bot API without a socket.

``WarpLoop``: when every task waits for a timer (the rate limiter's next token, the next delivery
tick, tomorrow's digest) and no thread is working for the loop (an aiosqlite query, a matching
batch in ``asyncio.to_thread``), the loop jumps its clock to that timer instead of sleeping.
Work is never skipped: while a thread works, or callbacks are ready, time runs as real time. So
a simulated week takes as long as the work in it, and CPU that cannot keep up shows as delay.

One exception, work done ahead: while only the assembly process works (``delivery.prefetch``:
the next chats' digests, which nothing awaits yet), the clock still jumps to timers at most
``AHEAD_JUMP`` away — the rate limiter's next token — so the sends go on beside it, as they
would in real time on a second core; a longer wait (nothing left to send) runs as real time.
The loop's clock never runs slower than real time, so a result the loop ends up waiting for
arrives no earlier in loop time than it would in reality: delays come out, if anything, long.

``FakeWire``: a ``BaseRequest`` handing each request to ``FakeTelegram.call`` — the fake's
methods, limits and records; PTB still builds the request, parses the answer and raises its
errors (``RetryAfter``, ``BadRequest``…), and the rate limiter paces it, all on loop time.
"""

from __future__ import annotations

import asyncio
import json
import selectors
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import aiosqlite
from telegram.request import BaseRequest, RequestData

from topicpulse import offload

AHEAD_JUMP = 1.0  # seconds: the longest jump while only work done ahead is running


class _WarpSelector:
    """The loop's selector: a wait for timers only becomes a jump of the loop's clock."""

    def __init__(self, inner: selectors.BaseSelector, loop: WarpLoop) -> None:
        self._inner = inner
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        loop = self._loop
        if timeout == 0 or loop.busy > 0:
            return self._inner.select(timeout)
        events = self._inner.select(0)
        if events or timeout is None:
            return events or self._inner.select(timeout)
        if loop.ahead > 0 and timeout > AHEAD_JUMP:
            return self._inner.select(timeout)
        loop.offset += timeout  # nothing can happen before the next timer: go there
        loop.warped += timeout
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class WarpLoop(asyncio.SelectorEventLoop):
    """See the module docstring. ``busy`` counts work in threads the loop waits for."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = 0.0
        self.warped = 0.0  # seconds skipped
        self.busy = 0
        self.ahead = 0  # calls to the assembly process running (work done ahead)
        self._selector = _WarpSelector(self._selector, self)  # type: ignore[has-type,assignment]

    def time(self) -> float:
        return time.monotonic() + self.offset

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> Any:
        future = super().run_in_executor(executor, func, *args)
        if executor is not None and executor is offload.pool_if_started(offload.ASSEMBLY):
            self.ahead += 1
            future.add_done_callback(self._ahead_done)
            return future
        self.busy += 1
        future.add_done_callback(self._done)
        return future

    def _done(self, _: object) -> None:
        self.busy -= 1

    def _ahead_done(self, _: object) -> None:
        self.ahead -= 1


def count_aiosqlite_work() -> None:
    """Make every aiosqlite call count as thread work of the running ``WarpLoop``."""
    original = aiosqlite.Connection._execute
    if getattr(original, "_warp", False):
        return

    async def counted(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        warp = isinstance(loop, WarpLoop)
        if warp:
            loop.busy += 1  # type: ignore[attr-defined]
        try:
            return await original(self, fn, *args, **kwargs)
        finally:
            if warp:
                loop.busy -= 1  # type: ignore[attr-defined]

    counted._warp = True  # type: ignore[attr-defined]
    aiosqlite.Connection._execute = counted  # type: ignore[method-assign]


class SimClock:
    """Wall time for the engine: ``start`` plus the loop's seconds since ``bind``."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self._t0 = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self) -> SimClock:
        self._loop = asyncio.get_running_loop()
        self._t0 = self._loop.time()
        return self

    def rebind(self, start: datetime) -> None:
        """From now on, ``start`` is now."""
        assert self._loop is not None
        self.start, self._t0 = start, self._loop.time()

    def seconds(self) -> float:
        assert self._loop is not None
        return self._loop.time() - self._t0

    def __call__(self) -> datetime:
        return self.start + timedelta(seconds=self.seconds())

    def at(self, when: datetime) -> float:
        """The loop time of ``when``."""
        return self._t0 + (when - self.start).total_seconds()


class FakeWire(BaseRequest):
    """PTB's requests answered by ``FakeTelegram.call`` in this process (no socket)."""

    def __init__(self, fake: Any) -> None:
        self.fake = fake

    @property
    def read_timeout(self) -> float | None:
        return None

    async def initialize(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = None,
        write_timeout: Any = None,
        connect_timeout: Any = None,
        pool_timeout: Any = None,
    ) -> tuple[int, bytes]:
        params: dict[str, Any] = dict(request_data.json_parameters) if request_data else {}
        if request_data is not None and request_data.contains_files:
            from fake_telegram import UploadedFile

            for name, part in request_data.multipart_data.items():
                filename, content, *mime = part  # (name, bytes or file, [mime type])
                data = content if isinstance(content, bytes) else content.read()
                kind = mime[0] if mime else "application/octet-stream"
                uploaded = UploadedFile(filename=filename, content_type=kind, data=data)
                for key, value in list(params.items()):  # "attach://name" → the upload
                    if value == f"attach://{name}":
                        params[key] = uploaded
                params.setdefault(name, uploaded)
        status, payload = self.fake.call(url.rsplit("/", 1)[-1], params)
        return status, json.dumps(payload).encode()
