"""Sending one chat's messages and reacting to each outcome, one chat at a time: deferrals
(429, backoff), pauses (Telegram unreachable), fallbacks (text without the chart, plain text)
and giving up. The base of ``Delivery``, which decides what to send when."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum

from topicpulse.delivery.messages import Outgoing, plain_text
from topicpulse.delivery.protocol import (
    ChatGone,
    ChatMoved,
    DeliveryError,
    FloodWait,
    MediaForbidden,
    MessageRejected,
    PermanentFailure,
    Sender,
    TemporaryFailure,
)
from topicpulse.models import iso, parse_iso
from topicpulse.store import Store

log = logging.getLogger(__name__)

RETRY_BASE = 1.0  # seconds: first retry after a temporary failure, doubling
RETRY_MAX = 60.0
GIVE_UP_AFTER = timedelta(hours=24)  # a message failing temporarily this long is dropped
HALT_AFTER = 5  # chats failing in a row (no success between): Telegram itself is in trouble
HALT_MAX = 30.0


@dataclass(slots=True)
class DeliveryStats:
    sent_messages: int = 0
    settled_rows: int = 0
    flood_waits: int = 0
    rejected: int = 0  # messages sent again as plain text
    photos_refused: int = 0  # spike alerts sent as text: the chat takes no photos
    dropped: int = 0  # messages refused for good, or given up after GIVE_UP_AFTER
    chats_gone: int = 0
    failures: int = 0
    folded: int = 0  # backlogs folded into a catch-up
    pauses: int = 0  # times all delivery paused after failures in a row
    errors: list[str] = field(default_factory=list)


class Outcome(Enum):
    """What became of one message."""

    SENT = "sent"
    DEFERRED = "deferred"  # try this chat again later
    GONE = "gone"  # chat deactivated
    DROPPED = "dropped"  # the message cannot be sent: rows dropped, go on


class Courier:
    """Sends messages chat by chat and keeps what their outcomes teach: which chats wait
    (``deferred``), whether everything waits (``halted``), and when to look again
    (``next_due``)."""

    def __init__(
        self,
        store: Store,
        sender: Sender,
        *,
        clock: Callable[[], datetime],
        monotonic: Callable[[], float],
        retry_base: float = RETRY_BASE,
        retry_max: float = RETRY_MAX,
        halt_max: float = HALT_MAX,
        give_up_after: timedelta = GIVE_UP_AFTER,
    ) -> None:
        self.store = store
        self.sender = sender
        self.clock = clock
        self.monotonic = monotonic
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.halt_max = halt_max
        self.give_up_after = give_up_after
        self.stats = DeliveryStats()
        self.closed = False
        self._deferred: dict[int, tuple[float, str]] = {}  # chat → (not before, why)
        self._chat_failures: dict[int, int] = {}  # chat → temporary failures in a row
        self._failing: set[int] = set()  # chats that failed since the last success, any chat
        self._halt_level = 0  # > 0 from a pause until a send succeeds again
        self._halted_until = float("-inf")

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
            if outcome in (Outcome.DEFERRED, Outcome.GONE):
                return False
        return True

    async def _send(self, message: Outgoing) -> Outcome:
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
            except MediaForbidden as exc:
                if message.photo is None:  # (said of a photo only; anything else is a bug)
                    return await self._drop(message, exc)
                self.stats.photos_refused += 1
                log.info(
                    "chat %s takes no photos (%s): sending outbox rows %s as text, without chart",
                    message.chat_id,
                    exc,
                    message.outbox_ids,
                )
                message.photo = None  # the caption is valid message HTML on its own
            except MessageRejected as exc:
                if plain:
                    return await self._drop(message, exc, "even as plain text")
                self.stats.rejected += 1
                log.error(
                    "Telegram rejected the message for outbox rows %s (chat %s): %s;"
                    " sending it as plain text",
                    message.outbox_ids,
                    message.chat_id,
                    exc,
                )
                plain = True
            except PermanentFailure as exc:
                return await self._drop(message, exc)
            except FloodWait as exc:
                self.stats.flood_waits += 1
                self._defer(message.chat_id, exc.seconds, "flood")
                log.info("chat %s must wait %.1fs (429); deferred", message.chat_id, exc.seconds)
                return Outcome.DEFERRED
            except ChatGone as exc:
                self.stats.chats_gone += 1
                self._deferred.pop(message.chat_id, None)
                self._chat_failures.pop(message.chat_id, None)  # no state kept for gone chats
                dropped = await self.store.deactivate_chat(message.chat_id, str(exc))
                log.info(
                    "chat %s is gone (%s): deactivated, %d pending dropped (subscriptions kept)",
                    message.chat_id,
                    exc,
                    dropped,
                )
                return Outcome.GONE
            except TemporaryFailure as exc:
                return await self._failed(message, exc)
            else:
                break
        await self._settle(message)
        self.stats.sent_messages += 1
        self.stats.settled_rows += len(message.outbox_ids)
        await self._succeeded(message.chat_id)
        return Outcome.SENT

    async def _settle(self, message: Outgoing) -> None:
        """Telegram accepted the message: record what it delivered."""
        part = message.digest
        if part is None:
            await self.store.mark_sent(message.outbox_ids)
            return
        chat = part.chat
        if chat.chat_id != message.chat_id:  # it moved on the way (group → supergroup)
            chat = dataclasses.replace(chat, chat_id=message.chat_id)
        await self.store.settle_digest(
            chat,
            outbox_ids=message.outbox_ids,
            paper_ids=part.paper_ids,
            through=part.through,
            next_digest_at=part.next_at,
        )

    async def _attempt(self, message: Outgoing) -> None:
        if message.photo is not None:
            await self.sender.send_photo(message.chat_id, message.photo, message.html)
        elif message.buttons:  # (only then: senders that predate buttons keep working)
            await self.sender.send_text(
                message.chat_id, message.html, preview=message.preview, buttons=message.buttons
            )
        else:
            await self.sender.send_text(message.chat_id, message.html, preview=message.preview)

    async def _drop(self, message: Outgoing, exc: DeliveryError, how: str = "") -> Outcome:
        """Telegram refused the message for good: drop its rows, say so, go on with the chat."""
        log.error(
            "Telegram refused the message for outbox rows %s (chat %s)%s: %s; dropping them",
            message.outbox_ids,
            message.chat_id,
            f" {how}" if how else "",
            exc,
        )
        await self.store.drop_outbox(message.outbox_ids, f"refused: {exc}")
        self.stats.dropped += 1
        return Outcome.DROPPED

    async def _succeeded(self, chat_id: int) -> None:
        self._failing.clear()
        self._chat_failures.pop(chat_id, None)
        if self._halt_level:
            log.info("Telegram answers again: delivery resumes")
            self._halt_level = 0
            self._halted_until = float("-inf")
            for chat, (_, why) in list(self._deferred.items()):
                if why == "failure":  # the outage's fault, not the chat's
                    del self._deferred[chat]
            # nor are the failures it caused: every failing message gets a new day of trying
            await self.store.forget_failures()

    async def _failed(self, message: Outgoing, exc: DeliveryError) -> Outcome:
        """A temporary failure: back off this chat, and everything if several chats fail in a
        row (Telegram unreachable). A message failing for ``give_up_after`` while Telegram
        answers others is dropped."""
        self.stats.failures += 1
        chat_id = message.chat_id
        now = self.clock()
        since = await self.store.mark_failed_attempt(message.outbox_ids, str(exc), at=iso(now))
        if since and not self._halt_level and now - parse_iso(since) >= self.give_up_after:
            self._chat_failures.pop(chat_id, None)
            log.error(
                "gave up on outbox rows %s (chat %s): failing since %s (last: %s); dropping them",
                message.outbox_ids,
                chat_id,
                since,
                exc,
            )
            await self.store.drop_outbox(message.outbox_ids, f"gave up: {exc}")
            self.stats.dropped += 1
            return Outcome.DROPPED
        count = self._chat_failures[chat_id] = self._chat_failures.get(chat_id, 0) + 1
        self._defer(chat_id, min(self.retry_base * 2 ** (count - 1), self.retry_max), "failure")
        self._failing.add(chat_id)
        quiet = self._halt_level > 0
        if len(self._failing) >= HALT_AFTER and not self.halted():
            self._halt_level += 1
            self.stats.pauses += 1
            pause = min(self.retry_base * 2 ** (self._halt_level - 1), self.halt_max)
            self._halted_until = self.monotonic() + pause
            log.warning(
                "%d chats failed in a row (last: %s): pausing delivery for %.0fs",
                len(self._failing),
                exc,
                pause,
            )
        elif not quiet:
            log.warning("sending to chat %s failed (%s); will retry", chat_id, exc)
        return Outcome.DEFERRED
