"""Sending one chat's messages and reacting to each outcome, one chat at a time: deferrals
(429, backoff), pauses (Telegram unreachable), fallbacks (text without the chart, plain text)
and giving up. The base of ``Delivery``, which decides what to send when.

Two outcomes are neither a success nor a failure:

* *maybe sent* (``MaybeSent``: Telegram took the request, its answer did not come within the
  sender's read timeout). Telegram most likely delivered it — a slow answer is the usual sign
  of a busy Bot API, not of a lost message — so the rows are settled as sent, with the doubt
  recorded in the outbox (``last_error`` "maybe sent: …"), logged with their ids and counted
  (``DeliveryStats.maybe_sent``). They are never sent again: a subscriber never gets the same
  alert twice. The chat waits ``SLOW_PAUSE`` before its next message; a slow chat counts
  towards no pause of the whole delivery (Telegram is answering, slowly).
* *topic closed* (``TopicClosed``: the forum topic the message goes to is closed). A problem
  of the chat, not of the message: the rows stay pending (they count no failure and are never
  given up), the chat's admins are told once — in General, or if General is the closed one in
  another topic the chat follows from — and the chat is tried again with a growing delay
  (``CLOSED_RETRY`` doubling to ``CLOSED_RETRY_MAX``), or at once when a command comes from it
  (``heard_from``): the first send that goes through resumes its alerts, in order.

A spike's chart is uploaded once: the first chat's send uploads it, the others wait for that
and send the ``file_id`` Telegram gave it (``Outgoing.chart`` names the episode)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum

from topicpulse.delivery import forums
from topicpulse.delivery.forums import CLOSED_RETRY, CLOSED_RETRY_MAX
from topicpulse.delivery.messages import Outgoing, plain_text
from topicpulse.delivery.protocol import (
    ChatGone,
    ChatMoved,
    DeliveryError,
    FloodWait,
    MaybeSent,
    MediaForbidden,
    MessageRejected,
    PermanentFailure,
    Sender,
    TemporaryFailure,
    ThreadGone,
    TopicClosed,
)
from topicpulse.delivery.uploads import ChartUploads
from topicpulse.models import iso, parse_iso
from topicpulse.store import Store

log = logging.getLogger(__name__)

RETRY_BASE = 1.0  # seconds: first retry after a temporary failure, doubling
RETRY_MAX = 60.0
GIVE_UP_AFTER = timedelta(hours=24)  # a message failing temporarily this long is dropped
HALT_AFTER = 5  # chats failing in a row (no success between): Telegram itself is in trouble
HALT_MAX = 30.0
SLOW_PAUSE = 30.0  # seconds a chat waits after a send whose answer did not come in time


@dataclass(slots=True)
class DeliveryStats:
    sent_messages: int = 0
    settled: int = 0  # outbox rows and papers from the matches settled by accepted messages
    flood_waits: int = 0
    rejected: int = 0  # messages sent again as plain text
    photos_refused: int = 0  # spike alerts sent as text: the chat takes no photos
    dropped: int = 0  # messages refused for good, or given up after GIVE_UP_AFTER
    chats_gone: int = 0
    failures: int = 0
    folded: int = 0  # backlogs folded into a catch-up
    pauses: int = 0  # times all delivery paused after failures in a row
    maybe_sent: int = 0  # messages whose answer did not come in time: settled, not resent
    topics_closed: int = 0  # sends refused because the chat's forum topic is closed
    charts_uploaded: int = 0  # spike charts uploaded (the other chats get their file_id)
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
        self._closed: dict[int, int] = {}  # chat whose forum topic is closed → refusals
        self._charts = ChartUploads()

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

    def heard_from(self, chat_id: int) -> bool:
        """A command came from the chat: if it waits for a closed forum topic, try it again
        now (an admin may just have reopened it). True if it was waiting."""
        entry = self._deferred.get(chat_id)
        if chat_id not in self._closed or entry is None or entry[1] != "closed":
            return False
        del self._deferred[chat_id]
        return True

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
                await self._attempt(message, plain=plain)
            except MaybeSent as exc:
                return await self._maybe_sent(message, exc)
            except TopicClosed as exc:
                return await self._topic_closed(message, exc)
            except ThreadGone as exc:
                if message.thread_id is None:  # (said of a thread only; anything else is a bug)
                    return await self._drop(message, exc)
                await self.store.forget_thread(message.chat_id, message.thread_id)
                log.info(
                    "chat %s: forum topic %s is gone; its alerts go to General from now on",
                    message.chat_id,
                    message.thread_id,
                )
                message.thread_id = None
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
                await self._as_rows(message)  # (its papers dropped with the chat's rows)
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
        self.stats.settled += message.settles_papers
        await self._succeeded(message.chat_id)
        return Outcome.SENT

    async def _settle(self, message: Outgoing) -> None:
        """Telegram accepted the message: record what it delivered."""
        if message.weekly is not None:
            due, next_at = message.weekly
            await self.store.settle_weekly(message.chat_id, due=due, next_at=next_at)
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

    async def _attempt(self, message: Outgoing, *, plain: bool = False) -> None:
        # (buttons and a thread only when there are some: senders that predate them keep working)
        extra: dict[str, object] = {}
        if message.thread_id is not None:
            extra["thread_id"] = message.thread_id
        if plain:
            text = plain_text(message.html) or "…"
            await self.sender.send_plain(message.chat_id, text, **extra)  # type: ignore[arg-type]
            return
        if message.photo is not None:
            if await self._charts.send(self.sender, message, extra):
                self.stats.charts_uploaded += 1
            return
        if message.buttons:
            extra["buttons"] = message.buttons
        await self.sender.send_text(
            message.chat_id,
            message.html,
            preview=message.preview,
            **extra,  # type: ignore[arg-type]
        )

    async def _drop(self, message: Outgoing, exc: DeliveryError, how: str = "") -> Outcome:
        """Telegram refused the message for good: drop its rows, say so, go on with the chat."""
        await self._as_rows(message)
        log.error(
            "Telegram refused the message for outbox rows %s (chat %s)%s: %s; dropping them",
            message.outbox_ids,
            message.chat_id,
            f" {how}" if how else "",
            exc,
        )
        await self.store.drop_outbox(message.outbox_ids, f"refused: {exc}")
        if message.settles_more:  # given up too: the digest is not assembled again
            await self._settle(message)
        self.stats.dropped += 1
        return Outcome.DROPPED

    async def _maybe_sent(self, message: Outgoing, exc: DeliveryError) -> Outcome:
        """No answer in time: most likely delivered. Settled, never sent again; the chat waits
        a little (Telegram is slow for it); no failure is counted (see the module doc)."""
        await self._as_rows(message)
        self.stats.maybe_sent += 1
        self.stats.settled += message.settles_papers
        await self.store.mark_maybe_sent(message.outbox_ids, str(exc))
        if message.settles_more:  # and the digest's watermark moves past it
            await self._settle(message)
        self._defer(message.chat_id, SLOW_PAUSE, "slow")
        log.warning(
            "Telegram did not answer in time for outbox rows %s (chat %s): %s; most likely"
            " delivered, so settled as sent (maybe sent) and not sent again",
            message.outbox_ids,
            message.chat_id,
            exc,
        )
        return Outcome.DEFERRED

    async def _topic_closed(self, message: Outgoing, exc: TopicClosed) -> Outcome:
        """The chat's forum topic is closed: keep what it owes (its rows, and its watermark
        unmoved), tell the admins once, retry later."""
        chat_id = message.chat_id
        self.stats.topics_closed += 1
        count = self._closed[chat_id] = self._closed.get(chat_id, 0) + 1
        delay = min(CLOSED_RETRY * 2 ** (count - 1), CLOSED_RETRY_MAX)
        self._defer(chat_id, delay, "closed")
        first = await self.store.mark_topic_closed(chat_id)
        log.info(
            "chat %s: forum topic %s is closed (%s); its alerts kept, trying again in %.0fs",
            chat_id,
            exc.thread_id if exc.thread_id is not None else "General",
            exc,
            delay,
        )
        if first:
            told = await forums.tell_closed(self.store, self.sender, chat_id, exc.thread_id)
            if told is False:  # the notice failed: it is tried again next time
                await self.store.clear_topic_closed(chat_id)
        return Outcome.DEFERRED

    async def _as_rows(self, message: Outgoing) -> None:
        """A message from the matches that did not simply go through: its papers become outbox
        rows of the message (``store.queue_papers``), so its failures count towards giving up
        and a refusal or a doubt is recorded per paper, as for any row; the watermark still
        moves only with the digest's or alert's last message."""
        part = message.digest
        if part is None or not part.paper_ids:
            return
        message.outbox_ids = [
            *message.outbox_ids,
            *await self.store.queue_papers(message.chat_id, part.paper_ids),
        ]
        part.paper_ids = []

    async def _succeeded(self, chat_id: int) -> None:
        self._failing.clear()
        self._chat_failures.pop(chat_id, None)
        if self._closed.pop(chat_id, None) is not None:  # its topic is open again
            await self.store.clear_topic_closed(chat_id)
            log.info("chat %s: its forum topic takes messages again; alerts resume", chat_id)
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
        await self._as_rows(message)
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
