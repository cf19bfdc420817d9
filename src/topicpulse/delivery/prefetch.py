"""Digests and instant alerts assembled ahead, in a worker process, while the event loop sends.

Assembling a chat's digest or alert (``digests``, ``alerts``: its matches read, its papers
formatted and packed) is pure Python and reads only. In a burst — a round's alerts for every
instant chat, 08:00 in Central Europe for the digests — it was about half of the event loop's
work (``bench/bench_scale.py``), done between sends on the one core the loop has. A pass with
many chats due now hands them, ``BATCH`` at a time and in the order it will send them, to a
process of its own (``offload``, the ``ASSEMBLY`` pool); the loop's workers then only read
each chat's row, take what the worker assembled, and send. On a two-core machine the sends and
the assembly of the next chats go on side by side.

What a worker assembled is used only if it is still what the loop would assemble now:
- the chat's row as the loop reads it before sending is the row the worker read (mode,
  schedule, watermark, the rounds' mark; a command or a settle in between changes it);
- nothing was sent to the chat since the batch was handed over (``forget``: a send settles
  rows the worker may have seen pending);
- the chat has no taste (ordering and holding back stay in the bot's process, next to the
  training, and holding back writes).
Otherwise, or if the worker fails, the loop assembles the chat itself as before: nothing is
lost or sent twice because of it, it is only slower. Small passes (fewer than ``FROM`` chats)
never start the process.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from topicpulse import offload
from topicpulse.delivery import alerts, digests
from topicpulse.delivery.messages import Outgoing
from topicpulse.models import Chat, iso, parse_iso
from topicpulse.store import Store

log = logging.getLogger(__name__)

FROM = 64  # chats due in a pass before their assembly goes to the worker process
BATCH = 48  # chats per call to the worker (~0.1 s of its work; the loop sends ~1.5 s of it)
AHEAD = 8  # batches handed over and not yet taken, at most (~13 s of sends at 30 a second)


@dataclass(slots=True)
class Assembled:
    """A chat's messages as the worker assembled them from ``chat`` at ``now``."""

    chat: Chat
    digest: bool  # a digest (else instant alerts)
    messages: list[Outgoing]
    through: int  # the watermark after them
    next_at: str | None  # (a digest) the next digest time after it


@dataclass(slots=True, eq=False)  # (found in the queue by identity)
class _Batch:
    chats: list[int]
    result: asyncio.Future[dict[int, Assembled]] | None = None


class Prefetcher:
    """The bot's side: hands due chats to the worker, and gives back what is still valid."""

    def __init__(
        self, store: Store, *, fold_after: int | None, clock: Callable[[], datetime]
    ) -> None:
        self.store = store
        self.fold_after = fold_after
        self.clock = clock
        self._pending: dict[int, _Batch] = {}  # chat → the batch assembling it
        self._queue: list[_Batch] = []  # batches not yet handed over
        self._running = 0
        self.used = self.stale = 0  # (counted: for benchmarks and tests)

    def offer(self, chat_ids: Sequence[int]) -> None:
        """Chats a pass will deliver, in its order; only a big pass's are assembled ahead."""
        fresh = [c for c in chat_ids if c not in self._pending]
        if not self.store.file_backed() or (len(fresh) < FROM and not self._pending):
            return
        for start in range(0, len(fresh), BATCH):
            batch = _Batch(fresh[start : start + BATCH])
            for chat_id in batch.chats:
                self._pending[chat_id] = batch
            self._queue.append(batch)
        self._hand_over()

    def _hand_over(self) -> None:
        while self._queue and self._running < AHEAD:
            batch = self._queue.pop(0)
            batch.chats = self._untaken(batch)
            self._running += 1
            batch.result = asyncio.ensure_future(
                offload.run(
                    assemble_batch,
                    self.store.path,
                    self.store.cache_marks(),
                    batch.chats,
                    iso(self.clock()),
                    self.fold_after,
                    pool=offload.ASSEMBLY,
                )
            )
            batch.result.add_done_callback(self._finished)

    def _finished(self, result: asyncio.Future[dict[int, Assembled]]) -> None:
        self._running -= 1
        if not result.cancelled() and result.exception() is not None:  # (retrieved: logged)
            log.warning("assembling ahead failed: %r", result.exception())
        self._hand_over()

    async def ready(self) -> None:
        """Until every batch handed over has come back (for tests and benchmarks)."""
        running = {id(b): b.result for b in self._pending.values() if b.result is not None}
        await asyncio.gather(*running.values(), return_exceptions=True)

    def drop(self) -> None:
        """The pass is over: what it did not take is not kept for the next one (batches still
        in the worker finish, unread)."""
        self._queue.clear()
        self._pending.clear()

    def forget(self, chat_id: int) -> None:
        """Something was sent to the chat: what was assembled for it before is stale."""
        batch = self._pending.pop(chat_id, None)
        if batch is not None:
            self._done_with(batch)

    async def take(self, chat: Chat) -> Assembled | None:
        """What the worker assembled for ``chat`` (as just read), if it is still valid."""
        batch = self._pending.pop(chat.chat_id, None)
        if batch is None:
            return None
        try:
            if batch.result is None:  # (not handed over yet: it is not worth waiting for)
                return None
            try:
                found = await asyncio.shield(batch.result)
            except Exception:  # (logged once, by _finished): the chats are assembled here
                return None
            ready = found.get(chat.chat_id)
            if ready is None or ready.chat != chat:
                self.stale += ready is not None
                return None
            self.used += 1
            return ready
        finally:
            self._done_with(batch)

    def _untaken(self, batch: _Batch) -> list[int]:
        """The batch's chats still waiting for it (not taken or forgotten meanwhile)."""
        return [c for c in batch.chats if self._pending.get(c) is batch]

    def _done_with(self, batch: _Batch) -> None:
        if batch.result is None and not self._untaken(batch):  # (never worth handing over)
            self._queue.remove(batch)


# ---------------------------------------------------------------------- in the worker process
def assemble_batch(
    path: str, marks: tuple[int, int], chat_ids: list[int], now: str, fold_after: int | None
) -> dict[int, Assembled]:
    """The chats' messages due at ``now``, assembled from the store at ``path``; chats it
    cannot assemble here are left out."""
    global _worker
    if _worker is None:
        _worker = _Worker()
    try:
        return _worker.loop.run_until_complete(
            _worker.assemble_all(path, marks, chat_ids, parse_iso(now), fold_after)
        )
    finally:
        if multiprocessing.parent_process() is None:  # (the pool broke: a thread of the bot's)
            _worker.close()


class _Worker:
    """The worker process's event loop and its store, kept open from call to call (opening it
    for each batch cost ~10% of a burst's time at 100,000 chats), with its read caches; the
    store is closed as the process exits (before aiosqlite's threads would keep it alive)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.store: Store | None = None
        self.caches: dict[str, Any] = {}
        multiprocessing.util.Finalize(self, self.close, exitpriority=10)

    async def assemble_all(
        self,
        path: str,
        marks: tuple[int, int],
        chat_ids: list[int],
        now: datetime,
        fold_after: int | None,
    ) -> dict[int, Assembled]:
        if self.store is not None and self.store.path != path:  # (another store: tests)
            await self.store.close()
            self.store, self.caches = None, {}
        if self.store is None:
            self.store = await Store.open(path, migrate=False, readers=1)
        store = self.store
        store.share_caches(self.caches, marks)
        found: dict[int, Assembled] = {}
        for chat_id in chat_ids:
            try:
                ready = await _assemble(store, chat_id, now, fold_after)
            except Exception:  # (the bot's process assembles it, and logs what goes wrong)
                continue
            if ready is not None:
                found[chat_id] = ready
        return found

    def close(self) -> None:
        if self.store is not None and not self.loop.is_closed():
            self.loop.run_until_complete(self.store.close())
        self.store = None


_worker: _Worker | None = None  # (in the worker process: made by its first call)


async def _assemble(
    store: Store, chat_id: int, now: datetime, fold_after: int | None
) -> Assembled | None:
    chat, _ = await store.chat_to_deliver(chat_id, spikes=0)
    if chat is None or not chat.active or chat.paused:
        return None
    if chat.mode == "instant":
        digest = await digests.digest_papers(store, chat, now)
        if digest.read.taste is not None:
            return None
        messages = await alerts.messages(store, digest, fold_after)
        return Assembled(chat, False, messages, digest.through, None)
    if not digests.due(chat, now):
        return None
    digest = await digests.digest_papers(store, chat, now)
    if digest.read.taste is not None:
        return None
    await digests.write_messages(store, digest)
    return Assembled(chat, True, digest.messages, digest.through, digest.next_at)
