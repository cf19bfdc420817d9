"""A local fake of the arXiv API (``export.arxiv.org/api/query``) for tests and benchmarks.

``FakeArxiv`` is an aiohttp server on 127.0.0.1 (a free port) that answers
``GET /api/query?search_query=…&start=…&max_results=…&sortBy=submittedDate&sortOrder=…`` in the
real arXiv Atom format (the structure of ``shared/arxiv-samples/*.xml``: a feed with
``opensearch:totalResults/startIndex/itemsPerPage`` and one ``entry`` per paper with its
versioned abs id, title, dates, summary, categories, links, authors and the optional
``arxiv:comment/journal_ref/doi``).

It interprets the two query forms topicpulse sends: ``cat:A OR cat:B …`` and
``(cat:A OR …) AND submittedDate:[YYYYMMDDHHMM TO YYYYMMDDHHMM]``. A paper matches when any of
its categories is asked for (so a cross-listed paper appears once) and, with a date range, when
its first-version date (``published``, to the minute, both ends inclusive) lies inside it.
Anything else gets a 400 with an arXiv API error feed, so a test that sends an unexpected query
fails loudly.

Tests change ``fake.papers`` at any time, script faults for the next requests with
``fake.script(...)`` (``ok()``, ``unavailable()``, ``server_error()``, ``empty_page()``,
``truncated()``, ``html_page()``, ``api_error()``, ``slow()``), and read ``fake.requests`` to
check politeness (monotonic start/end times, in-flight count, User-Agent).

The same server answers OAI-PMH at ``GET /oai`` (``fake.oai_url``; ``fake_oai.py`` says what it
models), from the same papers, with the same scripted faults and request log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import os
import re
import time
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from aiohttp import web

from fake_oai import FakeOai
from topicpulse.models import Paper, iso, parse_iso
from topicpulse.sources.ingest import papers_from_listing
from topicpulse.synthetic import ARXIV_SCHEME as ARXIV_SCHEME
from topicpulse.synthetic import generate_papers, query_string
from topicpulse.synthetic import render_entry as render_entry
from topicpulse.synthetic import render_feed as render_feed

SHARED = Path(os.environ.get("TOPICPULSE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
LISTINGS = SHARED / "arxiv-listings" / "papers.jsonl"

_CATEGORIES = re.compile(r"cat:[A-Za-z][\w.-]*(?: OR cat:[A-Za-z][\w.-]*)*")
_RANGED = re.compile(
    r"\((?P<cats>.+)\) AND submittedDate:\[(?P<first>\d{12}) TO (?P<last>\d{12})\]"
)


# ---------------------------------------------------------------------------------- scripting
@dataclass(frozen=True, slots=True)
class Scripted:
    """One scripted response, used for the next request instead of the normal answer."""

    kind: str  # ok | status | empty | truncated | html | api_error | slow
    status: int = 200
    retry_after: str | None = None
    seconds: float = 0.0
    message: str = ""


def ok() -> Scripted:
    """Answer this request normally (to place a fault after some good requests)."""
    return Scripted("ok")


def unavailable(retry_after: str | None = "1", status: int = 503) -> Scripted:
    """arXiv's overload answer: 503 with a Retry-After header."""
    return Scripted("status", status=status, retry_after=retry_after)


def server_error(status: int = 500) -> Scripted:
    return Scripted("status", status=status)


def empty_page() -> Scripted:
    """A well-formed page with no entries although totalResults says there are more."""
    return Scripted("empty")


def truncated() -> Scripted:
    """The normal answer cut off half-way (a dropped connection behind a proxy)."""
    return Scripted("truncated")


def html_page() -> Scripted:
    """An HTML error page served with status 200 (a proxy or maintenance page)."""
    return Scripted("html")


def api_error(message: str = "max_results must be non-negative", status: int = 400) -> Scripted:
    """arXiv's own error feed: one entry with id http://arxiv.org/api/errors#… and title Error."""
    return Scripted("api_error", status=status, message=message)


def slow(seconds: float) -> Scripted:
    """Wait ``seconds`` before answering normally (to exceed the client's timeout)."""
    return Scripted("slow", seconds=seconds)


@dataclass(slots=True)
class RecordedRequest:
    """One request as the fake saw it."""

    started: float  # time.monotonic() when the handler began
    params: dict[str, str]
    in_flight: int  # requests being served when this one started, itself included
    user_agent: str
    finished: float | None = None  # time.monotonic() when the answer was ready (None: aborted)
    status: int | None = None
    kind: str = "ok"
    path: str = "/api/query"


# ---------------------------------------------------------------------------------- queries
class QueryError(ValueError):
    """A search_query this fake does not understand (topicpulse never sends one)."""


@dataclass(frozen=True, slots=True)
class Query:
    categories: frozenset[str]
    first: str | None = None  # YYYYMMDDHHMM, inclusive
    last: str | None = None

    def matches(self, paper: Paper) -> bool:
        if not self.categories.intersection(paper.categories):
            return False
        if self.first is None or self.last is None:
            return True
        return self.first <= _minute(paper.published) <= self.last


@functools.lru_cache(maxsize=1 << 16)
def _minute(published: str) -> str:
    """``YYYYMMDDHHMM`` (UTC) of an ISO timestamp: arXiv's submittedDate resolution."""
    return parse_iso(published).strftime("%Y%m%d%H%M")


def parse_query(text: str) -> Query:
    text = " ".join(text.split())
    first = last = None
    ranged = _RANGED.fullmatch(text)
    if ranged:
        text, first, last = ranged.group("cats"), ranged.group("first"), ranged.group("last")
    if not _CATEGORIES.fullmatch(text):
        raise QueryError(f"unsupported search_query {text!r}")
    return Query(frozenset(re.findall(r"cat:([\w.-]+)", text)), first, last)


# ---------------------------------------------------------------------------------- rendering
# Entries and pages are written by topicpulse.synthetic (render_entry / render_feed, re-exported
# here), in the element order of real arXiv API responses.
def _text(value: str) -> str:
    return escape(value)


def render_error_feed(message: str, search_query: str = "") -> bytes:
    """arXiv's error answer: a feed whose single entry is the error (id …/api/errors#…)."""
    anchor = re.sub(r"\W+", "_", message).strip("_")
    query = query_string(search_query, 0, 10)
    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            '<feed xmlns="http://www.w3.org/2005/Atom">',
            f'  <link href={quoteattr("http://arxiv.org/api/query?" + query)} rel="self"'
            ' type="application/atom+xml"/>',
            f'  <title type="html">ArXiv Query: {_text(query)}</title>',
            "  <id>http://arxiv.org/api/ICCqNwWyrQkMAErZidA/EoTr7/o</id>",
            f"  <updated>{iso(datetime.now(UTC))}</updated>",
            '  <opensearch:totalResults xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">'
            "1</opensearch:totalResults>",
            '  <opensearch:startIndex xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">'
            "0</opensearch:startIndex>",
            '  <opensearch:itemsPerPage xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">'
            "1</opensearch:itemsPerPage>",
            "  <entry>",
            f"    <id>http://arxiv.org/api/errors#{anchor}</id>",
            "    <title>Error</title>",
            f"    <summary>{_text(message)}</summary>",
            f"    <updated>{iso(datetime.now(UTC))}</updated>",
            f'    <link href="http://arxiv.org/api/errors#{anchor}" rel="alternate"'
            ' type="text/html"/>',
            "    <author>",
            "      <name>arXiv api core</name>",
            "    </author>",
            "  </entry>",
            "</feed>",
            "",
        ]
    ).encode("utf-8")


HTML_ERROR_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>arXiv is undergoing maintenance</title></head>\n"
    b"<body><h1>Service temporarily unavailable</h1><p>Please try again later.</p></body></html>\n"
)


# ---------------------------------------------------------------------------------- papers
def make_paper(
    arxiv_id: str,
    published: datetime | str,
    *,
    categories: Sequence[str] = ("cs.CL",),
    version: int = 1,
    title: str | None = None,
    updated: datetime | str | None = None,
    **extra: Any,
) -> Paper:
    """A synthetic paper for tests (primary category = first category)."""
    published_s = published if isinstance(published, str) else iso(published)
    updated_s = updated if isinstance(updated, str) else iso(updated) if updated else published_s
    return Paper(
        arxiv_id=arxiv_id,
        version=version,
        title=title or f"Paper {arxiv_id}",
        abstract=extra.pop("abstract", f"Abstract of {arxiv_id}."),
        authors=tuple(extra.pop("authors", ("Ada Lovelace", "Alan Turing"))),
        primary_category=categories[0],
        categories=tuple(categories),
        published=published_s,
        updated=updated_s,
        **extra,
    )


def load_listing(
    path: Path = LISTINGS, *, end: date | None = None, spread: bool = True
) -> list[Paper]:
    """The real papers of ``shared/arxiv-listings/papers.jsonl``.

    With ``end``, every listing date is shifted by the same number of days so that the last one
    falls on ``end`` (the 8 weeks of listings become the 8 weeks before it). With ``spread``, the
    papers of one day get distinct times spread over that day (in file order), as real
    submissions have, so that newest-first paging is well defined.
    """
    with path.open(encoding="utf-8") as handle:
        papers = papers_from_listing(handle)
    shift = timedelta(0)
    if end is not None:
        shift = end - max(parse_iso(p.published).date() for p in papers)
    per_day = Counter(p.published for p in papers)
    seen: Counter[str] = Counter()
    out: list[Paper] = []
    for paper in papers:
        stamp = parse_iso(paper.published) + shift
        if spread:
            index = seen[paper.published]
            seen[paper.published] += 1
            stamp += timedelta(seconds=index * 86_000 // per_day[paper.published])
        out.append(dataclasses.replace(paper, published=iso(stamp), updated=iso(stamp)))
    return out


LISTING_END = date(2026, 5, 22)  # the last listing day of the real papers.jsonl


def synthetic_listing(
    *, end: date | None = None, weeks: int = 8, per_weekday: int = 125, seed: int = 0
) -> list[Paper]:
    """Generated papers (``topicpulse.synthetic``) standing in for the real listing: from the
    Monday ``weeks - 1`` weeks before ``end``'s week through ``end`` (default: the real
    listing's span, 2026-03-30 … 2026-05-22), about as many papers as its 5,861 by default,
    each with its own time of day."""
    last = end or LISTING_END
    first = last - timedelta(days=last.weekday(), weeks=weeks - 1)
    return generate_papers(
        start=first, days=(last - first).days + 1, per_weekday=per_weekday, seed=seed
    )


def listing_papers(*, end: date | None = None) -> list[Paper]:
    """The real listing (``load_listing``) when ../shared has it, else ``synthetic_listing``."""
    return load_listing(end=end) if LISTINGS.is_file() else synthetic_listing(end=end)


# ---------------------------------------------------------------------------------- server
class FakeArxiv:
    """The fake arXiv API. ``async with FakeArxiv(papers) as fake:`` then use ``fake.url``."""

    def __init__(self, papers: Iterable[Paper | dict[str, Any]] = ()) -> None:
        self.papers: list[Paper] = [self._paper(p) for p in papers]
        self.requests: list[RecordedRequest] = []
        self.url = ""
        self._script: deque[Scripted] = deque()
        self._runner: web.AppRunner | None = None
        self._in_flight = 0
        self.oai = FakeOai()  # GET /oai: OAI-PMH ListRecords (fake_oai.py)
        self.oai_url = ""

    @staticmethod
    def _paper(paper: Paper | dict[str, Any]) -> Paper:
        return paper if isinstance(paper, Paper) else Paper(**paper)

    # -------------------------------------------------------------- test controls
    def add(self, *papers: Paper | dict[str, Any]) -> None:
        """Add papers, replacing any paper with the same arXiv id (e.g. a new version)."""
        for paper in map(self._paper, papers):
            self.papers = [p for p in self.papers if p.arxiv_id != paper.arxiv_id]
            self.papers.append(paper)

    def replace(self, papers: Iterable[Paper | dict[str, Any]]) -> None:
        self.papers = [self._paper(p) for p in papers]

    def script(self, *responses: Scripted) -> None:
        """Answer the next ``len(responses)`` requests with these (then normally again)."""
        self._script.extend(responses)

    @property
    def pending_script(self) -> int:
        return len(self._script)

    def reset_requests(self) -> None:
        self.requests.clear()

    @property
    def max_in_flight(self) -> int:
        return max((r.in_flight for r in self.requests), default=0)

    def start_gaps(self) -> list[float]:
        """Seconds between the starts of consecutive requests."""
        starts = [r.started for r in self.requests]
        return [b - a for a, b in itertools.pairwise(starts)]

    # -------------------------------------------------------------- lifecycle
    async def start(self) -> FakeArxiv:
        app = web.Application()
        app.router.add_get("/api/query", self._handle)
        app.router.add_get("/oai", self._handle)
        # Cancel a handler when its client hangs up (a timed-out slow response), so that the
        # in-flight count and shutdown do not wait for it.
        self._runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=0.5
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/api/query"
        self.oai_url = f"http://{host}:{port}/oai"
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeArxiv:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -------------------------------------------------------------- serving
    def answer(self, params: dict[str, str]) -> tuple[list[Paper], int, int, int]:
        """(page, totalResults, start, max_results) for a query, as arXiv would answer it."""
        start = int(params.get("start", "0"))
        max_results = int(params.get("max_results", "10"))
        wanted = [i for i in params.get("id_list", "").split(",") if i]
        if wanted and not params.get("search_query"):  # a lookup by id (versions ignored)
            found = [p for p in self.papers if p.arxiv_id in {i.split("v")[0] for i in wanted}]
            return found[start : start + max_results], len(found), start, max_results
        query = parse_query(params.get("search_query", ""))
        if start < 0 or not 0 <= max_results <= 2000:
            raise QueryError("start must be >= 0 and max_results between 0 and 2000")
        if params.get("sortBy", "submittedDate") != "submittedDate":
            raise QueryError(f"unsupported sortBy {params['sortBy']!r}")
        order = params.get("sortOrder", "descending")
        if order not in ("ascending", "descending"):
            raise QueryError(f"unsupported sortOrder {order!r}")
        matching = sorted(
            (p for p in self.papers if query.matches(p)),
            key=lambda p: (p.published, p.arxiv_id),
            reverse=order == "descending",
        )
        return matching[start : start + max_results], len(matching), start, max_results

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self._in_flight += 1
        record = RecordedRequest(
            started=time.monotonic(),
            params=dict(request.query),
            in_flight=self._in_flight,
            user_agent=request.headers.get("User-Agent", ""),
            path=request.path,
        )
        self.requests.append(record)
        try:
            scripted = self._script.popleft() if self._script else ok()
            record.kind = scripted.kind
            if request.path == "/oai":
                response = await self._respond_oai(scripted, record.params)
            else:
                response = await self._respond(scripted, record.params)
            record.status = response.status
            record.finished = time.monotonic()
            return response
        finally:
            self._in_flight -= 1

    @staticmethod
    async def _transport_fault(scripted: Scripted) -> web.Response | None:
        """The faults both interfaces script alike: a status (503 with Retry-After, 5xx), an
        HTML page, a slow answer (then None: answered normally, late)."""
        if scripted.kind == "status":
            headers = {"Retry-After": scripted.retry_after} if scripted.retry_after else {}
            return web.Response(status=scripted.status, text="arXiv is busy", headers=headers)
        if scripted.kind == "html":
            return web.Response(body=HTML_ERROR_PAGE, content_type="text/html")
        if scripted.kind == "slow":
            await asyncio.sleep(scripted.seconds)
        return None

    async def _respond(self, scripted: Scripted, params: dict[str, str]) -> web.Response:
        search_query = params.get("search_query", "")
        if scripted.kind == "api_error":
            return self._atom(render_error_feed(scripted.message, search_query), scripted.status)
        if (fault := await self._transport_fault(scripted)) is not None:
            return fault
        try:
            page, total, start, max_results = self.answer(params)
        except ValueError as exc:  # QueryError, or start/max_results not numbers
            return self._atom(render_error_feed(str(exc), search_query), 400)
        if scripted.kind == "empty":
            page = []
        body = render_feed(
            page, search_query=search_query, start=start, max_results=max_results,
            total_results=total,
        )  # fmt: skip
        if scripted.kind == "truncated":
            body = body[: len(body) // 2]
        return self._atom(body)

    async def _respond_oai(self, scripted: Scripted, params: dict[str, str]) -> web.Response:
        """OAI-PMH: the same scripted faults (503, 5xx, HTML, truncated, slow) as the API."""
        if (fault := await self._transport_fault(scripted)) is not None:
            return fault
        body = self.oai.answer(self.papers, params, self.oai_url)
        if scripted.kind == "truncated":
            body = body[: len(body) // 2]
        return web.Response(body=body, content_type="text/xml", charset="utf-8")

    @staticmethod
    def _atom(body: bytes, status: int = 200) -> web.Response:
        return web.Response(
            body=body, status=status, content_type="application/atom+xml", charset="utf-8"
        )
