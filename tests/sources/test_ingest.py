"""The intake and history rounds through the real ``Ingestor``, ``OaiHarvester`` and
``ArxivClient`` against the fake arXiv's OAI-PMH endpoint: what is news (a late announcement, a
later cross-list), what is only an update (a replacement), catching up after days down, the
interface's flow control, tokens and errors, resumable history, lookups by id, politeness, and
the per-round records in ``ingest_runs``. Each case of issue 22's point 2 is here; the old
search-API poll, which read a week of submissions, misses the first three."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fake_arxiv import FakeArxiv, html_page, make_paper, ok, server_error, unavailable
from owed import owed
from topicpulse.delivery.chats import follow
from topicpulse.models import Paper, iso
from topicpulse.sources.arxiv import USER_AGENT, ArxivClient
from topicpulse.sources.ingest import Ingestor, harvest_sets
from topicpulse.sources.storing import KeepPage
from topicpulse.store import Store
from topicpulse.topics.matching import match_new_papers

NOW = datetime(2026, 5, 21, 9, 0, tzinfo=UTC)  # a Thursday morning (UTC)
CATEGORIES = ("cs.CL", "cs.LG")
EPSILON = 0.01  # clock granularity and loopback jitter, in seconds


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def day(days_ago: float) -> str:
    return ago(days_ago).date().isoformat()


def stored(store: Store) -> dict[str, tuple[int, int, str, str]]:
    """arxiv_id → (row id, version, title, announced) of everything in the database."""
    with sqlite3.connect(store.path) as db:
        rows = db.execute("SELECT arxiv_id, id, version, title, announced FROM papers")
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows.fetchall()}


def runs(store: Store) -> list[dict[str, object]]:
    with sqlite3.connect(store.path) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM ingest_runs ORDER BY id")]


async def alerts(store: Store) -> list[tuple[int, str]]:
    """(chat, arXiv id) of every alert the rounds have owed so far (nothing is sent here)."""
    with sqlite3.connect(store.path) as db:
        chats = [r[0] for r in db.execute("SELECT chat_id FROM chats ORDER BY chat_id")]
    return [(chat, arxiv_id) for chat in chats for arxiv_id in await owed(store, chat, NOW)]


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
    fake: FakeArxiv,
    categories: Sequence[str] = CATEGORIES,
    *,
    clock: datetime = NOW,
) -> Ingestor:
    return Ingestor(store, client, categories, oai_url=fake.oai_url, clock=lambda: clock)


async def follower(store: Store, chat_id: int = 1, query: str = "paper") -> None:
    """A chat following a custom topic every test paper matches (its title says "Paper")."""
    await store.ensure_chat(chat_id)
    await follow(store, chat_id, query, now=NOW, query_only=True)


async def alert_round(store: Store, clock: datetime = NOW) -> int:
    """One matching round; how many chats it marked as owed an alert."""
    return (await match_new_papers(store, clock=lambda: clock)).chats_marked


def papers(count: int, days_ago: float = 0.5, prefix: str = "2605") -> list[Paper]:
    return [make_paper(f"{prefix}.{i:05d}", ago(days_ago)) for i in range(1, count + 1)]


# ------------------------------------------------------------------------------ the intake
async def test_the_intake_reads_every_page_once_then_only_what_changed(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace(papers(25))
    fake.oai.page_size = 10
    ingestor = make_ingestor(store, client, fake)
    stats, result = await ingestor.poll()
    assert (stats.ok, stats.new, stats.requests) == (True, 25, 3)
    assert len(stored(store)) == 25 and len(result.new_ids) == 25
    first = [r.params for r in fake.requests]
    assert first[0] == {"verb": "ListRecords", "metadataPrefix": "arXiv", "set": "cs",
                        "from": day(7)}  # fmt: skip
    assert all(p == {"verb": "ListRecords", "resumptionToken": p["resumptionToken"]}
               for p in first[1:])  # fmt: skip

    fake.reset_requests()
    stats, _ = await ingestor.poll()  # nothing changed: the headers say so (no records read)
    assert (stats.ok, stats.new, stats.updated, stats.requests) == (True, 0, 0, 3)
    assert fake.requests[0].params == {"verb": "ListIdentifiers", "metadataPrefix": "arXiv",
                                       "set": "cs", "from": day(0.5)}  # fmt: skip
    fake.add(make_paper("2605.99999", ago(0)))
    fake.reset_requests()
    stats, _ = await ingestor.poll()  # then the harvest, from the newest record's day
    assert (stats.ok, stats.new, stats.requests) == (True, 1, 3 + 3)
    assert [r.params.get("verb") for r in fake.requests[:4]] == ["ListIdentifiers"] * 3 + [
        "ListRecords"
    ]
    assert fake.requests[3].params["from"] == day(0.5)
    assert len(stored(store)) == 26


async def test_a_paper_announced_twenty_days_after_submission_alerts_once(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    await follower(store)
    ingestor = make_ingestor(store, client, fake)
    await ingestor.poll()  # nothing yet
    held = make_paper("2604.11111", ago(20))  # submitted 20 days ago, held in moderation
    fake.add(held)
    fake.oai.datestamps[held.arxiv_id] = day(0)  # announced today
    await ingestor.poll()
    assert await alert_round(store) == 1
    assert stored(store)["2604.11111"][3] == f"{day(0)}T00:00:00Z"  # announced, not submitted
    await ingestor.poll()
    assert await alert_round(store) == 0
    assert await alerts(store) == [(1, "2604.11111")]
    paper = await store.get_paper("2604.11111")
    assert paper is not None and paper.published[:10] == held.published[:10]  # momentum's


async def test_a_later_cross_list_into_a_followed_category_is_new_and_alerts_once(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    await follower(store)
    ingestor = make_ingestor(store, client, fake)
    elsewhere = make_paper("2605.22222", ago(6), categories=("cs.CV",))
    fake.add(elsewhere)
    fake.oai.datestamps[elsewhere.arxiv_id] = day(6)
    await ingestor.poll()
    assert stored(store) == {}  # cs.CV is not followed: read, not kept
    crossed = make_paper("2605.22222", ago(6), categories=("cs.CV", "cs.CL"))
    fake.replace([crossed])
    fake.oai.datestamps[crossed.arxiv_id] = day(0)  # cross-listed today
    await ingestor.poll()
    assert await alert_round(store) == 1
    await ingestor.poll()
    assert await alert_round(store) == 0
    assert await alerts(store) == [(1, "2605.22222")]


async def test_a_replacement_updates_the_paper_and_never_alerts_again(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    await follower(store)
    ingestor = make_ingestor(store, client, fake)
    fake.replace([make_paper("2605.33333", ago(3))])
    await ingestor.poll()
    assert await alert_round(store) == 1
    row_id = stored(store)["2605.33333"][0]
    for version, days_ago in ((2, 1), (3, 0)):
        fake.replace([make_paper("2605.33333", ago(3), version=version, title=f"Title v{version}",
                                 updated=ago(days_ago))])  # fmt: skip
        stats, _ = await ingestor.poll()
        assert (stats.new, stats.updated) == (0, 1)
        assert await alert_round(store) == 0
        assert stored(store)["2605.33333"][:3] == (row_id, version, f"Title v{version}")
    fake.replace([make_paper("2605.33333", ago(3), version=2, updated=ago(0), title="Title v3")])
    await ingestor.poll()  # the same record again: never a version down
    assert stored(store)["2605.33333"][1] == 3
    assert await alerts(store) == [(1, "2605.33333")]


async def test_pages_are_stored_where_they_are_parsed_and_the_bots_cache_follows(
    store: Store, client: ArxivClient, fake: FakeArxiv, tmp_path: Path
) -> None:
    """The intake's pages are stored by the worker process that parsed them (a store in a
    file); what this process had read of a paper before (its read cache) gives way to the
    newer version stored there. In memory, the page is stored here, the same way."""
    ingestor = make_ingestor(store, client, fake)
    assert isinstance(ingestor._keep_apart(), KeepPage)
    fake.replace([make_paper("2605.44444", ago(3))])
    await ingestor.poll()
    [row_id] = [r[0] for r in stored(store).values()]
    assert (await store.papers_by_ids([row_id]))[0].version == 1  # (now in the read cache)
    fake.replace([make_paper("2605.44444", ago(3), version=2, title="Title v2", updated=ago(0))])
    stats, _ = await ingestor.poll()
    assert (stats.new, stats.updated) == (0, 1)
    [seen] = await store.papers_by_ids([row_id])
    assert (seen.version, seen.title) == (2, "Title v2")
    async with await Store.open(":memory:") as memory:
        here = make_ingestor(memory, client, fake)
        assert here._keep_apart() is None
        stats, _ = await here.poll()
        assert stats.new == 1 and (await memory.get_paper("2605.44444")) is not None


async def test_a_bot_down_for_three_days_catches_up_without_a_gap(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    await follower(store)
    monday = make_ingestor(store, client, fake, clock=ago(3))
    fake.replace([make_paper("2605.00001", ago(3.5))])
    await monday.poll()
    assert await alert_round(store, ago(3)) == 1
    missed = [make_paper(f"2605.1000{n}", ago(n)) for n in (0, 1, 2, 3)]
    fake.add(*missed)
    stats, _ = await make_ingestor(store, client, fake).poll()
    assert stats.ok and stats.new == 4
    assert fake.requests[-1].params.get("from") or fake.requests[-1].params
    assert await alert_round(store) == 1  # the one follower, owed all four
    assert sorted(a for _, a in await alerts(store)) == [
        "2605.00001",
        *sorted(p.arxiv_id for p in missed),
    ]


async def test_catching_up_never_alerts_what_is_older_than_the_alert_cutoff(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    await follower(store)
    before = make_ingestor(store, client, fake, clock=ago(30))
    await before.poll()  # a watermark a month old: down for thirty days
    fake.replace([make_paper("2604.50000", ago(20)), make_paper("2605.50001", ago(2))])
    await make_ingestor(store, client, fake).poll()
    assert len(stored(store)) == 2
    assert await alert_round(store) == 1
    assert await alerts(store) == [(1, "2605.50001")]


async def test_records_of_other_categories_and_deleted_records_are_not_stored(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace([make_paper("2605.60000", ago(1), categories=("cs.CV",)),
                  make_paper("2605.60001", ago(1), categories=("cs.LG", "stat.ML"))])  # fmt: skip
    fake.oai.deleted["2605.60001"] = day(0)
    await make_ingestor(store, client, fake).poll()
    assert list(stored(store)) == ["2605.60001"]


def test_harvest_sets_read_each_group_once() -> None:
    assert harvest_sets(["cs.CL", "cs.LG", "stat.ML", "hep-th", "cond-mat.str-el"]) == [
        "cs", "physics:cond-mat", "physics:hep-th", "stat",
    ]  # fmt: skip


# ------------------------------------------------------------------- the interface's faults
async def test_flow_control_is_waited_out(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace(papers(3))
    fake.script(unavailable(retry_after="0"), unavailable(retry_after="0"))
    stats, _ = await make_ingestor(store, client, fake).poll()
    assert (stats.ok, stats.new, stats.requests) == (True, 3, 3)
    assert [r.status for r in fake.requests] == [503, 503, 200]


async def test_an_expired_token_starts_again_and_stores_nothing_twice(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace(papers(9))
    fake.oai.page_size = 4
    ingestor = make_ingestor(store, client, fake)
    original = client.get_body
    calls = itertools.count()

    async def expire_after_the_first(params: dict[str, str | int], url: str | None = None) -> bytes:
        if next(calls) == 1:
            fake.oai.expire_tokens()
        return await original(params, url)

    client.get_body = expire_after_the_first  # type: ignore[method-assign]
    stats, _ = await ingestor.poll()
    assert (stats.ok, stats.new) == (True, 9)
    assert "resumptionToken" in fake.requests[1].params and "from" in fake.requests[2].params
    assert len(stored(store)) == 9


async def test_no_records_match_is_one_request_and_a_good_round(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    stats, _ = await make_ingestor(store, client, fake).poll()
    assert (stats.ok, stats.new, stats.requests) == (True, 0, 1)


@pytest.mark.parametrize(
    ("fault", "times"), [(html_page, 1), (server_error, 3)], ids=["html", "5xx-retried"]
)
async def test_a_broken_page_keeps_what_came_before_and_the_next_round_finishes(
    store: Store, client: ArxivClient, fake: FakeArxiv, fault: object, times: int
) -> None:
    await follower(store)
    fake.replace(papers(10))
    fake.oai.page_size = 4
    ingestor = make_ingestor(store, client, fake)
    fake.script(ok(), *[fault() for _ in range(times)])  # type: ignore[operator]
    stats, _ = await ingestor.poll()
    assert not stats.ok and stats.new == 4  # the first page is kept
    assert (await store.intake_state(ingestor.categories_key)).watermark is None
    stats, _ = await ingestor.poll()
    assert stats.ok and stats.new == 6
    await alert_round(store)
    assert len(await alerts(store)) == 10 == len(stored(store))


async def test_an_error_document_fails_the_round_without_moving_the_watermark(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace(papers(2))
    ingestor = make_ingestor(store, client, fake)
    await ingestor.poll()
    mark = (await store.intake_state(ingestor.categories_key)).watermark
    original = fake.oai.answer
    fake.oai.answer = lambda *a: (  # type: ignore[method-assign]
        b'<?xml version="1.0"?><OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
        b"<responseDate>2026-05-21T09:00:00Z</responseDate>"
        b'<error code="badArgument">Illegal date</error></OAI-PMH>'
    )
    stats, _ = await ingestor.poll()
    assert not stats.ok and "badArgument" in stats.message
    assert (await store.intake_state(ingestor.categories_key)).watermark == mark
    fake.oai.answer = original  # type: ignore[method-assign]
    assert (await ingestor.poll())[0].ok


# ---------------------------------------------------------------------------- the history
async def test_the_history_harvest_stores_the_weeks_and_only_them(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace([make_paper(f"2604.{n:05d}", ago(n)) for n in range(1, 30)]
                 + [make_paper("2301.00001", "2023-01-10T00:00:00Z", updated=ago(2),
                               version=3)])  # fmt: skip
    fake.oai.page_size = 10
    ingestor = make_ingestor(store, client, fake)
    assert await ingestor.history_missing(2)
    stats, new_ids = await ingestor.backfill(2)
    assert stats.ok and stats.requests == 2  # 16 records changed since, 10 a page
    assert fake.requests[0].params["from"] == day(14)
    ids = set(stored(store))
    assert {f"2604.{n:05d}" for n in range(1, 15)} <= ids
    assert "2301.00001" not in ids  # an old paper whose record changed: not our history
    assert not await ingestor.history_missing(2) and await ingestor.history_missing(3)
    fake.reset_requests()
    assert (await ingestor.backfill(2))[0].requests == 0 and fake.requests == []
    assert len(new_ids) == len(ids)


async def test_an_interrupted_history_harvest_resumes_at_its_next_page(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace([make_paper(f"2605.{n:05d}", ago(n / 2)) for n in range(1, 25)])
    fake.oai.page_size = 5
    ingestor = make_ingestor(store, client, fake)
    fake.script(ok(), ok(), *[server_error() for _ in range(3)])
    stats, _ = await ingestor.backfill(2)
    assert not stats.ok and len(stored(store)) == 10
    fake.reset_requests()
    stats, _ = await ingestor.backfill(2)
    assert stats.ok and len(stored(store)) == 24
    assert "resumptionToken" in fake.requests[0].params  # the third page, not the first
    assert stats.requests == 3


async def test_the_intake_runs_between_the_pages_of_a_long_history_harvest(
    store: Store, fake: FakeArxiv
) -> None:
    fake.replace([make_paper(f"2605.{n:05d}", ago(n / 3)) for n in range(1, 40)])
    fake.oai.page_size = 4
    async with ArxivClient(fake.url, delay=0.02, retries=0, timeout=5) as client:
        ingestor = make_ingestor(store, client, fake)
        history = asyncio.create_task(ingestor.backfill(2))
        while len(fake.requests) < 2:
            await asyncio.sleep(0.01)
        stats, _ = await ingestor.poll()
        assert stats.ok and not history.done()
        assert (await history)[0].ok
    assert len(stored(store)) == 39


# ------------------------------------------------------------------------------- lookups
async def test_a_lookup_fetches_papers_by_id_from_the_search_api(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace([make_paper("2401.00001", "2024-01-02T00:00:00Z"), *papers(3)])
    new = await make_ingestor(store, client, fake).lookup(["2401.00001"])
    assert len(new) == 1 and list(stored(store)) == ["2401.00001"]
    (request,) = fake.requests
    assert request.path == "/api/query" and request.params["id_list"] == "2401.00001"


async def test_a_lookup_keeps_the_bots_categories_only_and_does_not_repeat_a_miss(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace([make_paper("2401.00002", "2024-01-02T00:00:00Z", categories=("math.AG",))])
    ingestor = make_ingestor(store, client, fake)
    assert await ingestor.lookup(["2401.00002", "2401.99999"]) == []
    assert await ingestor.lookup(["2401.99999", "2401.00002"]) == []  # asked an hour ago
    assert len(fake.requests) == 1 and stored(store) == {}


# ----------------------------------------------------------------------------- politeness
async def test_requests_to_every_interface_are_spaced_and_never_overlap(
    store: Store, fake: FakeArxiv
) -> None:
    fake.replace(papers(12))
    fake.oai.page_size = 5
    async with ArxivClient(
        fake.url, delay=0.2, retries=0, timeout=5, contact="ops@lab.example"
    ) as c:
        ingestor = make_ingestor(store, c, fake)
        other = make_ingestor(store, c, fake, ["cs.CL"])
        results = await asyncio.gather(
            ingestor.poll(), ingestor.backfill(1), other.poll(), ingestor.lookup(["2605.00001"])
        )
    assert all(r[0].ok for r in results[:3])
    assert fake.max_in_flight == 1
    assert {r.path for r in fake.requests} == {"/oai", "/api/query"}
    assert min(fake.start_gaps()) >= 0.2 - EPSILON
    for before, after in itertools.pairwise(fake.requests):
        assert before.finished is not None and after.started >= before.finished
    (agent,) = {r.user_agent for r in fake.requests}
    assert agent.startswith(USER_AGENT[:-1]) and "contact: ops@lab.example" in agent


async def test_round_statistics_are_recorded(
    store: Store, client: ArxivClient, fake: FakeArxiv
) -> None:
    fake.replace(papers(12))
    fake.oai.page_size = 5
    ingestor = make_ingestor(store, client, fake)
    await ingestor.poll()
    fake.add(make_paper("2605.00003", ago(1), version=2, title="New title", updated=ago(0)))
    fake.add(make_paper("2605.77777", ago(0)))
    stats, _ = await ingestor.poll()
    assert (stats.new, stats.updated, stats.errors) == (1, 1, 0)
    last = await store.last_run("poll")
    assert last is not None
    assert (last["requests"], last["new"], last["updated"], last["ok"]) == (
        stats.requests, 1, 1, 1,
    )  # fmt: skip
    assert [(r["kind"], r["new"]) for r in runs(store)] == [("poll", 12), ("poll", 1)]
    assert await store.recent_run_errors(iso(NOW - timedelta(days=3650))) == 0
