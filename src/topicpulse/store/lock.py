"""Who uses a database file: a lock file beside it (``<db>-lock``) that every open store holds
shared and a restore takes exclusive.

``flock`` locks belong to the open file: the kernel drops them when the process ends, however
it ends (a crash or ``kill -9`` leaves no stale lock behind). Where the lock file cannot be
created (a read-only folder), a store opens without one: such a folder cannot be restored into
either.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

WAIT_SECONDS = 30.0  # a store that opens while a restore runs waits this long for it


class DatabaseInUse(RuntimeError):
    """Another process has the database open (a restore refuses, a store waits for one)."""


def lock_path(db: str | Path) -> Path:
    return Path(f"{db}-lock")


def _open(db: str | Path) -> int | None:
    try:
        return os.open(lock_path(db), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None


async def hold_shared(db: str | Path, wait: float = WAIT_SECONDS) -> int | None:
    """Take the shared lock of ``db`` (waiting out a restore); the descriptor to close, or None
    where no lock file can be made."""
    fd = _open(db)
    if fd is None:
        return None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if loop.time() >= deadline:
                os.close(fd)
                raise DatabaseInUse(f"{db} is being restored; try again after it") from None
            await asyncio.sleep(0.1)


def release(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


@contextlib.contextmanager
def exclusive(db: str | Path) -> Iterator[None]:
    """Hold ``db`` for oneself, or raise ``DatabaseInUse`` at once if any store has it open."""
    fd = _open(db)
    if fd is None:
        raise DatabaseInUse(f"cannot create {lock_path(db)}: is its folder writable?")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DatabaseInUse(
                f"{db} is in use by a running topicpulse (the bot, serve or another command):"
                " stop it first"
            ) from None
        yield
    finally:
        os.close(fd)
