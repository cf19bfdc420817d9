"""Delivery: turns the durable outbox into messages and hands them to a ``Sender``.

An outbox row is marked sent only after the sender returned (Telegram accepted the message), so
a crash or restart re-sends at most the messages that were in flight. What can go wrong on the
way is expressed by the exceptions below; the Telegram adapter (``bot.sender``) maps the Bot
API's errors onto them, which keeps this module free of Telegram objects.

How fast it goes is not decided here: the sender's rate limiter (``bot.ratelimit``) paces every
send to Telegram's limits. The engine's job is to keep that limiter busy — a pool of workers
pulls chats from the outbox, each sending one chat's messages in order, enough of them to hide
the API's latency — and to react to what goes wrong one chat at a time:

* a 429 defers only that chat for ``retry_after`` (the workers move on to other chats);
* 403 / chat not found deactivates the chat (its pending rows are dropped, logged);
* a message Telegram refuses (bad HTML, too long — which formatting makes impossible) is logged
  with its outbox ids and re-sent as plain text;
* network errors and 5xx defer the chat with exponential backoff; several failures in a row
  (Telegram unreachable) pause all delivery, with growing pauses, until a send succeeds again.
  Nothing is dropped meanwhile: the outbox keeps growing durably and drains afterwards.

Backpressure: a chat whose backlog would take more than ``fold_after`` alert messages gets it
folded into a digest-style message (every paper, one line each) instead.
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Protocol

from topicpulse import formatting, momentum
from topicpulse.charts import render_chart
from topicpulse.chats import next_digest_at
from topicpulse.models import OutboxItem, iso, utcnow
from topicpulse.store import Store

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 48  # chats in delivery at once: ≫ 30 msg/s × 0.1 s latency
FOLD_AFTER = 3  # alert messages a chat may get at once; a bigger backlog is folded
BATCH = 500  # pending rows read (and sent) at a time per chat
FETCH = 500  # chats read from the outbox at a time
RETRY_BASE = 1.0  # seconds: first retry after a temporary failure, doubling
RETRY_MAX = 60.0
HALT_AFTER = 5  # temporary failures in a row (no success between) that pause everything
HALT_MAX = 30.0


# ---------------------------------------------------------------------------------- sender
class DeliveryError(Exception):
    """Base of what a sender can report."""


class ChatGone(DeliveryError):
    """The chat blocked the bot, was deleted, or does not exist: stop sending to it."""


class ChatMoved(DeliveryError):
    """The group became a supergroup with a new id."""

    def __init__(self, new_chat_id: int) -> None:
        super().__init__(f"chat moved to {new_chat_id}")
        self.new_chat_id = new_chat_id


class FloodWait(DeliveryError):
    """Telegram asked us to wait ``seconds`` before sending to this chat again (HTTP 429)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"flood wait {seconds}s")
        self.seconds = seconds


class MessageRejected(DeliveryError):
    """Telegram refused this message's content (bad HTML, too long): retrying won't help."""


class TemporaryFailure(DeliveryError):
    """Network error or 5xx: try again later."""


class Sender(Protocol):
    async def send_text(self, chat_id: int, html: str, *, preview: bool = False) -> None: ...

    async def send_plain(self, chat_id: int, text: str) -> None: ...

    async def send_photo(self, chat_id: int, png: bytes, caption_html: str) -> None: ...


# ---------------------------------------------------------------------------------- messages
@dataclass(slots=True)
class Outgoing:
    """One message to send and the outbox rows it settles."""

    chat_id: int
    outbox_ids: list[int]
    html: str = ""
    photo: bytes | None = None
    preview: bool = False
    folded: bool = False  # a backlog folded into one catch-up digest (backpressure)


_TAG = re.compile(r"<[^>]+>")
_LINK = re.compile(r"<a\s[^>]*?href=\"([^\"]*)\"[^>]*>(.*?)</a>", re.DOTALL)


def _link(match: re.Match[str]) -> str:
    return f"{match.group(2)} ({match.group(1)})" if match.group(1) else match.group(2)


def plain_text(html_text: str) -> str:
    """Fallback for a message Telegram rejected: links written out, other tags dropped,
    entities decoded, cut to fit."""
    text = html.unescape(_TAG.sub("", _LINK.sub(_link, html_text))).strip()
    if formatting.tg_len(text) <= formatting.MAX_MESSAGE:
        return text
    units = text.encode("utf-16-le")[: 2 * (formatting.MAX_MESSAGE - 1)]
    return units.decode("utf-16-le", "ignore").rstrip() + "…"


CATCH_UP = "catch-up"  # the "period" of a folded backlog: "📬 Your catch-up digest: …"


async def paper_messages(
    store: Store,
    chat_id: int,
    items: Sequence[OutboxItem],
    *,
    digest_period: str | None = None,
    fold_after: int | None = None,
) -> list[Outgoing]:
    """Messages for a chat's pending paper rows: instant alerts, or a digest when
    ``digest_period`` is given — or when the alerts would take more than ``fold_after``
    messages (backpressure). Each message knows which rows it settles."""
    by_paper = {i.paper_id: i.id for i in items if i.kind == "paper" and i.paper_id is not None}
    if not by_paper:
        return []
    papers = await store.papers_by_ids(list(by_paper))
    tags = await store.chat_topics_for_papers(chat_id, [p.id for p in papers])
    alerts = [formatting.Alert(p, tags.get(p.id, [])) for p in papers]
    folded = False
    if digest_period:
        packed = formatting.pack_digest(alerts, period=digest_period)
    else:
        packed = formatting.pack_alerts(alerts)
        if fold_after is not None and len(packed) > fold_after:
            packed, folded = formatting.pack_digest(alerts, period=CATCH_UP), True
    return [
        Outgoing(
            chat_id,
            [by_paper[pid] for pid in paper_ids],
            text,
            preview=len(paper_ids) == 1,
            folded=folded,
        )
        for text, paper_ids in packed
    ]


async def spike_message(store: Store, chat_id: int, item: OutboxItem) -> Outgoing | None:
    episode = await store.episode(item.episode_id or 0)
    topic = await store.topic(episode.topic_id) if episode else None
    if episode is None or topic is None:
        return None
    m = await momentum.compute(store, topic=topic)
    png = await asyncio.to_thread(render_chart, m)
    return Outgoing(chat_id, [item.id], formatting.spike_caption(m, episode.reason), photo=png)


# ---------------------------------------------------------------------------------- engine
@dataclass(slots=True)
class DeliveryStats:
    sent_messages: int = 0
    settled_rows: int = 0
    flood_waits: int = 0
    rejected: int = 0
    chats_gone: int = 0
    failures: int = 0
    folded: int = 0  # backlogs folded into a catch-up digest
    pauses: int = 0  # times all delivery paused after failures in a row
    errors: list[str] = field(default_factory=list)


_Charts = dict[int, "asyncio.Future[Outgoing | None]"]


class _Outcome(Enum):
    SENT = "sent"
    DEFERRED = "deferred"  # try this chat again later
    GONE = "gone"  # chat deactivated
    DROPPED = "dropped"  # not even plain text could be sent: rows dropped, go on


class Delivery:
    """Sends what the outbox holds: instant alerts and spike alerts as they come, digests when
    due. ``run_once`` is one pass; the bot runs passes from its delivery worker, waking early
    when a deferred chat falls due (``next_due``)."""

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
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.sender = sender
        self.clock = clock
        self.concurrency = concurrency
        self.fold_after = fold_after
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.halt_max = halt_max
        self.monotonic = monotonic
        self.stats = DeliveryStats()
        self._busy: set[int] = set()  # chats being delivered right now
        self._deferred: dict[int, tuple[float, str]] = {}  # chat → (not before, why)
        self._chat_failures: dict[int, int] = {}  # chat → temporary failures in a row
        self._streak = 0  # temporary failures in a row, any chat
        self._halt_level = 0
        self._halted_until = float("-inf")
        self.closed = False

    def close(self) -> None:
        """Stop handing out work: passes end once the sends in flight are done."""
        self.closed = True

    # ------------------------------------------------------------------ scheduling
    def halted(self) -> bool:
        return self.monotonic() < self._halted_until

    def deferred(self, chat_id: int) -> bool:
        entry = self._deferred.get(chat_id)
        if entry is None:
            return False
        if entry[0] > self.monotonic():
            return True
        del self._deferred[chat_id]
        return False

    def next_due(self) -> float | None:
        """Seconds until a deferred chat or a pause falls due (0: now), None if nothing waits."""
        now = self.monotonic()
        expired = [c for c, (until, _) in self._deferred.items() if until <= now]
        for chat_id in expired:
            del self._deferred[chat_id]
        times = [until for until, _ in self._deferred.values()]
        if self._halted_until > now:
            times.append(self._halted_until)
        if expired:
            return 0.0
        return max(0.0, min(times) - now) if times else None

    def _defer(self, chat_id: int, seconds: float, why: str) -> None:
        until = self.monotonic() + seconds
        current = self._deferred.get(chat_id)
        if current is None or current[0] < until:
            self._deferred[chat_id] = (until, why)

    # ------------------------------------------------------------------ one pass
    async def run_once(self) -> int:
        """Deliver pending instant alerts, spike alerts and due digests: every chat that is not
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
        digest_due = (
            chat.mode != "instant"
            and chat.next_digest_at is not None
            and chat.next_digest_at <= iso(now)
        )
        complete = True
        while True:
            items = await self.store.pending_for_chat(chat_id, limit=BATCH)
            outgoing: list[Outgoing] = []
            if chat.mode == "instant":
                outgoing += await paper_messages(
                    self.store, chat_id, items, fold_after=self.fold_after
                )
            elif digest_due:
                outgoing += await paper_messages(
                    self.store, chat_id, items, digest_period=chat.mode
                )
            for item in items:
                if item.kind == "spike":
                    message = await self._spike(chat_id, item, charts)
                    if message is None:
                        await self.store.drop_outbox([item.id], "episode or topic no longer exists")
                    else:
                        outgoing.append(message)
            if not outgoing:
                break
            if any(m.folded for m in outgoing):
                self.stats.folded += 1
            complete = await self._send_all(outgoing)
            chat_id = outgoing[-1].chat_id  # it may have moved (group → supergroup)
            if not complete or len(items) < BATCH:
                break
        if digest_due and complete:
            due = next_digest_at(chat, now)
            await self.store.update_chat(chat_id, next_digest_at=iso(due) if due else None)

    async def _spike(self, chat_id: int, item: OutboxItem, charts: _Charts) -> Outgoing | None:
        """The spike alert; its chart is rendered once per episode and pass, not per chat."""
        episode_id = item.episode_id or 0
        if episode_id not in charts:
            charts[episode_id] = asyncio.ensure_future(spike_message(self.store, chat_id, item))
        shared = await asyncio.shield(charts[episode_id])
        if shared is None:
            return None
        return Outgoing(chat_id, [item.id], shared.html, photo=shared.photo)

    async def _advance_idle_digests(self, now: datetime) -> None:
        """Digest time came with nothing to send: no message, just schedule the next one."""
        for chat in await self.store.idle_digest_chats_due(iso(now)):
            due = next_digest_at(chat, now)
            await self.store.update_chat(chat.chat_id, next_digest_at=iso(due) if due else None)

    # ------------------------------------------------------------------ sending
    async def _send_all(self, outgoing: Sequence[Outgoing]) -> bool:
        """Send in order; stop at the first message that cannot go now. True if all went."""
        chat_id = outgoing[0].chat_id if outgoing else 0
        for message in outgoing:
            if self.closed:
                return False
            message.chat_id = chat_id  # the chat may have moved on the way
            outcome = await self._send(message)
            chat_id = message.chat_id
            if outcome in (_Outcome.DEFERRED, _Outcome.GONE):
                return False
        return True

    async def _send(self, message: Outgoing) -> _Outcome:
        plain = False
        moves = 0
        while True:
            try:
                if plain:
                    await self.sender.send_plain(message.chat_id, plain_text(message.html) or "…")
                else:
                    await self._attempt(message)
            except ChatMoved as exc:
                moves += 1
                if moves > 3:
                    return await self._failed(message, TemporaryFailure("chat keeps moving"))
                await self.store.migrate_chat(message.chat_id, exc.new_chat_id)
                log.info("chat %s moved to %s", message.chat_id, exc.new_chat_id)
                message.chat_id = exc.new_chat_id
            except MessageRejected as exc:
                if plain:
                    log.error(
                        "Telegram rejected even the plain text of outbox rows %s (chat %s): %s;"
                        " dropping them",
                        message.outbox_ids,
                        message.chat_id,
                        exc,
                    )
                    await self.store.drop_outbox(message.outbox_ids, f"rejected: {exc}")
                    return _Outcome.DROPPED
                self.stats.rejected += 1
                log.error(
                    "Telegram rejected the message for outbox rows %s (chat %s): %s;"
                    " sending it as plain text",
                    message.outbox_ids,
                    message.chat_id,
                    exc,
                )
                plain = True
            except FloodWait as exc:
                self.stats.flood_waits += 1
                self._defer(message.chat_id, exc.seconds, "flood")
                log.info("chat %s must wait %.1fs (429); deferred", message.chat_id, exc.seconds)
                return _Outcome.DEFERRED
            except ChatGone as exc:
                self.stats.chats_gone += 1
                self._deferred.pop(message.chat_id, None)
                self._chat_failures.pop(message.chat_id, None)  # no state kept for gone chats
                dropped = await self.store.deactivate_chat(message.chat_id, str(exc))
                log.info(
                    "chat %s is gone (%s): deactivated, %d pending dropped",
                    message.chat_id,
                    exc,
                    dropped,
                )
                return _Outcome.GONE
            except TemporaryFailure as exc:
                return await self._failed(message, exc)
            else:
                break
        await self.store.mark_sent(message.outbox_ids)
        self.stats.sent_messages += 1
        self.stats.settled_rows += len(message.outbox_ids)
        self._succeeded(message.chat_id)
        return _Outcome.SENT

    async def _attempt(self, message: Outgoing) -> None:
        if message.photo is not None:
            await self.sender.send_photo(message.chat_id, message.photo, message.html)
        else:
            await self.sender.send_text(message.chat_id, message.html, preview=message.preview)

    def _succeeded(self, chat_id: int) -> None:
        self._streak = 0
        self._chat_failures.pop(chat_id, None)
        if self._halt_level:
            log.info("Telegram answers again: delivery resumes")
            self._halt_level = 0
            self._halted_until = float("-inf")
            for chat, (_, why) in list(self._deferred.items()):
                if why == "failure":  # the outage's fault, not the chat's
                    del self._deferred[chat]

    async def _failed(self, message: Outgoing, exc: DeliveryError) -> _Outcome:
        """A temporary failure: back off this chat, and everything if it keeps happening."""
        self.stats.failures += 1
        chat_id = message.chat_id
        count = self._chat_failures[chat_id] = self._chat_failures.get(chat_id, 0) + 1
        self._defer(chat_id, min(self.retry_base * 2 ** (count - 1), self.retry_max), "failure")
        self._streak += 1
        quiet = self._halt_level > 0
        if self._streak >= HALT_AFTER and not self.halted():
            self._halt_level += 1
            self.stats.pauses += 1
            pause = min(self.retry_base * 2 ** (self._halt_level - 1), self.halt_max)
            self._halted_until = self.monotonic() + pause
            log.warning(
                "%d sends in a row failed (last: %s): pausing delivery for %.0fs",
                self._streak,
                exc,
                pause,
            )
        elif not quiet:
            log.warning("sending to chat %s failed (%s); will retry", chat_id, exc)
        await self.store.mark_failed_attempt(message.outbox_ids, str(exc))
        return _Outcome.DEFERRED
