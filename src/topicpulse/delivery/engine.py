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
from itertools import zip_longest

from topicpulse.delivery import alerts, digests, prefetch, weekly
from topicpulse.delivery.messages import Outgoing, spike_message
from topicpulse.delivery.protocol import Sender
from topicpulse.delivery.sending import (
    GIVE_UP_AFTER,
    HALT_MAX,
    RETRY_BASE,
    RETRY_MAX,
    Courier,
)
from topicpulse.models import Chat, OutboxItem, iso, parse_iso, utcnow
from topicpulse.store import Store

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 48  # chats in delivery at once: ≫ 30 msg/s × 0.1 s latency
FOLD_AFTER = 3  # alert messages a chat may get at once; a bigger backlog is one catch-up
BATCH = 500  # spike rows read at a time per chat
FETCH = 500  # chats read from the outbox at a time
# A worker waits at most this long for users' commands to be answered before its next chat
# (48 workers: even while commands never stop, bulk can still start ~100 chats a second).
USERS_FIRST = 0.5

_Charts = dict[int, "asyncio.Future[Outgoing | None]"]


class Delivery(Courier):
    """Sends what the outbox holds: spike alerts and instant alerts as they come, digests (and
    the weekly /foryou) when due. ``run_once`` is one pass; the bot runs passes from its
    delivery worker, waking early when a deferred chat falls due (``next_due``). ``clock``
    (wall time: digests, giving up) and ``monotonic`` (deferrals, pauses) are injectable for
    tests."""

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
        users_first: float = USERS_FIRST,
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
        self.users_first = users_first
        self._busy: set[int] = set()  # chats being delivered right now
        # in a burst, chats' messages assembled ahead in a worker process (prefetch)
        self.ahead = prefetch.Prefetcher(store, fold_after=fold_after, clock=clock)
        self._weekly: set[int] = set()  # chats whose weekly /foryou a pass found due

    async def next_wake(self, most: float) -> float:
        """Seconds until the next pass is needed, at most ``most`` (an idle tick): a deferred
        chat or a pause falling due, or the next digest time, so that a cohort of digests
        starts at its minute, not up to a tick after it. (Digests already due and waiting
        for their chat come back with their deferral or the tick.)"""
        waits = [most]
        due = self.next_due()
        if due is not None:
            waits.append(due)
        now = self.clock()
        try:
            at = await self.store.next_digest_time(iso(now))
        except Exception:  # (the store busy or closing: the tick will do)
            log.exception("could not read the next digest time")
            at = None
        if at is not None:
            waits.append(max(0.0, (parse_iso(at) - now).total_seconds()))
        return min(waits)

    def close(self) -> None:
        """Stop handing out work: passes end once the sends in flight are done."""
        self.closed = True

    # ------------------------------------------------------------------ one pass
    async def run_once(self) -> int:
        """Deliver pending spike alerts, instant alerts and due digests: every chat that is not
        deferred, busy in another pass, or paused. Returns the rows and papers settled."""
        before = self.stats.settled
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
                    # (the next chats are read while half a read's are still queued: their
                    # messages are then being assembled ahead before the queue runs dry)
                    if queue and (exhausted or len(queue) > FETCH // 2):
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
                        for c in await self._due_chats(self.clock(), FETCH + skip)
                        if c not in taken and c not in self._busy and not self.deferred(c)
                    ]
                    exhausted = not fresh
                    taken.update(fresh)
                    queue.extend(fresh)
                    self.ahead.offer(fresh)
                return None

        async def worker() -> None:
            while (chat_id := await next_chat()) is not None:
                try:
                    await self.store.users.after_users(self.users_first)
                    await self._deliver_chat(chat_id, self.clock(), charts)
                except Exception as exc:  # a bug or a store error: log it, keep going
                    log.exception("delivery to chat %s failed; retrying it later", chat_id)
                    self.stats.errors.append(f"{chat_id}: {type(exc).__name__}: {exc}"[:300])
                    del self.stats.errors[:-20]
                    self._defer(chat_id, self.retry_max, "error")
                finally:
                    self._busy.discard(chat_id)

        try:
            # the first chat read before any worker starts: a pass with nothing to do (most of
            # them, every few seconds) costs its queries, not `concurrency` tasks
            first = await next_chat()
            if first is not None:
                self._busy.discard(first)
                queue.appendleft(first)
                await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        finally:
            for chart in charts.values():
                chart.cancel()
            self.ahead.drop()
        return self.stats.settled - before

    async def _due_chats(self, now: datetime, limit: int) -> list[int]:
        """Chats with something to send: spike alerts first, then instant alerts and digests
        taken in turn (neither waits for the other's burst), digests longest due first and
        never before their time (``now``: when the pass reads them, not when it began)."""
        due = await self.store.chats_due(iso(now), limit=limit)
        instant = list(dict.fromkeys([*due.instant_pending, *due.instant_marked]))
        spikes, digests, weeks = due.spikes, due.digests, due.weekly
        self._weekly.update(weeks)
        turns = [c for pair in zip_longest(instant, digests) for c in pair if c is not None]
        return list(dict.fromkeys([*spikes, *turns, *weeks]))

    async def _deliver_chat(self, chat_id: int, now: datetime, charts: _Charts) -> None:
        chat, pending_spikes = await self.store.chat_to_deliver(chat_id, spikes=BATCH)
        if chat is None or not chat.active or chat.paused:
            return
        if chat.topic_closed_at is not None:  # (known closed before a restart)
            self._closed.setdefault(chat_id, 0)
        ready = await self.ahead.take(chat)  # (assembled ahead, if still valid)
        if ready is not None:  # (a whole batch comes back at once: users' commands go first)
            await self.store.users.after_users(self.users_first)
        # Spike alerts first, in every mode: never held behind a backlog of papers.
        spikes = await self._spikes(chat_id, pending_spikes, charts)
        if spikes:
            ready = None  # (their sends may move the chat, and settle what it assembled)
            if not await self._send_all(spikes):
                return
            chat_id = spikes[-1].chat_id  # it may have moved (group → supergroup)
        instant = chat.mode == "instant"
        if digests.due(chat, now):
            await self._deliver_digest(
                dataclasses.replace(chat, chat_id=chat_id),
                now,
                ready if ready and ready.digest else None,
            )
            ready = None
        if chat_id in self._weekly or chat.chat_id in self._weekly:  # (found due: one read)
            self._weekly -= {chat_id, chat.chat_id}
            ready = None
            week = await weekly.due_messages(
                self.store, dataclasses.replace(chat, chat_id=chat_id), now
            )
            if week and not await self._send_all(week):
                return
        if not instant:
            return
        if ready is not None and not ready.digest:
            outgoing = ready.messages
            if not outgoing:
                await alerts.settle_nothing(self.store, chat, ready.through)
        else:
            outgoing = await alerts.assemble(
                self.store,
                dataclasses.replace(chat, chat_id=chat_id),
                now,
                fold_after=self.fold_after,
            )
        if any(m.folded for m in outgoing):
            self.stats.folded += 1
        await self._send_all(outgoing)

    async def _deliver_digest(
        self, chat: Chat, now: datetime, ready: prefetch.Assembled | None
    ) -> None:
        """The digest due: assembled from the matches since the chat's watermark (here, or
        ``ready`` ahead); its last message (or, when it is empty, this) moves the watermark
        and the next digest time."""
        if ready is None:
            digest = await digests.assemble(self.store, chat, now)
            ready = prefetch.Assembled(chat, True, digest.messages, digest.through, digest.next_at)
        if not ready.messages:  # digest time came with nothing to send: schedule the next
            await self.store.settle_digest(
                chat,
                outbox_ids=[],
                paper_ids=[],
                through=ready.through,
                next_digest_at=ready.next_at,
            )
            return
        if any(m.folded for m in ready.messages):
            self.stats.folded += 1
        await self._send_all(ready.messages)

    async def _settle(self, message: Outgoing) -> None:
        self.ahead.forget(message.chat_id)  # (what was assembled for it before is stale)
        await super()._settle(message)

    async def _spikes(
        self, chat_id: int, pending: list[OutboxItem], charts: _Charts
    ) -> list[Outgoing]:
        messages: list[Outgoing] = []
        for item in pending:
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
