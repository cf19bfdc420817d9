"""The Telegram ``Sender``: sends through python-telegram-bot and maps Bot API errors onto the
delivery engine's vocabulary (``ChatGone``, ``ChatMoved``, ``FloodWait``, …)."""

from __future__ import annotations

import datetime as dtm

from telegram import Bot, LinkPreviewOptions
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from topicpulse.delivery import ChatGone, ChatMoved, FloodWait, MessageRejected, TemporaryFailure

_GONE = (
    "chat not found",
    "user is deactivated",
    "bot was kicked",
    "have no rights to send",
    "not enough rights",
    "chat_write_forbidden",
    "peer_id_invalid",
)


def retry_seconds(exc: RetryAfter) -> float:
    value = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


class TelegramSender:
    def __init__(self, bot: Bot) -> None:
        self.bot = bot

    async def send_text(self, chat_id: int, html: str, *, preview: bool = False) -> None:
        await self._call(
            self.bot.send_message(
                chat_id,
                html,
                parse_mode=ParseMode.HTML,
                link_preview_options=LinkPreviewOptions(is_disabled=not preview),
            )
        )

    async def send_photo(self, chat_id: int, png: bytes, caption_html: str) -> None:
        await self._call(
            self.bot.send_photo(chat_id, png, caption=caption_html, parse_mode=ParseMode.HTML)
        )

    @staticmethod
    async def _call(request: object) -> None:
        try:
            await request  # type: ignore[misc]
        except RetryAfter as exc:
            raise FloodWait(retry_seconds(exc)) from exc
        except ChatMigrated as exc:
            raise ChatMoved(int(exc.new_chat_id)) from exc
        except Forbidden as exc:
            raise ChatGone(exc.message) from exc
        except BadRequest as exc:
            if any(marker in exc.message.lower() for marker in _GONE):
                raise ChatGone(exc.message) from exc
            raise MessageRejected(exc.message) from exc
        except (NetworkError, TelegramError) as exc:  # timeouts, resets, 5xx
            raise TemporaryFailure(str(exc)) from exc
