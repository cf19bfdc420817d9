"""Matching rounds: watermarks, live topics, one alert per chat and paper, and the FTS cross-check.

The corpus tests split a listing at 2026-05-01 — a generated one over the real listing's 8 weeks
(``topicpulse.synthetic``) and, when ../shared has it, the real ``papers.jsonl``: the first part
is stored before the topics exist (they are matched by the full index when created), the rest
arrives as "new papers" for ``match_new_papers``. The store with the first part is built once
per module and copied.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import LISTINGS
from owed import owed
from topicpulse.models import Paper, StoredPaper, Topic, iso, parse_iso, utcnow
from topicpulse.sources.ingest import read_papers_file
from topicpulse.store import Store
from topicpulse.topics import matching
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import CatalogueEntry, custom_topic, sync_catalogue
from topicpulse.topics.matching import ALERT_MAX_AGE, BatchIndex, match_new_papers

SPLIT = "2026-05-01"


def _paper(
    n: int, title: str, *, abstract: str = "", version: int = 1, age: timedelta | None = None
) -> Paper:
    """A paper first published ``age`` ago (default: a few hours, i.e. news worth an alert)."""
    stamp = iso(utcnow() - (age if age is not None else timedelta(hours=1 + n % 48)))
    return Paper(
        arxiv_id=f"2605.{n:05d}",
        version=version,
        title=title,
        abstract=abstract,
        authors=("Ada Lovelace", "Alan Turing"),
        primary_category="cs.CL",
        categories=("cs.CL", "cs.LG"),
        published=stamp,
        updated=iso(parse_iso(stamp) + timedelta(minutes=version)),
    )


@dataclass
class Spy:
    """What one or more rounds passed to ``record_matches`` and how often they ran a query."""

    rounds: list[tuple[dict[int, list[int]], int, int]]
    match_calls: list[str]


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    seen = Spy([], [])
    record = Store.record_matches
    match = BatchIndex.match

    async def recording(
        self: Store,
        matches: dict[int, list[int]],
        *,
        batch_after: int,
        batch_through: int,
        alert_published_since: str | None,
    ) -> int:
        seen.rounds.append(({k: list(v) for k, v in matches.items()}, batch_after, batch_through))
        return await record(
            self,
            matches,
            batch_after=batch_after,
            batch_through=batch_through,
            alert_published_since=alert_published_since,
        )

    def counting(self: BatchIndex, fts: str) -> list[int]:
        seen.match_calls.append(fts)
        return match(self, fts)

    monkeypatch.setattr(Store, "record_matches", recording)
    monkeypatch.setattr(BatchIndex, "match", counting)
    return seen


async def _ids(store: Store, *arxiv_ids: str) -> list[int]:
    papers = [await store.get_paper(a) for a in arxiv_ids]
    return [p.id for p in papers if p is not None]


async def _pending(store: Store, chat_id: int) -> list[str]:
    """The arXiv ids of the papers a chat's next alert holds, oldest first."""
    return await owed(store, chat_id)


async def _topic_papers(store: Store, topic: Topic) -> list[str]:
    return sorted(p.arxiv_id for p in await store.matching_papers(topic_id=topic.id))


async def _follow(store: Store, chat_id: int, *topics: Topic) -> None:
    await store.ensure_chat(chat_id)
    for topic in topics:
        assert await store.subscribe(chat_id, topic.id)


async def _reload(store: Store, topic: Topic) -> Topic:
    fresh = await store.topic(topic.id)
    assert fresh is not None
    return fresh


# ---------------------------------------------------------------------------- watermarks
async def test_round_matches_only_papers_after_each_topics_watermark(
    store: Store, spy: Spy
) -> None:
    await store.upsert_papers([_paper(1, "alpha"), _paper(2, "beta")])
    alpha = await custom_topic(store, "alpha")
    await _follow(store, 1, alpha)
    await store.upsert_papers([_paper(3, "alpha beta"), _paper(4, "beta")])
    beta = await custom_topic(store, "beta")  # created now: matched through paper 4 already
    await _follow(store, 2, beta)
    await store.upsert_papers([_paper(5, "alpha beta"), _paper(6, "beta")])
    _, p2, p3, p4, p5, p6 = await _ids(store, *(f"2605.{n:05d}" for n in range(1, 7)))
    assert (alpha.matched_through, beta.matched_through) == (p2, p4)

    result = await match_new_papers(store)

    assert (result.papers, result.topics, result.matches, result.chats_marked) == (4, 2, 4, 2)
    assert spy.rounds == [({alpha.id: [p3, p5], beta.id: [p5, p6]}, p2, p6)]
    assert len(spy.match_calls) == 2
    assert (await _reload(store, alpha)).matched_through == p6
    assert (await _reload(store, beta)).matched_through == p6
    assert await _topic_papers(store, alpha) == ["2605.00001", "2605.00003", "2605.00005"]
    assert await _topic_papers(store, beta) == [f"2605.{n:05d}" for n in (2, 3, 4, 5, 6)]
    assert await _pending(store, 1) == ["2605.00003", "2605.00005"]
    assert await _pending(store, 2) == ["2605.00005", "2605.00006"]

    again = await match_new_papers(store)
    assert (again.papers, again.matches, again.chats_marked) == (0, 0, 0)
    assert len(spy.rounds) == 1


async def test_round_in_several_batches_equals_one_batch(store: Store, spy: Spy) -> None:
    alpha = await custom_topic(store, "alpha")
    await _follow(store, 1, alpha)
    await store.upsert_papers([_paper(n, "alpha" if n % 3 else "beta") for n in range(1, 11)])
    ids = await _ids(store, *(f"2605.{n:05d}" for n in range(1, 11)))

    result = await match_new_papers(store, batch_papers=4)

    assert [(after, through) for _, after, through in spy.rounds] == [
        (0, ids[3]), (ids[3], ids[7]), (ids[7], ids[9])
    ]  # fmt: skip
    expected = [f"2605.{n:05d}" for n in range(1, 11) if n % 3]
    assert (result.papers, result.matches, result.chats_marked) == (10, 7, 3)  # once a batch
    assert await _topic_papers(store, alpha) == expected
    assert sorted(await _pending(store, 1)) == expected


async def test_the_bots_worker_process_matches_and_records_the_same(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the bot (``in_process``) a worker process matches a batch and records it through a
    connection of its own: the store ends up exactly as when this process does it."""
    alpha = await custom_topic(store, "alpha")
    await _follow(store, 1, alpha)
    await store.upsert_papers([_paper(n, "alpha" if n % 3 else "beta") for n in range(1, 11)])
    expected = [f"2605.{n:05d}" for n in range(1, 11) if n % 3]

    async def here(*args: object, **kwargs: object) -> int:
        raise AssertionError("recorded in this process")

    monkeypatch.setattr(Store, "record_matches", here)

    result = await match_new_papers(store, batch_papers=4, in_process=True)

    assert (result.papers, result.matches, result.chats_marked) == (10, 7, 3)
    assert await _topic_papers(store, alpha) == expected
    assert sorted(await _pending(store, 1)) == expected
    ids = await _ids(store, "2605.00010")
    assert (await _reload(store, alpha)).matched_through == ids[0]
    again = await match_new_papers(store, in_process=True)
    assert (again.papers, again.matches, again.chats_marked) == (0, 0, 0)


async def test_round_without_live_topics_does_nothing(store: Store, spy: Spy) -> None:
    await custom_topic(store, "alpha")  # no follower: not live
    await store.upsert_papers([_paper(1, "alpha")])
    result = await match_new_papers(store)
    assert (result.papers, result.topics, result.matches, result.chats_marked) == (0, 0, 0, 0)
    assert spy.rounds == [] and spy.match_calls == []


# ---------------------------------------------------------------------------- live topics
async def test_only_live_topics_are_matched(store: Store, spy: Spy) -> None:
    await sync_catalogue(
        store,
        [
            CatalogueEntry("kept", "Kept", "", "alpha"),
            CatalogueEntry("dropped", "Dropped", "", "alpha OR beta"),
        ],
    )
    await sync_catalogue(store, [CatalogueEntry("kept", "Kept", "", "alpha")])
    followed = await custom_topic(store, "beta")
    orphan = await custom_topic(store, "alpha beta")
    await _follow(store, 7, followed)
    topics = {t.name: t for t in await store.topics(active_only=False)}
    kept, dropped = topics["Kept"], topics["Dropped"]
    assert [t.id for t in await store.live_topics()] == [kept.id, followed.id]

    await store.upsert_papers([_paper(1, "alpha beta")])
    (p1,) = await _ids(store, "2605.00001")
    result = await match_new_papers(store)

    assert result.topics == 2
    assert [sorted(m) for m, _, _ in spy.rounds] == [sorted([kept.id, followed.id])]
    assert sorted(spy.match_calls) == sorted([kept.fts, followed.fts])
    assert (await _reload(store, kept)).matched_through == p1
    assert (await _reload(store, followed)).matched_through == p1
    assert (await _reload(store, dropped)).matched_through == 0
    assert (await _reload(store, orphan)).matched_through == 0
    assert await _topic_papers(store, dropped) == []
    assert await _topic_papers(store, orphan) == []
    assert await _pending(store, 7) == ["2605.00001"]


async def test_unfollowed_topic_is_brought_up_to_date_when_followed_again(store: Store) -> None:
    topic = await custom_topic(store, "alpha")
    await store.upsert_papers([_paper(1, "alpha")])
    await match_new_papers(store)  # not live: not matched
    assert await _topic_papers(store, topic) == []
    await store.refresh_topic_matches(await _reload(store, topic))
    assert await _topic_papers(store, topic) == ["2605.00001"]
    await _follow(store, 1, topic)
    await store.upsert_papers([_paper(2, "alpha")])
    result = await match_new_papers(store)
    assert result.chats_marked == 1
    assert await _pending(store, 1) == ["2605.00002"]


# ---------------------------------------------------------------------------- alerts
async def test_paper_matched_by_several_followed_topics_is_queued_once(store: Store) -> None:
    await sync_catalogue(store, [CatalogueEntry("greek", "Greek", "", "alpha OR gamma")])
    (greek,) = await store.topics(kind="catalogue")
    alpha = await custom_topic(store, "alpha")
    beta = await custom_topic(store, "beta")
    await _follow(store, 1, greek, alpha, beta)
    await _follow(store, 2, beta)

    await store.upsert_papers([_paper(1, "alpha beta gamma"), _paper(2, "gamma")])
    result = await match_new_papers(store)

    assert (result.matches, result.chats_marked) == (4, 2)
    assert await _pending(store, 1) == ["2605.00001", "2605.00002"]
    assert await _pending(store, 2) == ["2605.00001"]
    p1, p2 = await _ids(store, "2605.00001", "2605.00002")
    tags = await store.chat_topics_for_papers(1, [p1, p2])
    assert sorted(t.id for t in tags[p1]) == sorted([greek.id, alpha.id, beta.id])
    assert [t.id for t in tags[p2]] == [greek.id]


async def test_new_version_of_a_paper_queues_nothing_new(store: Store) -> None:
    alpha = await custom_topic(store, "alpha")
    await _follow(store, 1, alpha)
    await store.upsert_papers([_paper(1, "alpha v1")])
    assert (await match_new_papers(store)).chats_marked == 1

    upsert = await store.upsert_papers([_paper(1, "alpha v2, revised", version=2)])
    assert (upsert.new, upsert.updated) == (0, 1)
    result = await match_new_papers(store)
    assert (result.papers, result.chats_marked) == (0, 0)
    assert await _pending(store, 1) == ["2605.00001"]
    chat = await store.chat(1)
    assert chat is not None
    await store.settle_digest(
        chat, outbox_ids=[], paper_ids=[], through=await store.fanned_out_through()
    )  # (the alert went out)
    assert await _pending(store, 1) == []

    await store.upsert_papers([_paper(1, "alpha v3", version=3)])
    assert (await match_new_papers(store)).chats_marked == 0
    assert await _pending(store, 1) == []
    assert await store.instant_chats_due(limit=10) == []
    assert (await store.get_paper("2605.00001")).version == 3  # type: ignore[union-attr]


async def test_papers_stored_before_a_subscription_are_not_queued(store: Store) -> None:
    alpha = await custom_topic(store, "alpha")
    await _follow(store, 1, alpha)
    await store.upsert_papers([_paper(1, "alpha one")])
    await _follow(store, 2, alpha)  # follows after paper 1 was stored (not yet matched)
    await store.upsert_papers([_paper(2, "alpha two")])

    result = await match_new_papers(store)

    assert result.chats_marked == 2
    assert await _pending(store, 1) == ["2605.00001", "2605.00002"]
    assert await _pending(store, 2) == ["2605.00002"]


async def test_inactive_and_paused_chats_get_nothing(store: Store) -> None:
    alpha = await custom_topic(store, "alpha")
    for chat_id in (1, 2, 3):
        await _follow(store, chat_id, alpha)
    await store.update_chat(2, paused=1)
    await store.deactivate_chat(3, "blocked")

    await store.upsert_papers([_paper(1, "alpha")])
    result = await match_new_papers(store)

    assert result.chats_marked == 1
    assert await _pending(store, 1) == ["2605.00001"]
    assert await store.instant_chats_due(limit=10) == [1]
    assert await store.outbox_counts() == {}  # (no row per chat and paper)
    assert await _topic_papers(store, alpha) == ["2605.00001"]  # matched all the same


async def test_papers_older_than_the_alert_age_are_matched_but_not_alerted(store: Store) -> None:
    alpha = await custom_topic(store, "alpha")
    await _follow(store, 1, alpha)
    day = timedelta(days=1)
    await store.upsert_papers(
        [
            _paper(1, "alpha, backfilled", age=ALERT_MAX_AGE + day),
            _paper(2, "alpha, held in moderation", age=ALERT_MAX_AGE - day),
            _paper(3, "alpha, today", age=timedelta(minutes=5)),
        ]
    )
    result = await match_new_papers(store)
    assert (result.matches, result.chats_marked) == (3, 1)
    assert await _topic_papers(store, alpha) == ["2605.00001", "2605.00002", "2605.00003"]
    assert sorted(await _pending(store, 1)) == ["2605.00002", "2605.00003"]


# ---------------------------------------------------------------------------- work per round
async def _store_with_followers(path: Path, chats: int) -> tuple[Store, list[Topic]]:
    store = await Store.open(path)
    await sync_catalogue(store, [CatalogueEntry("greek", "Greek", "", "alpha OR gamma")])
    topics = [
        *(await store.topics(kind="catalogue")),
        await custom_topic(store, "alpha"),
        await custom_topic(store, "beta NOT gamma"),
        await custom_topic(store, "ti:delta"),
    ]
    async with store._write() as conn:  # bulk set-up; the round under test uses the real API
        await conn.executemany(
            "INSERT INTO chats (chat_id, created_at, updated_at) VALUES (?, '', '')",
            [(1000 + n,) for n in range(chats)],
        )
        await conn.executemany(
            "INSERT INTO subscriptions (chat_id, topic_id, after_paper_id, created_at)"
            " VALUES (?, ?, 0, '')",
            [(1000 + n, t.id) for n in range(chats) for t in topics],
        )
    return store, topics


async def test_queries_per_round_do_not_depend_on_the_number_of_chats(
    tmp_path: Path, spy: Spy
) -> None:
    words = ["alpha", "beta", "gamma", "delta", "beta gamma", "epsilon"] * 5
    papers = [_paper(n, f"{w} study", abstract="delta") for n, w in enumerate(words, 1)]
    figures = []
    for chats in (1, 500):
        store, topics = await _store_with_followers(tmp_path / f"{chats}.db", chats)
        try:
            await store.upsert_papers(papers)
            statements: list[str] = []
            await store._conn.set_trace_callback(statements.append)
            spy.match_calls.clear()
            result = await match_new_papers(store)
            await store._conn.set_trace_callback(None)
            owed_first = len(await _pending(store, 1000))
        finally:
            await store.close()
        figures.append((len(spy.match_calls), len(statements), result.matches))
        assert (result.papers, result.topics, result.chats_marked, owed_first) == (
            30,
            4,
            chats,
            25,
        )
        # one query per distinct phrase of the live topics, however many chats follow them
        assert sorted(spy.match_calls) == ['"alpha"', '"beta"', '"gamma"', 'title : "delta"']
        assert len(topics) == 4
    assert figures[0] == figures[1]
    assert figures[0][1] > 0  # the trace callback did see the round's statements


# ---------------------------------------------------------------------------- match_batch
VOCABULARY = ["alpha", "beta", "gamma", "delta", "optim*", "rewar*", '"reward model"',
              '"language model"*', '"alpha beta"', "cs.LG", "lovelace", "x1"]  # fmt: skip
BATCH_TEXTS = [
    ("Alpha beta", "reward models for language modelling", ("Ada Lovelace",), ("cs.CL",)),
    ("Gamma optimisation", "optimizing rewards; alpha", ("Alan Turing",), ("cs.LG", "cs.AI")),
    ("Delta", "a reward model and a language model", ("Grace Hopper",), ("cs.LG",)),
    ("Beta alpha gamma", "delta x1", ("Ada Lovelace", "Alan Turing"), ("stat.ML",)),
    ("Language models", "alpha beta gamma delta", ("Lovelace Ada",), ("cs.CL", "cs.LG")),
    ("Rewarding optimizers", "nothing", ("Emmy Noether",), ("math.OC",)),
    ("X1 and alpha", "beta", ("Ada Lovelace",), ("cs.LG",)),
    ("Unrelated", "entirely unrelated", ("Nobody",), ("q-bio.NC",)),
]


def _batch() -> list[StoredPaper]:
    return [
        StoredPaper(
            id=10 + n, arxiv_id=f"2605.{n:05d}", version=1, title=title, abstract=abstract,
            authors=authors, primary_category=cats[0], categories=cats,
            published="2026-05-01T00:00:00Z", updated="2026-05-01T00:00:00Z",
            stored_at="2026-05-01T00:00:00Z",
        )
        for n, (title, abstract, authors, cats) in enumerate(BATCH_TEXTS)
    ]  # fmt: skip


def _full_expression_matches(papers: list[StoredPaper], topics: list[Topic]
                             ) -> dict[int, list[int]]:  # fmt: skip
    """The reference: each topic's whole compiled expression as one FTS5 query."""
    index = BatchIndex(papers)
    try:
        return {t.id: sorted(i for i in index.match(t.fts) if i > t.matched_through)
                for t in topics}  # fmt: skip
    finally:
        index.close()


queries = st.recursive(
    st.tuples(st.sampled_from(["", "ti:", "abs:", "au:", "cat:"]), st.sampled_from(VOCABULARY)).map(
        "".join
    ),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from([" AND ", " OR ", " NOT ", " "]), inner).map(
            lambda t: f"({t[0]}{t[1]}{t[2]})"
        ),
        st.tuples(st.sampled_from(["ti:", "abs:"]), inner).map(lambda t: f"{t[0]}({t[1]})"),
    ),
    max_leaves=10,
)


@settings(max_examples=100, deadline=None)
@given(st.lists(queries, min_size=1, max_size=12), st.integers(min_value=0, max_value=14))
def test_match_batch_equals_one_fts_query_per_topic(texts: list[str], watermark: int) -> None:
    topics = []
    for n, text in enumerate(texts):
        try:
            fts = ql.compile_query(text)
        except ql.QueryError:
            continue
        topics.append(Topic(id=n, kind="custom", slug=None, name=text, description="",
                            query=text, fts=fts, matched_through=watermark))  # fmt: skip
    papers = _batch()
    assert matching.match_batch(papers, topics) == _full_expression_matches(papers, topics)


# ---------------------------------------------------------------------------- real corpus
CROSS_CHECK_TOPICS = [
    CatalogueEntry(
        "rl-lm",
        "RL for Language Models",
        "",
        '("reinforcement learning" OR rlhf OR rlvr OR grpo OR "policy optimization")'
        ' AND (llm OR llms OR "language model")',
    ),
    CatalogueEntry("agents", "Agents", "", "ti:agent* NOT cat:cs.RO"),
    CatalogueEntry("vision", "Vision", "", "cat:cs.CV OR cat:cs.RO OR ti:multimodal"),
]
CROSS_CHECK_QUERIES = [
    "safety NOT jailbreak*",
    '"retrieval augmented generation" OR rag',
    "au:wang AND benchmark",
    "ti:(diffusion OR speech) AND abs:model",
    "hallucination",
]


def _build_first_part(path: Path, listing: Path) -> None:
    papers = read_papers_file(listing)

    async def build() -> None:
        store = await Store.open(path)
        try:
            await store.upsert_papers([p for p in papers if p.published < SPLIT])
            await sync_catalogue(store, CROSS_CHECK_TOPICS)
            for n, text in enumerate(CROSS_CHECK_QUERIES):
                await _follow(store, 100 + n, await custom_topic(store, text))
        finally:
            await store.close()

    asyncio.run(build())


@pytest.fixture(scope="module")
def first_part(tmp_path_factory: pytest.TempPathFactory, listing_file: Path) -> Path:
    path = tmp_path_factory.mktemp("matching") / "first-part.db"
    _build_first_part(path, listing_file)
    return path


@pytest.fixture(scope="module")
def second_part(listing_file: Path) -> list[Paper]:
    return [p for p in read_papers_file(listing_file) if p.published >= SPLIT]


@pytest.fixture
def corpus_db(first_part: Path, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "corpus.db"
    shutil.copy(first_part, path)
    yield path


@pytest.mark.parametrize("batch_papers", [1_000])  # three batches: the harder path
async def test_round_matches_equal_the_full_index_on_the_listings(
    corpus_db: Path, listing_file: Path, second_part: list[Paper], spy: Spy, batch_papers: int
) -> None:
    store = await Store.open(corpus_db)
    try:
        before = await store.max_paper_id()
        upsert = await store.upsert_papers(second_part)
        assert upsert.new == len(second_part)
        assert len(second_part) == 2584 or listing_file != LISTINGS
        through = await store.max_paper_id()
        topics = await store.live_topics()
        assert len(topics) == len(CROSS_CHECK_TOPICS) + len(CROSS_CHECK_QUERIES)

        result = await match_new_papers(store, batch_papers=batch_papers)

        assert result.papers == through - before
        assert spy.rounds[0][1] == before and spy.rounds[-1][2] == through
        by_topic: dict[int, list[int]] = {}
        for matches, _, _ in spy.rounds:
            for topic_id, ids in matches.items():
                by_topic.setdefault(topic_id, []).extend(ids)
        total = 0
        for topic in topics:
            everywhere = {p.id for p in await store.matching_papers(fts=topic.fts)}
            new = sorted(i for i in everywhere if before < i <= through)
            assert sorted(by_topic[topic.id]) == new, topic.query
            assert len(new) > 0, topic.query
            recorded = {p.id for p in await store.matching_papers(topic_id=topic.id)}
            assert recorded == everywhere, topic.query
            assert await store.count_matches(topic_id=topic.id) == await store.count_matches(
                fts=topic.fts
            )
            total += len(new)
        assert result.matches == total
        # the corpus is months old: history, matched and counted but never alerted
        assert result.chats_marked == 0
        assert await store.outbox_counts() == {}
    finally:
        await store.close()


# ------------------------------------------------------------------------ rounds and commands
async def test_a_command_between_ingest_and_match_loses_no_alert(store: Store) -> None:
    """/latest or /follow reading a live topic before the round matched the new papers must
    not mark them matched: the round queues their alerts."""
    alpha, beta = await custom_topic(store, "alpha"), await custom_topic(store, "beta")
    for chat_id, topic in ((1, alpha), (2, beta)):
        await store.ensure_chat(chat_id)
        await store.subscribe(chat_id, topic.id)
    await store.upsert_papers([_paper(1, "alpha thing")])
    await store.refresh_topic_matches(await _reload(store, alpha))  # a command meanwhile
    result = await match_new_papers(store)
    assert result.chats_marked == 1
    assert await _pending(store, 1) == ["2605.00001"]


async def test_a_returning_chat_gets_no_old_papers_and_paused_chats_none_twice(
    store: Store,
) -> None:
    alpha, beta = await custom_topic(store, "alpha"), await custom_topic(store, "beta")
    for chat_id, topic in ((1, alpha), (2, beta)):
        await store.ensure_chat(chat_id)
        await store.subscribe(chat_id, topic.id)
    await store.update_chat(1, paused=1)  # chat 1 pauses
    await store.deactivate_chat(2, "blocked")  # chat 2 blocks the bot: beta stops growing
    await store.upsert_papers([_paper(1, "alpha while paused"), _paper(2, "beta meanwhile")])
    assert (await match_new_papers(store)).chats_marked == 0
    await store.update_chat(1, paused=0)  # papers that came while paused are skipped
    await store.ensure_chat(2, reactivate=True)  # chat 2 comes back
    await store.upsert_papers([_paper(3, "beta new")])
    result = await match_new_papers(store)
    assert result.chats_marked == 1
    assert await _pending(store, 1) == []
    assert await _pending(store, 2) == ["2605.00003"]  # only what came after it returned
    assert await _topic_papers(store, beta) == ["2605.00002", "2605.00003"]  # caught up
