"""The arXiv API: a polite HTTP client and an Atom parser that yields ``Paper`` objects.

Politeness (arXiv's terms of use): one request at a time over one connection, at least
``delay`` seconds between the starts of two requests, and a User-Agent naming the project.
Failures the real API produces are turned into two exceptions: ``ArxivUnavailable`` (503 with
Retry-After, other 5xx, timeouts and connection errors, after retrying with backoff) and
``FeedError`` (a response that is not a complete arXiv Atom feed).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

import feedparser
import httpx

from topicpulse import __version__
from topicpulse.models import Paper, iso

log = logging.getLogger(__name__)

USER_AGENT = (
    f"topicpulse/{__version__} (Telegram arXiv topic alerts; https://github.com/topicpulse)"
)
_ID = re.compile(r"arxiv\.org/abs/(?P<id>[^\s]+?)(?:v(?P<version>\d+))?$")
_MAX_RETRY_AFTER = 600.0  # a longer wait than this gives up the round instead


class ArxivUnavailable(RuntimeError):
    """arXiv did not answer usefully after all retries; try again next round."""


class FeedError(ValueError):
    """The response is not a well-formed, complete arXiv Atom feed."""


@dataclass(slots=True)
class FeedPage:
    """One parsed API response."""

    total_results: int
    start_index: int
    papers: list[Paper] = field(default_factory=list)
    entries: int = 0  # entries in the response, including ones skipped as unusable
    skipped: int = 0


def category_query(categories: Iterable[str]) -> str:
    """``cat:cs.AI OR cat:cs.CL …`` for the arXiv API's search_query."""
    return " OR ".join(f"cat:{c}" for c in categories)


def date_range_query(categories: Iterable[str], first: date, last: date) -> str:
    """Papers in ``categories`` first submitted between two days, inclusive (UTC)."""
    span = f"submittedDate:[{first:%Y%m%d}0000 TO {last:%Y%m%d}2359]"
    return f"({category_query(categories)}) AND {span}"


# ---------------------------------------------------------------------------------- parsing
def _clean(text: str | None) -> str:
    return " ".join((text or "").split())


def _optional(text: str | None) -> str | None:
    cleaned = _clean(text)
    return cleaned or None


def _timestamp(parsed: object, raw: str | None) -> str | None:
    if isinstance(parsed, time.struct_time):
        return iso(datetime(*parsed[:6], tzinfo=UTC))
    return raw or None


def parse_entry(entry: feedparser.FeedParserDict) -> Paper | None:
    """One Atom entry → Paper; ``None`` when it lacks what a paper needs (id, title, date)."""
    match = _ID.search(str(entry.get("id", "")))
    title = _clean(entry.get("title"))
    published = _timestamp(entry.get("published_parsed"), entry.get("published"))
    updated = _timestamp(entry.get("updated_parsed"), entry.get("updated")) or published
    if not match or not title or not published or not updated:
        return None
    categories: list[str] = []
    primary = (entry.get("arxiv_primary_category") or {}).get("term")
    for term in [primary, *(tag.get("term") for tag in entry.get("tags", []))]:
        if term and term not in categories:
            categories.append(term)
    return Paper(
        arxiv_id=match.group("id"),
        version=int(match.group("version") or 1),
        title=title,
        abstract=_clean(entry.get("summary")),
        authors=tuple(_clean(a.get("name")) for a in entry.get("authors", []) if a.get("name")),
        primary_category=categories[0] if categories else "",
        categories=tuple(categories),
        published=published,
        updated=updated,
        comment=_optional(entry.get("arxiv_comment")),
        journal_ref=_optional(entry.get("arxiv_journal_ref")),
        doi=_optional(entry.get("arxiv_doi")),
    )


def parse_feed(data: bytes) -> FeedPage:
    """Parse an arXiv API response body; raise ``FeedError`` unless it is a complete feed."""
    parsed = feedparser.parse(data)
    if parsed.get("bozo"):
        exc = parsed.get("bozo_exception")
        # A declared-vs-actual encoding mismatch is harmless; anything else means broken XML.
        if not isinstance(exc, feedparser.CharacterEncodingOverride):
            raise FeedError(f"malformed arXiv response: {exc}")
    feed = parsed.get("feed", {})
    if parsed.get("version") not in ("atom10", "atom03") or "opensearch_totalresults" not in feed:
        raise FeedError("response is not an arXiv Atom feed (no opensearch:totalResults)")
    entries = parsed.get("entries", [])
    for entry in entries:
        if "/api/errors" in str(entry.get("id", "")):
            raise FeedError(f"arXiv API error: {_clean(entry.get('summary')) or 'unknown'}")
    page = FeedPage(
        total_results=int(feed.get("opensearch_totalresults") or 0),
        start_index=int(feed.get("opensearch_startindex") or 0),
        entries=len(entries),
    )
    for entry in entries:
        paper = parse_entry(entry)
        if paper is None:
            page.skipped += 1
        else:
            page.papers.append(paper)
    return page


# ---------------------------------------------------------------------------------- client
def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        if when is None:
            return None
        return max(0.0, (when - datetime.now(UTC)).total_seconds())


class ArxivClient:
    """Fetches pages from the arXiv API, one request at a time, ``delay`` seconds apart."""

    def __init__(
        self,
        base_url: str,
        *,
        delay: float = 3.0,
        timeout: float = 60.0,
        retries: int = 4,
        backoff: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.delay = delay
        self.retries = retries
        self.backoff = backoff
        self.requests = 0  # HTTP requests sent (including retries), for run stats
        self._lock = asyncio.Lock()
        self._last_start = float("-inf")
        self._http = httpx.AsyncClient(
            timeout=timeout,
            headers={"User-Agent": USER_AGENT},
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            transport=transport,
            follow_redirects=True,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ArxivClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _get(self, params: dict[str, str | int]) -> httpx.Response:
        """One paced request: never two at once, starts at least ``delay`` apart."""
        async with self._lock:
            wait = self._last_start + self.delay - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._last_start = time.monotonic()
            self.requests += 1
            return await self._http.get(self.base_url, params=params)

    async def fetch(self, params: dict[str, str | int]) -> FeedPage:
        """GET with retries on 5xx/timeouts/connection errors, then parse the feed."""
        problem = ""
        for attempt in range(self.retries + 1):
            wait = self.backoff * 2**attempt
            try:
                response = await self._get(params)
            except httpx.TransportError as exc:  # timeouts, refused or reset connections
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if response.status_code == 200:
                    return await asyncio.to_thread(parse_feed, response.content)
                problem = f"HTTP {response.status_code}"
                if response.status_code < 500 and response.status_code != 429:
                    raise ArxivUnavailable(f"arXiv answered {problem} for {params}")
                retry_after = _retry_after_seconds(response.headers.get("Retry-After"))
                if retry_after is not None:
                    if retry_after > _MAX_RETRY_AFTER:
                        break
                    wait = max(retry_after, self.delay)
            if attempt < self.retries:
                log.warning(
                    "arXiv request failed (%s); retry %d in %.1fs", problem, attempt + 1, wait
                )
                await asyncio.sleep(wait)
        raise ArxivUnavailable(f"arXiv unavailable after {self.retries + 1} attempts ({problem})")

    async def search(
        self,
        query: str,
        *,
        start: int,
        max_results: int,
        sort_by: str = "submittedDate",
        sort_order: str = "descending",
    ) -> FeedPage:
        return await self.fetch(
            {
                "search_query": query,
                "start": start,
                "max_results": max_results,
                "sortBy": sort_by,
                "sortOrder": sort_order,
            }
        )
