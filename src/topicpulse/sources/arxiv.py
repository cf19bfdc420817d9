"""The arXiv API: a polite HTTP client and an Atom parser that yields ``Paper`` objects.

Politeness (arXiv's terms of use): one request at a time over one connection, at least
``delay`` seconds from the end of one response to the start of the next request (so arXiv sees
the starts at least ``delay`` apart whatever the network latency), and a User-Agent naming the
project.
Failures the real API produces are turned into two exceptions: ``ArxivUnavailable`` (503 with
Retry-After, other 5xx, timeouts and connection errors, after retrying with backoff) and
``FeedError`` (a response that is not a complete arXiv Atom feed).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from topicpulse import __version__, offload
from topicpulse.models import Paper, iso

log = logging.getLogger(__name__)

USER_AGENT = (
    f"topicpulse/{__version__} (Telegram arXiv topic alerts; https://github.com/topicpulse)"
)


def user_agent(contact: str | None) -> str:
    """The User-Agent arXiv sees: the software, and whom to write to about this deployment
    (``TOPICPULSE_CONTACT``), as arXiv asks of automated clients."""
    if not contact:
        return USER_AGENT
    return USER_AGENT[:-1] + f"; contact: {' '.join(contact.split())})"


_ID = re.compile(r"arxiv\.org/abs/(?P<id>[^\s]+?)(?:v(?P<version>\d+))?$")
_MAX_RETRY_AFTER = 600.0  # a longer wait than this gives up the round instead
_API_ERROR = "arXiv API error: "
# Request counters of the rounds running in the current context (see count_requests).
_COUNTERS: ContextVar[tuple[list[int], ...]] = ContextVar("arxiv_request_counters", default=())


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
    oldest_published: str = ""  # of the usable entries ("" when none)
    # The response body, when its papers are left to be parsed where they are stored (``papers``
    # is then empty): a round's papers never have to cross to the bot's process and back.
    body: bytes = b""


# What a user may type for a paper: an id ("2605.01234", "arXiv:2605.01234v2",
# "hep-th/9901001") or a link to its abstract, PDF or HTML page.
_TYPED_ID = re.compile(
    r"^(?:https?://)?(?:www\.|export\.)?(?:arxiv\.org/(?:abs|pdf|html)/)?(?:arxiv:)?"
    r"(?P<id>\d{4}\.\d{4,5}|[a-z][a-z.-]*(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?(?:\.pdf)?/?$",
    re.IGNORECASE,
)


def typed_id(text: str) -> str | None:
    """The arXiv id (without version) of what a user typed for a paper, or None."""
    found = _TYPED_ID.match(text.strip())
    if found is None:
        return None
    arxiv_id = found.group("id")
    return arxiv_id if "/" in arxiv_id else arxiv_id.lower()


# ---------------------------------------------------------------------------------- parsing
# The API's answer is plain Atom with two extension namespaces, read with the standard library's
# XML parser (feedparser, used before, is some thirty times slower on a 1,000-entry page).
_ATOM = "{http://www.w3.org/2005/Atom}"
_ARXIV = "{http://arxiv.org/schemas/atom}"
_OPENSEARCH = "{http://a9.com/-/spec/opensearch/1.1/}"


def _clean(text: str | None) -> str:
    """Whitespace collapsed, and UTF-8 that was decoded as Latin-1 on the way repaired."""
    return " ".join(_unmangle(text or "").split())


def _unmangle(text: str) -> str:
    """Undo double-encoded UTF-8: recorded arXiv responses carry "$Ï\x89$Test" for "$ω$Test".
    A text is repaired only when all of it is Latin-1 and its bytes are valid UTF-8 (the rule
    feedparser applies), which ordinary text practically never is."""
    if text.isascii():
        return text
    try:
        return text.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return text


def _optional(text: str | None) -> str | None:
    cleaned = _clean(text)
    return cleaned or None


def _text(element: ET.Element, tag: str) -> str | None:
    """All the text inside the first ``tag`` child, or ``None`` when there is none."""
    child = element.find(tag)
    return None if child is None else "".join(child.itertext())


def _timestamp(raw: str | None) -> str | None:
    """An Atom date as the store's ISO-8601 UTC form; ``None`` if missing or unreadable."""
    if not raw or not raw.strip():
        return None
    try:
        when = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return iso(when if when.tzinfo else when.replace(tzinfo=UTC))


def parse_entry(entry: ET.Element) -> Paper | None:
    """One Atom entry → Paper; ``None`` when it lacks what a paper needs (id, title, date)."""
    match = _ID.search(_clean(_text(entry, f"{_ATOM}id")))
    title = _clean(_text(entry, f"{_ATOM}title"))
    published = _timestamp(_text(entry, f"{_ATOM}published"))
    updated = _timestamp(_text(entry, f"{_ATOM}updated")) or published
    if not match or not title or not published or not updated:
        return None
    primary = entry.find(f"{_ARXIV}primary_category")
    terms = [None if primary is None else primary.get("term")]
    terms += [tag.get("term") for tag in entry.findall(f"{_ATOM}category")]
    categories = tuple(dict.fromkeys(_clean(t) for t in terms if t and t.strip()))
    people = entry.findall(f"{_ATOM}author")
    authors = (_clean(_text(a, f"{_ATOM}name")) for a in people)
    affiliations = (
        _clean("".join(tag.itertext())) for a in people for tag in a.findall(f"{_ARXIV}affiliation")
    )
    return Paper(
        arxiv_id=match.group("id"),
        version=int(match.group("version") or 1),
        title=title,
        abstract=_clean(_text(entry, f"{_ATOM}summary")),
        authors=tuple(name for name in authors if name),
        primary_category=categories[0] if categories else "",
        categories=categories,
        published=published,
        updated=updated,
        comment=_optional(_text(entry, f"{_ARXIV}comment")),
        journal_ref=_optional(_text(entry, f"{_ARXIV}journal_ref")),
        doi=_optional(_text(entry, f"{_ARXIV}doi")),
        affiliations=tuple(dict.fromkeys(a for a in affiliations if a)),
    )


def parse_feed(data: bytes, keep_papers: bool = True) -> FeedPage:
    """Parse an arXiv API response body; raise ``FeedError`` unless it is a complete feed.
    Without ``keep_papers``, only the page's counts and dates are returned."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:  # truncated, empty, or not XML at all
        raise FeedError(f"malformed arXiv response: {exc}") from None
    total = root.find(f"{_OPENSEARCH}totalResults")
    if root.tag != f"{_ATOM}feed" or total is None:
        raise FeedError("response is not an arXiv Atom feed (no opensearch:totalResults)")
    entries = root.findall(f"{_ATOM}entry")
    for entry in entries:
        if "/api/errors" in (_text(entry, f"{_ATOM}id") or ""):
            summary = _clean(_text(entry, f"{_ATOM}summary"))
            raise FeedError(f"{_API_ERROR}{summary or 'unknown'}")
    try:
        page = FeedPage(
            total_results=int(_clean(total.text) or 0),
            start_index=int(_clean(root.findtext(f"{_OPENSEARCH}startIndex")) or 0),
            entries=len(entries),
        )
    except ValueError as exc:
        raise FeedError(f"arXiv response has a malformed opensearch field: {exc}") from None
    for entry in entries:
        paper = parse_entry(entry)
        if paper is None:
            page.skipped += 1
            continue
        if keep_papers:
            page.papers.append(paper)
        if not page.oldest_published or paper.published < page.oldest_published:
            page.oldest_published = paper.published
    return page


# ---------------------------------------------------------------------------------- client
def _retry_after_seconds(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date); ``None`` when it
    is absent or unreadable (the caller then falls back to its own backoff)."""
    if not value or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000" means UTC with no zone information (RFC 5322)
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)


def _error_detail(body: bytes) -> str:
    """``": <message>"`` from an arXiv API error feed, or ``""`` if the body is not one."""
    try:
        parse_feed(body)
    except FeedError as exc:
        if str(exc).startswith(_API_ERROR):
            return f": {str(exc).removeprefix(_API_ERROR)}"
    return ""


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
        contact: str | None = None,
    ) -> None:
        self.base_url = base_url
        self.delay = delay
        self.retries = retries
        self.backoff = backoff
        self.requests = 0  # HTTP requests sent (including retries) by this client in total
        self._lock = asyncio.Lock()
        self._last_end = float("-inf")  # when the previous request finished (or failed)
        self._http = httpx.AsyncClient(
            timeout=timeout,
            headers={"User-Agent": user_agent(contact)},
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            transport=transport,
            follow_redirects=True,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    @contextmanager
    def count_requests(self) -> Iterator[Callable[[], int]]:
        """Count the requests sent inside the block by the current task (and tasks it starts),
        not those of other tasks sharing this client: ``with client.count_requests() as sent:``
        then ``sent()``."""
        counter = [0]
        token = _COUNTERS.set((*_COUNTERS.get(), counter))
        try:
            yield lambda: counter[0]
        finally:
            _COUNTERS.reset(token)

    async def __aenter__(self) -> ArxivClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _get(self, params: dict[str, str | int], url: str | None = None) -> httpx.Response:
        """One paced request: never two at once, each sent at least ``delay`` after the previous
        one ended, whichever of arXiv's interfaces (``url``, default the API) it goes to.
        (Pacing from the previous *start* lets a slow first request, e.g. one that opened the
        connection, arrive at arXiv less than ``delay`` before the next.)"""
        async with self._lock:
            wait = self._last_end + self.delay - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.requests += 1
            for counter in _COUNTERS.get():
                counter[0] += 1
            try:
                return await self._http.get(url or self.base_url, params=params)
            finally:
                self._last_end = time.monotonic()

    async def fetch(self, params: dict[str, str | int], *, keep_papers: bool = True) -> FeedPage:
        """GET with retries on 5xx/timeouts/connection errors, then parse the feed (without
        ``keep_papers``: only check it and count it, and keep its ``body``)."""
        body = await self.get_body(params)
        page = await offload.run(parse_feed, body, keep_papers)
        if not keep_papers:
            page.body = body
        return page

    async def get_body(self, params: dict[str, str | int], url: str | None = None) -> bytes:
        """The body of a 200 answer from ``url`` (default: the API), retried with backoff on
        5xx, 429, timeouts and connection errors, honouring Retry-After (up to 10 minutes).
        Raises ``ArxivUnavailable`` for any other answer, and when the retries run out."""
        problem = ""
        for attempt in range(self.retries + 1):
            wait = self.backoff * 2**attempt
            try:
                response = await self._get(params, url)
            except httpx.TransportError as exc:  # timeouts, refused or reset connections
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if response.status_code == 200:
                    return response.content
                problem = f"HTTP {response.status_code}"
                if response.status_code < 500 and response.status_code != 429:
                    # arXiv explains a rejected query in an error feed; keep its words.
                    raise ArxivUnavailable(
                        f"arXiv answered {problem}{_error_detail(response.content)} for {params}"
                    )
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
        keep_papers: bool = True,
    ) -> FeedPage:
        return await self.fetch(
            {
                "search_query": query,
                "start": start,
                "max_results": max_results,
                "sortBy": sort_by,
                "sortOrder": sort_order,
            },
            keep_papers=keep_papers,
        )
