"""The store's read cache of papers and their catalogue tags: what a round's chats read alike
comes from memory, and a write the cache holds clears it — a new version is shown as new."""

from __future__ import annotations

from pathlib import Path

from fake_arxiv import make_paper
from topicpulse.store import Store
from topicpulse.store.cache import ReadCache
from topicpulse.topics import catalogue

DAY = "2026-11-30T10:00:00Z"


def test_entries_expire_and_the_cache_stays_bounded() -> None:
    now = [0.0]
    cache: ReadCache[str] = ReadCache(ttl=60, size=3, clock=lambda: now[0])
    cache.put({1: "a", 2: "b"})
    assert cache.split([1, 2, 3]) == ({1: "a", 2: "b"}, [3])
    cache.put({3: "c", 4: "d"})  # past the size: a new generation
    assert cache.split([1, 3, 4]) == ({3: "c", 4: "d"}, [1])
    now[0] = 61.0
    assert cache.split([3, 4]) == ({}, [3, 4])


async def test_a_new_version_and_new_tags_are_read_past_the_cache(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "cache.db")
    try:
        await catalogue.sync_catalogue(store)
        await store.upsert_papers([make_paper("2611.00100", DAY, title="Plain words")])
        paper = await store.get_paper("2611.00100")
        assert paper is not None
        assert [p.title for p in await store.papers_by_ids([paper.id])] == ["Plain words"]
        assert (await store.paper_topics([paper.id], kind="catalogue"))[paper.id] == []
        assert [p.title for p in await store.papers_by_ids([paper.id])] == ["Plain words"]
        assert store._paper_cache.hits >= 1  # the second read came from memory

        title = "Diffusion models for denoising image generation"
        await store.upsert_papers([make_paper("2611.00100", DAY, version=2, title=title)])
        assert [p.title for p in await store.papers_by_ids([paper.id])] == [title]
        topic = (await store.topics(kind="catalogue"))[0]
        await store.record_matches(  # (as a round records them)
            {topic.id: [paper.id]},
            batch_after=0,
            batch_through=paper.id,
            alert_published_since=None,
        )
        tags = (await store.paper_topics([paper.id], kind="catalogue"))[paper.id]
        assert [t.id for t in tags] == [topic.id]
    finally:
        await store.close()
