"""Plain data types that flow between the pipeline's stages (no I/O, no Telegram)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(dt: datetime) -> str:
    """The one timestamp format the store uses: UTC, second precision, trailing Z."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Paper:
    """One arXiv paper as parsed from the API (latest version seen)."""

    arxiv_id: str  # without version, e.g. "2401.01234" or "hep-th/9901001"
    version: int
    title: str
    abstract: str
    authors: tuple[str, ...]
    primary_category: str
    categories: tuple[str, ...]  # primary first, no duplicates
    published: str  # first version, ISO-8601 UTC
    updated: str  # latest version, ISO-8601 UTC
    comment: str | None = None
    journal_ref: str | None = None
    doi: str | None = None

    @property
    def url(self) -> str:
        return f"https://arxiv.org/abs/{self.arxiv_id}"

    @property
    def pdf_url(self) -> str:
        return f"https://arxiv.org/pdf/{self.arxiv_id}"


@dataclass(frozen=True, slots=True)
class StoredPaper:
    """A paper as read back from the store, with its row id and when we first stored it."""

    id: int
    arxiv_id: str
    version: int
    title: str
    abstract: str
    authors: tuple[str, ...]
    primary_category: str
    categories: tuple[str, ...]
    published: str
    updated: str
    stored_at: str
    comment: str | None = None
    journal_ref: str | None = None
    doi: str | None = None

    @property
    def url(self) -> str:
        return f"https://arxiv.org/abs/{self.arxiv_id}"

    @property
    def pdf_url(self) -> str:
        return f"https://arxiv.org/pdf/{self.arxiv_id}"


@dataclass(slots=True)
class UpsertResult:
    """What an upsert of a batch of papers changed."""

    new_ids: list[int] = field(default_factory=list)
    updated: int = 0
    unchanged: int = 0

    @property
    def new(self) -> int:
        return len(self.new_ids)


@dataclass(slots=True)
class RunStats:
    """Per-round ingestion figures, recorded in ``ingest_runs``."""

    kind: str
    requests: int = 0
    new: int = 0
    updated: int = 0
    errors: int = 0
    duration_s: float = 0.0
    ok: bool = True
    message: str = ""
