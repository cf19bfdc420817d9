"""The weekly /foryou through the fake Bot API, on the injected clock: /foryou weekly and off,
the message at its time (Mondays at the digest time; a weekly digest's own slot, after the
digest), exactly once a week across restarts, nothing for a chat with too few 👍 or nothing to
recommend, /taste showing it, and groups."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot_harness import USER, Bot, Clock, bot_session, check_traffic, paper, seed_papers
from fake_telegram import SentMessage
from topicpulse.bot.common import NOT_ADMIN
from topicpulse.delivery import weekly
from topicpulse.models import Paper
from waiting import wait_for

pytestmark = pytest.mark.timeout(90)

NOW = datetime(2026, 11, 15, 9, 0, tzinfo=UTC)  # a Sunday
LIKED = "protein folding with diffusion language models"
DISLIKED = "stock trading agents built on language models"
WEEKLY = "For you this week"


def themed(n: int, theme: str, days_ago: float = 3, now: datetime = NOW) -> Paper:
    return paper(
        n,
        f"{theme.capitalize()}, study {n}",
        days_ago=days_ago,
        abstract=f"We study {theme} in depth; {theme} matter. Variant {n}.",
        now=now,
    )


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    history = [themed(600 + n, LIKED) for n in range(7)]
    history += [themed(700 + n, DISLIKED) for n in range(6)]
    async with bot_session(tmp_path, papers=seed_papers(NOW) + history, clock=Clock(NOW)) as b:
        await b.poll()
        yield b
        check_traffic(b.fake)


async def teach(bot: Bot, up: int, chat_id: int = USER, **user: object) -> None:
    """The chat follows "stock trading" and likes ``up`` protein papers (imported by id)."""
    await bot.ask(chat_id, '/follow "stock trading"', **user)
    await bot.ask(chat_id, "/taste " + " ".join(f"2611.{600 + n:05d}" for n in range(up)), **user)

    async def trained() -> bool:
        row = await bot.store.taste(chat_id)
        return row is not None and row.trained >= row.changed

    await wait_for(trained, timeout=60, what="the taste to be trained")


def weeklies(bot: Bot, chat_id: int = USER) -> list[SentMessage]:
    return [m for m in bot.fake.messages_to(chat_id) if WEEKLY in (m.text or "")]


async def at(bot: Bot, when: datetime) -> None:
    """The clock at ``when``, and a delivery pass."""
    bot.clock.now = when
    await bot.deliver()


async def test_weekly_comes_once_a_week_across_restarts_until_off(bot: Bot) -> None:
    await teach(bot, 5)
    on = await bot.say(USER, "/foryou weekly")
    assert "Weekly /foryou is on: Mondays at 08:00 UTC" in (on.text or "")
    assert "(first: Mon 16 Nov 08:00)" in (on.text or "")
    page = await bot.say(USER, "/taste")
    assert "Weekly /foryou: on — Mondays at 08:00 UTC" in (page.text or "")
    await at(bot, datetime(2026, 11, 16, 7, 59, tzinfo=UTC))
    assert weeklies(bot) == []
    await at(bot, datetime(2026, 11, 16, 8, 0, 30, tzinfo=UTC))
    [sent] = weeklies(bot)
    text = sent.text or ""
    # what /foryou lists: the unrated protein papers first, nothing the topic matched
    assert "2611.00605" in text and "2611.00606" in text and "Stock trading" not in text
    labels = [label for label, _ in sent.buttons]
    assert labels[:3] == ["👍 1", "👎 1", "why? 1"]
    # not twice: another pass, then a restart
    await bot.deliver()
    await bot.restart()
    await at(bot, datetime(2026, 11, 16, 9, 0, tzinfo=UTC))
    assert len(weeklies(bot)) == 1
    row = await bot.store.taste(USER)
    assert row is not None and row.weekly_next_at == "2026-11-23T08:00:00Z"
    # the next week brings the next one, with that week's papers
    bot.arxiv.add(themed(650, LIKED, days_ago=1, now=datetime(2026, 11, 22, 9, tzinfo=UTC)))
    bot.clock.now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    await bot.poll()
    await at(bot, datetime(2026, 11, 23, 8, 1, tzinfo=UTC))
    assert len(weeklies(bot)) == 2
    assert "2611.00650" in (weeklies(bot)[-1].text or "")
    # off: the week after brings nothing, though there is something to recommend
    off = await bot.say(USER, "/foryou off")
    assert "Weekly /foryou is off" in (off.text or "")
    bot.arxiv.add(themed(651, LIKED, days_ago=1, now=datetime(2026, 11, 29, 9, tzinfo=UTC)))
    bot.clock.now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    await bot.poll()
    await at(bot, datetime(2026, 11, 30, 8, 1, tzinfo=UTC))
    assert len(weeklies(bot)) == 2
    [listed] = await bot.ask(USER, "/foryou")  # (what it would have sent)
    assert "2611.00651" in (listed.text or "")


async def test_nothing_for_a_chat_with_too_few_likes(bot: Bot) -> None:
    await teach(bot, 2)
    on = await bot.say(USER, "/foryou weekly")
    assert f"It starts once your taste has {weekly.MIN_LIKED} 👍 (now 2)" in (on.text or "")
    await at(bot, datetime(2026, 11, 16, 8, 1, tzinfo=UTC))
    assert weeklies(bot) == []
    row = await bot.store.taste(USER)  # the week is skipped, not kept for later
    assert row is not None and row.weekly_next_at == "2026-11-23T08:00:00Z"


async def test_nothing_when_there_is_nothing_to_recommend(bot: Bot) -> None:
    await teach(bot, 5)
    await bot.say(USER, "/foryou weekly")
    # the bot was down over the first Monday: a week later nothing was published in 7 days
    await at(bot, datetime(2026, 11, 23, 8, 1, tzinfo=UTC))
    assert weeklies(bot) == []
    nothing = await bot.say(USER, "/foryou")
    assert nothing.text == "Nothing new outside your topics in the last 7 days."
    row = await bot.store.taste(USER)
    assert row is not None and row.weekly_next_at == "2026-11-30T08:00:00Z"


async def test_a_weekly_digest_chat_gets_it_after_its_digest(bot: Bot) -> None:
    await teach(bot, 5)
    await bot.say(USER, "/foryou weekly")
    await bot.ask(USER, "/digest weekly 10:00 tue")  # the weekly /foryou moves with it
    bot.arxiv.add(themed(720, DISLIKED, days_ago=0.5))
    await bot.poll()
    await at(bot, datetime(2026, 11, 16, 8, 1, tzinfo=UTC))
    assert weeklies(bot) == []
    await at(bot, datetime(2026, 11, 17, 10, 0, 5, tzinfo=UTC))
    texts = [m.text or "" for m in bot.fake.messages_to(USER)]
    digest = next(n for n, t in enumerate(texts) if "Your weekly digest" in t)
    [week] = [n for n, t in enumerate(texts) if WEEKLY in t]
    assert digest < week
    assert "Weekly /foryou: on — Tuesdays at 10:00 UTC" in (
        (await bot.say(USER, "/taste")).text or ""
    )


GROUP, ADMIN_ID, MEMBER_ID = -4001, 777, 888


async def test_weekly_is_for_a_groups_admins_and_bad_words_get_one_line(bot: Bot) -> None:
    bot.fake.set_chat_admins(GROUP, {ADMIN_ID})
    [refused] = await bot.ask(GROUP, "/foryou weekly", user_id=MEMBER_ID, username="bob")
    assert refused.text == NOT_ADMIN
    assert (await bot.store.taste(GROUP)) is None
    [done] = await bot.ask(GROUP, "/foryou weekly", user_id=ADMIN_ID, username="ann")
    assert "Weekly /foryou is on" in (done.text or "")
    [bad] = await bot.ask(GROUP, "/foryou sometimes", user_id=ADMIN_ID, username="ann")
    assert bad.text == "Use /foryou, /foryou weekly or /foryou off."
