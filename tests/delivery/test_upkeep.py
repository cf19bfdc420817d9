"""A long life: backfill holes heal, background failures are loud, and the daily maintenance
removes what has no further use — and nothing a chat still needs."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot_harness import Clock, bot_session
from fake_arxiv import make_paper, ok, server_error
from owed import owed
from topicpulse.delivery.chats import share_query, shared_query
from topicpulse.delivery.upkeep import (
    OUTBOX_HORIZON,
    SHARED_QUERY_HORIZON,
    UNFOLLOWED_GRACE,
    run_maintenance,
)
from topicpulse.models import RunStats, iso
from topicpulse.store import Store
from topicpulse.topics.catalogue import custom_topic
from topicpulse.topics.matching import match_new_papers

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAYS = [(NOW - timedelta(days=n)).date() for n in range(7, 0, -1)]  # the week before today


def day_papers() -> list:  # two papers on each day of the backfill week
    return [
        make_paper(f"2611.{n:02d}{i:03d}", datetime(d.year, d.month, d.day, 9 + i, tzinfo=UTC))
        for n, d in enumerate(DAYS)
        for i in range(2)
    ]


async def backfill_task(bot) -> asyncio.Task[None] | None:  # type: ignore[no-untyped-def]
    tasks = [t for t in bot.pipeline.tasks if t.get_name() == "backfill"]
    return tasks[0] if tasks else None


# ---------------------------------------------------------------------------------- healing
async def test_a_history_harvest_that_stopped_is_resumed_on_restart(tmp_path: Path) -> None:
    settings = {"TOPICPULSE_BACKFILL_WEEKS": 1, "TOPICPULSE_ARXIV_RETRIES": 0}
    clock = Clock(NOW)
    # The first start harvests the week's history in the background (pages of 4 records);
    # arXiv fails on the second page.
    async with bot_session(
        tmp_path, papers=day_papers(), clock=clock, arxiv_script=(ok(), server_error()),
        oai_page_size=4, **settings,
    ) as bot:  # fmt: skip
        task = await backfill_task(bot)
        assert task is not None
        await asyncio.wait_for(task, timeout=30)
        assert await bot.pipeline.ingestor.history_missing(1)
        assert await bot.store.count_papers() == 4  # the first page stays

        bot.arxiv.reset_requests()
        await bot.restart()  # the next start goes on from the second page
        task = await backfill_task(bot)
        assert task is not None
        await asyncio.wait_for(task, timeout=30)
        assert not await bot.pipeline.ingestor.history_missing(1)
        assert await bot.store.count_papers() == 2 * len(DAYS)
        assert "resumptionToken" in bot.arxiv.requests[0].params

        await bot.restart()  # nothing missing: no history harvest at all
        assert await backfill_task(bot) is None


async def test_an_intake_round_resumes_a_stopped_history_harvest(tmp_path: Path) -> None:
    settings = {"TOPICPULSE_BACKFILL_WEEKS": 1, "TOPICPULSE_ARXIV_RETRIES": 0}
    async with bot_session(
        tmp_path, papers=day_papers(), clock=Clock(NOW), arxiv_script=(ok(), server_error()),
        oai_page_size=4, **settings,
    ) as bot:  # fmt: skip
        task = await backfill_task(bot)
        assert task is not None
        await asyncio.wait_for(task, timeout=30)
        assert await bot.pipeline.ingestor.history_missing(1)
        await bot.poll()  # the intake, then the rest of the history
        assert not await bot.pipeline.ingestor.history_missing(1)
        assert await bot.store.count_papers() == 2 * len(DAYS)


# ---------------------------------------------------------------------------------- failures
async def test_a_background_task_that_dies_is_logged_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with bot_session(tmp_path) as bot:

        async def broken() -> None:
            raise RuntimeError("disk on fire")

        with caplog.at_level(logging.ERROR, logger="topicpulse.bot.app"):
            task = bot.pipeline.spawn(broken(), "backfill")
            with pytest.raises(RuntimeError):
                await task
            await asyncio.sleep(0)  # done-callbacks run on the next loop iteration
            died = [r for r in caplog.records if "died" in r.getMessage()]
            assert len(died) == 1 and died[0].exc_info is not None  # with its traceback
            assert "'backfill'" in died[0].getMessage()
        assert bot.app is not None  # the bot is still running


async def test_engine_passes_never_overlap(tmp_path: Path) -> None:
    async with bot_session(tmp_path, papers=day_papers(), clock=Clock(NOW)) as bot:
        await bot.ask(1001, "/follow reinforcement learning")
        await asyncio.gather(bot.poll(), bot.poll(), bot.pipeline.after_ingest())
        assert bot.pipeline.engine_lock.locked() is False


# ---------------------------------------------------------------------------------- maintenance
class MovableClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def test_maintenance_removes_what_it_should_and_nothing_a_chat_needs(
    tmp_path: Path,
) -> None:
    clock = MovableClock(NOW - timedelta(days=60))
    store = await Store.open(tmp_path / "upkeep.db", clock=clock)
    try:
        old = [make_paper(f"2609.{i:05d}", iso(clock.now - timedelta(hours=i))) for i in range(4)]
        await store.upsert_papers(old)
        for chat_id in (1, 2):
            await store.ensure_chat(chat_id)
        followed = await custom_topic(store, "alpha OR beta")
        await custom_topic(store, "gamma")  # created, never followed: goes
        dropped_long_ago = await custom_topic(store, "delta")
        await store.subscribe(1, followed.id)
        await store.subscribe(2, dropped_long_ago.id)
        await store.unsubscribe(2, dropped_long_ago.id)
        run = await store.start_run("poll")
        await store.finish_run(run, RunStats(kind="poll"))
        sent_long_ago = await _queue(store, 1, old[0].arxiv_id)
        pending_long_ago = await _queue(store, 1, old[1].arxiv_id)
        await store.mark_sent([sent_long_ago])

        clock.now = NOW  # two months later
        recent_drop = await custom_topic(store, "epsilon")
        await store.subscribe(2, recent_drop.id)
        await store.unsubscribe(2, recent_drop.id)  # Undo must still work for a while
        recent = make_paper("2611.00001", iso(NOW - timedelta(hours=1)))
        await store.upsert_papers([recent])
        sent_recently = await _queue(store, 1, recent.arxiv_id)
        await store.mark_sent([sent_recently])
        for _ in range(2):
            run = await store.start_run("poll")
            await store.finish_run(run, RunStats(kind="poll"))

        pruned = await run_maintenance(store, now=NOW)

        assert (pruned.outbox_rows, pruned.topics, pruned.runs) == (1, 2, 1)
        remaining = {t.id for t in await store.topics(kind="custom")}
        assert remaining == {followed.id, recent_drop.id}  # gamma and delta are gone
        assert await store.outbox_counts() == {"pending": 1, "sent": 1}
        assert [i.id for i in await store.pending_for_chat(1)] == [pending_long_ago]
        assert await store.count_papers() == 5  # papers are never pruned
        assert (await store.last_run("poll")) is not None
        # A second run a moment later has nothing left to remove.
        again = await run_maintenance(store, now=NOW + timedelta(minutes=1))
        assert (again.outbox_rows, again.topics, again.runs) == (0, 0, 0)
        # Past the grace period the recently dropped topic goes too.
        later = await run_maintenance(store, now=NOW + UNFOLLOWED_GRACE + timedelta(days=1))
        assert later.topics == 1
        assert {t.id for t in await store.topics(kind="custom")} == {followed.id}
    finally:
        await store.close()


async def test_shared_queries_nobody_uses_are_forgotten(tmp_path: Path) -> None:
    """Every query typed into the web page gets a follow-link code. Codes whose page nobody
    shows and whose link nobody opens for ``SHARED_QUERY_HORIZON`` go; used ones stay."""
    start = NOW - SHARED_QUERY_HORIZON - timedelta(days=10)
    clock = MovableClock(start)
    store = await Store.open(tmp_path / "shared.db", clock=clock)
    try:
        once = await share_query(store, "typed once")
        shown = await share_query(store, "page shown again")
        opened = await share_query(store, "link opened")
        clock.now = start + timedelta(hours=12)
        await share_query(store, "typed once")  # the same day: not a new use worth a write
        clock.now = NOW - timedelta(days=20)
        assert await share_query(store, "page shown again") == shown  # the same code
        assert await shared_query(store, opened) == "link opened"

        pruned = await run_maintenance(store, now=NOW)

        assert pruned.shared_queries == 1
        assert await shared_query(store, once) is None  # its link says it is not valid any more
        assert await shared_query(store, shown) == "page shown again"
        assert await shared_query(store, opened) == "link opened"
        assert (await run_maintenance(store, now=NOW)).shared_queries == 0
        clock.now = NOW
        assert await share_query(store, "typed once") == once  # shown again: the same code
        assert await shared_query(store, once) == "typed once"
    finally:
        await store.close()


async def test_pruned_deliveries_are_never_sent_again(tmp_path: Path) -> None:
    """Past the dedup horizon a delivered paper's row (here: one its failed alert left) is
    gone, yet no later round (a new version, a re-run of matching) owes that paper to the chat
    again: its watermark has passed it."""
    clock = MovableClock(NOW)
    store = await Store.open(tmp_path / "dedup.db", clock=clock)
    try:
        await store.ensure_chat(1)
        topic = await custom_topic(store, "alpha")
        await store.subscribe(1, topic.id)
        paper = make_paper("2611.00007", iso(NOW - timedelta(hours=2)), title="Alpha at scale")
        await store.upsert_papers([paper])
        first = await match_new_papers(store, clock=clock)
        assert first.chats_marked == 1
        stored = await store.get_paper(paper.arxiv_id)
        assert stored is not None and await owed(store, 1) == [paper.arxiv_id]
        await store.mark_sent(await store.queue_papers(1, [stored.id]))
        await _alert_settled(store, 1)
        assert await owed(store, 1) == []

        clock.now = NOW + OUTBOX_HORIZON + timedelta(days=1)
        pruned = await run_maintenance(store, now=clock.now)
        assert pruned.outbox_rows == 1 and await store.outbox_counts() == {}

        v2 = make_paper("2611.00007", iso(NOW - timedelta(hours=2)), version=2, title="Alpha v2")
        await store.upsert_papers([v2])
        again = await match_new_papers(store, clock=clock)
        assert again.chats_marked == 0 and await owed(store, 1) == []
        assert await store.outbox_counts() == {}
    finally:
        await store.close()


async def _queue(store: Store, chat_id: int, arxiv_id: str) -> int:
    """One pending paper delivery (test set-up; rounds queue them through record_matches)."""
    paper = await store.get_paper(arxiv_id)
    assert paper is not None
    async with store._write() as conn:
        cur = await conn.execute(
            "INSERT INTO outbox (chat_id, kind, paper_id, created_at) VALUES (?, 'paper', ?, ?)",
            (chat_id, paper.id, store._now()),
        )
        return int(cur.lastrowid or 0)


async def test_a_follow_racing_the_prune_of_its_topic_still_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daily upkeep deletes an abandoned custom topic between a /follow finding it and
    subscribing to it: the follow makes the topic anew instead of failing."""
    from topicpulse.delivery import chats

    store = await Store.open(tmp_path / "race.db")
    try:
        await store.ensure_chat(1)
        abandoned = await custom_topic(store, "alpha OR beta")
        refresh = store.refresh_topic_matches
        pruned: list[int] = []

        async def prune_first(topic):  # type: ignore[no-untyped-def]
            if not pruned:
                pruned.append(topic.id)
                async with store._write() as conn:
                    await conn.execute("DELETE FROM topics WHERE id = ?", (topic.id,))
            await refresh(topic)

        monkeypatch.setattr(store, "refresh_topic_matches", prune_first)
        result = await chats.follow(store, 1, "alpha OR beta")
        assert pruned == [abandoned.id] and result.added
        assert [s.topic.query for s in await store.subscriptions(1)] == ["alpha OR beta"]
    finally:
        await store.close()


async def test_a_group_that_becomes_a_supergroup_keeps_its_settings_and_spellings(
    tmp_path: Path,
) -> None:
    """The new id often talks to the bot first (a command in the new supergroup makes its
    row); the group's settings and each follow's spelling still move over."""
    from topicpulse.delivery import chats

    store = await Store.open(tmp_path / "moved.db")
    try:
        await store.ensure_chat(-1, type="group")
        await chats.follow(store, -1, "LLM agents AND planning")
        await chats.set_digest(store, -1, ["weekly", "09:30", "fri"])
        await chats.set_timezone(store, -1, "Europe/Berlin")
        group = await store.chat(-1)
        assert group is not None and group.type == "group"  # settings never retype a group
        await store.ensure_chat(-1009, type="supergroup")  # the new id's first command
        await store.migrate_chat(-1, -1009)
        moved = await store.chat(-1009)
        assert moved is not None
        assert (moved.mode, moved.digest_weekday, moved.timezone) == ("weekly", 4, "Europe/Berlin")
        assert [s.topic.name for s in await store.subscriptions(-1009)] == [
            "LLM agents AND planning"
        ]
        assert await store.chat(-1) is None
    finally:
        await store.close()


async def test_delivered_papers_leave_the_outbox_within_a_day(tmp_path: Path) -> None:
    """The outbox is a queue: an hour after a paper was queued and sent plainly its row goes
    at the daily upkeep (issue 25: the store grows with papers, not with chats × papers). What
    is a record stays to the long horizon: a drop's reason, a doubtful send, a digest's
    papers past its chat's watermark (sent in a first message, the last not gone yet). And
    the pruned paper is still never queued again, in a new version either."""
    clock = MovableClock(NOW)
    store = await Store.open(tmp_path / "queue.db", clock=clock)
    try:
        await store.ensure_chat(1)
        await store.ensure_chat(2)
        async with store._write() as conn:  # (set-up: chat 2 takes daily digests)
            await conn.execute("UPDATE chats SET mode = 'daily' WHERE chat_id = 2")
        topic = await custom_topic(store, "alpha")
        await store.subscribe(1, topic.id)
        papers = [
            make_paper(f"2611.0002{n}", iso(NOW - timedelta(hours=2)), title=f"Alpha {n}")
            for n in range(3)
        ]
        await store.upsert_papers(papers)
        assert (await match_new_papers(store, clock=clock)).chats_marked == 1
        ids = [(await store.get_paper(p.arxiv_id)).id for p in papers]  # type: ignore[union-attr]
        # rows as failed alerts leave them (one went through after, one maybe, one refused)
        sent, doubtful, dropped = await store.queue_papers(1, sorted(ids))
        await store.mark_sent([sent])
        await store.mark_maybe_sent([doubtful], "read timeout")
        await store.drop_outbox([dropped], "Forbidden: bot was blocked by the user")
        digest_chat = await store.chat(2)
        assert digest_chat is not None
        first = await store.get_paper(papers[0].arxiv_id)
        assert first is not None
        await store.settle_digest(digest_chat, outbox_ids=[], paper_ids=[first.id], through=None)
        await _alert_settled(store, 1)  # (chat 1's alert's last message: its watermark moves)
        assert await store.outbox_counts() == {"sent": 3, "dropped": 1}

        clock.now = NOW + timedelta(minutes=30)  # too soon: the hour is not over
        assert (await run_maintenance(store, now=clock.now)).outbox_rows == 0
        clock.now = NOW + timedelta(hours=2)
        pruned = await run_maintenance(store, now=clock.now)

        assert pruned.outbox_rows == 1
        assert await store.outbox_counts() == {"sent": 2, "dropped": 1}
        await store.upsert_papers([make_paper(papers[0].arxiv_id, iso(NOW), version=2)])
        assert (await match_new_papers(store, clock=clock)).chats_marked == 0
    finally:
        await store.close()


async def _alert_settled(store: Store, chat_id: int) -> None:
    """As the last message of the chat's instant alert settles: its watermark moves to where
    the rounds stand."""
    chat = await store.chat(chat_id)
    assert chat is not None
    through = await store.fanned_out_through()
    await store.settle_digest(chat, outbox_ids=[], paper_ids=[], through=through)
