"""The Telegram ``Sender``: sends alerts through python-telegram-bot and maps Bot API errors onto
the delivery engine's vocabulary (``ChatGone``, ``MediaForbidden``, ``FloodWait``, …).

What a 400 means is read from its description (Telegram has no error codes beyond HTTP's):

* the chat can take nothing from the bot (no such chat, no right to send messages) → gone;
* no right to send photos (or other media) while text may go → ``MediaForbidden``;
* the text's HTML or length → ``MessageRejected`` (the engine re-sends it as plain text);
* anything else → ``PermanentFailure`` (the engine drops the message).

Every 403 means the bot can send the chat nothing (blocked, kicked, deleted) → gone.

Every send is marked ``Priority.BULK`` for the rate limiter (``bot.ratelimit``), so replies to
users go first; the bot must therefore be the Application's ``ExtBot`` with that limiter.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable
from typing import Any

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.ext import ExtBot

from topicpulse.bot.buckets import Priority
from topicpulse.bot.ratelimit import retry_seconds
from topicpulse.delivery import (
    Buttons,
    ChatGone,
    ChatMoved,
    FloodWait,
    MediaForbidden,
    MessageRejected,
    PermanentFailure,
    TemporaryFailure,
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
# Anything shaped like a bot token ("<digits>:<secret>"): error texts end up in logs and in the
# outbox's last_error, and must never carry the token.
_TOKEN = re.compile(r"\d+:[A-Za-z0-9_-]{10,}")


def describe(exc: BaseException) -> str:
    """A short, token-free description of a failure."""
    text = str(exc) or type(exc).__name__
    return _TOKEN.sub("<redacted>", f"{type(exc).__name__}: {text}")[:300]


class TelegramSender:
    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        limited = isinstance(bot, ExtBot) and bot.rate_limiter is not None
        self._extra: dict[str, Any] = {"rate_limit_args": Priority.BULK} if limited else {}

    async def send_text(
        self,
        chat_id: int,
        html: str,
        *,
        preview: bool = False,
        buttons: Buttons | None = None,
    ) -> None:
        """HTML text; ``buttons`` (label, callback data) become an inline keyboard, a button
        a row, or a list of them side by side."""
        keyboard = (
            InlineKeyboardMarkup(
                [
                    [InlineKeyboardButton(t, callback_data=d) for t, d in row]
                    for row in (b if isinstance(b, list) else [b] for b in buttons)
                ]
            )
            if buttons
            else None
        )
        await self._call(
            self.bot.send_message(
                chat_id,
                html,
                parse_mode=ParseMode.HTML,
                link_preview_options=LinkPreviewOptions(is_disabled=not preview),
                reply_markup=keyboard,
                **self._extra,
            )
        )

    async def send_plain(self, chat_id: int, text: str) -> None:
        """Plain text, no parse mode: the fallback for a message Telegram rejected."""
        await self._call(
            self.bot.send_message(
                chat_id,
                text,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
                **self._extra,
            )
        )

    async def send_photo(self, chat_id: int, png: bytes, caption_html: str) -> None:
        await self._call(
            self.bot.send_photo(
                chat_id, png, caption=caption_html, parse_mode=ParseMode.HTML, **self._extra
            )
        )

    @staticmethod
    async def _call(request: Awaitable[object]) -> None:
        try:
            await request
        except RetryAfter as exc:
            raise FloodWait(retry_seconds(exc)) from exc
        except ChatMigrated as exc:
            raise ChatMoved(int(exc.new_chat_id)) from exc
        except Forbidden as exc:
            raise ChatGone(exc.message) from exc
        except BadRequest as exc:
            text = exc.message.lower()
            if any(marker in text for marker in _GONE):
                raise ChatGone(exc.message) from exc
            if _MEDIA.search(text):
                raise MediaForbidden(exc.message) from exc
            if any(marker in text for marker in _CONTENT):
                raise MessageRejected(exc.message) from exc
            raise PermanentFailure(exc.message) from exc
        except (NetworkError, TelegramError) as exc:  # timeouts, resets, 5xx
            raise TemporaryFailure(describe(exc)) from exc
