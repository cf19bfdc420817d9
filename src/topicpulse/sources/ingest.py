"""Ingestion rounds: poll the arXiv API, backfill history, import saved responses.

Every round is recorded in the store (``ingest_runs``) with its requests, new and updated
papers, errors and duration. A round either stores everything it fetched in one transaction or
stores nothing: a broken page never leaves a half-written round behind.

Poll: newest-first by submission date, paging until the papers are older than the overlap
window (default 7 days). Re-reading that window every round catches papers announced late
(held in moderation, submitted before papers we already stored); the store dedupes them.
Backfill: one date-ranged query per day, oldest day first, each day recorded as done in the
same transaction as its papers, so an interrupted backfill resumes where it stopped.

In the bot (``store_elsewhere``), a round's pages are parsed and stored by a worker process
(``offload``) with its own connection to the database file: the bot's process only checks and
counts each page as it arrives, so its event loop never builds thousands of rows while users
wait for replies (bench/bench_replies.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from topicpulse import offload
from topicpulse.config import Settings
from topicpulse.models import Paper, RunStats, UpsertResult, iso, utcnow
from topicpulse.sources.arxiv import (
    ArxivClient,
    ArxivUnavailable,
    FeedError,
    FeedPage,
    category_query,
    date_range_query,
    parse_feed,
)
from topicpulse.store import BackfillWindow, Store

log = logging.getLogger(__name__)

EMPTY_PAGE_RETRIES = 3  # the API sometimes answers an empty page although more results exist
FAILED_DAYS_IN_A_ROW = 3  # a backfill goes past a failing day, but not past an outage
MAX_RESULTS_PER_QUERY = 30_000  # arXiv serves at most the first 30,000 results of one query

Progress = Callable[[int, int, str], None]  # (done, total, label)


class RoundFailed(RuntimeError):
    """An ingestion round stopped early; nothing of it was stored."""


async def _fetch_all(
    client: ArxivClient,
    query: str,
    *,
    page_size: int,
    sort_order: str,
    stop_before: str | None = None,
    keep_papers: bool = True,
) -> list[FeedPage]:
    """Page through one query. With ``stop_before`` (ISO time), stop once a page reaches
    papers first published before it (the query must be sorted newest first)."""
    pages: list[FeedPage] = []
    start = 0
    while True:
        page = await _fetch_page(client, query, start, page_size, sort_order, keep_papers)
        pages.append(page)
        start += page.entries
        if page.entries == 0 or start >= page.total_results:
            break
        if stop_before and page.oldest_published and page.oldest_published < stop_before:
            break
        if start >= MAX_RESULTS_PER_QUERY:
            log.warning(
                "query %r has %d results; arXiv serves only the first %d, stopped paging",
                query, page.total_results, MAX_RESULTS_PER_QUERY,
            )  # fmt: skip
            break
    return pages


async def _fetch_page(
    client: ArxivClient, query: str, start: int, page_size: int, sort_order: str, keep: bool
) -> FeedPage:
    """One page; an empty page while totalResults says there is more is asked for again."""
    for attempt in range(EMPTY_PAGE_RETRIES + 1):
        page = await client.search(
            query, start=start, max_results=page_size, sort_order=sort_order, keep_papers=keep
        )
        if page.entries > 0 or start >= page.total_results:
            return page
        log.warning(
            "arXiv returned an empty page at start=%d although totalResults=%d (try %d)",
            start, page.total_results, attempt + 1,
        )  # fmt: skip
    raise RoundFailed(
        f"arXiv kept returning empty pages at start={start} (totalResults={page.total_results})"
    )


class Ingestor:
    """Runs poll and backfill rounds for a set of categories against one store."""

    def __init__(
        self,
        store: Store,
        client: ArxivClient,
        categories: Sequence[str],
        *,
        page_size: int = 1000,
        overlap_days: float = 7,
        clock: Callable[[], datetime] = utcnow,
        store_elsewhere: bool = False,
    ) -> None:
        self.store = store
        # Parse and store each round's pages in a worker process (when the store is a file).
        self.store_elsewhere = store_elsewhere
        self.client = client
        self.categories = list(categories)
        self.page_size = page_size
        self.overlap = timedelta(days=overlap_days)
        self.clock = clock
        self._lock = asyncio.Lock()  # one round at a time (poll and backfill share arXiv)

    @classmethod
    def from_settings(
        cls,
        store: Store,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utcnow,
        backoff: float = 5.0,
        store_elsewhere: bool = False,
    ) -> Ingestor:
        """An ingestor with its own arXiv client, configured from the settings (close it with
        ``await ingestor.client.aclose()``)."""
        client = ArxivClient(
            settings.arxiv_api_url,
            delay=settings.arxiv_delay_seconds,
            timeout=settings.arxiv_timeout_seconds,
            retries=settings.arxiv_retries,
            backoff=backoff,
        )
        return cls(
            store,
            client,
            settings.categories,
            page_size=settings.arxiv_page_size,
            overlap_days=settings.overlap_days,
            clock=clock,
            store_elsewhere=store_elsewhere,
        )

    @property
    def categories_key(self) -> str:
        return " ".join(sorted(self.categories))

    async def poll(self) -> tuple[RunStats, UpsertResult]:
        """One polling round: re-read the overlap window newest-first and store what is new."""
        async with self._lock:
            cutoff = iso(self.clock() - self.overlap)
            query = category_query(self.categories)
            return await self._round(
                "poll",
                lambda: _fetch_all(
                    self.client, query, page_size=self.page_size, sort_order="descending",
                    stop_before=cutoff, keep_papers=not self._elsewhere,
                ),
            )  # fmt: skip

    def backfill_days(self, weeks: float) -> list[date]:
        """The complete days a backfill of ``weeks`` weeks covers, oldest first (not today)."""
        today = self.clock().date()
        return [today - timedelta(days=n) for n in range(round(weeks * 7), 0, -1)]

    async def missing_days(self, weeks: float) -> list[date]:
        """Days of the backfill period not yet fetched completely (a failed day stays missing
        until a later backfill fills it)."""
        done = await self.store.completed_backfill_windows(self.categories_key)
        return [d for d in self.backfill_days(weeks) if d.isoformat() not in done]

    async def backfill(
        self, weeks: float, progress: Progress | None = None, *, include_today: bool = True
    ) -> tuple[RunStats, list[int]]:
        """Fetch the last ``weeks`` weeks day by day, skipping days already completed, then
        (with ``include_today``) today so far, which is never recorded as complete.

        Returns the summed stats and the row ids of all papers it stored new. A failed day is
        skipped (the next call retries it); three failed days in a row stop the backfill. The
        ingest lock is held for one day at a time, so a first deploy's long backfill does not
        hold up the polls (they run between its days).
        """
        today = self.clock().date()
        todo: list[tuple[date, BackfillWindow | None]] = [
            (day, BackfillWindow(self.categories_key, day.isoformat(), day.isoformat()))
            for day in await self.missing_days(weeks)
        ]
        if include_today:
            todo.append((today, None))
        total_days = len(self.backfill_days(weeks)) + int(include_today)
        total = RunStats(kind="backfill")
        new_ids: list[int] = []
        failed: list[str] = []
        failed_in_a_row = 0
        for index, (day, window) in enumerate(todo, start=1):
            async with self._lock:  # a day at a time: polls run between the days
                stats, result = await self._round(
                    "backfill", lambda day=day: self._fetch_day(day), window=window
                )
            for name in ("requests", "new", "updated", "errors", "duration_s"):
                setattr(total, name, getattr(total, name) + getattr(stats, name))
            new_ids.extend(result.new_ids)
            if progress:
                progress(total_days - len(todo) + index, total_days, day.isoformat())
            if stats.ok:
                failed_in_a_row = 0
                continue
            # A day that keeps failing must not block the days after it: go on, and stop
            # only when arXiv seems down (several days in a row); missing days are retried.
            failed.append(day.isoformat())
            failed_in_a_row += 1
            total.ok = False
            total.message = f"failed days: {', '.join(failed)} ({stats.message})"
            if failed_in_a_row >= FAILED_DAYS_IN_A_ROW:
                total.message = f"stopped at {day}: {total.message}"
                break
        return total, new_ids

    @property
    def _elsewhere(self) -> bool:
        return self.store_elsewhere and self.store.file_backed()

    async def _fetch_day(self, day: date) -> list[FeedPage]:
        query = date_range_query(self.categories, day, day)
        return await _fetch_all(
            self.client, query, page_size=self.page_size, sort_order="ascending",
            keep_papers=not self._elsewhere,
        )  # fmt: skip

    async def _store(self, pages: list[FeedPage], window: BackfillWindow | None) -> UpsertResult:
        """Store a round's papers: here, or parsed and stored by a worker process."""
        if self._elsewhere:
            bodies = [page.body for page in pages]
            now = self.store.clock()
            return await offload.run(store_feeds, self.store.path, bodies, window, now)
        papers = [paper for page in pages for paper in page.papers]
        return await self.store.upsert_papers(papers, window=window)

    async def _round(
        self,
        kind: str,
        fetch: Callable[[], Awaitable[list[FeedPage]]],
        *,
        window: BackfillWindow | None = None,
    ) -> tuple[RunStats, UpsertResult]:
        run_id = await self.store.start_run(kind)
        stats = RunStats(kind=kind)
        result = UpsertResult()
        started = time.monotonic()
        unexpected: Exception | None = None
        # Counted per round, not as a difference of the client's total: another round may be
        # using the same client at the same time.
        with self.client.count_requests() as sent:
            try:
                pages = await fetch()
                if window is not None and not _complete(pages, window):
                    window = None  # stored, but the day stays missing: asked for again
                result = await self._store(pages, window)
                stats.new, stats.updated = result.new, result.updated
            except (ArxivUnavailable, FeedError, RoundFailed) as exc:
                stats.ok, stats.errors, stats.message = False, 1, str(exc)
                log.error(
                    "%s round failed, giving up for this round (nothing stored; the next round "
                    "tries again): %s", kind, exc,
                )  # fmt: skip
            except Exception as exc:  # a bug or a store failure: record the round, then raise
                stats.ok, stats.errors = False, 1
                stats.message = f"{type(exc).__name__}: {exc}"
                unexpected = exc
            stats.requests = sent()
        stats.duration_s = time.monotonic() - started
        await self.store.finish_run(run_id, stats)
        if unexpected is not None:
            raise unexpected
        if stats.ok:
            log.info(
                "%s round: %d requests, %d new, %d updated in %.1fs",
                kind, stats.requests, stats.new, stats.updated, stats.duration_s,
            )  # fmt: skip
        return stats, result


def _complete(pages: list[FeedPage], window: BackfillWindow) -> bool:
    """Whether a day's answer may be recorded as the whole day. arXiv has answered HTTP 200 with
    no results for minutes at a time: a weekday (Monday-Friday) that comes back empty is not
    taken as complete, and a later backfill asks again; an empty weekend day is (few papers
    are submitted then). A weekday truly without papers costs one request a backfill."""
    if any(page.total_results or page.entries for page in pages):
        return True
    if date.fromisoformat(window.start).weekday() >= 5:
        return True
    log.warning("arXiv found no papers for weekday %s: not recorded as complete", window.start)
    return False


def store_feeds(
    path: str, bodies: list[bytes], window: BackfillWindow | None, now: datetime
) -> UpsertResult:
    """In a worker process: parse a round's pages and store their papers (one transaction),
    through a connection of this process's own; ``now`` is the store's time for the rows."""
    papers = [paper for body in bodies for paper in parse_feed(body).papers]
    return Store.run_apart(path, now, lambda store: store.upsert_papers(papers, window=window))


# ---------------------------------------------------------------------------------- import
def papers_from_listing(lines: Iterable[str]) -> list[Paper]:
    """Papers from a JSON-lines listing (one object per line with arxiv_id, title, abstract,
    authors, categories, date), as in ``shared/arxiv-listings/papers.jsonl``. The listing date
    stands in for the first-version date."""
    papers = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            papers.append(_listing_paper(json.loads(line)))
        except KeyError as exc:
            raise ValueError(f"line {number}: no {exc} field") from None
        except (ValueError, TypeError, AttributeError) as exc:
            raise ValueError(f"line {number}: {exc}") from None
    return papers


def _listing_paper(record: dict[str, Any]) -> Paper:
    categories = tuple(dict.fromkeys(record["categories"]))
    stamp = f"{date.fromisoformat(record['date'])}T00:00:00Z"
    return Paper(
        arxiv_id=record["arxiv_id"],
        version=int(record.get("version", 1)),
        title=" ".join(record["title"].split()),
        abstract=" ".join(record.get("abstract", "").split()),
        authors=tuple(record.get("authors", [])),
        primary_category=categories[0] if categories else "",
        categories=categories,
        published=stamp,
        updated=stamp,
    )


def read_papers_file(path: Path) -> list[Paper]:
    """Papers from a saved arXiv API response (Atom XML) or a ``.jsonl`` listing. Raises
    ``ValueError`` naming the file (and line) when it cannot be parsed."""
    try:
        if path.suffix == ".jsonl":
            with path.open(encoding="utf-8") as handle:
                return papers_from_listing(handle)
        return parse_feed(path.read_bytes()).papers
    except ValueError as exc:  # includes FeedError and UnicodeDecodeError
        raise ValueError(f"{path}: {exc}") from exc


async def import_files(store: Store, paths: Sequence[Path]) -> tuple[RunStats, UpsertResult]:
    """Store the papers of saved files as one round. Raises OSError/ValueError before storing
    anything if a file cannot be read or parsed."""
    started = time.monotonic()
    papers: list[Paper] = []
    for path in paths:
        papers.extend(await asyncio.to_thread(read_papers_file, path))
    run_id = await store.start_run("import")
    result = await store.upsert_papers(papers)
    stats = RunStats(
        kind="import", new=result.new, updated=result.updated,
        duration_s=time.monotonic() - started, message=f"{len(paths)} file(s)",
    )  # fmt: skip
    await store.finish_run(run_id, stats)
    return stats, result
