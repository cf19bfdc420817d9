"""More like this: BM25 candidates re-ranked by TF-IDF cosine with the store's document
frequencies, and the store's cache of those frequencies."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fake_arxiv import make_paper
from topicpulse.insight import similarity
from topicpulse.store import Store

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)

# Our own texts. The seed is about speculative decoding; "near" shares its rare words; "long"
# repeats one of them in a long abstract about something else; "common" shares only words
# every filler paper uses.
TEXTS = {
    "seed": (
        "Speculative decoding with draft trees",
        "Speculative decoding drafts tokens with a small model and verifies them with a large"
        " one. Draft trees raise the acceptance rate.",
    ),
    "near": (
        "Faster speculative decoding via adaptive draft trees",
        "We grow draft trees adaptively so that speculative decoding accepts more tokens.",
    ),
    "long": (
        "Benchmarking image captioning systems",
        "Captioning systems are compared on twelve datasets with human raters. Models that"
        " decode captions greedily lose to sampling; a tree search over captions helps little."
        " Raters prefer short captions, and captions with named objects score higher.",
    ),
    "common": (
        "A large model for tabular data",
        "A large model is trained on tables and evaluated on tables.",
    ),
}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "test.db")
    papers = [
        make_paper(f"2611.{n:05d}", NOW, title=title, abstract=abstract)
        for n, (title, abstract) in enumerate(TEXTS.values(), start=1)
    ]
    papers += [
        make_paper(
            f"2611.{n:05d}",
            NOW,
            title=f"A large model for task {n}",
            abstract="A large model is trained and a small model is distilled from it.",
        )
        for n in range(10, 70)
    ]
    await opened.upsert_papers(papers)
    try:
        yield opened
    finally:
        await opened.close()


def test_tfidf_vectors_are_unit_length_and_weigh_rare_terms_more() -> None:
    vector = similarity.tfidf(Counter({"rare": 1, "common": 1}), {"rare": 2, "common": 90}, 100)
    assert abs(sum(x * x for x in vector.values()) - 1) < 1e-9
    assert vector["rare"] > vector["common"]
    assert similarity.cosine(vector, vector) == pytest.approx(1.0)
    assert similarity.cosine(vector, {"other": 1.0}) == 0.0


async def test_similar_papers_rank_the_paper_sharing_rare_words_first(store: Store) -> None:
    by_id = {p.arxiv_id: p for p in await store.papers_after(0)}
    seed = by_id["2611.00001"]
    found = [p.arxiv_id for p in await similarity.similar_papers(store, seed, limit=3)]
    assert found[0] == "2611.00002"  # "near": speculative, decoding, draft, trees
    assert "2611.00001" not in found  # never itself
    ranked = await similarity.rank_by_tfidf(
        store, seed, [by_id["2611.00004"], by_id["2611.00003"], by_id["2611.00002"]]
    )
    assert ranked[0].arxiv_id == "2611.00002"
    assert await similarity.rank_by_tfidf(store, seed, []) == []


async def test_term_documents_are_cached_until_the_store_grows(store: Store) -> None:
    assert (await store.term_documents(["draft"]))["draft"] == 2
    await store.upsert_papers([make_paper("2611.00100", NOW, abstract="One more draft.")])
    assert (await store.term_documents(["draft"]))["draft"] == 2  # 64 → 65 papers: within 2%
    await store.upsert_papers(
        [make_paper(f"2611.{n:05d}", NOW, abstract="Yet another draft.") for n in range(101, 104)]
    )
    assert (await store.term_documents(["draft"]))["draft"] == 6  # 68: grew by 6%, read again
