"""Ingestion rounds: new papers and history from arXiv's OAI-PMH interface, lookups of single
papers from its search API, imports of saved files.

Every round is recorded in the store (``ingest_runs``) with its requests, new and updated
papers, errors and duration. Each harvested page is stored in slices of a few hundred papers
(short write transactions: a reader's 👍 gets in between), the harvest's progress past it
with the last slice, so an interrupted harvest loses nothing: what it stored stays, what it
had not reached (a page cut short included) is read by the next one (a page read twice is
stored once: the upsert reads it as unchanged).

- ``poll``: the daily intake. A small ``ListIdentifiers`` request (headers only) asks whether
  anything changed since the newest record seen (a later datestamp, or a record of that day
  this process has not read); if so, ``ListRecords`` for the configured categories'
  sets from the watermark (that newest record's day): every record created or changed since,
  the day's new papers, later cross-lists into a followed category, replaced versions.
  ``announce`` decides what each record is; the watermark moves only when every set was read
  to its last page. A bot down for days reads them all in its next round.
- ``backfill``: the history. The same harvest from the first day of the configured weeks (OAI-
  PMH cannot select by submission date: it lists everything changed since, and the papers
  created before that day are left out), resumable at its next page, and holding the ingest
  lock one page at a time so the daily intake runs between its pages.
- ``lookup``: papers by id through the search API's ``id_list``, for a reader who asks for a
  paper the store does not hold yet; never the daily list.

When a round runs is the scheduler's business (``calendar``): shortly after arXiv's expected
update, and again with backoff while it has not appeared.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from topicpulse.config import Settings
from topicpulse.models import Paper, RunStats, UpsertResult, utcnow
from topicpulse.sources.arxiv import ArxivClient, ArxivUnavailable, FeedError, parse_feed
from topicpulse.sources.harvest import GROUPS, Harvest, OaiHarvester
from topicpulse.sources.oai import BAD_TOKEN, OaiError, OaiPage
from topicpulse.sources.storing import KeepPage, Kept, store_page
from topicpulse.store import IntakeUpdate, Store

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]  # (done, total, label)
MAX_LOOKUP = 50  # ids in one id_list request
NOT_FOUND_FOR = 3600.0  # seconds a lookup that found nothing is not repeated


class RoundFailed(RuntimeError):
    """An ingestion round stopped early; what it stored before stays stored."""


def harvest_sets(categories: Iterable[str]) -> list[str]:
    """The OAI-PMH sets that hold the categories: a group (``cs``, ``stat`` …) for the groups'
    categories, an archive (``physics:hep-th``, ``physics:cond-mat``) for physics. Coarser than
    one set per category, so a paper cross-listed in two followed categories is read once."""
    found = set()
    for category in categories:
        archive = category.partition(".")[0]
        found.add(archive if archive in GROUPS else f"physics:{archive}")
    return sorted(found)


class Ingestor:
    """Runs the intake and history harvests for a set of categories against one store."""

    def __init__(
        self,
        store: Store,
        client: ArxivClient,
        categories: Sequence[str],
        *,
        oai_url: str,
        overlap_days: float = 7,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.client = client
        self.harvester = OaiHarvester(client, oai_url)
        self.categories = list(categories)
        self.sets = harvest_sets(self.categories)
        self.overlap = timedelta(days=overlap_days)  # how far back a first intake reaches
        self.clock = clock
        self._lock = asyncio.Lock()  # one page at a time (the intake and history share arXiv)
        self._not_found: OrderedDict[str, float] = OrderedDict()  # lookups: id → when
        self._read_on: set[str] = set()  # the ids of the watermark day the last harvest read

    @classmethod
    def from_settings(
        cls,
        store: Store,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utcnow,
        backoff: float = 5.0,
    ) -> Ingestor:
        """An ingestor with its own arXiv client, configured from the settings (close it with
        ``await ingestor.client.aclose()``)."""
        client = ArxivClient(
            settings.arxiv_api_url,
            delay=settings.arxiv_delay_seconds,
            timeout=settings.arxiv_timeout_seconds,
            retries=settings.arxiv_retries,
            backoff=backoff,
            contact=settings.contact,
        )
        return cls(
            store,
            client,
            settings.categories,
            oai_url=settings.arxiv_oai_url,
            overlap_days=settings.overlap_days,
            clock=clock,
        )

    @property
    def categories_key(self) -> str:
        return " ".join(sorted(self.categories))

    # ------------------------------------------------------------------------- the intake
    async def poll(self) -> tuple[RunStats, UpsertResult]:
        """One intake round: every record changed since the watermark, then the watermark."""
        async with self._lock:
            return await self._round("poll", self._harvest_new)

    async def newest_stamp(self) -> str | None:
        """The day of the newest record the intake has read, its watermark (has an expected
        update appeared?)."""
        return (await self.store.intake_state(self.categories_key)).watermark

    async def _harvest_new(self, result: UpsertResult) -> None:
        state = await self.store.intake_state(self.categories_key)
        if state.watermark:
            since = date.fromisoformat(state.watermark)
            # One small request first: the headers since the watermark day. Nothing dated later
            # and no record of that day this process has not read means no update yet (a day
            # without an announcement, or one not loaded yet): the round ends there.
            if not await self._changed_since(since):
                return
        else:
            since = (self.clock() - self.overlap).date()
        newest = since.isoformat()
        read_on: dict[str, set[str]] = {}  # datestamp → ids read with it
        keep = self._keep_apart()
        for set_spec in self.sets:
            async for page in self.harvester.pages(set_spec, since, Harvest(), keep=keep):
                newest = max(newest, await self._store_page(page, result))
                for record in page.records:
                    read_on.setdefault(record.datestamp, set()).add(record.arxiv_id)
        # The next harvest starts at the newest datestamp read (inclusive: a day's records
        # that arrive after this harvest are read then), never later than what was read.
        self._read_on = read_on.get(newest, set())
        await self.store.save_intake(IntakeUpdate(self.categories_key, {"watermark": newest}))

    async def _changed_since(self, watermark: date) -> bool:
        """Whether the headers since the watermark day hold a later datestamp, or a record of
        that day this process has not read (after a restart: any). Usually one request; more
        only while the pages hold nothing but records already read."""
        day = watermark.isoformat()
        for set_spec in self.sets:
            try:
                async for headers in self.harvester.header_pages(set_spec, watermark):
                    if any(s > day or (s == day and i not in self._read_on) for i, s in headers):
                        return True
            except OaiError as exc:
                if exc.code != BAD_TOKEN:
                    raise
                return True  # the harvest will tell
        return False

    def _keep_apart(self) -> KeepPage | None:
        """The intake's pages are stored where they are parsed, in the worker process,
        through a connection of its own (a store in a file; in memory, here): the bot's
        process then does not unpickle, sort and write a thousand papers a page, ~13% of its
        event loop's time in a round (bench_replies' samples), while readers wait."""
        if not self.store.file_backed():
            return None
        return KeepPage(self.store.path, tuple(self.categories), self.store.clock())

    async def _store_page(
        self,
        page: OaiPage,
        result: UpsertResult,
        intake: IntakeUpdate | None = None,
        oldest: str | None = None,
    ) -> str:
        """Store one page's papers (and ``intake``: ``storing.store_page``), unless the worker
        that parsed it did (``page.kept``); its newest datestamp."""
        if isinstance(page.kept, Kept):
            kept = page.kept
            self.store.papers_written_apart()
        else:
            kept = await store_page(self.store, page, self.categories, intake, oldest)
        result.new_ids.extend(kept.stored.new_ids)
        result.updated += kept.stored.updated
        result.unchanged += kept.stored.unchanged
        return kept.newest_stamp

    # ------------------------------------------------------------------------ the history
    def history_start(self, weeks: float) -> date:
        return self.clock().date() - timedelta(days=round(weeks * 7))

    async def history_missing(self, weeks: float) -> bool:
        """Whether the papers of the last ``weeks`` weeks are not all stored yet."""
        if weeks <= 0:
            return False
        done = (await self.store.intake_state(self.categories_key)).history_from
        return done is None or done > self.history_start(weeks).isoformat()

    async def backfill(
        self, weeks: float, progress: Progress | None = None
    ) -> tuple[RunStats, list[int]]:
        """Harvest the history of the last ``weeks`` weeks, unless it is complete already;
        resumes an interrupted harvest of the same start at its next page. Returns the round's
        stats and the row ids of the papers it stored new."""
        if not await self.history_missing(weeks):
            return RunStats(kind="backfill"), []
        start = self.history_start(weeks).isoformat()
        stats, result = await self._round(
            "backfill", lambda result: self._harvest_history(start, result, progress)
        )
        return stats, result.new_ids

    async def _harvest_history(
        self, start: str, result: UpsertResult, progress: Progress | None
    ) -> None:
        key = self.categories_key
        state = await self.store.intake_state(key)
        sets, token = self.sets, None
        if state.pending_from == start and state.pending_set in sets:
            sets = sets[sets.index(state.pending_set) :]
            token = state.pending_token
            log.info("resuming the history harvest at set %s", state.pending_set)
        done = records = 0
        for index, set_spec in enumerate(sets):
            harvest = Harvest()
            pages = self.harvester.pages(
                set_spec, date.fromisoformat(start), harvest, resume=token
            ).__aiter__()
            token = None
            while True:
                async with self._lock:  # one page at a time: the intake runs between them
                    page = await anext(pages, None)
                    if page is None:
                        break
                    records += len(page.records)
                    after = page.token.value if page.token else None
                    following = sets[index + 1] if index + 1 < len(sets) else None
                    progress_past = {
                        "pending_from": start,
                        "pending_set": set_spec if after else following,
                        "pending_token": after,
                    }
                    if after is None and following is None and not records and not token:
                        # arXiv has answered "nothing" for minutes at a time: weeks of history
                        # without one record are not taken as complete (asked again later)
                        raise RoundFailed(f"OAI-PMH listed no records since {start}")
                    if after is None and following is None:  # the last page of the last set
                        progress_past = {
                            "history_from": start,
                            "pending_from": None,
                            "pending_set": None,
                            "pending_token": None,
                        }
                    await self._store_page(
                        page, result, IntakeUpdate(key, progress_past), oldest=start
                    )
                done += 1
                if progress:
                    progress(done, max(done, _pages_expected(page, done)), set_spec)

    # ------------------------------------------------------------------------- lookups
    async def lookup(self, arxiv_ids: Sequence[str]) -> list[int]:
        """Fetch papers by id from the search API (``id_list``) and store those of the
        configured categories (the store keeps those only); the row ids of the ones new to it.
        An id arXiv did not know (or of other categories) is not asked again for an hour.
        Raises ``ArxivUnavailable`` when arXiv does not answer."""
        now = time.monotonic()
        wanted = [
            i
            for i in dict.fromkeys(arxiv_ids)
            if now - self._not_found.get(i, -NOT_FOUND_FOR) >= NOT_FOUND_FOR
        ]
        new: list[int] = []
        for start in range(0, len(wanted), MAX_LOOKUP):
            chunk = wanted[start : start + MAX_LOOKUP]
            page = await self.client.fetch(
                {"id_list": ",".join(chunk), "start": 0, "max_results": len(chunk)}
            )
            ours = [p for p in page.papers if set(p.categories) & set(self.categories)]
            new.extend((await self.store.upsert_papers(ours)).new_ids)
            kept = {p.arxiv_id for p in ours}
            for arxiv_id in chunk:
                if arxiv_id not in kept:
                    self._not_found[arxiv_id] = now
                    self._not_found.move_to_end(arxiv_id)
            while len(self._not_found) > 10_000:
                self._not_found.popitem(last=False)
        return new

    # ----------------------------------------------------------------------------- rounds
    async def _round(
        self, kind: str, work: Callable[[UpsertResult], Awaitable[None]]
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
                await work(result)
            except (ArxivUnavailable, FeedError, OaiError, RoundFailed) as exc:
                stats.ok, stats.errors, stats.message = False, 1, str(exc)
                log.error(
                    "%s round stopped (%d new papers stored before it; the next round goes on "
                    "from there): %s", kind, result.new, exc,
                )  # fmt: skip
            except Exception as exc:  # a bug or a store failure: record the round, then raise
                stats.ok, stats.errors = False, 1
                stats.message = f"{type(exc).__name__}: {exc}"
                unexpected = exc
            stats.requests = sent()
        stats.new, stats.updated = result.new, result.updated
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


def _pages_expected(page: OaiPage, done: int) -> int:
    """How many pages this set's harvest will take, where the server says (old server's
    ``completeListSize``); else one more than read so far while a token follows."""
    token = page.token
    if token is None:
        return done
    if token.complete_list_size and page.records:
        return math.ceil(token.complete_list_size / len(page.records))
    return done + 1


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
