"""Configuration: every setting comes from the environment or an optional ``.env`` file.

The variable names are part of the product's interface and are documented in docs/configuration.md.
Validation happens once at start; a bad value raises ``ConfigError`` with one readable line.
"""

from __future__ import annotations

import re
from datetime import date
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# Where AI/ML work lands on arXiv: the cs.* areas plus stat.ML and audio/speech.
DEFAULT_CATEGORIES: tuple[str, ...] = (
    "cs.AI",
    "cs.CL",
    "cs.LG",
    "cs.CV",
    "cs.IR",
    "cs.RO",
    "cs.NE",
    "cs.MA",
    "cs.GT",
    "cs.HC",
    "cs.SD",
    "cs.SE",
    "cs.CR",
    "cs.CY",
    "cs.DB",
    "cs.DC",
    "cs.DS",
    "cs.LO",
    "cs.PL",
    "cs.SI",
    "eess.AS",
    "eess.IV",
    "eess.SP",
    "eess.SY",
    "stat.ML",
)


_CATEGORY = re.compile(r"[a-z][a-z-]*(\.[A-Za-z-]+)?")
_SECRET = re.compile(r"[A-Za-z0-9_-]{32,256}")  # a webhook secret token (Telegram: 1–256)


class ConfigError(Exception):
    """A setting is missing or invalid; the message is one line meant for a human."""


def _networks(value: object) -> object:
    """Comma-separated addresses and CIDR networks → networks (an address is its /32 or /128)."""
    items = _split_csv(value)
    if not isinstance(items, list | tuple):
        return value
    networks: list[object] = []
    for item in items:
        if not isinstance(item, str):
            networks.append(item)  # already a network: pydantic checks it
            continue
        try:
            networks.append(ip_network(item))
        except ValueError as exc:
            if "host bits set" in str(exc):
                raise ValueError(f"{exc} (give the network, or one address)") from None
            raise ValueError(
                f"{item!r} is not an IP address or network (e.g. 10.0.0.0/8 or 192.0.2.7)"
            ) from None
    return networks


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    """All runtime settings. Field aliases are the environment variable names."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    telegram_bot_token: str | None = Field(
        default=None, validation_alias=AliasChoices("TELEGRAM_BOT_TOKEN", "telegram_bot_token")
    )
    db: Path = Field(default=Path("topicpulse.db"), alias="TOPICPULSE_DB")
    telegram_api_url: str = Field(
        default="https://api.telegram.org/bot", alias="TOPICPULSE_TELEGRAM_API_URL"
    )
    arxiv_api_url: str = Field(
        default="https://export.arxiv.org/api/query", alias="TOPICPULSE_ARXIV_API_URL"
    )
    categories: Annotated[list[str], NoDecode] = Field(
        default=list(DEFAULT_CATEGORIES), alias="TOPICPULSE_CATEGORIES"
    )
    # arXiv's OAI-PMH interface: the daily intake and the history (issue 22).
    arxiv_oai_url: str = Field(
        default="https://oaipmh.arxiv.org/oai", alias="TOPICPULSE_ARXIV_OAI_URL"
    )
    # unset: arXiv's calendar decides when to look (shortly after each expected update);
    # set: look every N seconds (a look that finds nothing new costs one small request)
    poll_seconds: float | None = Field(default=None, gt=0, alias="TOPICPULSE_POLL_SECONDS")
    # who runs this bot (an e-mail address or URL), named in the User-Agent arXiv sees
    contact: str | None = Field(default=None, alias="TOPICPULSE_CONTACT")
    # evenings (Eastern dates, YYYY-MM-DD, comma-separated) arXiv does not announce on
    arxiv_holidays: Annotated[list[date], NoDecode] = Field(
        default=[], alias="TOPICPULSE_ARXIV_HOLIDAYS"
    )
    arxiv_delay_seconds: float = Field(default=3.0, ge=0, alias="TOPICPULSE_ARXIV_DELAY_SECONDS")
    backfill_weeks: int = Field(default=12, ge=0, le=520, alias="TOPICPULSE_BACKFILL_WEEKS")
    admin_ids: Annotated[list[int], NoDecode] = Field(default=[], alias="TOPICPULSE_ADMIN_IDS")
    # Less common knobs (docs/configuration.md).
    overlap_days: float = Field(default=7, gt=0, le=60, alias="TOPICPULSE_OVERLAP_DAYS")
    arxiv_timeout_seconds: float = Field(default=60, gt=0, alias="TOPICPULSE_ARXIV_TIMEOUT_SECONDS")
    arxiv_retries: int = Field(default=4, ge=0, le=20, alias="TOPICPULSE_ARXIV_RETRIES")
    # Spike detection (see momentum.SpikeThresholds).
    spike_min_papers: int = Field(default=10, ge=1, alias="TOPICPULSE_SPIKE_MIN_PAPERS")
    spike_min_change_pct: float = Field(default=50, gt=0, alias="TOPICPULSE_SPIKE_MIN_CHANGE_PCT")
    spike_sigma: float = Field(default=3, gt=0, alias="TOPICPULSE_SPIKE_SIGMA")
    spike_min_week_papers: int = Field(default=5, ge=1, alias="TOPICPULSE_SPIKE_MIN_WEEK_PAPERS")

    # The web pages (topicpulse serve; and beside the bot, see docs/deploy.md).
    web_host: str = Field(default="0.0.0.0", alias="TOPICPULSE_WEB_HOST")
    # unset: `run` opens no port (a polling bot needs none) and `serve` uses 8080
    web_port: int | None = Field(
        default=None, ge=1, le=65535, validation_alias=AliasChoices("TOPICPULSE_WEB_PORT", "PORT")
    )
    bot_username: str | None = Field(default=None, alias="TOPICPULSE_BOT_USERNAME")
    # Webhook mode: Telegram POSTs updates to <webhook_url>/telegram on the pages' server
    # (unset: long polling). The secret token defaults to a fresh random one at every start.
    webhook_url: str | None = Field(default=None, alias="TOPICPULSE_WEBHOOK_URL")
    webhook_secret: str | None = Field(default=None, alias="TOPICPULSE_WEBHOOK_SECRET")
    # Reverse proxies whose X-Forwarded-For names the visitor to the pages' rate limit
    # (unset: no header is believed, every connection's own address is the visitor).
    trusted_proxies: Annotated[list[IPv4Network | IPv6Network], NoDecode] = Field(
        default=[], alias="TOPICPULSE_TRUSTED_PROXIES"
    )
    # the pages' public address: /momentum and /latest then carry an "Open topic page" button
    public_url: str | None = Field(default=None, alias="TOPICPULSE_PUBLIC_URL")
    # /ask's optional generated answer: an OpenAI-compatible chat-completions endpoint.
    llm_url: str | None = Field(default=None, alias="TOPICPULSE_LLM_URL")
    llm_model: str | None = Field(default=None, alias="TOPICPULSE_LLM_MODEL")
    llm_api_key: str | None = Field(default=None, alias="TOPICPULSE_LLM_API_KEY")
    llm_timeout_seconds: float = Field(default=20, gt=0, alias="TOPICPULSE_LLM_TIMEOUT_SECONDS")

    # Daily snapshots of the database (topicpulse backup's consistent copy), the newest kept.
    backup_dir: Path | None = Field(default=None, alias="TOPICPULSE_BACKUP_DIR")
    backup_keep: int = Field(default=7, ge=1, le=3660, alias="TOPICPULSE_BACKUP_KEEP")

    @field_validator("categories", "admin_ids", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _parse_networks(cls, value: object) -> object:
        return _networks(value)

    @field_validator(
        "llm_url",
        "llm_model",
        "llm_api_key",
        "bot_username",
        "public_url",
        "webhook_url",
        "webhook_secret",
        "backup_dir",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("categories")
    @classmethod
    def _check_categories(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("give at least one arXiv category, e.g. cs.CL,cs.LG")
        for cat in value:
            if not _CATEGORY.fullmatch(cat):
                raise ValueError(f"{cat!r} is not an arXiv category (e.g. cs.CL, stat.ML)")
        return value

    @field_validator("webhook_secret")
    @classmethod
    def _check_secret(cls, value: str | None) -> str | None:
        if value is not None and not _SECRET.fullmatch(value):
            raise ValueError(
                "use 32–256 characters from A–Z, a–z, 0–9, _ and - (a short one can be guessed)"
            )
        return value

    @field_validator("webhook_url")
    @classmethod
    def _check_webhook(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        local = parts.hostname in ("localhost", "127.0.0.1")
        if parts.scheme != "https" and not local:
            raise ValueError("Telegram sends webhooks to https:// addresses only")
        if parts.path.strip("/") or parts.query or parts.fragment:
            raise ValueError(
                "give the public base address without a path, e.g. https://pulse.example.org"
            )
        return value

    @property
    def page_cache_seconds(self) -> float:
        """How long the topic pages are cached: the polling interval, or half an hour."""
        return self.poll_seconds or 1800

    @property
    def fresh_seconds(self) -> float:
        """How old the last successful intake may be before /healthz/fresh says stale: three
        polling intervals, or, when arXiv's calendar decides, the longest regular gap between
        two of its updates (Thursday's to Sunday's: 72 hours) and one evening's retries."""
        return 3 * self.poll_seconds if self.poll_seconds else 80 * 3600

    @property
    def listen_port(self) -> int | None:
        """The port ``run`` serves the pages (and the webhook) on; None: open none."""
        if self.web_port is None and self.webhook_url:
            return 8080
        return self.web_port

    @field_validator("arxiv_holidays", mode="before")
    @classmethod
    def _split_dates(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator(
        "telegram_api_url", "arxiv_api_url", "arxiv_oai_url", "llm_url", "public_url", "webhook_url"
    )
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} must start with http:// or https://")
        return value


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment (and ``.env``), raising ``ConfigError`` on bad input."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = _env_name(str(first["loc"][0])) if first["loc"] else "configuration"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"invalid {name}: {message}") from None


def _env_name(field_or_alias: str) -> str:
    field = Settings.model_fields.get(field_or_alias)
    if field is not None and isinstance(field.alias, str):
        return field.alias
    return field_or_alias
