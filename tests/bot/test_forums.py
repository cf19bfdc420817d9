"""Forum supergroups end to end (issue 23 §4): alerts go to the forum topic a follow came from,
and a closed topic (General included) is a problem of the chat — its alerts stay queued, its
admins are told once, and delivery resumes when it reopens: at the next retry, or at once
when a command comes from the chat.

Before: every alert went to General, and with General (or the topic) closed each one was
dropped as a permanent failure while the chat stayed active. The engine's retry delays run on a
``SteerableClock`` that the tests move forward instead of waiting."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot_harness import RL, Bot, bot_session, check_traffic, links, paper, seed_papers
from clocks import SteerableClock
from fake_telegram import SentMessage
from owed import owed
from topicpulse.delivery.forums import CLOSED_RETRY, TOPIC_CLOSED_NOTICE
from waiting import wait_for

FORUM = -1_000_000_000_777
ADMIN_ID = 777
MOLECULES = "molecules"  # a custom query, matched by the titles below

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with bot_session(tmp_path, papers=seed_papers()) as running_bot:
        await running_bot.poll()
        running_bot.fake.make_forum(FORUM, title="Lab")
        running_bot.fake.set_chat_admins(FORUM, {ADMIN_ID})
        yield running_bot
        check_traffic(running_bot.fake, allowed=["TOPIC_CLOSED", "message thread not found"])


async def follow(bot: Bot, what: str, thread: int | None) -> SentMessage:
    return await bot.say(
        FORUM, f"/follow {what}", user_id=ADMIN_ID, username="ann", thread_id=thread
    )


def steer(bot: Bot) -> SteerableClock:
    """The engine's deferrals on a clock the test moves."""
    clock = SteerableClock()
    bot.pipeline.delivery.monotonic = clock
    return clock


def notices(bot: Bot) -> list[SentMessage]:
    return [m for m in bot.fake.messages_to(FORUM) if m.text == TOPIC_CLOSED_NOTICE]


def alerts(bot: Bot) -> list[tuple[str, int | None]]:
    """(arXiv id, forum topic) of every paper alert the forum got (not the replies)."""
    return [
        (i, m.thread_id)
        for m in bot.fake.messages_to(FORUM)
        if "reply_parameters" not in m.params
        for i in links(m)
    ]


def closed_refusals(bot: Bot) -> int:
    return sum(c.description == "Bad Request: TOPIC_CLOSED" for c in bot.fake.calls)


async def pending(bot: Bot) -> int:
    """How many papers the forum is still owed (kept while its topic is closed)."""
    return len(await owed(bot.store, FORUM))


async def test_alerts_go_to_the_topic_each_follow_came_from(bot: Bot) -> None:
    arxiv = bot.fake.create_topic(FORUM, "arXiv")
    confirmed = await follow(bot, RL, arxiv)
    assert confirmed.thread_id == arxiv  # the reply is in the command's topic
    assert (await follow(bot, MOLECULES, None)).thread_id is None  # from General
    bot.arxiv.add(
        paper(601, "GRPO for language model alignment, in a forum"),
        paper(602, "Graph neural networks for molecules, again", categories=["cs.LG"]),
    )
    await bot.poll_and_deliver()
    assert sorted(alerts(bot)) == [("2611.00601", arxiv), ("2611.00602", None)]


async def test_a_closed_topic_keeps_the_alerts_tells_once_and_resumes(bot: Bot) -> None:
    clock = steer(bot)
    arxiv = bot.fake.create_topic(FORUM, "arXiv")
    await follow(bot, RL, arxiv)
    bot.fake.close_topic(FORUM, arxiv)
    bot.arxiv.add(paper(611, "GRPO for language model alignment, while closed"))
    await bot.poll_and_deliver()
    assert closed_refusals(bot) == 1
    assert await pending(bot) == 1  # kept, not dropped
    chat = await bot.store.chat(FORUM)
    assert chat is not None and chat.active and chat.topic_closed_at is not None
    [told] = notices(bot)
    assert told.thread_id is None  # in General, the one place everyone sees

    bot.arxiv.add(paper(612, "GRPO for language model alignment, still closed"))
    await bot.poll()
    clock.jump(CLOSED_RETRY + 1)  # the next try …
    await bot.deliver()
    assert closed_refusals(bot) == 2 and await pending(bot) == 2
    await bot.restart()  # (the closing is remembered: no second notice after a restart)
    await bot.deliver()
    assert closed_refusals(bot) == 3 and len(notices(bot)) == 1

    clock = steer(bot)
    bot.fake.reopen_topic(FORUM, arxiv)
    await bot.ask(FORUM, "/list", user_id=ADMIN_ID, username="ann", thread_id=arxiv)

    async def delivered() -> bool:  # sent, and the closing forgotten (just after the send)
        chat = await bot.store.chat(FORUM)
        return await pending(bot) == 0 and chat is not None and chat.topic_closed_at is None

    await wait_for(delivered, what=bot.fake.summary)  # … or at once after a command
    assert sorted(alerts(bot)) == [("2611.00611", arxiv), ("2611.00612", arxiv)]
    assert "dropped" not in await bot.store.outbox_counts()
    chat = await bot.store.chat(FORUM)
    assert chat is not None and chat.topic_closed_at is None  # a new closing is told again


async def test_a_closed_general_is_told_in_another_topic_and_retried(bot: Bot) -> None:
    clock = steer(bot)
    reading = bot.fake.create_topic(FORUM, "Reading group")
    await follow(bot, RL, None)  # RL's alerts go to General …
    await follow(bot, MOLECULES, reading)  # … the other topic's to "Reading group"
    bot.fake.close_topic(FORUM, None)
    bot.arxiv.add(paper(621, "GRPO for language model alignment, General closed"))
    await bot.poll_and_deliver()
    [told] = notices(bot)
    assert told.thread_id == reading  # General is closed: told where it follows from
    assert await pending(bot) == 1
    bot.fake.reopen_topic(FORUM, None)
    clock.jump(CLOSED_RETRY + 1)  # no command: the retry finds it open
    await bot.deliver()
    assert alerts(bot) == [("2611.00621", None)] and await pending(bot) == 0


async def test_a_deleted_topic_sends_its_alerts_to_general(bot: Bot) -> None:
    old = bot.fake.create_topic(FORUM, "Old")
    await follow(bot, RL, old)
    bot.fake.delete_topic(FORUM, old)
    bot.arxiv.add(paper(631, "GRPO for language model alignment, topic deleted"))
    await bot.poll_and_deliver()
    assert alerts(bot) == [("2611.00631", None)]
    assert set((await bot.store.subscription_threads(FORUM)).values()) == {None}
