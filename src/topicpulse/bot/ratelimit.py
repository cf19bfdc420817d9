"""Flood control for the Bot API: a python-telegram-bot ``BaseRateLimiter`` on token buckets.

Telegram's limits (commonly quoted; Telegram does not publish exact numbers): about 30 messages a
second per bot, about one a second per private chat with short bursts, 20 a minute per group.
Past them a request fails with 429 and ``retry_after``, and a bot that keeps sending into a
penalised scope is given longer and longer penalties.

``TelegramRateLimiter`` paces every message-sending request *before* it goes out, so that 429s
do not happen in the first place:

* one global leaky bucket (29.5/s, bursts of 20) shared by everything the bot sends;
* one bucket per private chat (1/s, bursts of 2) and per group (at most 19 in any minute);
* three priorities. Replies to users are the default; bulk sends (alerts) pass
  ``rate_limit_args=Priority.BULK``, and what only helps (the tick a rating puts on a message's
  buttons) ``Priority.LOW``. Waiters are served reply-first, then bulk, then low, and neither
  bulk nor low sends take the last tokens of a bucket (``reserve``), which stay free for
  replies: a user's command is answered about as fast as on an idle bot while thousands of
  alerts drain at full speed, and a thousand readers' ticks never slow either.

It also reacts to the 429s that happen anyway. The chat that got one is closed for
``retry_after`` — only that chat, the others keep flowing — unless several chats get one at
about the same time: then Telegram is limiting the whole bot, and every send waits. A bulk send
into a closed chat fails at once with ``RetryAfter`` (the delivery engine defers that chat and
moves on); a reply waits and retries.

The buckets are ``bot.buckets.TokenBucket`` (leaky-bucket accounting); the queueing by priority is
``PriorityBucket``. All time is read from an injectable ``clock`` and waited for with an
injectable ``sleep`` (defaults: ``time.monotonic`` and ``asyncio.sleep``), so tests can run the
limiter on a virtual clock. Only message-sending endpoints are paced (``send*`` but
``sendChatAction``, ``edit*``, ``copy*``, ``forward*``); ``getUpdates`` never reaches a rate
limiter, and queries such as ``getChatMember`` or ``answerCallbackQuery`` pass straight through.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import logging
import time
import warnings
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter
from telegram.warnings import PTBDeprecationWarning

from topicpulse.bot.buckets import Clock, Priority, PriorityBucket, Sleep

log = logging.getLogger(__name__)

JSON = bool | dict[str, Any] | list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Limits:
    """The budgets, in messages per second. Defaults: Telegram's limits with a safety margin
    (every bucket allows strictly less than Telegram in any window, even with jitter of a few
    hundred milliseconds between our clock and Telegram's)."""

    # 29.5/s: with its burst of 20 below Telegram's ~30 in every window, and only 1.7% short of
    # the ceiling over a long burst (29/s cost 52 s of a 25-minute burst of instant alerts).
    global_rate: float = 29.5
    global_burst: float = 20.0
    global_reserve: float = 5.0  # of the global burst, left to replies by bulk sends
    private_rate: float = 1.0
    private_burst: float = 2.0
    private_reserve: float = 1.0
    group_rate: float = 16 / 60  # with the burst of 3: at most 19 in any 60 s (Telegram: 20)
    group_burst: float = 3.0
    group_reserve: float = 1.0
    # Several chats answered 429 within this window: Telegram is limiting the whole bot.
    global_flood_chats: int = 3
    global_flood_window: float = 1.0
    # Replies retry a 429 (after waiting it out) this often, if the wait is at most this long.
    reply_retries: int = 3
    reply_max_wait: float = 30.0
    # A low send (a rating's tick) waits at most this long for room, then is left out (NoRoom).
    low_max_wait: float = 1.0

    def scaled(self, factor: float) -> Limits:
        """The same limits ``factor`` times faster (tests against a fake with faster limits)."""
        return Limits(
            global_rate=self.global_rate * factor,
            global_burst=self.global_burst,
            global_reserve=self.global_reserve,
            private_rate=self.private_rate * factor,
            private_burst=self.private_burst,
            private_reserve=self.private_reserve,
            group_rate=self.group_rate * factor,
            group_burst=self.group_burst,
            group_reserve=self.group_reserve,
            global_flood_chats=self.global_flood_chats,
            global_flood_window=self.global_flood_window / factor,
            reply_retries=self.reply_retries,
            reply_max_wait=self.reply_max_wait,
            low_max_wait=self.low_max_wait / factor,
        )


class ChatCoolingDown(RetryAfter):
    """A bulk send refused before it went out: the chat is serving a 429 penalty."""


class NoRoom(RetryAfter):
    """A low send left out before it went out: no room for it within ``low_max_wait``."""


# ---------------------------------------------------------------------------------- limiter
_PACED_PREFIXES = ("send", "edit", "copy", "forward")
_NOT_PACED = frozenset({"sendChatAction"})


def paced(endpoint: str) -> bool:
    """Whether ``endpoint`` sends or changes a message (what Telegram's flood limits count)."""
    return endpoint.startswith(_PACED_PREFIXES) and endpoint not in _NOT_PACED


def _chat_key(chat_id: object) -> int | str | None:
    if chat_id is None:
        return None
    if isinstance(chat_id, int):
        return chat_id
    text = str(chat_id).strip()
    return int(text) if text.lstrip("-").isdigit() else text  # "@channel" stays a string


def _is_group(chat: int | str) -> bool:
    return isinstance(chat, str) or chat < 0


def _retry_after(kind: type[RetryAfter], seconds: float) -> RetryAfter:
    with warnings.catch_warnings():  # PTB warns about the type retry_after will have
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        return kind(dtm.timedelta(seconds=max(seconds, 0.001)))


def retry_seconds(exc: RetryAfter) -> float:
    """``retry_after`` in seconds (without PTB's warning about its future type)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


@dataclass(slots=True)
class LimiterStats:
    sent: int = 0  # requests let through
    floods: int = 0  # 429s received
    global_floods: int = 0  # of which judged to be bot-wide
    refused: int = 0  # bulk sends refused because their chat was cooling down
    reply_retries: int = 0


class TelegramRateLimiter(BaseRateLimiter[Priority]):
    """Paces sends to stay inside Telegram's limits; see the module docstring."""

    __slots__ = (
        "_chat_buckets",
        "_chat_cooldown",
        "_created",
        "_global",
        "_global_until",
        "_recent_floods",
        "_sleep",
        "_time",
        "limits",
        "stats",
    )

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        """``clock`` (monotonic seconds) and ``sleep`` (waits that many seconds of ``clock``)
        are all the time the limiter sees: tests pass a virtual clock and its sleep."""
        self.limits = limits or Limits()
        self.stats = LimiterStats()
        self._time = clock
        self._sleep = sleep
        self._global: PriorityBucket | None = None
        self._chat_buckets: dict[int | str, PriorityBucket] = {}
        self._chat_cooldown: dict[int | str, float] = {}  # chat → clock time its penalty ends
        self._global_until = 0.0
        self._recent_floods: deque[tuple[float, int | str | None]] = deque()
        self._created = 0

    async def initialize(self) -> None:
        """Buckets are made lazily, inside the running loop."""

    async def shutdown(self) -> None:
        for bucket in [*self._chat_buckets.values(), *([self._global] if self._global else [])]:
            bucket.close()
        self._chat_buckets.clear()
        self._global = None

    # ------------------------------------------------------------------ introspection
    def cooldown(self, chat_id: int | str | None = None) -> float:
        """Seconds until a send to ``chat_id`` (or any send, for None) may go out."""
        now = self._time()
        until = self._global_until
        if chat_id is not None:
            until = max(until, self._chat_cooldown.get(_chat_key(chat_id) or 0, 0.0))
        return max(0.0, until - now)

    # ------------------------------------------------------------------ buckets
    def _global_bucket(self) -> PriorityBucket:
        if self._global is None:
            lim = self.limits
            self._global = self._bucket(lim.global_rate, lim.global_burst, lim.global_reserve)
        return self._global

    def _chat_bucket(self, chat: int | str) -> PriorityBucket:
        bucket = self._chat_buckets.get(chat)
        if bucket is None:
            lim = self.limits
            if _is_group(chat):
                bucket = self._bucket(lim.group_rate, lim.group_burst, lim.group_reserve)
            else:
                bucket = self._bucket(lim.private_rate, lim.private_burst, lim.private_reserve)
            self._chat_buckets[chat] = bucket
            self._created += 1
            if self._created % 1024 == 0:
                self._evict(keep=chat)
        return bucket

    def _bucket(self, rate: float, burst: float, reserve: float) -> PriorityBucket:
        return PriorityBucket(rate, burst, reserve, clock=self._time, sleep=self._sleep)

    def _evict(self, keep: int | str) -> None:
        """Forget buckets that are back to empty and penalties that are over (a bucket that
        drained completely behaves exactly like a new one)."""
        for chat, bucket in list(self._chat_buckets.items()):
            if chat != keep and bucket.idle():
                del self._chat_buckets[chat]
        now = self._time()
        for chat, until in list(self._chat_cooldown.items()):
            if until <= now:
                del self._chat_cooldown[chat]

    # ------------------------------------------------------------------ 429s
    def _note_flood(self, chat: int | str | None, seconds: float) -> None:
        self.stats.floods += 1
        now = self._time()
        lim = self.limits
        if chat is not None:
            self._chat_cooldown[chat] = max(self._chat_cooldown.get(chat, 0.0), now + seconds)
        floods = self._recent_floods
        floods.append((now, chat))
        while floods and now - floods[0][0] > lim.global_flood_window:
            floods.popleft()
        chats = {c for _, c in floods}
        if chat is None or len(chats) >= lim.global_flood_chats:
            if self._global_until < now + seconds:
                self.stats.global_floods += 1
                log.warning(
                    "Telegram flood control on %d chats at once: all sends wait %.1fs",
                    len(chats),
                    seconds,
                )
            self._global_until = max(self._global_until, now + seconds)
        else:
            log.info("Telegram flood control for chat %s: it waits %.1fs", chat, seconds)

    async def _wait_penalties(self, chat: int | str | None, priority: Priority) -> None:
        """Wait out a bot-wide penalty; a chat's own penalty is waited out by replies and
        refused at once for bulk sends (their sender has other chats to serve)."""
        while True:
            now = self._time()
            chat_left = self._chat_cooldown.get(chat, 0.0) - now if chat is not None else 0.0
            if chat_left > 0 and priority != Priority.REPLY:
                self.stats.refused += 1
                raise _retry_after(ChatCoolingDown, chat_left)
            left = max(chat_left, self._global_until - now)
            if left <= 0:
                return
            if priority == Priority.LOW:
                raise _retry_after(NoRoom, left)
            if priority == Priority.REPLY and left > self.limits.reply_max_wait:
                raise _retry_after(RetryAfter, left)
            await self._sleep(left)

    async def _acquire_by(self, bucket: PriorityBucket, priority: Priority, by: float) -> None:
        """``bucket.acquire``, or ``NoRoom`` if that takes until ``by`` (clock time)."""
        acquire = asyncio.ensure_future(bucket.acquire(priority))
        timer = asyncio.ensure_future(self._sleep(max(0.0, by - self._time())))
        try:
            await asyncio.wait({acquire, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not acquire.done():
                acquire.cancel()  # (the bucket hands a token granted as it left to the next)
        if acquire.cancelled() or not acquire.done():
            raise _retry_after(NoRoom, by - self._time())
        acquire.result()

    # ------------------------------------------------------------------ the request
    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, JSON]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: Priority | None,
    ) -> JSON:
        if not paced(endpoint):
            return await callback(*args, **kwargs)
        priority = rate_limit_args if isinstance(rate_limit_args, Priority) else Priority.REPLY
        chat = _chat_key(data.get("chat_id"))
        retries = 0
        while True:
            await self._wait_penalties(chat, priority)
            if priority == Priority.LOW:  # room within low_max_wait, or left out
                deadline = self._time() + self.limits.low_max_wait
                if chat is not None:
                    await self._acquire_by(self._chat_bucket(chat), priority, deadline)
                await self._acquire_by(self._global_bucket(), priority, deadline)
            else:
                if chat is not None:
                    await self._chat_bucket(chat).acquire(priority)
                await self._global_bucket().acquire(priority)
            if self.cooldown(chat) > 0:  # a 429 elsewhere closed the scope while we queued
                continue
            self.stats.sent += 1
            try:
                return await callback(*args, **kwargs)
            except RetryAfter as exc:
                seconds = retry_seconds(exc)
                self._note_flood(chat, seconds)
                if (
                    priority != Priority.REPLY
                    or retries >= self.limits.reply_retries
                    or seconds > self.limits.reply_max_wait
                ):
                    raise
                retries += 1
                self.stats.reply_retries += 1
