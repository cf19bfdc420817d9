"""Plain data types that flow between the pipeline's stages (no I/O, no Telegram)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(dt: datetime) -> str:
    """The one timestamp format the store uses: UTC, second precision, trailing Z."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class ArxivLinks:
    """The abs, PDF and HTML links of anything with an ``arxiv_id``."""

    __slots__ = ()
    arxiv_id: str

    @property
    def url(self) -> str:
        return f"https://arxiv.org/abs/{self.arxiv_id}"

    @property
    def pdf_url(self) -> str:
        return f"https://arxiv.org/pdf/{self.arxiv_id}"

    @property
    def html_url(self) -> str:
        return f"https://arxiv.org/html/{self.arxiv_id}"


@dataclass(frozen=True, slots=True)
class Paper(ArxivLinks):
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
    affiliations: tuple[str, ...] = ()  # the authors' institutions, distinct, in author order

    def __reduce__(self) -> tuple[type[Paper], tuple[object, ...]]:
        """Pickled as its constructor's arguments. A page's 2,000 records come back from the
        process that parsed them, unpickled on the event loop: 5 ms this way, 9 ms through
        dataclasses' own state (which lists the class's fields again for every record)."""
        return (type(self), tuple([getattr(self, name) for name in PAPER_FIELDS]))


PAPER_FIELDS = tuple(f.name for f in dataclasses.fields(Paper))


@dataclass(frozen=True, slots=True)
class StoredPaper(ArxivLinks):
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
    affiliations: tuple[str, ...] = ()  # the authors' institutions, distinct, in author order

    def __hash__(self) -> int:
        # (equal papers hash alike; a changed one compares unequal: the formatting caches key on
        # papers, and hashing every field, the authors' tuple too, cost more than the lookup)
        return hash((self.id, self.version, self.updated))

    def to_json(self) -> dict[str, object]:
        """The documented JSON shape of a paper (``preview``/``search --json``)."""
        return {
            "arxiv_id": self.arxiv_id,
            "title": self.title,
            "published": self.published,
            "url": self.url,
            "categories": list(self.categories),
        }


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


@dataclass(frozen=True, slots=True)
class Topic:
    """A followable topic: a catalogue entry or a user's own query."""

    id: int
    kind: str  # "catalogue" or "custom"
    slug: str | None
    name: str
    description: str
    query: str
    fts: str
    active: bool = True
    matched_through: int = 0

    def __hash__(self) -> int:
        return hash((self.id, self.name))  # (as ``StoredPaper``'s: a few fields, still exact)

    @property
    def is_custom(self) -> bool:
        return self.kind == "custom"


@dataclass(frozen=True, slots=True)
class SpikeEpisode:
    id: int
    topic_id: int
    started_at: str
    reason: str
    last_4w: int
    prev_4w: int
    change_pct: float | None
    quiet_since: str | None
    ended_at: str | None


@dataclass(frozen=True, slots=True)
class Chat:
    """A Telegram chat (private or group) and its delivery settings."""

    chat_id: int
    type: str
    title: str | None
    active: bool
    paused: bool
    mode: str  # "instant", "daily" or "weekly"
    digest_time: str  # "HH:MM" in `timezone`
    digest_weekday: int  # 0 = Monday
    timezone: str
    spikes: bool
    next_digest_at: str | None
    # When a send found the forum topic its alerts go to closed (its admins were told then);
    # None: not closed, or not a forum.
    topic_closed_at: str | None = None
    digest_through: int = 0  # the newest fanned-out paper its digests or alerts covered
    # An instant chat a round marked as owed alerts: that round's age rule (papers announced
    # before it are history, not news); None: not marked.
    alerts_since: str | None = None

    @property
    def is_group(self) -> bool:
        return self.type in ("group", "supergroup")


@dataclass(frozen=True, slots=True)
class Subscription:
    chat_id: int
    topic: Topic
    created_at: str


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One pending delivery: a paper (with the chat's topics that matched it) or a spike."""

    id: int
    chat_id: int
    kind: str  # "paper" or "spike"
    paper_id: int | None
    episode_id: int | None
    attempts: int
