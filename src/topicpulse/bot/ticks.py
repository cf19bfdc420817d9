"""The ticks a 👍 / 👎 puts on its message's buttons: sent after the tap is answered and outside
the chat's button lock, one edit in flight per message, the latest keyboard winning.

A tick is a low send (``Priority.LOW``): while the bot sends all Telegram lets it, or once the
chat had its ~1 message a second, it waits up to a second for room, or is left out. Inside the
button lock that wait held up the chat's next tap: a reader rating down a digest, a tap a
second, waited for each earlier tick before the next tap was even acknowledged. Here every tap
is acknowledged at once, and the ticks wanted for a message while one is on its way fold into
one edit. It shows every rating as stored: ``views.relabel`` ticks from the chat's ratings, not
from the keyboard before. A button that redraws the message drops its waiting tick (``drop``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from topicpulse.bot.views import Keyboard

Key = tuple[int, int]  # (chat id, message id)
Send = Callable[[Keyboard], Awaitable[bool]]  # the edit; False: left out (no room)
Spawn = Callable[[Coroutine[Any, Any, None]], object]  # runs a coroutine in the background
Remember = Callable[[Key, tuple[str, Keyboard]], None]  # what the message shows now


@dataclass(slots=True)
class _Ticking:
    text: str
    wanted: Keyboard | None  # the keyboard to send next (None: nothing new)
    send: Send
    dropped: bool = False


class Ticks:
    """The messages whose tick is on its way or waiting, and what each should show."""

    def __init__(self, remember: Remember) -> None:
        self._remember = remember
        self._ticking: dict[Key, _Ticking] = {}

    def want(
        self, key: Key, text: str, wanted: Keyboard, shown: Keyboard, send: Send, spawn: Spawn
    ) -> None:
        """The message ``key`` (saying ``text``; showing ``shown``, as far as the bot knows)
        should show ``wanted``: sent by a task ``spawn`` starts, or by the one on its way."""
        ticking = self._ticking.get(key)
        if ticking is not None:
            ticking.text, ticking.wanted, ticking.send = text, wanted, send
        elif wanted != shown:
            ticking = self._ticking[key] = _Ticking(text, wanted, send)
            spawn(self._run(key, ticking))

    def drop(self, key: Key) -> None:
        """Another edit redraws the message: no tick of the old keyboard may follow it."""
        ticking = self._ticking.pop(key, None)
        if ticking is not None:
            ticking.dropped = True
            ticking.wanted = None

    def idle(self) -> bool:
        """No tick on its way or waiting."""
        return not self._ticking

    async def _run(self, key: Key, ticking: _Ticking) -> None:
        sent: Keyboard | None = None
        try:
            while ticking.wanted is not None:
                wanted, ticking.wanted = ticking.wanted, None
                if wanted != sent and await ticking.send(wanted) and not ticking.dropped:
                    self._remember(key, (ticking.text, wanted))
                    sent = wanted
        finally:
            if self._ticking.get(key) is ticking:
                del self._ticking[key]
