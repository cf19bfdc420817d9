"""The taste's cost-saving parts: cached stems give the vectors ``similarity.tfidf`` gives,
the cache stays bounded and follows a text's changes, liblinear learns what lbfgs learns, the
bot's training path (the background's rows built once) learns what ``fit`` learns, a batch of
chats survives one failing, the Trainer trains in batches, and a worker's store keeps the
index's document counts between calls, and /foryou ranks the week whole though it reads it a
page at a time."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from topicpulse.delivery import tastes
from topicpulse.insight import features, fitting, similarity, taste
from topicpulse.models import StoredPaper, iso
from topicpulse.store import Rating, Store
from topicpulse.synthetic import generate_papers
from topicpulse.topics.stemming import stem_texts
from waiting import wait_for

START = date(2026, 11, 2)
T = TypeVar("T")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "taste.db")
    await opened.upsert_papers(generate_papers(start=START, days=7, per_weekday=80, seed=5))
    try:
        yield opened
    finally:
        await opened.close()


async def stored(store: Store) -> list[StoredPaper]:
    return await store.recent_papers(10_000)


async def test_cached_vectors_are_those_of_tfidf_and_follow_a_changed_text(store: Store) -> None:
    papers = (await stored(store))[:40]
    expected = await _tfidf(store, papers)
    features.cache.clear()
    assert await features.vectors(store, papers) == expected  # stemmed now
    hits = features.cache.hits
    assert await features.vectors(store, papers) == expected  # from the cache
    assert features.cache.hits == hits + len(papers)
    revised = dataclasses.replace(papers[0], abstract="Quantum annealing of spin glasses.")
    [vector] = await features.vectors(store, [revised])
    assert vector == (await _tfidf(store, [revised]))[0]
    assert set(vector) != set(expected[0])
    lazy = await features.lazy_vectors(store, papers)
    assert len(lazy) == len(papers) and lazy[3] == expected[3] and lazy[1:3] == expected[1:3]
    assert list(lazy) == expected
    # a taste scores them without building them, as it scores the vectors built
    weights = {t: (-1) ** n * 0.5 for n, t in enumerate(sorted(set().union(*expected)))}
    probe = taste.Taste(weights, -0.2, up=3, down=3)
    assert probe.scores(lazy) == pytest.approx([probe.score(v) for v in expected], abs=1e-12)


async def _tfidf(store: Store, papers: list[StoredPaper]) -> list[similarity.Vector]:
    counts = similarity.paper_stems(papers)
    documents = await store.term_documents(sorted(set().union(*counts)))
    total = await store.count_papers()
    return [similarity.tfidf(c, documents, total) for c in counts]


async def test_the_stem_cache_keeps_the_texts_met_last(store: Store) -> None:
    a, b, c = (await stored(store))[:3]
    cache = features.StemCache(size=2)
    await cache.stems([a, b])
    await cache.stems([a])  # a is now the most recent
    await cache.stems([c])  # b goes
    assert len(cache) == 2
    misses = cache.misses
    await cache.stems([a, c])
    assert cache.misses == misses
    await cache.stems([b])
    assert cache.misses == misses + 1


def test_words_are_stemmed_as_the_index_stems_them() -> None:
    words = ["technology", "learning", "models", "the", "technology"]
    expected = [s[0] if s else "" for s in stem_texts(words)]
    assert features.stem_words(words) == expected
    assert features.stem_words(["learning"]) == [expected[1]]  # (cached)


def _samples(papers: list[StoredPaper], vectors: list[similarity.Vector], word: str):
    """Papers with ``word`` in their title liked, a few others disliked, the rest background."""
    liked = [v for p, v in zip(papers, vectors, strict=True) if word in p.title.lower()][:15]
    others = [v for p, v in zip(papers, vectors, strict=True) if word not in p.title.lower()]
    return liked, others[:8], others[8:308]


async def test_liblinear_learns_what_lbfgs_learns(store: Store) -> None:
    from sklearn.linear_model import LogisticRegression

    papers = await stored(store)
    liked, disliked, background = _samples(papers, await features.vectors(store, papers), "model")
    assert len(liked) >= 5
    ours = taste.fit(liked, disliked, background, max_terms=10**6)
    assert ours is not None
    vocabulary: dict[str, int] = {}
    x = fitting.matrix([*liked, *disliked, *background], vocabulary)
    labels = [1] * len(liked) + [0] * (len(disliked) + len(background))
    negative = len(disliked) + taste.BACKGROUND_WEIGHT * len(background)
    weights = [negative / len(liked)] * len(liked) + [1.0] * len(disliked)
    weights += [taste.BACKGROUND_WEIGHT] * len(background)
    exact = LogisticRegression(C=taste.C, solver="lbfgs", tol=1e-10, max_iter=5_000)
    exact.fit(x, labels, sample_weight=weights)
    theirs = dict(zip(vocabulary, exact.coef_[0], strict=True))
    assert max(abs(ours.weights.get(t, 0.0) - w) for t, w in theirs.items()) < 2e-3
    assert ours.bias == pytest.approx(exact.intercept_[0], abs=2e-3)


async def test_the_bots_training_learns_what_fit_learns(store: Store) -> None:
    papers = await stored(store)
    rated = [p for p in papers[400:] if "model" in p.title.lower()][:12] + papers[400:406]
    ratings = [
        Rating(
            p.arxiv_id,
            p.id,
            1 if "model" in p.title.lower() else -1,
            "button",
            p.title,
            p.abstract,
            "2026-11-09T00:00:00Z",
        )
        for p in dict.fromkeys(rated)
    ]
    learned = await taste.train(store, ratings)
    assert learned is not None
    # fit on the same vectors: the rated ones, and the newest unrated papers as background
    ids = {r.item for r in ratings}
    background = [p for p in papers[: 2 * taste.BACKGROUND] if p.arxiv_id not in ids]
    liked = [r for r in ratings if r.value > 0]
    disliked = [r for r in ratings if r.value < 0]
    vectors = await features.vectors(store, [*liked, *disliked, *background[: taste.BACKGROUND]])
    n, m = len(liked), len(liked) + len(disliked)
    expected = taste.fit(vectors[:n], vectors[n:m], vectors[m:])
    assert expected is not None
    assert learned.weights.keys() == expected.weights.keys()
    assert max(abs(learned.weights[t] - expected.weights[t]) for t in expected.weights) < 1e-6
    assert learned.bias == pytest.approx(expected.bias, abs=1e-6)
    assert (learned.up, learned.down) == (len(liked), len(disliked))
    probe = vectors[0]
    assert learned.score(probe) == pytest.approx(expected.score(probe), abs=1e-6)
    assert learned.raw(probe) == pytest.approx(
        learned.bias + sum(x * learned.weights.get(t, 0.0) for t, x in probe.items())
    )


async def _rate(store: Store, chat_id: int, papers: list[StoredPaper]) -> None:
    await store.ensure_chat(chat_id)
    for n, p in enumerate(papers):
        await store.toggle_rating(chat_id, p, -1 if n % 3 == 0 else 1)


async def test_a_failing_chat_does_not_stop_its_batch(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    papers = await stored(store)
    for chat_id in (1, 2, 3):
        await _rate(store, chat_id, papers[chat_id * 10 : chat_id * 10 + 9])
    original = taste.train

    async def train(store: Store, ratings: list[Rating], *args: object, **kwargs: object):
        if any(r.item == papers[20].arxiv_id for r in ratings):  # chat 2's
            raise RuntimeError("a broken paper")
        return await original(store, ratings, *args, **kwargs)

    monkeypatch.setattr(taste, "train", train)
    assert await taste.learn_many(store, [1, 2, 3]) == 2
    assert await store.tastes_due() == []  # chat 2 marked trained too, its (no) model kept
    assert (await store.taste(2)).model is None  # type: ignore[union-attr]
    assert (await store.taste(3)).model  # type: ignore[union-attr]


async def test_the_trainer_trains_due_chats_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    async with await Store.open(":memory:") as store:
        await store.upsert_papers(generate_papers(start=START, days=3, per_weekday=40, seed=6))
        papers = await stored(store)
        chats = list(range(1, taste.BATCH + 6))
        for chat_id in chats:
            await _rate(store, chat_id, papers[chat_id : chat_id + 4])
        batches: list[list[int]] = []
        original = taste.learn_many

        async def learn_many(store: Store, chat_ids: list[int]) -> int:
            batches.append(list(chat_ids))
            return await original(store, chat_ids)

        monkeypatch.setattr(taste, "learn_many", learn_many)
        trainer = taste.Trainer(store)
        running = asyncio.create_task(trainer.run())
        try:
            await wait_for(lambda: trainer.trained == len(chats), what="every chat trained")
        finally:
            running.cancel()
        assert [len(b) for b in batches] == [taste.BATCH, 5]
        assert [c for b in batches for c in b] == chats
        assert await store.tastes_due() == []
        for chat_id in chats:
            assert (await store.taste(chat_id)).model  # type: ignore[union-attr]


async def test_the_trainer_waits_while_a_round_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(taste, "BUSY_POLL", 0.01)
    async with await Store.open(":memory:") as store:
        await store.upsert_papers(generate_papers(start=START, days=3, per_weekday=40, seed=6))
        await _rate(store, 1, (await stored(store))[:4])
        round_running, looks = [True], [0]

        def busy() -> bool:
            looks[0] += 1
            return round_running[0]

        trainer = taste.Trainer(store, busy=busy)
        running = asyncio.create_task(trainer.run())
        try:
            await wait_for(lambda: looks[0] >= 3, what="the trainer to look at the round")
            assert trainer.trained == 0 and await store.tastes_due() == [1]
            round_running[0] = False
            await wait_for(lambda: trainer.trained == 1, what="the chat trained after the round")
        finally:
            running.cancel()
        assert await store.tastes_due() == []


async def test_a_worker_keeps_the_index_counts_between_calls(store: Store) -> None:
    terms = ["model", "learn", "graph"]
    counts = await store.term_documents(terms)
    path, now = store.path, datetime(2026, 11, 10, tzinfo=UTC)

    async def read(apart: Store) -> tuple[int, dict[str, int]]:
        return len(apart._term_documents), await apart.term_documents(terms)

    first = await _in_thread(Store.run_apart, path, now, read)
    second = await _in_thread(Store.run_apart, path, now, read)
    assert first == (0, counts)
    assert second[0] >= len(terms) and second[1] == counts


async def _in_thread(fn: Callable[..., T], *args: object) -> T:
    """(``run_apart`` starts an event loop of its own, as in the worker process)"""
    return await asyncio.to_thread(fn, *args)


async def test_a_topics_texts_are_its_newest_papers_since_a_date(store: Store) -> None:
    from topicpulse.topics.catalogue import sync_catalogue
    from topicpulse.topics.matching import match_new_papers

    await sync_catalogue(store)
    await match_new_papers(store, alerts=False)
    counts = {
        t.id: await store.count_matches(topic_id=t.id) for t in await store.topics(kind="catalogue")
    }
    topic_id = max(counts, key=lambda t: counts[t])
    assert counts[topic_id] > 3
    since = (datetime.combine(START, datetime.min.time(), UTC) + timedelta(days=3)).isoformat()
    since = since.replace("+00:00", "Z")
    texts = await store.topic_texts(topic_id, since=since, limit=2)
    papers = await store.matching_papers(topic_id=topic_id, since=since, limit=2)
    assert [(t.id, t.arxiv_id, t.title, t.abstract) for t in texts] == [
        (p.id, p.arxiv_id, p.title, p.abstract) for p in papers
    ]
    assert len(texts) == 2 and all(p.published >= since for p in papers)


def test_fit_needs_a_like_and_a_negative() -> None:
    v = {"a": 1.0}
    assert taste.fit([], [v], [v]) is None
    assert taste.fit([v], [], []) is None
    assert np.isfinite(taste.fit([v], [{"b": 1.0}], []).bias)  # type: ignore[union-attr]


async def test_for_you_reads_the_week_a_page_at_a_time_and_ranks_it_whole(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    papers = await stored(store)  # newest first
    await _rate(store, 7, [p for p in papers if "model" in p.title.lower()][:8] + papers[-4:])
    assert await taste.learn(store, 7) is not None
    now = datetime.fromisoformat(papers[0].published.replace("Z", "+00:00")) + timedelta(hours=1)
    whole = await tastes.for_you(store, 7, now, limit=12)
    monkeypatch.setattr(tastes, "FOR_YOU_PAGE", 7)
    paged = await tastes.for_you(store, 7, now, limit=12)
    assert whole is not None and paged is not None
    # the same as scoring every unrated paper of the week at once, best first, newest first on ties
    learned, _ = await taste.load(store, 7)
    assert learned is not None
    rated = await store.ratings_for(7, [p.id for p in papers])
    week = [p for p in papers if p.published >= iso(now - timedelta(days=7)) and p.id not in rated]
    expected = (await taste.scored(store, learned, week))[:12]
    assert [p.arxiv_id for p, _ in paged] == [p.arxiv_id for p, _ in expected]
    assert [p.arxiv_id for p, _ in whole] == [p.arxiv_id for p, _ in expected]
    assert [s for _, s in paged] == pytest.approx([s for _, s in expected])
