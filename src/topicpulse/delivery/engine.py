"""The delivery engine: passes over the outbox, in which a pool of workers takes chats with
something due and sends each one's messages in order (``sending.Courier``); see
``topicpulse.delivery`` for the rules."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta

from topicpulse.delivery.chats import next_digest_at
from topicpulse.delivery.messages import Outgoing, paper_messages, spike_message
from topicpulse.delivery.protocol import Sender
from topicpulse.delivery.sending import (
    GIVE_UP_AFTER,
    HALT_MAX,
    RETRY_BASE,
    RETRY_MAX,
    Courier,
)
from topicpulse.models import OutboxItem, iso, utcnow
from topicpulse.store import Store

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 48  # chats in delivery at once: ≫ 30 msg/s × 0.1 s latency
FOLD_AFTER = 3  # alert messages a chat may get at once; a bigger backlog is one catch-up
BATCH = 500  # pending rows read (and sent) at a time per chat
DIGEST_MESSAGES = 2  # a longer digest is one message: counts, the best papers, /latest buttons
FETCH = 500  # chats read from the outbox at a time

_Charts = dict[int, "asyncio.Future[Outgoing | None]"]


class Delivery(Courier):
    """Sends what the outbox holds: spike alerts and instant alerts as they come, digests when
    due. ``run_once`` is one pass; the bot runs passes from its delivery worker, waking early
    when a deferred chat falls due (``next_due``). ``clock`` (wall time: digests, giving up)
    and ``monotonic`` (deferrals, pauses) are injectable for tests."""

    def __init__(
        self,
        store: Store,
        sender: Sender,
        *,
        clock: Callable[[], datetime] = utcnow,
        concurrency: int = DEFAULT_CONCURRENCY,
        fold_after: int | None = FOLD_AFTER,
        retry_base: float = RETRY_BASE,
        retry_max: float = RETRY_MAX,
        halt_max: float = HALT_MAX,
        give_up_after: timedelta = GIVE_UP_AFTER,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            store,
            sender,
            clock=clock,
            monotonic=monotonic,
            retry_base=retry_base,
            retry_max=retry_max,
            halt_max=halt_max,
            give_up_after=give_up_after,
        )
        self.concurrency = concurrency
        self.fold_after = fold_after
        self._busy: set[int] = set()  # chats being delivered right now

    def close(self) -> None:
        """Stop handing out work: passes end once the sends in flight are done."""
        self.closed = True

    # ------------------------------------------------------------------ one pass
    async def run_once(self) -> int:
        """Deliver pending spike alerts, instant alerts and due digests: every chat that is not
        deferred, busy in another pass, or paused. Returns the rows settled."""
        before = self.stats.settled_rows
        now = self.clock()
        if self.halted() or self.closed:
            return 0
        taken: set[int] = set()
        queue: deque[int] = deque()
        exhausted = False
        fetching = asyncio.Lock()
        charts: _Charts = {}  # spike episode → its message (chart rendered once), this pass

        async def next_chat() -> int | None:
            """The next chat to deliver to; more are read from the outbox as needed."""
            nonlocal exhausted
            async with fetching:
                while not self.halted() and not self.closed:
                    if queue:
                        chat_id = queue.popleft()
                        if chat_id not in self._busy:  # (another pass may have taken it)
                            self._busy.add(chat_id)
                            return chat_id
                        continue
                    if exhausted:
                        break
                    skip = len(taken) + len(self._busy) + len(self._deferred)
                    fresh = [
                        c
                        for c in await self._due_chats(now, FETCH + skip)
                        if c not in taken and c not in self._busy and not self.deferred(c)
                    ]
                    exhausted = not fresh
                    taken.update(fresh)
                    queue.extend(fresh)
                return None

        async def worker() -> None:
            while (chat_id := await next_chat()) is not None:
                try:
                    await self._deliver_chat(chat_id, now, charts)
                except Exception as exc:  # a bug or a store error: log it, keep going
                    log.exception("delivery to chat %s failed; retrying it later", chat_id)
                    self.stats.errors.append(f"{chat_id}: {type(exc).__name__}: {exc}"[:300])
                    del self.stats.errors[:-20]
                    self._defer(chat_id, self.retry_max, "error")
                finally:
                    self._busy.discard(chat_id)

        try:
            await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        finally:
            for chart in charts.values():
                chart.cancel()
        await self._advance_idle_digests(now)
        return self.stats.settled_rows - before

    async def _due_chats(self, now: datetime, limit: int) -> list[int]:
        instant = await self.store.chats_with_pending(modes=("instant",), limit=limit)
        spikes = await self.store.chats_with_pending(
            modes=("daily", "weekly"), kind="spike", limit=limit
        )
        digests = await self.store.chats_with_pending(
            modes=("daily", "weekly"), due_before=iso(now), limit=limit
        )
        return list(dict.fromkeys([*instant, *spikes, *digests]))

    async def _deliver_chat(self, chat_id: int, now: datetime, charts: _Charts) -> None:
        chat = await self.store.chat(chat_id)
        if chat is None or not chat.active or chat.paused:
            return
        if chat.topic_closed_at is not None:  # (known closed before a restart)
            self._closed.setdefault(chat_id, 0)
        # Spike alerts first, in every mode: never held behind a backlog of papers.
        spikes = await self._spikes(chat_id, charts)
        if spikes:
            if not await self._send_all(spikes):
                return
            chat_id = spikes[-1].chat_id  # it may have moved (group → supergroup)
        instant = chat.mode == "instant"
        digest_due = (
            not instant and chat.next_digest_at is not None and chat.next_digest_at <= iso(now)
        )
        if not (instant or digest_due):
            return
        complete = True
        while True:
            items = await self.store.pending_for_chat(chat_id, limit=BATCH, kind="paper")
            outgoing = await paper_messages(
                self.store,
                chat_id,
                items,
                digest_period=None if instant else chat.mode,
                fold_after=self.fold_after if instant else DIGEST_MESSAGES,
            )
            if not outgoing:
                break
            if any(m.folded for m in outgoing):
                self.stats.folded += 1
            complete = await self._send_all(outgoing)
            chat_id = outgoing[-1].chat_id
            if not complete or len(items) < BATCH:
                break
        if digest_due and complete:  # from the schedule read above, unless it changed since
            due = next_digest_at(chat, now)
            moved = dataclasses.replace(chat, chat_id=chat_id)  # (group → supergroup)
            await self.store.advance_digest(moved, iso(due) if due else None)

    async def _spikes(self, chat_id: int, charts: _Charts) -> list[Outgoing]:
        messages: list[Outgoing] = []
        for item in await self.store.pending_for_chat(chat_id, limit=BATCH, kind="spike"):
            message = await self._spike(chat_id, item, charts)
            if message is None:
                await self.store.drop_outbox([item.id], "episode or topic no longer exists")
            else:
                messages.append(message)
        return messages

    async def _spike(self, chat_id: int, item: OutboxItem, charts: _Charts) -> Outgoing | None:
        """The spike alert; its chart is rendered once per episode and pass, not per chat."""
        episode_id = item.episode_id or 0
        if episode_id not in charts:
            charts[episode_id] = asyncio.ensure_future(spike_message(self.store, chat_id, item))
        shared = await asyncio.shield(charts[episode_id])
        if shared is None:
            return None
        thread = await self.store.spike_thread(chat_id, episode_id)
        return Outgoing(
            chat_id, [item.id], shared.html, photo=shared.photo, thread_id=thread, chart=episode_id
        )

    async def _advance_idle_digests(self, now: datetime) -> None:
        """Digest time came with nothing to send: no message, just schedule the next one."""
        for chat in await self.store.idle_digest_chats_due(iso(now)):
            due = next_digest_at(chat, now)
            await self.store.advance_digest(chat, iso(due) if due else None)
