"""Serving beside the bot: the pages' web server (and ``/healthz``) in the bot's process, and
webhook mode — registering the webhook with Telegram, and handing the updates Telegram POSTs to
that server to the Application (until it begins to stop: then Telegram is told to resend).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web
from telegram import Bot, Update
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.ext import Application

from topicpulse.bot.intake import lighten
from topicpulse.bot.ratelimit import retry_seconds
from topicpulse.web.server import NotAccepting, WebContext, build_web_app

log = logging.getLogger(__name__)

WEBHOOK_ATTEMPTS = 5  # setWebhook tries at a start, over network errors and Telegram's 5xx
STOPPING = "topicpulse.stopping"  # bot_data key: set when the Application begins to stop


async def register_webhook(bot: Bot, url: str, secret: str, *, backoff: float) -> None:
    """``setWebhook``, tried ``WEBHOOK_ATTEMPTS`` times over network errors, Telegram's 5xx and
    flood waits (``backoff`` seconds, doubling); a refusal (e.g. a bad address) stops the start
    with Telegram's reason, as does the last failure."""
    for attempt in range(1, WEBHOOK_ATTEMPTS + 1):
        try:
            await bot.set_webhook(url, secret_token=secret, allowed_updates=Update.ALL_TYPES)
            return
        except RetryAfter as exc:
            delay = retry_seconds(exc)
            error: TelegramError = exc
        except (BadRequest, Forbidden, InvalidToken):
            raise
        except NetworkError as exc:  # also TimedOut; Telegram's 5xx arrive as NetworkError
            delay, error = backoff * 2 ** (attempt - 1), exc
        if attempt == WEBHOOK_ATTEMPTS:
            raise error
        log.warning("setWebhook failed (%s); trying again in %.1f s", error, delay)
        await asyncio.sleep(delay)


def queue_update(app: Application) -> Callable[[dict[str, Any]], Coroutine[Any, Any, None]]:  # type: ignore[type-arg]
    """Hand an update's JSON, as Telegram POSTed it, to the Application — until it begins to
    stop: the Application no longer reads its queue then, so Telegram is told to resend."""

    async def receive(data: dict[str, Any]) -> None:
        if app.bot_data.get(STOPPING):
            raise NotAccepting("the bot is stopping")
        await app.update_queue.put(Update.de_json(lighten(data), app.bot))

    return receive


async def start_web(context: WebContext, host: str, port: int) -> web.AppRunner:
    """The topic pages (and /healthz) on ``host:port`` beside the bot."""
    runner = web.AppRunner(build_web_app(context))
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    log.info("serving the topic pages on %s:%d", host, port)
    return runner
