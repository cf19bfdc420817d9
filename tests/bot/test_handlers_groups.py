"""The bot in groups, end to end through the fake Bot API: ``/command@botname``, who may change a
group's topics and settings (administrators only), and what everyone may read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot_harness import RL, Bot, bot_session, check_traffic, links, seed_papers, topic_id
from topicpulse.bot import common

GROUP = -4001  # a basic group
ADMIN_ID, MEMBER_ID = 777, 888
REFUSAL = "Sorry — only this group's administrators can change its topics or settings."
TOO_FAST = "You are sending commands too fast. Please wait a minute."

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with bot_session(tmp_path, papers=seed_papers()) as running_bot:
        await running_bot.poll()
        running_bot.fake.set_chat_admins(GROUP, {ADMIN_ID})
        yield running_bot
        check_traffic(running_bot.fake)


async def by_admin(bot: Bot, text: str, chat: int = GROUP) -> list:  # type: ignore[type-arg]
    return await bot.ask(chat, text, user_id=ADMIN_ID, username="ann")


async def by_member(bot: Bot, text: str, chat: int = GROUP) -> list:  # type: ignore[type-arg]
    return await bot.ask(chat, text, user_id=MEMBER_ID, username="bob")


async def test_commands_addressed_to_the_bot_by_name(bot: Bot) -> None:
    name = bot.fake.bot_username
    [followed] = await by_admin(bot, f"/follow@{name} {RL}")
    assert followed.text is not None and followed.text.startswith(f"✅ Now following <b>{RL}</b>")
    assert await bot.subscriptions(GROUP) == [RL]
    [listed] = await by_member(bot, f"/list@{name.upper()}")
    assert listed.text is not None and listed.text.startswith("<b>Following 1 topic</b>")
    assert await by_member(bot, "/help@some_other_bot") == []  # not for us: silence
    assert await by_member(bot, "/frobnicate@some_other_bot") == []
    [unknown] = await by_member(bot, f"/frobnicate@{name}")
    assert unknown.text == "I don't know that command. /help lists what I can do."
    assert await by_member(bot, "just chatting") == []  # plain text in a group: not for us
    chat = await bot.store.chat(GROUP)
    assert chat is not None and chat.type == "group" and chat.title == f"Group {GROUP}"


async def test_members_may_not_change_the_group(bot: Bot) -> None:
    await by_admin(bot, f"/follow {RL}")
    before = await bot.store.chat(GROUP)
    for command in (
        "/follow grpo AND reasoning",
        f"/unfollow {RL}",
        "/digest daily 08:00",
        "/timezone Europe/Berlin",
        "/pause",
        "/resume",
        "/spikes off",
    ):
        answer = await by_member(bot, command)
        assert [m.text for m in answer] == [REFUSAL], command
    assert await bot.store.chat(GROUP) == before
    assert await bot.subscriptions(GROUP) == [RL]
    assert await bot.store.topics(kind="custom") == []  # nothing created either

    # Administrators and the group's creator may.
    [paused] = await by_admin(bot, "/pause")
    assert paused.text == "⏸ Paused: no alerts until /resume."
    owner = 999
    bot.fake.set_chat_admins(GROUP, {ADMIN_ID}, owner_id=owner)
    [resumed] = await bot.ask(GROUP, "/resume", user_id=owner, username="olga")
    assert resumed.text == "▶️ Resumed: new papers will arrive again."
    chat = await bot.store.chat(GROUP)
    assert chat is not None and not chat.paused


async def test_members_may_not_press_follow_or_unfollow_buttons(bot: Bot) -> None:
    rl_id = await topic_id(bot.store, RL)
    [confirmation] = await by_admin(bot, f"/follow {RL}")
    edits, answer = await bot.press(
        GROUP, confirmation, f"u:{rl_id}", user_id=MEMBER_ID, username="bob"
    )
    assert edits == []
    assert answer == {"text": REFUSAL, "show_alert": True}
    [listed] = await by_member(bot, "/list")  # anyone may look
    edits, answer = await bot.press(GROUP, listed, f"ul:{rl_id}", user_id=MEMBER_ID)
    assert edits == [] and answer["text"] == REFUSAL
    assert await bot.subscriptions(GROUP) == [RL]

    [page] = await by_member(bot, "/topics")  # browsing is for everyone …
    first_topic = page.buttons[0][1]
    assert first_topic is not None and first_topic.startswith("f:")
    edits, _ = await bot.press(GROUP, page, "tp:1", user_id=MEMBER_ID)
    assert len(edits) == 1 and edits[0].method == "editMessageText"
    first_topic = edits[0].buttons[0][1]  # the message now shows page 2
    edits, answer = await bot.press(
        GROUP, edits[0], first_topic, user_id=MEMBER_ID
    )  # … not following
    assert edits == [] and answer["text"] == REFUSAL
    assert await bot.subscriptions(GROUP) == [RL]

    edits, answer = await bot.press(GROUP, confirmation, f"u:{rl_id}", user_id=ADMIN_ID)
    assert answer["text"] == f"Unfollowed {RL}"
    assert [m.text for m in edits] == [f"Unfollowed <b>{RL}</b>."]
    assert await bot.subscriptions(GROUP) == []


async def test_anyone_may_read(bot: Bot) -> None:
    await by_admin(bot, f"/follow {RL}")
    text, chart = await by_member(bot, f"/momentum {RL}")
    assert text.text is not None and text.text.startswith(f"📊 <b>{RL}</b>\n5 papers in the last")
    assert chart.method == "sendPhoto" and chart.photo_bytes
    [ranked] = await by_member(bot, "/momentum")
    assert ranked.text is not None and f"<b>{RL}</b>: 5 (+150%)" in ranked.text
    [latest] = await by_member(bot, f"/latest {RL} 2")
    assert links(latest) == ["2611.00001", "2611.00002"]
    [listed] = await by_member(bot, "/list")
    assert listed.text is not None and listed.text.startswith("<b>Following 1 topic</b>")
    [found] = await by_member(bot, "/search grpo")
    assert found.text is not None and found.text.startswith("🔎 <b>7 papers</b> match")
    [shown] = await by_member(bot, "/settings")
    assert shown.text is not None and shown.text.startswith("<b>Settings</b>")
    replies = [m for m in bot.fake.messages_to(GROUP) if m.params.get("reply_parameters")]
    assert replies  # answers in a group quote the command they answer


async def test_anonymous_administrator(bot: Bot) -> None:
    """An admin posting as the group (anonymous admin) is an admin; Telegram shows the sender
    as @GroupAnonymousBot, which getChatMember would call a plain member."""
    anonymous = {"id": 1087968824, "is_bot": True, "first_name": "Group"}
    group = {"id": GROUP, "title": "Readers", "type": "group"}
    bot.fake.add_update(
        {
            "message": {
                "message_id": 90,
                "from": anonymous,
                "sender_chat": group,
                "chat": group,
                "date": 1_700_000_000,
                "text": "/pause",
                "entities": [{"type": "bot_command", "offset": 0, "length": 6}],
            }
        }
    )
    await bot.idle()
    [paused] = bot.fake.messages_to(GROUP)
    assert paused.text == "⏸ Paused: no alerts until /resume."
    chat = await bot.store.chat(GROUP)
    assert chat is not None and chat.paused and chat.title == "Readers"


async def test_anonymous_administrators_of_each_group_have_their_own_allowance(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every anonymous admin of every group is the same placeholder user (@GroupAnonymousBot):
    the command limit counts by the chat they speak for, so one group using up its allowance
    leaves every other group's, and each person's, alone."""
    monkeypatch.setattr(common, "COMMAND_RATE", (3, 60.0))
    other = -4002
    for _ in range(3):
        [shown] = await bot.ask(GROUP, "/settings", sender_chat=GROUP)
        assert shown.text is not None and shown.text.startswith("<b>Settings</b>")
    [slow] = await bot.ask(GROUP, "/settings", sender_chat=GROUP)
    assert slow.text == TOO_FAST
    assert await bot.ask(GROUP, "/pause", sender_chat=GROUP) == []  # told once, then ignored
    [paused] = await bot.ask(other, "/pause", sender_chat=other)  # another group's admins
    assert paused.text == "⏸ Paused: no alerts until /resume."
    [shown] = await by_member(bot, "/settings")  # a member of the limited group: their own
    assert shown.text is not None and shown.text.startswith("<b>Settings</b>")
    for _ in range(3):  # a person using up their allowance limits no group's admins
        await by_admin(bot, "/settings", chat=other)
    [slow] = await by_admin(bot, "/settings", chat=other)
    assert slow.text == TOO_FAST
    [resumed] = await bot.ask(other, "/resume", sender_chat=other)
    assert resumed.text == "▶️ Resumed: new papers will arrive again."
    chat = await bot.store.chat(GROUP)
    assert chat is not None and not chat.paused


async def test_migration_message_moves_the_group(bot: Bot) -> None:
    supergroup = -1004001
    await by_admin(bot, f"/follow {RL}")
    await by_admin(bot, "/digest daily 09:00")
    group = {"id": GROUP, "title": f"Group {GROUP}", "type": "group"}
    bot.fake.migrate_chat(GROUP, supergroup)
    bot.fake.add_update(  # the service message Telegram puts in the old group
        {
            "message": {
                "message_id": 91,
                "from": {"id": ADMIN_ID, "is_bot": False, "first_name": "Ann"},
                "chat": group,
                "date": 1_700_000_000,
                "migrate_to_chat_id": supergroup,
            }
        }
    )
    await bot.idle()
    assert await bot.store.chat(GROUP) is None
    moved = await bot.store.chat(supergroup)
    assert moved is not None and moved.type == "supergroup" and moved.mode == "daily"
    assert await bot.subscriptions(supergroup) == [RL]
    bot.fake.set_chat_admins(supergroup, {ADMIN_ID})
    [listed] = await by_member(bot, "/list", chat=supergroup)
    assert listed.text is not None and listed.text.startswith("<b>Following 1 topic</b> · daily")
