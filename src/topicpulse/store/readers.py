"""The read-only connections, lent one read at a time: first come, first served, users first.

A read borrows a connection for one trip to its thread and gives it back. When every connection
is out, readers wait in line, and a returned connection goes straight to the first in line: a
user's read (``interactive``) before any background read (a delivery pass, a spike check), then
background reads in the order they asked. Nobody jumps the line: with a plain ``asyncio.Queue``
a newcomer who asks just as a connection comes back takes it, and the woken waiter goes to the
back again, so under a steady stream of reads one waiter can starve for seconds (measured with
bench/bench_replies.py while a round's alerts were delivered: a chat's first read waited up to
10 s, and a user's /list 3.1 s). Some connections are *reserved* for users: background reads
never take them, so a user never waits behind more than the reads already running.

``UsersFirst`` extends the rule past reads: while a command is being answered, the delivery
workers start no new chat (for at most a moment), so a reply at the peak of a digest burst
shares the process only with the sends already under way.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import aiosqlite


@dataclass(frozen=True, slots=True)
class Loan:
    conn: aiosqlite.Connection
    reserved: bool  # a user's-only connection


class ReaderPool:
    """Lends read-only connections; ``reserved`` of them serve only interactive reads."""

    def __init__(self, readers: Sequence[aiosqlite.Connection], reserved: int) -> None:
        reserved = reserved if len(readers) > reserved else 0  # always keep one for everyone
        self.connections = list(readers)
        self._idle = deque(Loan(c, n < reserved) for n, c in enumerate(readers))
        self._users: deque[asyncio.Future[Loan]] = deque()
        self._background: deque[asyncio.Future[Loan]] = deque()

    def __bool__(self) -> bool:
        return bool(self.connections)

    async def borrow(self, *, interactive: bool) -> Loan:
        """A connection, now or when it is this read's turn."""
        loan = self._take_idle(interactive)
        if loan is not None:
            return loan
        line = self._users if interactive else self._background
        turn = asyncio.get_running_loop().create_future()
        line.append(turn)
        try:
            return await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # handed over just as we were cancelled
                self.give_back(turn.result())
            elif turn in line:  # (a hand-over may already have skipped and dropped it)
                line.remove(turn)
            raise

    def give_back(self, loan: Loan) -> None:
        """Hand the connection to the first in line, or put it back."""
        for line in (self._users,) if loan.reserved else (self._users, self._background):
            while line:
                turn = line.popleft()
                if not turn.done():
                    turn.set_result(loan)
                    return
        self._idle.append(loan)

    def _take_idle(self, interactive: bool) -> Loan | None:
        if self._users:  # users already waiting go first
            return None
        if not interactive and self._background:
            return None
        # A user takes a reserved connection first, leaving the others to the background.
        usable = [n for n in self._idle if interactive or not n.reserved]
        if not usable:
            return None
        loan = max(usable, key=lambda n: n.reserved)
        self._idle.remove(loan)
        return loan


class UsersFirst:
    """Users being answered right now. A command marks itself (``serving``) for as long as it
    runs; bulk work (a delivery worker about to assemble its next chat) calls ``after_users``
    and waits, briefly, until none is left, so that at the peak of a digest burst a reply
    shares the process with the sends already under way and not with new ones."""

    def __init__(self) -> None:
        self.count = 0
        self._waiting: list[asyncio.Future[None]] = []

    def enter(self) -> None:
        self.count += 1

    def leave(self) -> None:
        self.count -= 1
        if self.count <= 0:
            self.count = 0
            waiting, self._waiting = self._waiting, []
            for turn in waiting:
                if not turn.done():
                    turn.set_result(None)

    async def after_users(self, most: float) -> None:
        """Return once no user is being served, or after ``most`` seconds."""
        if not self.count:
            return
        turn = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            await asyncio.wait([turn], timeout=most)
        finally:
            if not turn.done():
                turn.cancel()
                self._waiting.remove(turn)
