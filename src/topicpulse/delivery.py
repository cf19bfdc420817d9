"""Delivery: turns the durable outbox into messages and hands them to a ``Sender``.

An outbox row is marked sent only after the sender returned (Telegram accepted the message), so
a crash or restart re-sends at most the messages that were in flight. What can go wrong on the
way is expressed by the exceptions below; the Telegram adapter (``bot.sender``) maps the Bot
API's errors onto them, which keeps this module free of Telegram objects.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from topicpulse import formatting, momentum
from topicpulse.charts import render_chart
from topicpulse.chats import next_digest_at
from topicpulse.models import OutboxItem, iso, utcnow
from topicpulse.store import Store

log = logging.getLogger(__name__)


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
    """Telegram asked us to wait ``seconds`` before sending again (HTTP 429)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"flood wait {seconds}s")
        self.seconds = seconds


class MessageRejected(DeliveryError):
    """Telegram refused this message's content (bad HTML, too long): retrying won't help."""


class TemporaryFailure(DeliveryError):
    """Network error or 5xx: try again later."""


class Sender(Protocol):
    async def send_text(self, chat_id: int, html: str, *, preview: bool = False) -> None: ...

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


_TAG = re.compile(r"<[^>]+>")


def plain_text(html_text: str) -> str:
    """Fallback for a message Telegram rejected: tags dropped, entities decoded, cut to fit."""
    import html

    text = html.unescape(_TAG.sub("", html_text))
    return text if formatting.tg_len(text) <= formatting.MAX_MESSAGE else text[:4000] + "…"


async def paper_messages(
    store: Store, chat_id: int, items: Sequence[OutboxItem], *, digest_period: str | None = None
) -> list[Outgoing]:
    """Messages for a chat's pending paper rows: instant alerts, or a digest when
    ``digest_period`` is given. Each message knows which rows it settles."""
    by_paper = {i.paper_id: i.id for i in items if i.kind == "paper" and i.paper_id is not None}
    if not by_paper:
        return []
    papers = await store.papers_by_ids(list(by_paper))
    tags = await store.chat_topics_for_papers(chat_id, [p.id for p in papers])
    alerts = [formatting.Alert(p, tags.get(p.id, [])) for p in papers]
    if digest_period:
        packed = formatting.pack_digest(alerts, period=digest_period)
    else:
        packed = formatting.pack_alerts(alerts)
    return [
        Outgoing(chat_id, [by_paper[pid] for pid in paper_ids], html, preview=len(paper_ids) == 1)
        for html, paper_ids in packed
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
    errors: list[str] = field(default_factory=list)


class Delivery:
    """Sends what the outbox holds: instant alerts and spike alerts as they come, digests when
    due. ``run_once`` is one pass; the bot calls it from its jobs."""

    def __init__(
        self,
        store: Store,
        sender: Sender,
        *,
        clock: Callable[[], datetime] = utcnow,
        concurrency: int = 8,
    ) -> None:
        self.store = store
        self.sender = sender
        self.clock = clock
        self.concurrency = concurrency
        self.stats = DeliveryStats()
        self._busy: set[int] = set()  # chats being delivered right now

    async def run_once(self) -> int:
        """Deliver pending instant alerts, spike alerts and due digests. Returns rows settled."""
        before = self.stats.settled_rows
        now = self.clock()
        chats = await self.store.chats_with_pending(modes=("instant",))
        spike_chats = await self.store.chats_with_pending(modes=("daily", "weekly"), kind="spike")
        digest_chats = await self.store.chats_with_pending(
            modes=("daily", "weekly"), due_before=iso(now)
        )
        jobs = [(c, None) for c in dict.fromkeys([*chats, *spike_chats])]
        jobs += [(c, "digest") for c in digest_chats]
        semaphore = asyncio.Semaphore(self.concurrency)

        async def one(chat_id: int, what: str | None) -> None:
            async with semaphore:
                if chat_id in self._busy:
                    return
                self._busy.add(chat_id)
                try:
                    if what == "digest":
                        await self._deliver_digest(chat_id, now)
                    else:
                        await self._deliver_instant(chat_id)
                finally:
                    self._busy.discard(chat_id)

        await asyncio.gather(*(one(c, w) for c, w in jobs))
        await self._advance_idle_digests(now)
        return self.stats.settled_rows - before

    async def _deliver_instant(self, chat_id: int) -> None:
        chat = await self.store.chat(chat_id)
        if chat is None:
            return
        items = await self.store.pending_for_chat(chat_id)
        outgoing: list[Outgoing] = []
        if chat.mode == "instant":
            outgoing += await paper_messages(self.store, chat_id, items)
        for item in items:
            if item.kind == "spike":
                message = await spike_message(self.store, chat_id, item)
                if message is None:
                    await self.store.drop_outbox([item.id], "episode or topic no longer exists")
                else:
                    outgoing.append(message)
        await self._send_all(outgoing)

    async def _deliver_digest(self, chat_id: int, now: datetime) -> None:
        chat = await self.store.chat(chat_id)
        if chat is None:
            return
        items = [
            i for i in await self.store.pending_for_chat(chat_id, limit=2000) if i.kind == "paper"
        ]
        outgoing = await paper_messages(self.store, chat_id, items, digest_period=chat.mode)
        if await self._send_all(outgoing):
            due = next_digest_at(chat, now)
            await self.store.update_chat(chat_id, next_digest_at=iso(due) if due else None)

    async def _advance_idle_digests(self, now: datetime) -> None:
        """Digest time came with nothing to send: no message, just schedule the next one."""
        for chat in await self.store.idle_digest_chats_due(iso(now)):
            due = next_digest_at(chat, now)
            await self.store.update_chat(chat.chat_id, next_digest_at=iso(due) if due else None)

    async def _send_all(self, outgoing: Sequence[Outgoing]) -> bool:
        """Send in order; stop at the first message that cannot go now. True if all went."""
        for message in outgoing:
            if not await self._send(message):
                return False
        return True

    async def _send(self, message: Outgoing) -> bool:
        try:
            await self._attempt(message)
        except FloodWait as exc:
            self.stats.flood_waits += 1
            log.warning(
                "Telegram asks to wait %.0fs; retrying chat %s then", exc.seconds, message.chat_id
            )
            await asyncio.sleep(exc.seconds)
            return await self._send(message)
        except ChatMoved as exc:
            await self.store.migrate_chat(message.chat_id, exc.new_chat_id)
            message.chat_id = exc.new_chat_id
            return await self._send(message)
        except ChatGone as exc:
            self.stats.chats_gone += 1
            dropped = await self.store.deactivate_chat(message.chat_id, str(exc))
            log.info(
                "chat %s is gone (%s): deactivated, %d pending dropped",
                message.chat_id,
                exc,
                dropped,
            )
            return False
        except MessageRejected as exc:
            self.stats.rejected += 1
            log.error(
                "Telegram rejected outbox rows %s (%s); sending plain text", message.outbox_ids, exc
            )
            try:
                await self.sender.send_text(
                    message.chat_id, plain_text(message.html) or "…", preview=False
                )
            except DeliveryError as fallback_exc:
                await self.store.drop_outbox(message.outbox_ids, f"rejected: {exc}; {fallback_exc}")
                return False
        except TemporaryFailure as exc:
            self.stats.failures += 1
            await self.store.mark_failed_attempt(message.outbox_ids, str(exc))
            log.warning("sending to chat %s failed (%s); will retry", message.chat_id, exc)
            return False
        await self.store.mark_sent(message.outbox_ids)
        self.stats.sent_messages += 1
        self.stats.settled_rows += len(message.outbox_ids)
        return True

    async def _attempt(self, message: Outgoing) -> None:
        if message.photo is not None:
            await self.sender.send_photo(message.chat_id, message.photo, message.html)
        else:
            await self.sender.send_text(message.chat_id, message.html, preview=message.preview)
