"""Digests assembled from the matches since each chat's watermark (issue 25 §2): no outbox row
per paper for a digest chat, and still every paper exactly once — across a restart between the
two messages of a digest, new versions of its papers, and changes of mode."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from test_delivery import FakeSender

from fanout import synthetic_paper
from topicpulse.delivery import Delivery, TemporaryFailure, chats
from topicpulse.models import Paper, iso
from topicpulse.store import Store
from topicpulse.topics import catalogue
from topicpulse.topics.matching import match_new_papers

# today (the synthetic papers are an hour old): 07:00, and just after the daily 08:00 digest
NOW = datetime.now(UTC).replace(hour=7, minute=0, second=0, microsecond=0)
DIGEST = NOW.replace(hour=8, second=30)
CHAT = 1
KEYWORD = "kwdigest"


def papers(first: int, count: int) -> list[Paper]:
    return [synthetic_paper(n, keyword=KEYWORD, hours_ago=1) for n in range(first, first + count)]


async def daily_chat(store: Store) -> None:
    """Chat 1 on a daily 08:00 UTC digest, following one topic (before any paper)."""
    await store.ensure_chat(CHAT)
    await chats.set_digest(store, CHAT, ["daily", "08:00"], now=NOW)
    topic = await catalogue.custom_topic(store, KEYWORD)
    await store.subscribe(CHAT, topic.id)


async def announce(store: Store, batch: list[Paper]) -> None:
    await store.upsert_papers(batch)
    await match_new_papers(store, clock=lambda: NOW)


async def test_a_round_queues_no_rows_for_a_digest_chat(store: Store) -> None:
    await daily_chat(store)
    await announce(store, papers(1, 30))
    assert await store.outbox_counts() == {}  # nothing per paper: the digest reads the matches
    sender = FakeSender()
    await Delivery(store, sender, clock=lambda: DIGEST).run_once()
    assert sorted(sender.ids_to(CHAT)) == sorted(p.arxiv_id for p in papers(1, 30))
    chat = await store.chat(CHAT)
    assert chat is not None and chat.next_digest_at == iso(NOW.replace(hour=8) + timedelta(1))
    assert chat.digest_through == await store.fanned_out_through()


async def test_a_restart_between_the_two_messages_of_a_digest_sends_each_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "restart.db"
    async with await Store.open(path) as store:
        await daily_chat(store)
        await announce(store, papers(1, 25))  # a digest of two messages
        sender = FakeSender()
        engine = Delivery(store, sender, clock=lambda: DIGEST)
        original = sender._send
        sends = 0

        async def cut_after_one(kind: str, chat: int, text: str) -> None:
            nonlocal sends
            sends += 1
            if sends == 2:  # the process "dies" before the second message goes out
                raise TemporaryFailure("connection reset")
            await original(kind, chat, text)

        sender._send = cut_after_one  # type: ignore[method-assign]
        await engine.run_once()
        assert len(sender.texts_to(CHAT)) == 1
        # what the first message held is recorded, and the failed one's papers as pending
        # rows (their failures count towards giving up); nothing else has a row
        sent = len(sender.ids_to(CHAT))
        assert await store.outbox_counts() == {"sent": sent, "pending": 25 - sent}
    async with await Store.open(path) as store:  # the restart
        again = FakeSender()
        await Delivery(store, again, clock=lambda: DIGEST + timedelta(minutes=1)).run_once()
        first, second = sender.ids_to(CHAT), again.ids_to(CHAT)
        assert len(again.texts_to(CHAT)) == 1
        assert not set(first) & set(second), "nothing twice"
        assert sorted(first + second) == sorted(p.arxiv_id for p in papers(1, 25))
        # and the next pass, or the next day's, sends none of them again
        later = FakeSender()
        await Delivery(store, later, clock=lambda: DIGEST + timedelta(days=1)).run_once()
        assert later.sent == []


async def test_a_new_version_is_not_a_new_paper_for_the_next_digest(store: Store) -> None:
    await daily_chat(store)
    await announce(store, papers(1, 5))
    sender = FakeSender()
    await Delivery(store, sender, clock=lambda: DIGEST).run_once()
    revised = [dataclasses.replace(p, version=2, title=p.title + " (v2)") for p in papers(1, 5)]
    await announce(store, [*revised, *papers(6, 2)])
    tomorrow = FakeSender()
    await Delivery(store, tomorrow, clock=lambda: DIGEST + timedelta(days=1)).run_once()
    assert sorted(tomorrow.ids_to(CHAT)) == sorted(p.arxiv_id for p in papers(6, 2))
    assert await store.outbox_counts() == {}  # one-message digests leave no row at all


async def test_turning_instant_sends_what_the_next_digest_would_have_held(store: Store) -> None:
    await daily_chat(store)
    await announce(store, papers(1, 4))
    await chats.set_digest(store, CHAT, ["instant"], now=NOW)
    sender = FakeSender()
    await Delivery(store, sender, clock=lambda: NOW).run_once()
    assert sorted(sender.ids_to(CHAT)) == sorted(p.arxiv_id for p in papers(1, 4))
    # back to digests: the next one starts after them, and holds only what came since
    await chats.set_digest(store, CHAT, ["daily", "08:00"], now=NOW)
    await announce(store, papers(5, 3))
    digest = FakeSender()
    await Delivery(store, digest, clock=lambda: DIGEST).run_once()
    assert sorted(digest.ids_to(CHAT)) == sorted(p.arxiv_id for p in papers(5, 3))


async def test_a_digest_is_never_early_and_the_longest_due_goes_first(store: Store) -> None:
    await daily_chat(store)
    await store.ensure_chat(2)
    await chats.set_digest(store, 2, ["daily", "07:30"], now=NOW)
    await store.subscribe(2, (await catalogue.custom_topic(store, KEYWORD)).id)
    await announce(store, papers(1, 3))
    eight = NOW.replace(hour=8)
    assert await store.digest_chats_due(iso(eight - timedelta(seconds=1)), limit=10) == [2]
    assert await store.digest_chats_due(iso(eight), limit=10) == [2, CHAT]
    sender = FakeSender()
    await Delivery(store, sender, clock=lambda: NOW + timedelta(minutes=45)).run_once()
    assert sender.texts_to(CHAT) == [] and len(sender.texts_to(2)) == 1
