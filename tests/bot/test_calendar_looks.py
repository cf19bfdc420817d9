"""arXiv as the running bot reads it: it looks when arXiv's calendar says (TOPICPULSE_POLL_SECONDS
unset) — its first look at start, then shortly after the next expected update, or again soon
while an expected update has not appeared; with the variable set, every N seconds instead —
and asks the search API only for a paper by id that it does not hold yet."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from bot_harness import Clock, bot_session, paper
from topicpulse.sources.calendar import AFTER_UPDATE, FIRST_RETRY, Calendar

THURSDAY_NOON = datetime(2026, 11, 19, 17, 0, tzinfo=UTC)  # 12:00 Eastern


def poll_jobs(bot) -> list:  # type: ignore[no-untyped-def]
    assert bot.app is not None and bot.app.job_queue is not None
    return [j for j in bot.app.job_queue.jobs() if j.name == "poll"]


async def test_the_calendar_books_the_next_look_after_the_next_update(tmp_path: Path) -> None:
    clock = Clock(THURSDAY_NOON)
    # Wednesday evening's announcement, dated Thursday by OAI-PMH, is there already.
    papers = [paper(1, "GRPO for reasoning", days_ago=0.2, now=THURSDAY_NOON)]
    async with bot_session(
        tmp_path, papers=papers, clock=clock, TOPICPULSE_POLL_SECONDS=None
    ) as bot:
        assert bot.pipeline.schedule is not None
        assert [j.trigger.__class__.__name__ for j in poll_jobs(bot)] == ["DateTrigger"]
        await bot.poll()
        assert await bot.store.count_papers() == 1
        wait = await bot.pipeline.next_look()
        expected = Calendar().update(date(2026, 11, 19)) + AFTER_UPDATE  # Thursday evening's
        assert wait == expected - THURSDAY_NOON

        clock.now = expected  # Thursday evening's update has not appeared: ask again soon
        assert await bot.pipeline.next_look() == FIRST_RETRY


async def test_a_polling_interval_replaces_the_calendar(tmp_path: Path) -> None:
    async with bot_session(tmp_path, TOPICPULSE_POLL_SECONDS=600) as bot:
        assert bot.pipeline.schedule is None
        [job] = poll_jobs(bot)
        assert job.trigger.interval == timedelta(seconds=600)


async def test_paper_and_follow_like_fetch_a_paper_not_stored_yet_by_id(tmp_path: Path) -> None:
    """Issue 22 §4: the search API serves lookups by id (``id_list``) and nothing else."""
    async with bot_session(tmp_path) as bot:
        bot.arxiv.add(paper(77, "Verifier-guided decoding for math word problems"))
        bot.arxiv.reset_requests()
        card = await bot.say(1001, "/paper 2611.00077")
        assert card.text is not None and "Verifier-guided decoding" in card.text
        (request,) = bot.arxiv.requests
        assert request.path == "/api/query" and request.params["id_list"] == "2611.00077"
        assert await bot.store.get_paper("2611.00077") is not None
        bot.arxiv.reset_requests()
        await bot.ask(1001, "/follow like 2611.00077")  # stored now: no request
        assert bot.arxiv.requests == []
