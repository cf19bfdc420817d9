"""A group becoming a supergroup, end to end through the fake Bot API: Telegram sends two
service messages (``migrate_to_chat_id`` in the old group, ``migrate_from_chat_id`` in the new
supergroup), the bot handles them concurrently, and the chat moves once, silently."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot_harness import RL, Bot, bot_session, check_traffic, seed_papers

GROUP, SUPERGROUP = -4001, -1004001
ADMIN_ID = 777
CUSTOM = "grpo AND reasoning"

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with bot_session(tmp_path, papers=seed_papers()) as running_bot:
        await running_bot.poll()
        running_bot.fake.set_chat_admins(GROUP, {ADMIN_ID})
        yield running_bot
        check_traffic(running_bot.fake)


async def by_admin(bot: Bot, text: str, chat: int = GROUP) -> None:
    [answer] = await bot.ask(chat, text, user_id=ADMIN_ID, username="ann")
    assert answer.text is not None


def calls_to(bot: Bot, *chats: int) -> list[tuple[str, int, object]]:
    """Every call the bot made naming these chats, whatever its answer: (method, chat, text)."""
    return [
        (c.method, c.params["chat_id"], c.params.get("text"))
        for c in bot.fake.calls
        if c.params.get("chat_id") in chats
    ]


@pytest.mark.parametrize("supergroup_first", [False, True], ids=["group-first", "supergroup-first"])
async def test_both_migration_updates_move_the_group_once_and_silently(
    bot: Bot, supergroup_first: bool
) -> None:
    await by_admin(bot, f"/follow {RL}")
    await by_admin(bot, f"/follow {CUSTOM}")
    await by_admin(bot, "/digest weekly 09:30 fri")
    await by_admin(bot, "/timezone Europe/Berlin")
    await by_admin(bot, "/spikes off")
    await by_admin(bot, "/pause")
    group = await bot.store.chat(GROUP)
    assert group is not None and group.type == "group" and group.mode == "weekly"
    followed = await bot.subscriptions(GROUP)
    assert sorted(followed) == sorted([RL, CUSTOM])
    calls_before = len(calls_to(bot, GROUP, SUPERGROUP))

    # Both service messages in one getUpdates batch: the bot handles them at the same time.
    notices = bot.fake.migrate_chat(
        GROUP, SUPERGROUP, notify=True, username="ann", supergroup_first=supergroup_first
    )
    assert notices is not None
    await bot.idle()
    offsets = [c.params.get("offset") for c in bot.fake.calls_to("getUpdates")]
    assert min(notices) + 1 not in offsets  # fetched in one batch: never the first alone

    assert await bot.store.chat(GROUP) is None
    assert await bot.subscriptions(GROUP) == []
    moved = await bot.store.chat(SUPERGROUP)
    assert moved == dataclasses.replace(group, chat_id=SUPERGROUP, type="supergroup")
    assert await bot.subscriptions(SUPERGROUP) == followed  # each once, in the same order
    counts = await bot.store.chat_counts()
    assert counts == {"active": 1, "inactive": 0, "subscriptions": 2}
    assert calls_to(bot, GROUP, SUPERGROUP)[calls_before:] == []  # nothing posted, anywhere
