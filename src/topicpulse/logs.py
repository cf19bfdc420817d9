"""Logging set-up: one format, quiet HTTP libraries, and the bot token redacted everywhere."""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Callable
from typing import Any

# Telegram bot tokens look like "<bot id>:<secret>"; the Bot API puts them in every URL path.
_TOKEN_IN_URL = re.compile(r"/bot[^/\s]+/")


class RedactSecrets(logging.Filter):
    """Replaces configured secrets (and anything shaped like a Bot API URL token) in records."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def _clean(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "<redacted>")
        return _TOKEN_IN_URL.sub("/bot<redacted>/", text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self._clean(message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._clean(record.exc_text)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return True


_redactor = RedactSecrets([])


def redact(text: str, secrets: list[str]) -> str:
    """``text`` without ``secrets`` (nor a token in a Bot API URL), for a line not logged."""
    return RedactSecrets(secrets)._clean(text)


def _redacting_factory(make: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        with contextlib.suppress(Exception):  # a bad format string is the handler's to report
            _redactor.filter(record)
        return record

    make_record.redacts = True  # type: ignore[attr-defined]
    return make_record


def protect_secrets(secrets: list[str]) -> None:
    """Redact ``secrets`` from every log record created from now on — whichever logger makes
    it and whichever handler emits it (also ones added later, such as a test's log capture).
    Libraries log the Bot API URL, token included (httpx per request, PTB at start)."""
    for secret in secrets:
        if secret and secret not in _redactor.secrets:
            _redactor.secrets.append(secret)
    factory = logging.getLogRecordFactory()
    if not getattr(factory, "redacts", False):
        logging.setLogRecordFactory(_redacting_factory(factory))


def startup_failure(record: logging.LogRecord) -> bool:
    """python-telegram-bot's report of a failed start (token refused, Bot API unreachable),
    traceback included: the command says the same in one line of its own."""
    return record.name.startswith("telegram") and str(record.msg).startswith(
        "Network Retry Loop (Bootstrap"
    )


def setup_logging(level: int = logging.INFO, secrets: list[str] | None = None) -> None:
    """Log to stderr; httpx/httpcore request lines (which carry the token) are silenced. Below
    debug level, a library's report of a failed start is left to the command's one line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets(secrets or []))
    if level > logging.DEBUG:
        handler.addFilter(lambda record: not startup_failure(record))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiohttp.access: a line per request, the platform's health checks included
    for noisy in ("httpx", "httpcore", "apscheduler", "matplotlib", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
