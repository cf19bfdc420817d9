"""Ingestion rounds through the real ``Ingestor`` and ``ArxivClient`` against the fake arXiv API:
paging, date-ranged resumable backfill, the overlap window, version bumps, cross-lists, every
failure the API produces, politeness, and the per-round records in ``ingest_runs``."""

from __future__ import annotations

import asyncio
import itertools
import logging
import sqlite3
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from fake_arxiv import (
    FakeArxiv,
    api_error,
    empty_page,
    html_page,
    make_paper,
    ok,
    server_error,
    slow,
    truncated,
    unavailable,
)
from topicpulse.models import Paper, iso
from topicpulse.sources import ingest
from topicpulse.sources.arxiv import USER_AGENT, ArxivClient
from topicpulse.sources.ingest import Ingestor
from topicpulse.store import Store
from waiting import wait_for

NOW = datetime(2026, 5, 23, 12, 0, tzinfo=UTC)
TODAY = NOW.date()
CATEGORIES = ("cs.CL", "cs.LG")
EPSILON = 0.01  # clock granularity and loopback jitter, in seconds


def ago(days: float, hours: float = 0) -> datetime:
    return NOW - timedelta(days=days, hours=hours)


def papers_in_window(count: int, *, prefix: str = "2605", days: float = 5) -> list[Paper]:
    """``count`` papers spread evenly over the last ``days`` days (newest first)."""
    step = days / count
    return [make_paper(f"{prefix}.{i:05d}", ago(step * (i + 0.5))) for i in range(count)]


def stored(store: Store) -> dict[str, tuple[int, int, str]]:
    """arxiv_id → (row id, version, title) of everything in the database."""
    with sqlite3.connect(store.path) as db:
        rows = db.execute("SELECT arxiv_id, id, version, title FROM papers").fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def runs(store: Store) -> list[dict[str, object]]:
    with sqlite3.connect(store.path) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM ingest_runs ORDER BY id")]


def day_of(params: dict[str, str]) -> str:
    """The day a backfill request asked for, from its submittedDate range."""
    query = params["search_query"]
    first = query.split("submittedDate:[")[1][:8]
    assert query.endswith(f"[{first}0000 TO {first}2359]"), query
    return f"{first[:4]}-{first[4:6]}-{first[6:]}"


@pytest.fixture
async def fake() -> AsyncIterator[FakeArxiv]:
    async with FakeArxiv() as server:
        yield server


@pytest.fixture
async def client(fake: FakeArxiv) -> AsyncIterator[ArxivClient]:
    async with ArxivClient(fake.url, delay=0, retries=2, backoff=0.01, timeout=5) as c:
        yield c


def make_ingestor(
    store: Store,
    client: ArxivClient,
    categories: Sequence[str] = CATEGORIES,
    *,
    page_size: int = 100,
    overlap_days: float = 7,
    elsewhere: bool = False,
) -> Ingestor:
    return Ingestor(
        store, client, categories, page_size=page_size, overlap_days=overlap_days,
        clock=lambda: NOW, store_elsewhere=elsewhere,
    )  # fmt: skip


# The bot parses and stores a round's pages in a worker process: the tests marked with this run
# both ways and must see the same store.
BOTH_WAYS = pytest.mark.parametrize("elsewhere", [False, True], ids=["here", "in-a-worker"])


# ---------------------------------------------------------------------------------- paging
@BOTH_WAYS
async def test_poll_pages_through_every_paper_once(
    store: Store,
    client: ArxivClient,
    fake: FakeArxiv,
    elsewhere: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    papers = papers_in_window(50)
    fake.replace(papers)
    if elsewhere:  # the worker stores them: this process never does

        async def here(*args: object, **kwargs: object) -> None:
            raise AssertionError("stored in the bot's process")

        monkeypatch.setattr(Store, "upsert_papers", here)
    stats, result = await make_ingestor(store, client, page_size=7, elsewhere=elsewhere).poll()

    assert (stats.ok, stats.new, stats.updated, stats.requests) == (True, 50, 0, 8)
    assert sorted(stored(store)) == sorted(p.arxiv_id for p in papers)
    assert {v[1] for v in stored(store).values()} == {1}
    assert len(result.new_ids) == 50
    assert [int(r.params["start"]) for r in fake.requests] == [0, 7, 14, 21, 28, 35, 42, 49]
    for request in fake.requests:
        assert request.params["search_query"] == "cat:cs.CL OR cat:cs.LG"
        assert request.params["max_results"] == "7"
        assert request.params["sortBy"] == "submittedDate"
        assert request.params["sortOrder"] == "descending"


async def test_small_pages_do_not_cut_a_large_query_short(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    """arXiv's cap is on results (30,000), not pages: 250 papers in pages of 7 all arrive."""
    fake.replace(papers_in_window(250))
    stats, _ = await make_ingestor(store, client, page_size=7).poll()
    assert (stats.ok, stats.new, stats.requests) == (True, 250, 36)
    assert len(stored(store)) == 250


async def test_paging_stops_at_arxivs_result_cap(
    store: Store, client: ArxivClient, fake: FakeArxiv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "MAX_RESULTS_PER_QUERY", 20)
    fake.replace(papers_in_window(50))
    stats, _ = await make_ingestor(store, client, page_size=7).poll()
    assert (stats.ok, stats.new, stats.requests) == (True, 21, 3)


@BOTH_WAYS
async def test_poll_stops_paging_past_the_overlap_window(
    store: Store, client: ArxivClient, fake: FakeArxiv, elsewhere: bool
) -> None:
    recent = papers_in_window(10, days=6)
    old = [make_paper(f"2604.{i:05d}", ago(8 + i)) for i in range(30)]
    other_field = make_paper("2605.99999", ago(1), categories=("math.AG",))
    fake.replace([*recent, *old, other_field])
    stats, _ = await make_ingestor(store, client, page_size=5, elsewhere=elsewhere).poll()

    # Pages of 5, newest first: two pages of recent papers, the third reaches the old ones.
    assert stats.requests == 3 and [r.params["start"] for r in fake.requests] == ["0", "5", "10"]
    expected = {p.arxiv_id for p in recent} | {f"2604.{i:05d}" for i in range(5)}
    assert set(stored(store)) == expected and stats.new == 15


# ---------------------------------------------------------------------------------- backfill
async def test_backfill_fetches_its_window_day_by_day(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    in_window: list[Paper] = []
    for days in range(1, 8):
        day = TODAY - timedelta(days=days)
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        in_window += [
            make_paper(f"2605.1{days}001", start),  # first second of the day
            make_paper(f"2605.1{days}002", start + timedelta(hours=23, minutes=59, seconds=59)),
        ]
    busy_day = TODAY - timedelta(days=3)
    busy = [
        make_paper(f"2605.3{i:04d}", datetime(*busy_day.timetuple()[:3], 12, i, tzinfo=UTC))
        for i in range(15)
    ]
    outside = [
        make_paper("2605.20001", ago(8)),  # before the window
        make_paper("2605.20002", datetime(*TODAY.timetuple()[:3], 0, 5, tzinfo=UTC)),  # today
        make_paper("2605.20003", ago(2), categories=("math.AG",)),  # other category
    ]
    fake.replace([*in_window, *busy, *outside])
    progress: list[tuple[int, int, str]] = []
    stats, new_ids = await make_ingestor(store, client, page_size=7).backfill(
        1, progress=lambda done, total, label: progress.append((done, total, label))
    )

    today = outside[1]  # today so far is fetched too, and never recorded as complete
    assert stats.ok and stats.new == len(in_window) + len(busy) + 1 == 30
    assert set(stored(store)) == {p.arxiv_id for p in [*in_window, *busy, today]}
    assert len(new_ids) == 30
    # One query per day, oldest first, ascending; the busy day (17 papers) needs 3 pages.
    days = [(TODAY - timedelta(days=n)).isoformat() for n in range(7, 0, -1)]
    asked = [day_of(r.params) for r in fake.requests]
    expected = [d for d in days for _ in range(3 if d == busy_day.isoformat() else 1)]
    assert asked == [*expected, TODAY.isoformat()]
    assert stats.requests == 10
    assert {r.params["sortOrder"] for r in fake.requests} == {"ascending"}
    assert [p[2] for p in progress] == [*days, TODAY.isoformat()]
    assert progress[-1][:2] == (8, 8)
    assert await store.completed_backfill_windows("cs.CL cs.LG") == set(days)
    backfill_runs = [r for r in runs(store) if r["kind"] == "backfill"]
    assert len(backfill_runs) == 8 and all(r["ok"] == 1 for r in backfill_runs)
    assert sum(int(r["new"]) for r in backfill_runs) == 30  # type: ignore[call-overload]

    fake.reset_requests()  # again: only today is asked for (the complete days are skipped)
    again, _ = await make_ingestor(store, client, page_size=7).backfill(1)
    assert again.ok and again.new == 0
    assert [day_of(r.params) for r in fake.requests] == [TODAY.isoformat()]


async def test_a_failed_backfill_day_is_skipped_then_retried(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    days = [TODAY - timedelta(days=n) for n in range(7, 0, -1)]
    fake.replace(
        make_paper(f"2605.{n:02d}{i:03d}", datetime(*d.timetuple()[:3], 10 + i, tzinfo=UTC))
        for n, d in enumerate(days)
        for i in range(2)
    )
    ingestor = make_ingestor(store, client)
    # Days 1-3 succeed, day 4 fails on every try (retries=2: three 500s), days 5-7 succeed:
    # a day that keeps failing does not block the days after it.
    fake.script(ok(), ok(), ok(), server_error(), server_error(), server_error())
    first, _ = await ingestor.backfill(1, include_today=False)

    assert fake.pending_script == 0
    assert not first.ok and first.message.startswith(f"failed days: {days[3]}")
    assert (first.new, first.errors, first.requests) == (12, 1, 9)
    assert await store.completed_backfill_windows("cs.CL cs.LG") == {
        d.isoformat() for d in days if d != days[3]
    }
    assert [d.isoformat() for d in await ingestor.missing_days(1)] == [days[3].isoformat()]

    fake.reset_requests()  # the next call fetches only the missing day
    second, _ = await ingestor.backfill(1, include_today=False)
    assert second.ok and (second.new, second.requests) == (2, 1)
    assert [day_of(r.params) for r in fake.requests] == [days[3].isoformat()]
    assert len(stored(store)) == 14

    fake.reset_requests()
    third, _ = await ingestor.backfill(1, include_today=False)
    assert third.ok and (third.new, third.requests) == (0, 0) and fake.requests == []


async def test_an_empty_weekday_is_not_complete_until_it_has_papers(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    """arXiv has answered 200 with no results for minutes at a time: a weekday that comes back
    empty is asked for again by the next backfill, not recorded done for good (issue 23 §5).
    An empty Saturday or Sunday is complete: few papers are submitted then."""
    days = [TODAY - timedelta(days=n) for n in range(7, 0, -1)]
    weekday = next(d for d in days if d.weekday() < 5)
    weekend = next(d for d in days if d.weekday() >= 5)
    papers = [
        make_paper(f"2605.{n:02d}001", datetime(*d.timetuple()[:3], 10, tzinfo=UTC))
        for n, d in enumerate(days)
    ]
    missing = {weekday, weekend}
    fake.replace(p for p, d in zip(papers, days, strict=True) if d not in missing)
    ingestor = make_ingestor(store, client)
    first, _ = await ingestor.backfill(1, include_today=False)
    assert first.ok and first.new == 5
    assert await store.completed_backfill_windows("cs.CL cs.LG") == {
        d.isoformat() for d in days if d != weekday
    }
    fake.replace(papers)  # arXiv answers properly again
    fake.reset_requests()
    second, _ = await ingestor.backfill(1, include_today=False)
    assert second.ok and second.new == 1 and second.requests == 1
    assert [day_of(r.params) for r in fake.requests] == [weekday.isoformat()]
    assert weekday.isoformat() in await store.completed_backfill_windows("cs.CL cs.LG")


async def test_polls_run_between_the_days_of_a_long_backfill(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    """A first deploy's backfill takes hours at arXiv's pace; the ingest lock is held a day at
    a time, so a poll started meanwhile runs between two days instead of after the last one
    (issue 23 §1: before, the poll waited for the whole backfill)."""
    fake.replace(make_paper(f"2605.0000{n}", ago(n, hours=0.2)) for n in range(8))
    fake.script(*[slow(0.1)] * 8)  # each backfill day answers slowly
    ingestor = make_ingestor(store, client)
    backfill = asyncio.create_task(ingestor.backfill(1, include_today=False))
    await wait_for(lambda: len(fake.requests) >= 1, timeout=10, what="the backfill to start")
    polled, _ = await ingestor.poll()
    assert polled.ok and not backfill.done()
    days_before_the_poll = [r for r in fake.requests if "submittedDate" in r.params["search_query"]]
    assert 1 <= len(days_before_the_poll) < 7
    stats, _ = await backfill
    assert stats.ok and len(await store.completed_backfill_windows("cs.CL cs.LG")) == 7


async def test_a_backfill_stops_when_arxiv_seems_down(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace([make_paper("2605.00001", ago(3))])
    fake.script(*[server_error()] * 9)  # three days in a row fail (three tries each)
    stats, _ = await make_ingestor(store, client).backfill(1, include_today=False)
    assert not stats.ok and stats.message.startswith("stopped at")
    assert stats.requests == 9 and fake.pending_script == 0
    assert len(await make_ingestor(store, client).missing_days(1)) == 7


# ---------------------------------------------------------------------------------- overlap
@BOTH_WAYS
async def test_overlap_window_catches_a_late_announced_paper(
    store: Store, client: ArxivClient, fake: FakeArxiv, elsewhere: bool
) -> None:
    fake.replace([make_paper("2605.00001", ago(1)), make_paper("2605.00002", ago(2))])
    ingestor = make_ingestor(store, client, elsewhere=elsewhere)
    first, _ = await ingestor.poll()
    assert first.new == 2

    # Submitted before everything stored, announced only now (held in moderation).
    fake.add(make_paper("2605.00003", ago(3)))
    second, result = await ingestor.poll()
    assert (second.new, second.updated) == (1, 0)
    assert await store.papers_by_ids(result.new_ids) == [await store.get_paper("2605.00003")]
    assert set(stored(store)) == {"2605.00001", "2605.00002", "2605.00003"}

    third, _ = await ingestor.poll()  # nothing changed: nothing new or updated
    assert (third.new, third.updated, len(stored(store))) == (0, 0, 3)


# ---------------------------------------------------------------------------------- versions
@BOTH_WAYS
async def test_new_version_updates_the_stored_row(
    store: Store, client: ArxivClient, fake: FakeArxiv, elsewhere: bool
) -> None:
    v1 = make_paper("2605.00042", ago(2), title="Original title")
    fake.replace([v1, make_paper("2605.00043", ago(1))])
    ingestor = make_ingestor(store, client, elsewhere=elsewhere)
    await ingestor.poll()
    before = await store.get_paper("2605.00042")
    assert before is not None and (before.version, before.title) == (1, "Original title")

    v2 = make_paper("2605.00042", ago(2), version=2, title="Revised  title", updated=ago(0.5))
    fake.add(v2)
    stats, result = await ingestor.poll()
    assert (stats.new, stats.updated, result.new_ids) == (0, 1, [])
    after = await store.get_paper("2605.00042")
    assert after is not None
    assert (after.id, after.version, after.title) == (before.id, 2, "Revised title")
    assert (after.updated, after.stored_at) == (iso(ago(0.5)), before.stored_at)
    assert await store.count_papers() == 2

    fake.add(v1)  # a stale mirror serving v1 again changes nothing
    stats, _ = await ingestor.poll()
    assert (stats.new, stats.updated) == (0, 0)
    again = await store.get_paper("2605.00042")
    assert again is not None and (again.version, again.title) == (2, "Revised title")


@BOTH_WAYS
async def test_cross_listed_paper_is_stored_once(
    store: Store, client: ArxivClient, fake: FakeArxiv, elsewhere: bool
) -> None:
    cross = make_paper("2605.00007", ago(2), categories=("cs.LG", "stat.ML", "cs.CL"))
    fake.replace([cross, make_paper("2605.00008", ago(1), categories=("cs.CL",))])
    ingestor = make_ingestor(
        store, client, elsewhere=elsewhere
    )  # asks for cs.CL and cs.LG: both match `cross`
    poll, _ = await ingestor.poll()
    backfill, _ = await ingestor.backfill(1)
    only_cl, _ = await make_ingestor(store, client, ["cs.CL"]).poll()

    assert (poll.new, backfill.new, only_cl.new) == (2, 0, 0)
    assert (backfill.updated, only_cl.updated) == (0, 0)
    paper = await store.get_paper("2605.00007")
    assert paper is not None
    assert paper.categories == ("cs.LG", "stat.ML", "cs.CL") and paper.primary_category == "cs.LG"
    assert await store.count_papers() == 2


# ---------------------------------------------------------------------------------- failures
async def test_503_with_retry_after_is_waited_out(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace(papers_in_window(5))
    fake.script(unavailable(retry_after="1"))
    stats, _ = await make_ingestor(store, client).poll()

    assert (stats.ok, stats.new, stats.requests, stats.errors) == (True, 5, 2, 0)
    assert [r.status for r in fake.requests] == [503, 200]
    assert fake.start_gaps()[0] >= 1.0 - EPSILON
    assert len(stored(store)) == 5


async def test_unreadable_retry_after_falls_back_to_backoff(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace(papers_in_window(3))
    fake.script(unavailable(retry_after="soon"), unavailable(retry_after="Fri, 99 Foo"))
    stats, _ = await make_ingestor(store, client).poll()
    assert (stats.ok, stats.new, stats.requests) == (True, 3, 3)


async def test_repeated_5xx_fails_the_round_and_stores_nothing(
    store: Store, client: ArxivClient, fake: FakeArxiv, caplog: pytest.LogCaptureFixture
) -> None:
    fake.replace(papers_in_window(5))
    fake.script(server_error(500), server_error(502), server_error(500))
    with caplog.at_level(logging.WARNING, logger="topicpulse"):
        stats, result = await make_ingestor(store, client).poll()

    assert (stats.ok, stats.errors, stats.new, stats.requests) == (False, 1, 0, 3)
    assert fake.pending_script == 0 and "HTTP 500" in stats.message and result.new_ids == []
    assert await store.count_papers() == 0
    (run,) = runs(store)
    assert (run["kind"], run["ok"], run["errors"], run["requests"], run["new"]) == (
        "poll", 0, 1, 3, 0,
    )  # fmt: skip
    assert run["finished_at"] is not None and "HTTP 500" in str(run["message"])
    retries = [r for r in caplog.records if "retry" in r.getMessage()]
    assert len(retries) == 2
    gave_up = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(gave_up) == 1 and "giving up for this round" in gave_up[0].getMessage()

    recovered, _ = await make_ingestor(store, client).poll()  # the next round works
    assert (recovered.ok, recovered.new) == (True, 5)


async def test_spurious_empty_page_is_asked_again(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    papers = papers_in_window(20)
    fake.replace(papers)
    fake.script(ok(), empty_page())
    stats, _ = await make_ingestor(store, client, page_size=7).poll()

    assert (stats.ok, stats.new, stats.requests) == (True, 20, 4)
    assert [r.params["start"] for r in fake.requests] == ["0", "7", "7", "14"]
    assert [r.kind for r in fake.requests] == ["ok", "empty", "ok", "ok"]
    assert set(stored(store)) == {p.arxiv_id for p in papers}


async def test_empty_pages_that_persist_fail_the_round(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace(papers_in_window(20))
    fake.script(ok(), *[empty_page()] * (ingest.EMPTY_PAGE_RETRIES + 1))
    stats, _ = await make_ingestor(store, client, page_size=7).poll()
    assert not stats.ok and "empty pages" in stats.message
    assert stats.requests == 2 + ingest.EMPTY_PAGE_RETRIES
    assert await store.count_papers() == 0


@pytest.mark.parametrize(
    "fault",
    [truncated(), html_page(), api_error("internal error", status=200)],
    ids=["truncated-xml", "html-page", "api-error-feed"],
)
@BOTH_WAYS
async def test_broken_page_mid_paging_stores_nothing_of_the_round(
    store: Store, client: ArxivClient, fake: FakeArxiv, fault: object, elsewhere: bool
) -> None:
    fake.replace(papers_in_window(20))
    fake.script(ok(), fault)  # type: ignore[arg-type]
    stats, _ = await make_ingestor(store, client, page_size=7, elsewhere=elsewhere).poll()

    assert (stats.ok, stats.errors, stats.new, stats.requests) == (False, 1, 0, 2)
    assert await store.count_papers() == 0  # not even the 7 papers of the good first page
    (run,) = runs(store)
    assert (run["ok"], run["errors"], run["new"]) == (0, 1, 0)


async def test_timeout_is_retried_then_fails_the_round(store: Store, fake: FakeArxiv) -> None:
    fake.replace(papers_in_window(4))
    fake.script(slow(3), slow(3))
    async with ArxivClient(fake.url, delay=0, retries=1, backoff=0.01, timeout=0.3) as client:
        stats, _ = await make_ingestor(store, client).poll()
    assert (stats.ok, stats.errors, stats.requests) == (False, 1, 2)
    assert "Timeout" in stats.message
    assert await store.count_papers() == 0
    assert [r.finished for r in fake.requests] == [None, None]  # both abandoned by the client


async def test_timeout_then_success(store: Store, fake: FakeArxiv) -> None:
    fake.replace(papers_in_window(4))
    fake.script(slow(3))
    async with ArxivClient(fake.url, delay=0, retries=1, backoff=0.01, timeout=0.3) as client:
        stats, _ = await make_ingestor(store, client).poll()
    assert (stats.ok, stats.new, stats.requests) == (True, 4, 2)
    assert 0.3 - EPSILON <= fake.start_gaps()[0] < 2


async def test_unexpected_error_is_recorded_and_raised(
    store: Store, client: ArxivClient, fake: FakeArxiv, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.replace(papers_in_window(3))

    async def broken(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "upsert_papers", broken)
    with pytest.raises(sqlite3.OperationalError):
        await make_ingestor(store, client).poll()
    (run,) = runs(store)
    assert (run["ok"], run["errors"], run["requests"]) == (0, 1, 1)
    assert run["finished_at"] is not None and "disk I/O error" in str(run["message"])


# ---------------------------------------------------------------------------------- politeness
async def test_requests_are_spaced_and_never_overlap(store: Store, fake: FakeArxiv) -> None:
    fake.replace(papers_in_window(30, days=0.5))
    async with ArxivClient(fake.url, delay=0.2, retries=0, backoff=0.01, timeout=5) as client:
        poller = make_ingestor(store, client, page_size=7)
        other = make_ingestor(store, client, ["cs.CL"], page_size=10)
        # Two ingestors on one client, a poll and a backfill at once: still one at a time.
        results = await asyncio.gather(
            poller.poll(), poller.backfill(1 / 7, include_today=False), other.poll()
        )

    assert all(r[0].ok for r in results)
    assert [r[0].requests for r in results] == [5, 1, 3]
    assert len(fake.requests) == 9
    assert fake.max_in_flight == 1
    assert min(fake.start_gaps()) >= 0.2 - EPSILON
    for before, after in itertools.pairwise(fake.requests):
        assert before.finished is not None and after.started >= before.finished
    assert {r.user_agent for r in fake.requests} == {USER_AGENT}
    assert USER_AGENT.startswith("topicpulse/0.")
    assert await store.count_papers() == 30


async def test_round_statistics_are_recorded(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace(papers_in_window(12))
    ingestor = make_ingestor(store, client, page_size=5)
    await ingestor.poll()
    fake.add(make_paper("2605.00003", ago(1), version=2, title="New title", updated=ago(0.1)))
    fake.add(make_paper("2605.77777", ago(0.2)))
    stats, _ = await ingestor.poll()

    assert (stats.new, stats.updated, stats.requests, stats.errors) == (1, 1, 3, 0)
    last = await store.last_run("poll")
    assert last is not None
    assert (last["requests"], last["new"], last["updated"], last["errors"], last["ok"]) == (
        3, 1, 1, 0, 1,
    )  # fmt: skip
    assert last["duration_s"] == round(stats.duration_s, 3) and stats.duration_s > 0
    assert last["started_at"] <= last["finished_at"]
    assert [(r["kind"], r["new"]) for r in runs(store)] == [("poll", 12), ("poll", 1)]
    assert await store.recent_run_errors(iso(NOW - timedelta(days=3650))) == 0
