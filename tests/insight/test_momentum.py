"""Momentum: windows consistent with preview, weekly counts equal to the corpus, wording,
sparklines, and spike detection (rules, thresholds, one episode per spike, re-arming).

The corpus tests use one store of a listing built once per module and copied per test: a
generated listing over the real one's 8 weeks (``topicpulse.synthetic``) and, when ../shared
has it, the real ``papers.jsonl``; the spike tests insert papers at chosen dates into a fresh
store.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import shutil
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import LISTINGS, ROOT, Trips
from topicpulse.insight import momentum
from topicpulse.insight.momentum import (
    Momentum,
    SpikeThresholds,
    as_of_day,
    check_spike,
    compute,
    detect_spikes,
    headline,
    sparkline,
    trending,
    week_starts,
)
from topicpulse.models import Paper, Topic, iso
from topicpulse.sources.ingest import import_files
from topicpulse.store import Store
from topicpulse.synthetic import generate_papers
from topicpulse.topics.catalogue import CatalogueEntry, custom_topic, sync_catalogue
from topicpulse.topics.matching import match_new_papers

CATALOGUE = [
    CatalogueEntry(
        "rl-lm",
        "RL for Language Models",
        "",
        '("reinforcement learning" OR rlhf OR rlvr OR grpo OR "policy optimization")'
        ' AND (llm OR llms OR "language model")',
    ),
    CatalogueEntry("machine-learning", "Machine Learning", "", "cat:cs.LG"),
    CatalogueEntry("agents", "Agents", "", "ti:agent*"),
    CatalogueEntry("speech", "Speech", "", "speech OR cat:eess.AS"),
    CatalogueEntry("rag", "RAG", "", '"retrieval augmented generation" OR rag'),
]
END = as_of_day(date(2026, 5, 22))  # 2026-05-23T00:00Z: the whole corpus


# ---------------------------------------------------------------------------- the corpus
@functools.cache
def _listing_rows(path: Path) -> tuple[dict[str, object], ...]:
    with path.open(encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def _listing_dates(
    path: Path, keep: Callable[[dict[str, object]], bool] = lambda r: True
) -> list[date]:
    """Listing dates of the papers in the listing for which ``keep`` holds (plain Python)."""
    return [date.fromisoformat(str(r["date"])) for r in _listing_rows(path) if keep(r)]


def _count_weeks(dates: list[date], as_of: datetime) -> list[tuple[date, int]]:
    """Papers per Monday-start week, for the 12 weeks before ``as_of`` — counted independently."""
    per_week = Counter(
        d - timedelta(days=d.weekday()) for d in dates if datetime(d.year, d.month, d.day,
                                                                   tzinfo=UTC) < as_of
    )  # fmt: skip
    last = (as_of - timedelta(microseconds=1)).date()
    monday = last - timedelta(days=last.weekday())
    weeks = [monday - timedelta(weeks=n) for n in range(11, -1, -1)]
    return [(w, per_week[w]) for w in weeks]


def _count_between(dates: list[date], since: datetime, until: datetime) -> int:
    return sum(since <= datetime(d.year, d.month, d.day, tzinfo=UTC) < until for d in dates)


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory, listing_file: Path) -> Path:
    path = tmp_path_factory.mktemp("momentum") / "listings.db"

    async def build() -> None:
        store = await Store.open(path)
        try:
            await import_files(store, [listing_file])
            await sync_catalogue(store, CATALOGUE)
        finally:
            await store.close()

    asyncio.run(build())
    return path


@pytest.fixture
async def corpus(corpus_file: Path, tmp_path: Path) -> AsyncIterator[Store]:
    path = tmp_path / "copy.db"
    shutil.copy(corpus_file, path)
    store = await Store.open(path)
    try:
        yield store
    finally:
        await store.close()


async def _topic(store: Store, slug: str) -> Topic:
    return next(t for t in await store.topics(kind="catalogue") if t.slug == slug)


AS_OFS = [
    END,
    datetime(2026, 5, 18, tzinfo=UTC),  # a Monday, 00:00
    datetime(2026, 5, 13, 12, 30, tzinfo=UTC),  # mid-week
    as_of_day(date(2026, 5, 10)),  # the end of a Sunday
    datetime(2026, 4, 20, tzinfo=UTC),  # nothing in the four weeks before the last four
]


@pytest.mark.parametrize("as_of", AS_OFS, ids=iso)
@pytest.mark.parametrize("slug", ["rl-lm", "agents", "speech"])
async def test_windows_equal_what_preview_lists(corpus: Store, slug: str, as_of: datetime) -> None:
    topic = await _topic(corpus, slug)
    m = await compute(corpus, topic=topic, as_of=as_of)

    def window(weeks_back: int) -> tuple[str, str]:
        return iso(as_of - timedelta(days=28 * weeks_back)), iso(
            as_of - timedelta(days=28 * (weeks_back - 1))
        )

    last = await corpus.matching_papers(topic_id=topic.id, since=window(1)[0], until=window(1)[1])
    prev = await corpus.matching_papers(topic_id=topic.id, since=window(2)[0], until=window(2)[1])
    assert (m.last_4w, m.prev_4w) == (len(last), len(prev))
    assert m.total == len(await corpus.matching_papers(topic_id=topic.id))
    assert m.last_4w > 0
    # the same figures for the query itself, through the full-text index
    by_query = await compute(corpus, fts=topic.fts, query=topic.query, as_of=as_of)
    assert (by_query.last_4w, by_query.prev_4w, by_query.total, by_query.weekly) == (
        m.last_4w, m.prev_4w, m.total, m.weekly
    )  # fmt: skip
    assert (m.topic, m.query, by_query.topic, by_query.query) == (
        topic.name, topic.query, None, topic.query
    )  # fmt: skip


@pytest.mark.parametrize("as_of", AS_OFS, ids=iso)
async def test_weekly_counts_match_the_corpus(
    corpus: Store, listing_file: Path, as_of: datetime
) -> None:
    real = listing_file == LISTINGS
    topic = await _topic(corpus, "machine-learning")  # cat:cs.LG: exactly "cs.LG" in categories
    lg = _listing_dates(listing_file, lambda r: "cs.LG" in r["categories"])  # type: ignore[operator]
    m = await compute(corpus, topic=topic, as_of=as_of)
    assert m.weekly == _count_weeks(lg, as_of)
    assert m.last_4w == _count_between(lg, as_of - timedelta(days=28), as_of)
    assert m.prev_4w == _count_between(lg, as_of - timedelta(days=56), as_of - timedelta(days=28))
    assert m.total == len(lg) and (len(lg) == 867 or not real)

    every = _listing_dates(listing_file)
    all_last = _count_between(every, as_of - timedelta(days=28), as_of)
    assert m.share_pct == pytest.approx(m.last_4w / all_last * 100, rel=1e-12)
    assert m.change_pct == (
        None if m.prev_4w == 0 else pytest.approx((m.last_4w - m.prev_4w) / m.prev_4w * 100)
    )

    cl = _listing_dates(listing_file, lambda r: "cs.CL" in r["categories"])  # type: ignore[operator]
    by_query = await compute(corpus, fts='categories : "cs cl"', query="cat:cs.CL", as_of=as_of)
    assert by_query.weekly == _count_weeks(cl, as_of)
    assert by_query.total == len(cl) and (len(cl) == 3436 or not real)


async def test_weekly_totals_equal_the_corpus_figures(corpus: Store, listing_file: Path) -> None:
    """Papers per week from the store's own counts, as counted in the file (for the real
    listing: the per-week table of shared/arxiv-listings/SOURCES.md)."""
    starts = week_starts(END)
    edges = [iso(datetime(w.year, w.month, w.day, tzinfo=UTC)) for w in starts] + [iso(END)]
    counts = await corpus.count_windows(edges)
    weeks = list(zip(starts, counts, strict=True))
    assert weeks == _count_weeks(_listing_dates(listing_file), END)
    if listing_file != LISTINGS:
        return
    assert weeks[4:] == [
        (date(2026, 3, 30), 547), (date(2026, 4, 6), 698), (date(2026, 4, 13), 803),
        (date(2026, 4, 20), 785), (date(2026, 4, 27), 591), (date(2026, 5, 4), 687),
        (date(2026, 5, 11), 1058), (date(2026, 5, 18), 692),
    ]  # fmt: skip
    assert counts[:4] == [0, 0, 0, 0]


async def test_change_is_none_when_nothing_came_before(corpus: Store) -> None:
    topic = await _topic(corpus, "rl-lm")
    m = await compute(corpus, topic=topic, as_of=datetime(2026, 4, 20, tzinfo=UTC))
    assert m.prev_4w == 0 and m.last_4w > 0
    assert m.change_pct is None
    assert m.to_json()["change_pct"] is None
    assert headline(m).startswith(f"{m.last_4w} papers in the last four weeks, none in the four")


async def test_momentum_of_an_empty_store_is_all_zero(store: Store) -> None:
    m = await compute(store, fts='"anything"', query="anything", as_of=END)
    assert (m.last_4w, m.prev_4w, m.change_pct, m.share_pct, m.total) == (0, 0, None, 0.0, 0)
    assert [c for _, c in m.weekly] == [0] * 12
    assert headline(m) == (
        "0 papers in the last four weeks, none in the four weeks before either."
        " 0% of all new papers."
    )


async def test_to_json_has_the_documented_shape(corpus: Store) -> None:
    m = await compute(corpus, topic=await _topic(corpus, "rl-lm"), as_of=END)
    data = m.to_json()
    assert list(data) == ["topic", "query", "as_of", "last_4w", "prev_4w", "change_pct",
                          "share_pct", "total", "weekly"]  # fmt: skip
    assert data["as_of"] == "2026-05-23T00:00:00Z"
    assert data["topic"] == "RL for Language Models"
    assert data["change_pct"] == round(m.change_pct or 0, 1)
    assert data["share_pct"] == round(m.share_pct, 2)
    assert data["weekly"] == [{"week_start": w.isoformat(), "count": c} for w, c in m.weekly]
    assert json.loads(json.dumps(data)) == data


async def test_trending_ranks_by_change_then_volume(corpus: Store) -> None:
    as_of = END
    everything = [await compute(corpus, topic=t, as_of=as_of)
                  for t in await corpus.topics(kind="catalogue")]  # fmt: skip
    eligible = [m for m in everything if m.last_4w >= 5]
    expected = sorted(
        eligible,
        key=lambda m: (float("inf") if m.change_pct is None else m.change_pct, m.last_4w),
        reverse=True,
    )
    ranked = await trending(corpus, as_of=as_of, min_volume=5, limit=10)
    assert [m.topic for m in ranked] == [m.topic for m in expected]
    assert len(ranked) == len(CATALOGUE)
    changes = [m.change_pct for m in ranked]
    assert changes == sorted(changes, key=lambda c: float("inf") if c is None else c,
                             reverse=True)  # fmt: skip
    assert [m.topic for m in await trending(corpus, as_of=as_of, limit=2)] == [
        m.topic for m in expected[:2]
    ]
    high = max(m.last_4w for m in everything)
    assert [m.last_4w for m in await trending(corpus, as_of=as_of, min_volume=high)] == [high]


@pytest.mark.skipif(
    not (ROOT / "src" / "topicpulse" / "topics" / "catalogue.toml").exists(),
    reason="no catalogue.toml yet",
)
async def test_every_real_catalogue_topic_is_consistent_with_preview(corpus: Store) -> None:
    await sync_catalogue(corpus)
    real = await corpus.topics(kind="catalogue")  # only the real catalogue is active now
    assert real
    since, until = iso(END - timedelta(days=28)), iso(END)
    for topic in real:
        m = await compute(corpus, topic=topic, as_of=END)
        listed = await corpus.matching_papers(topic_id=topic.id, since=since, until=until)
        assert m.last_4w == len(listed), topic.name
        assert m.total == await corpus.count_matches(fts=topic.fts), topic.name


# ---------------------------------------------------------------------------- weeks
@pytest.mark.parametrize(
    ("as_of", "last_week"),
    [
        (datetime(2026, 5, 18, tzinfo=UTC), date(2026, 5, 11)),  # Monday 00:00: the week before
        (datetime(2026, 5, 18, 0, 0, 1, tzinfo=UTC), date(2026, 5, 18)),
        (datetime(2026, 5, 20, 12, tzinfo=UTC), date(2026, 5, 18)),  # mid-week
        (datetime(2026, 5, 24, 23, 59, 59, tzinfo=UTC), date(2026, 5, 18)),  # Sunday night
        (as_of_day(date(2026, 5, 24)), date(2026, 5, 18)),  # --as-of a Sunday: its end
        (as_of_day(date(2026, 5, 25)), date(2026, 5, 25)),  # --as-of a Monday: that Monday
    ],
)
def test_week_starts_are_twelve_mondays_ending_with_as_ofs_week(
    as_of: datetime, last_week: date
) -> None:
    starts = week_starts(as_of)
    assert len(starts) == 12
    assert starts[-1] == last_week
    assert all(w.weekday() == 0 for w in starts)
    assert [b - a for a, b in itertools.pairwise(starts)] == [timedelta(days=7)] * 11
    assert week_starts(as_of, weeks=3) == starts[-3:]


def test_as_of_day_is_the_end_of_that_day() -> None:
    assert as_of_day(date(2026, 5, 22)) == datetime(2026, 5, 23, tzinfo=UTC)


# ---------------------------------------------------------------------------- wording
def _m(last: int, prev: int, share: float, weekly: list[int] | None = None) -> Momentum:
    return Momentum(
        topic="RL for Language Models",
        query="rl AND llm",
        as_of=END,
        last_4w=last,
        prev_4w=prev,
        change_pct=(last - prev) / prev * 100 if prev else None,
        share_pct=share,
        total=last + prev,
        weekly=list(zip(week_starts(END), weekly or [0] * 12, strict=True)),
    )


@pytest.mark.parametrize(
    ("last", "prev", "share", "text"),
    [
        (36, 21, 0.4, "36 papers in the last four weeks, up 71% on the four weeks before. "
                      "0.4% of all new papers."),
        (10, 20, 0.05, "10 papers in the last four weeks, down 50% on the four weeks before. "
                       "<0.1% of all new papers."),
        (0, 7, 0.0, "0 papers in the last four weeks, down 100% on the four weeks before. "
                    "0% of all new papers."),
        (20, 20, 1.25, "20 papers in the last four weeks, level with the four weeks before. "
                       "1.2% of all new papers."),
        (201, 200, 12.6, "201 papers in the last four weeks, level with the four weeks before. "
                         "13% of all new papers."),
        (5, 0, 1.2, "5 papers in the last four weeks, none in the four weeks before. "
                    "1.2% of all new papers."),
        (1, 0, 0.1, "1 paper in the last four weeks, none in the four weeks before. "
                    "0.1% of all new papers."),
        (0, 0, 0.0, "0 papers in the last four weeks, none in the four weeks before either. "
                    "0% of all new papers."),
        (2, 1, 100.0, "2 papers in the last four weeks, up 100% on the four weeks before. "
                      "100% of all new papers."),
    ],
)  # fmt: skip
def test_headline_wording(last: int, prev: int, share: float, text: str) -> None:
    assert headline(_m(last, prev, share)) == text


@pytest.mark.parametrize(
    ("counts", "line"),
    [
        ([], ""),
        ([0], "▁"),
        ([0, 0, 0], "▁▁▁"),
        ([5], "█"),
        ([3, 3, 3], "███"),
        ([0, 7], "▁█"),
        ([1, 100], "▂█"),
        ([0, 1, 2, 3, 4, 5, 6, 7], "▁▂▃▄▅▆▇█"),
        ([10**9, 0, 1], "█▁▂"),
    ],
)
def test_sparkline(counts: list[int], line: str) -> None:
    assert sparkline(counts) == line


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**6), max_size=30))
def test_sparkline_properties(counts: list[int]) -> None:
    line = sparkline(counts)
    assert len(line) == len(counts)
    assert all(ch in momentum.SPARK_BARS for ch in line)
    for count, ch in zip(counts, line, strict=True):
        assert (ch == "▁") == (count == 0 or max(counts) == 0)
        if count == max(counts) and count > 0:
            assert ch == "█"
    ordered = sorted(range(len(counts)), key=counts.__getitem__)
    bars = [momentum.SPARK_BARS.index(line[i]) for i in ordered]
    assert bars == sorted(bars)  # monotone in the counts


# ---------------------------------------------------------------------------- spike rules
T0 = datetime(2025, 6, 2, tzinfo=UTC)  # a Monday, 00:00: the last four weeks are whole weeks
WORD = "zorblax"


def _weekly(counts_oldest_first: list[int]) -> list[int]:
    """Pad to 12 weeks (oldest first), the last entry being the week just before T0."""
    return [0] * (12 - len(counts_oldest_first)) + counts_oldest_first


def _spike_papers(counts_oldest_first: list[int], *, before: datetime = T0,
                  start: int = 0) -> list[Paper]:  # fmt: skip
    """Papers about WORD: counts[i] of them on the Wednesday of the i-th of those weeks."""
    papers: list[Paper] = []
    weeks = len(counts_oldest_first)
    for i, count in enumerate(counts_oldest_first):
        wednesday = before - timedelta(weeks=weeks - i) + timedelta(days=2, hours=12)
        for _ in range(count):
            n = start + len(papers)
            stamp = iso(wednesday + timedelta(minutes=n % 600))
            papers.append(
                Paper(
                    arxiv_id=f"2506.{n:05d}", version=1, title=f"On {WORD} number {n}",
                    abstract="A synthetic paper.", authors=("Ada Lovelace",),
                    primary_category="cs.CL", categories=("cs.CL",),
                    published=stamp, updated=stamp,
                )
            )  # fmt: skip
    return papers


def _momentum_of(weekly_oldest_first: list[int], as_of: datetime = T0) -> Momentum:
    weekly = _weekly(weekly_oldest_first)
    last, prev = sum(weekly[-4:]), sum(weekly[-8:-4])
    return Momentum(
        topic=WORD, query=WORD, as_of=as_of, last_4w=last, prev_4w=prev,
        change_pct=(last - prev) / prev * 100 if prev else None, share_pct=1.0,
        total=sum(weekly), weekly=list(zip(week_starts(as_of), weekly, strict=True)),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("weekly", "reason"),
    [
        # rule 1: ≥ 10 in the last four weeks and ≥ +50% on the four before
        ([1, 2, 2, 1, 3, 2, 3, 2], "4-week count up 67% (6 → 10)"),
        ([2, 2, 2, 2, 3, 3, 3, 3], "4-week count up 50% (8 → 12)"),  # exactly +50%
        # rule 2: the latest complete week ≥ mean + 3σ of the 8 before, with ≥ 5 papers
        ([1, 0, 1, 1, 0, 1, 1, 0, 6], "last week 6 papers vs 0.6 ± 0.5 over the 8 weeks before"),
        ([2, 2, 2, 2, 2, 2, 2, 2, 5], "last week 5 papers vs 2.0 ± 0.0 over the 8 weeks before"),
        ([0, 0, 0, 0, 0, 0, 0, 0, 5], "last week 5 papers vs 0.0 ± 0.0 over the 8 weeks before"),
    ],
)
def test_check_spike_fires(weekly: list[int], reason: str) -> None:
    check = check_spike(_momentum_of(weekly))
    assert (check.spiking, check.reason) == (True, reason)


@pytest.mark.parametrize(
    "weekly",
    [
        [3, 2, 2, 2, 1, 0, 1, 0],  # down, and only 2 papers in the last four weeks
        [0, 0, 0, 0, 0, 0, 0, 0],  # nothing at all
        [1, 0, 1, 0, 3, 2, 2, 2],  # 9 in the last four weeks (+350%): below 10
        [3, 2, 3, 2, 3, 4, 3, 4],  # 14 vs 10: +40%, below +50%
        [0, 0, 0, 0, 3, 2, 3, 2],  # 10 vs 0: no change to measure, and no week reaches 5
        [0, 0, 0, 0, 0, 0, 0, 0, 4],  # rule 2: 4 papers is below 5
        [6, 0, 6, 0, 6, 0, 6, 0, 8],  # rule 2: 8 < 3 + 3·3; rule 1: 14 vs 12
    ],
)
def test_check_spike_stays_quiet_below_the_thresholds(weekly: list[int]) -> None:
    assert check_spike(_momentum_of(weekly)) == momentum.SpikeCheck(False, "")


def test_rule_2_needs_eight_complete_weeks_before_the_latest() -> None:
    m = _momentum_of([0, 0, 0, 0, 0, 0, 0, 0, 6])
    assert check_spike(m).spiking
    m.weekly = m.weekly[-8:]  # a shorter history: seven weeks of baseline only
    assert not check_spike(m).spiking


def test_check_spike_respects_custom_thresholds() -> None:
    m = _momentum_of([1, 2, 2, 1, 3, 2, 3, 2])
    assert not check_spike(m, SpikeThresholds(min_last_4w=11)).spiking
    assert not check_spike(m, SpikeThresholds(min_change_pct=70)).spiking
    assert check_spike(_momentum_of([0] * 8 + [3]), SpikeThresholds(min_week_papers=3)).spiking


def test_incomplete_week_is_left_out_of_rule_2() -> None:
    weekly = [0] * 11 + [6]  # six papers so far in the current, unfinished week
    mid_week = T0 + timedelta(days=3)
    m = _momentum_of([], mid_week)
    m.weekly = list(zip(week_starts(mid_week), weekly, strict=True))
    m.last_4w = 6
    assert not check_spike(m).spiking
    done = _momentum_of([], T0 + timedelta(days=7))
    done.weekly = list(zip(week_starts(done.as_of), weekly, strict=True))
    assert week_starts(done.as_of)[-1] == week_starts(mid_week)[-1]
    assert check_spike(done).spiking


# ---------------------------------------------------------------------------- spike episodes
async def _spike_setup(store: Store, weekly: list[int]) -> Topic:
    """A followed custom topic whose papers make ``weekly`` (oldest first, ending before T0);
    chat 1 has spikes on, chat 2 off, chat 3 is paused, chat 4 follows another topic."""
    await store.upsert_papers(_spike_papers(weekly))
    topic = await custom_topic(store, WORD)
    other = await custom_topic(store, "unrelated")
    for chat_id in (1, 2, 3, 4):
        await store.ensure_chat(chat_id)
        await store.subscribe(chat_id, (other if chat_id == 4 else topic).id)
    await store.update_chat(2, spikes=0)
    await store.update_chat(3, paused=1)
    return topic


async def _spike_rows(store: Store, chat_id: int) -> list[int]:
    return [i.episode_id for i in await store.pending_for_chat(chat_id) if i.kind == "spike"]  # type: ignore[misc]


async def test_one_episode_per_spike_and_one_alert_per_follower(store: Store) -> None:
    topic = await _spike_setup(store, [1, 2, 2, 1, 3, 2, 3, 2])
    m = await compute(store, topic=topic, as_of=T0)
    assert (m.last_4w, m.prev_4w) == (10, 6)

    opened = await detect_spikes(store, [topic], now=T0)
    assert len(opened) == 1
    assert await detect_spikes(store, [topic], now=T0) == []
    assert await detect_spikes(store, [topic], now=T0 + timedelta(hours=1)) == []

    episode = await store.episode(opened[0])
    assert episode is not None
    assert (episode.topic_id, episode.started_at, episode.reason) == (
        topic.id, iso(T0), "4-week count up 67% (6 → 10)"
    )  # fmt: skip
    assert (episode.last_4w, episode.prev_4w) == (10, 6)
    assert episode.change_pct == pytest.approx(400 / 6)
    assert (episode.quiet_since, episode.ended_at) == (None, None)
    assert await store.open_episode(topic.id) == episode
    assert await _spike_rows(store, 1) == opened
    for chat_id in (2, 3, 4):  # spikes off, paused, another topic
        assert await _spike_rows(store, chat_id) == []
    assert await store.outbox_counts() == {"pending": 1}


async def test_concurrent_spike_checks_open_one_episode(store: Store) -> None:
    """Two engine passes at once (a backfill's and a poll's) never collide on the episode."""
    topic = await _spike_setup(store, [1, 2, 2, 1, 3, 2, 3, 2])
    first, second = await asyncio.gather(
        detect_spikes(store, [topic], now=T0), detect_spikes(store, [topic], now=T0)
    )
    assert len(first + second) == 1
    assert await _spike_rows(store, 1) == first + second


async def test_quiet_topics_open_no_episode(store: Store) -> None:
    topic = await _spike_setup(store, [3, 2, 3, 2, 3, 4, 3, 4])
    assert await detect_spikes(store, [topic], now=T0) == []
    assert await store.open_episode(topic.id) is None
    assert await store.outbox_counts() == {}


async def test_episode_rearms_only_after_fourteen_quiet_days(store: Store) -> None:
    topic = await _spike_setup(store, [1, 2, 2, 1, 3, 2, 3, 2])
    (first,) = await detect_spikes(store, [topic], now=T0)

    quiet = T0 + timedelta(weeks=5)  # the spike weeks have left the last-four-weeks window
    assert not check_spike(await compute(store, topic=topic, as_of=quiet)).spiking
    assert await detect_spikes(store, [topic], now=quiet) == []
    episode = await store.episode(first)
    assert episode is not None and (episode.quiet_since, episode.ended_at) == (iso(quiet), None)

    almost = quiet + timedelta(days=14, seconds=-1)
    assert await detect_spikes(store, [topic], now=almost) == []
    assert (await store.episode(first)).ended_at is None  # type: ignore[union-attr]
    assert await store.open_episode(topic.id) is not None

    ended = quiet + timedelta(days=14)
    assert await detect_spikes(store, [topic], now=ended) == []
    episode = await store.episode(first)
    assert episode is not None and episode.ended_at == iso(ended)
    assert episode.quiet_since == iso(quiet)
    assert await store.open_episode(topic.id) is None

    # a new spike after that is a new episode, with a new alert
    later = T0 + timedelta(weeks=12)
    await store.upsert_papers(_spike_papers([1, 2, 2, 1, 3, 2, 3, 2], before=later, start=500))
    await match_new_papers(store)
    (second,) = await detect_spikes(store, [topic], now=later)
    assert second != first
    assert await detect_spikes(store, [topic], now=later) == []
    assert await _spike_rows(store, 1) == [first, second]
    assert await _spike_rows(store, 2) == []


async def test_spike_returning_within_fourteen_days_is_the_same_episode(store: Store) -> None:
    topic = await _spike_setup(store, [1, 2, 2, 1, 3, 2, 3, 2])
    (first,) = await detect_spikes(store, [topic], now=T0)
    quiet = T0 + timedelta(weeks=5)
    assert await detect_spikes(store, [topic], now=quiet) == []

    back = quiet + timedelta(days=7)  # a Monday: whole weeks again
    await store.upsert_papers(_spike_papers([0, 0, 0, 0, 5, 5, 5, 5], before=back, start=500))
    await match_new_papers(store)
    assert check_spike(await compute(store, topic=topic, as_of=back)).spiking
    assert await detect_spikes(store, [topic], now=back) == []
    episode = await store.episode(first)
    assert episode is not None and (episode.quiet_since, episode.ended_at) == (None, None)
    assert await _spike_rows(store, 1) == [first]


async def test_detect_spikes_handles_each_topic_on_its_own(store: Store) -> None:
    topic = await _spike_setup(store, [0, 0, 0, 0, 0, 0, 0, 0, 6])
    calm = await custom_topic(store, "unrelated")
    opened = await detect_spikes(store, [topic, calm], now=T0)
    assert len(opened) == 1
    assert (await store.episode(opened[0])).reason.startswith("last week 6 papers")  # type: ignore[union-attr]
    assert await store.open_episode(calm.id) is None


async def test_momentum_of_many_topics_at_once_equals_one_by_one(store: Store) -> None:
    """compute_many (spikes, /list, /trending) gives exactly what compute gives per topic."""
    await sync_catalogue(store, CATALOGUE)
    papers = generate_papers(count=600, start=date(2026, 2, 2), days=84, seed=11)
    await store.upsert_papers(papers)
    await match_new_papers(store)
    topics = await store.topics(kind="catalogue")
    for as_of in (as_of_day(date(2026, 4, 26)), datetime(2026, 3, 18, 13, 30, tzinfo=UTC)):
        many = await momentum.compute_many(store, topics, as_of=as_of)
        one = [await compute(store, topic=t, as_of=as_of) for t in topics]
        assert many == one
        assert any(m.last_4w for m in many)


async def test_a_momentum_is_one_trip_to_the_store(store: Store) -> None:
    """A reply's reads each wait for the event loop while a round runs (bench_replies): one
    topic's momentum, a query's, and any number of topics' are each one trip to a reader."""
    await sync_catalogue(store, CATALOGUE)
    await store.upsert_papers(generate_papers(count=300, start=date(2026, 2, 2), days=84, seed=3))
    await match_new_papers(store)
    topics = await store.topics(kind="catalogue")
    trips = Trips(store)
    as_of = as_of_day(date(2026, 4, 26))
    for reading in (
        compute(store, topic=topics[0], as_of=as_of),
        compute(store, fts="agent*", query="agent*", as_of=as_of),
        momentum.compute_many(store, topics, as_of=as_of),
    ):
        trips.count = 0
        assert (await reading) and trips.count == 1
