"""The Telegram ``Sender``: sends alerts through python-telegram-bot and maps Bot API errors onto
the delivery engine's vocabulary (``ChatGone``, ``MediaForbidden``, ``FloodWait``, …).

What a 400 means is read from its description (Telegram has no error codes beyond HTTP's):

* the chat can take nothing from the bot (no such chat, no right to send messages) → gone;
* no right to send photos (or other media) while text may go → ``MediaForbidden``;
* the text's HTML or length → ``MessageRejected`` (the engine re-sends it as plain text);
* the forum topic is closed (TOPIC_CLOSED) → ``TopicClosed``; deleted ("message thread not
  found") → ``ThreadGone``;
* anything else → ``PermanentFailure`` (the engine drops the message).

Every 403 means the bot can send the chat nothing (blocked, kicked, deleted) → gone.

Timeouts (``SendTimeouts``, python-telegram-bot's four request timeouts, per call). PTB's
defaults (5 s to read the answer) are made for replies; a bulk send to a busy chat, or while
Telegram is loaded, can take longer to be answered, and it is usually delivered all the same.
So a send may take a while to be answered (``read``), and only a *read* timeout is reported as
``MaybeSent`` — the request was written out whole, Telegram may have delivered it — which the
engine never resends. A connect, write or pool timeout means the request never reached
Telegram complete: ``TemporaryFailure``, safe to retry.

Every send is marked ``Priority.BULK`` for the rate limiter (``bot.ratelimit``), so replies to
users go first; the bot must therefore be the Application's ``ExtBot`` with that limiter.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from telegram import Bot, Message
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.ext import ExtBot
from telegram.warnings import PTBUserWarning

from topicpulse.bot.buckets import Priority
from topicpulse.bot.common import inline_keyboard
from topicpulse.bot.ratelimit import retry_seconds
from topicpulse.bot.transport import written_unanswered
from topicpulse.delivery import (
    Buttons,
    ChatGone,
    ChatMoved,
    FloodWait,
    MaybeSent,
    MediaForbidden,
    MessageRejected,
    PermanentFailure,
    TemporaryFailure,
    ThreadGone,
    TopicClosed,
)

_GONE = (  # the bot can send this chat nothing
    "chat not found",
    "user is deactivated",
    "bot was kicked",
    "bot was blocked",
    "have no rights to send a message",
    "not enough rights to send text messages",
    "chat_write_forbidden",
    "chat_restricted",
    "chat_admin_required",
    "need administrator rights",
    "peer_id_invalid",
    "channel_private",
    "group chat was deactivated",
)
# Text may go, but not this kind of media: "not enough rights to send photos to the chat",
# CHAT_SEND_PHOTOS_FORBIDDEN, CHAT_SEND_MEDIA_FORBIDDEN, …
_MEDIA = re.compile(r"not enough rights to send (?!text)|chat_send_\w*_forbidden")
_CONTENT = ("can't parse", "too long", "too_long")  # the text itself: worth sending as plain text
_TOPIC_CLOSED = "topic_closed"  # "Bad Request: TOPIC_CLOSED"
_THREAD_GONE = ("message thread not found", "topic_deleted", "message_thread_invalid")
# Anything shaped like a bot token ("<digits>:<secret>"): error texts end up in logs and in the
# outbox's last_error, and must never carry the token.
_TOKEN = re.compile(r"\d+:[A-Za-z0-9_-]{10,}")
# ``_send_message`` asks for sendMessage by name on purpose (its answer unparsed), as a rating's
# tick does editMessageReplyMarkup (bot/rating.py); PTB's advice to use ``Bot.send_message``
# instead is for code that wants the parsed Message.
warnings.filterwarnings(
    "ignore",
    message=r"Please use 'Bot\.(sendMessage|editMessageReplyMarkup)' instead",
    category=PTBUserWarning,
)


def describe(exc: BaseException) -> str:
    """A short, token-free description of a failure."""
    text = str(exc) or type(exc).__name__
    return _TOKEN.sub("<redacted>", f"{type(exc).__name__}: {text}")[:300]


@dataclass(frozen=True, slots=True)
class SendTimeouts:
    """Seconds a bulk send may spend in each phase (PTB's per-call request timeouts)."""

    connect: float = 5.0  # no connection: nothing was sent
    write: float = 10.0  # writing a text message out
    media_write: float = 30.0  # uploading a chart
    read: float = 30.0  # waiting for Telegram's answer; past it the message is "maybe sent"
    pool: float = 10.0  # waiting for a free connection (256 in the pool; 48 delivery workers)


class TelegramSender:
    def __init__(self, bot: Bot, timeouts: SendTimeouts | None = None) -> None:
        self.bot = bot
        limited = isinstance(bot, ExtBot) and bot.rate_limiter is not None
        self.timeouts = timeouts = timeouts or SendTimeouts()
        self._extra: dict[str, Any] = {"rate_limit_args": Priority.BULK} if limited else {}
        self._extra.update(
            connect_timeout=timeouts.connect,
            read_timeout=timeouts.read,
            pool_timeout=timeouts.pool,
        )

    async def send_text(
        self,
        chat_id: int,
        html: str,
        *,
        preview: bool = False,
        buttons: Buttons | None = None,
        thread_id: int | None = None,
    ) -> None:
        """HTML text; ``buttons`` (label, callback data) become an inline keyboard, a button
        a row, or a list of them side by side; ``thread_id``: the forum topic to post in."""
        payload: dict[str, Any] = {"chat_id": chat_id, "text": html, "parse_mode": "HTML"}
        if buttons:
            rows = [b if isinstance(b, list) else [b] for b in buttons]
            payload["reply_markup"] = inline_keyboard(rows)
        await self._send_message(payload, preview, thread_id)

    async def send_plain(self, chat_id: int, text: str, *, thread_id: int | None = None) -> None:
        """Plain text, no parse mode: the fallback for a message Telegram rejected."""
        await self._send_message({"chat_id": chat_id, "text": text}, False, thread_id)

    async def _send_message(
        self, payload: dict[str, Any], preview: bool, thread_id: int | None
    ) -> None:
        """``sendMessage`` with the payload as the Bot API reads it. The answer is not parsed:
        a bulk send needs only whether it was accepted, and parsing the echoed message into
        PTB's objects (its entities, its keyboard) cost about a sixth of a digest's CPU.
        Errors come back as from ``Bot.send_message``, through the same rate limiter."""
        payload["link_preview_options"] = {"is_disabled": not preview}
        if thread_id is not None:
            payload["message_thread_id"] = thread_id
        await self._call(
            self.bot.do_api_request(
                "sendMessage", api_kwargs=payload, write_timeout=self.timeouts.write, **self._extra
            ),
            thread_id,
        )

    async def send_photo(
        self, chat_id: int, photo: bytes | str, caption_html: str, *, thread_id: int | None = None
    ) -> str | None:
        """A photo: its bytes (an upload) or the ``file_id`` of an earlier upload. Returns the
        ``file_id`` Telegram gives the largest size, for the next chats."""
        t = self.timeouts
        sent = await self._call(
            self.bot.send_photo(
                chat_id,
                photo,
                caption=caption_html,
                parse_mode=ParseMode.HTML,
                message_thread_id=thread_id,
                write_timeout=t.media_write if isinstance(photo, bytes) else t.write,
                **self._extra,
            ),
            thread_id,
        )
        sizes = sent.photo if isinstance(sent, Message) else ()
        return sizes[-1].file_id if sizes else None

    @staticmethod
    async def _call(request: Awaitable[object], thread_id: int | None = None) -> object:
        try:
            return await request
        except TimedOut as exc:
            if written_unanswered(exc):  # written out whole, not answered
                raise MaybeSent(describe(exc)) from exc
            raise TemporaryFailure(describe(exc)) from exc
        except RetryAfter as exc:
            raise FloodWait(retry_seconds(exc)) from exc
        except ChatMigrated as exc:
            raise ChatMoved(int(exc.new_chat_id)) from exc
        except Forbidden as exc:
            raise ChatGone(exc.message) from exc
        except BadRequest as exc:
            text = exc.message.lower()
            if _TOPIC_CLOSED in text:
                raise TopicClosed(thread_id, exc.message) from exc
            if thread_id is not None and any(marker in text for marker in _THREAD_GONE):
                raise ThreadGone(thread_id, exc.message) from exc
            if any(marker in text for marker in _GONE):
                raise ChatGone(exc.message) from exc
            if _MEDIA.search(text):
                raise MediaForbidden(exc.message) from exc
            if any(marker in text for marker in _CONTENT):
                raise MessageRejected(exc.message) from exc
            raise PermanentFailure(exc.message) from exc
        except (NetworkError, TelegramError) as exc:  # timeouts, resets, 5xx
            raise TemporaryFailure(describe(exc)) from exc
