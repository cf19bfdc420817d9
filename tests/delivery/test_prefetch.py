"""Digests and alerts assembled ahead in a worker process during a burst (``delivery.prefetch``):
what they send is exactly what the loop would have assembled, each paper once, and anything
assembled from a chat that changed since is assembled again, never sent."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_delivery import FakeSender

from fanout import synthetic_paper
from topicpulse.delivery import Delivery, chats, prefetch
from topicpulse.models import Paper
from topicpulse.store import Store
from topicpulse.topics import catalogue
from topicpulse.topics.matching import match_new_papers

NOW = datetime.now(UTC).replace(hour=7, minute=0, second=0, microsecond=0)
DIGEST = NOW.replace(hour=8, second=30)  # just after the daily 08:00 digest
KEYWORDS = ("kwalpha", "kwbeta", "kwgamma")
DAILY = range(1, 41)  # 40 daily-digest chats
INSTANT = range(101, 141)  # 40 instant chats: 80 due at 08:00, over prefetch.FROM


def papers() -> list[Paper]:
    made = []
    for n in range(1, 31):  # 10 papers per keyword; every third one on two of them
        paper = synthetic_paper(n, keyword=KEYWORDS[n % 3], hours_ago=1)
        if n % 3 == 0:
            paper = dataclasses.replace(paper, title=f"{paper.title} {KEYWORDS[1]}")
        made.append(paper)
    return made


async def prepare(path: Path) -> None:
    """The chats (each following one or two of the topics), then a round of 30 papers."""
    async with await Store.open(path) as store:
        topics = [await catalogue.custom_topic(store, k) for k in KEYWORDS]
        for chat_id in [*DAILY, *INSTANT]:
            await store.ensure_chat(chat_id)
            if chat_id in DAILY:
                await chats.set_digest(store, chat_id, ["daily", "08:00"], now=NOW)
            for topic in topics[chat_id % 3 : chat_id % 3 + 1 + chat_id % 2]:
                await store.subscribe(chat_id, topic.id)
        await store.upsert_papers(papers())
        await match_new_papers(store, clock=lambda: NOW)


async def deliver(path: Path) -> tuple[FakeSender, Delivery]:
    async with await Store.open(path) as store:
        sender = FakeSender()
        engine = Delivery(store, sender, clock=lambda: DIGEST)
        while await engine.run_once():
            pass
        return sender, engine


async def test_a_burst_assembled_ahead_sends_what_the_loop_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await prepare(tmp_path / "ahead.db")
    shutil.copy(tmp_path / "ahead.db", tmp_path / "here.db")
    ahead_sender, ahead = await deliver(tmp_path / "ahead.db")
    monkeypatch.setattr(prefetch, "FROM", 10**9)  # the same burst, every chat assembled here
    here_sender, here = await deliver(tmp_path / "here.db")

    assert ahead.ahead.used == len(DAILY) + len(INSTANT)  # every chat, in the worker process
    assert here.ahead.used == 0
    for chat_id in [*DAILY, *INSTANT]:
        assert ahead_sender.texts_to(chat_id) == here_sender.texts_to(chat_id), chat_id
        ids = ahead_sender.ids_to(chat_id)
        assert ids and len(ids) == len(set(ids)), chat_id  # (each paper once)
    # and the state each leaves behind is the same: the same rows (the papers of two-message
    # digests recorded as sent), watermarks and next digests
    left = []
    for name in ("ahead.db", "here.db"):
        async with await Store.open(tmp_path / name) as store:
            rows = [await store.chat(c) for c in [*DAILY, *INSTANT]]
            marks = [(c.digest_through, c.next_digest_at) for c in rows if c]
            left.append((await store.outbox_counts(), marks))
    assert left[0] == left[1] and len(left[0][1]) == len(DAILY) + len(INSTANT)


async def test_what_was_assembled_for_a_chat_that_changed_since_is_not_used(
    tmp_path: Path,
) -> None:
    await prepare(tmp_path / "changed.db")
    async with await Store.open(tmp_path / "changed.db") as store:
        ahead = prefetch.Prefetcher(store, fold_after=3, clock=lambda: DIGEST)
        due = [*DAILY, *INSTANT]
        ahead.offer(due)
        await ahead.ready()
        # after the worker assembled them: chat 1 changes its digest time, chat 2 is sent something
        await chats.set_digest(store, 1, ["daily", "09:00"], now=NOW)
        ahead.forget(2)
        changed, unchanged = await store.chat(1), await store.chat(3)
        assert changed is not None and unchanged is not None
        assert await ahead.take(changed) is None  # (assembled from the old row)
        assert ahead.stale == 1
        sent_to = await store.chat(2)
        assert sent_to is not None and await ahead.take(sent_to) is None
        ready = await ahead.take(unchanged)
        assert ready is not None and ready.digest and ready.chat == unchanged
        assert ready.messages and ready.through > unchanged.digest_through
        assert await ahead.take(unchanged) is None  # (taken once)
        ahead.drop()


async def test_a_small_pass_starts_no_worker(store: Store) -> None:
    ahead = prefetch.Prefetcher(store, fold_after=3, clock=lambda: DIGEST)
    ahead.offer(list(range(1, prefetch.FROM)))
    chat = await store.ensure_chat(1)
    assert await ahead.take(chat) is None and ahead.used == 0


async def test_another_process_reads_past_its_cache_once_the_store_wrote(tmp_path: Path) -> None:
    """The worker's store keeps its read caches between calls, cleared when the bot's store
    cleared its own (a new version of a paper)."""
    path = tmp_path / "caches.db"
    paper = synthetic_paper(1, keyword="kwcache")
    async with await Store.open(path) as bot, await Store.open(path) as worker:
        await bot.upsert_papers([paper])
        kept: dict[str, object] = {}
        worker.share_caches(kept, bot.cache_marks())
        [stored] = await worker.papers_by_ids([1])
        newer = dataclasses.replace(paper, version=2, title="A newer title")
        await bot.upsert_papers([newer])
        worker.share_caches(kept, bot.cache_marks())
        [again] = await worker.papers_by_ids([1])
    assert (stored.title, again.title) == (paper.title, "A newer title")
