"""Logging set-up: one format, quiet HTTP libraries, and the bot token redacted everywhere."""

from __future__ import annotations

import logging
import re
import sys

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


def setup_logging(level: int = logging.INFO, secrets: list[str] | None = None) -> None:
    """Log to stderr; httpx/httpcore request lines (which carry the token) are silenced."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets(secrets or []))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "apscheduler", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
