"""Hostile and careless users: every odd input gets a clear answer and changes nothing, caps
hold under concurrent commands, and buttons or deep links act only on what they offered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot_harness import RL, USER, Bot, bot_session, check_traffic, seed_papers, topic_id
from topicpulse.bot import callbacks
from topicpulse.bot.views import TOPICS_PER_PAGE
from topicpulse.delivery import chats

EXPIRED = callbacks.EXPIRED
OTHER = 2002

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with bot_session(tmp_path, papers=seed_papers()) as running_bot:
        await running_bot.poll()
        yield running_bot
        check_traffic(running_bot.fake)  # no request the strict fake refused


async def custom_count(bot: Bot) -> int:
    return len(await bot.store.topics(kind="custom", active_only=False))


# ---------------------------------------------------------------------------------- caps
async def test_the_follow_cap_holds_under_concurrent_commands(bot: Bot) -> None:
    await bot.store.ensure_chat(USER)
    for n in range(chats.MAX_FOLLOWS - 5):  # 45 topics, set up directly
        await chats.follow(bot.store, USER, f"capword{n} OR filler")
    for n in range(10):  # ten /follows at once
        bot.fake.user_sends(USER, f"/follow raceword{n} OR filler")
    await bot.idle()
    assert await bot.store.count_subscriptions(USER) == chats.MAX_FOLLOWS
    replies = bot.fake.messages_to(USER)[-10:]
    refused = [m for m in replies if (m.text or "").startswith("This chat already follows 50")]
    assert len(refused) == 5


# ---------------------------------------------------------------------------------- odd input
@pytest.mark.parametrize("suffix", ["²", "①", "٣", "１"])
async def test_latest_with_a_digit_lookalike_is_answered(bot: Bot, suffix: str) -> None:
    answer = await bot.say(USER, f"/latest {RL} {suffix}")
    assert answer.plain_text is not None
    assert answer.plain_text.startswith(f"No topic called “{RL} {suffix}”")


@pytest.mark.parametrize(
    "data",
    [
        "f:99999999999999999999",
        "f:0",
        "u:-1",
        "ul:abc",
        "tp:-3",
        "tp:99999",
        "l:1.5",
        "zz:1",
        "",
        "f:1:2",
        "\x00",
        "fq:",
        "fq:short",
        "fq:UPPERCASEAAAA",
        "fq:" + "a" * 27,
        "fq:aaaaaaaaaa",  # well formed, but no such code was issued
    ],
)
async def test_unknown_or_malformed_buttons_are_answered_as_expired(bot: Bot, data: str) -> None:
    menu = await bot.say(USER, "/topics")
    before = await bot.store.count_subscriptions(USER)
    edits, answer = await bot.press(USER, menu, data, forged=True)
    assert edits == [] and answer["text"] == EXPIRED
    assert await bot.store.count_subscriptions(USER) == before


async def test_a_forged_follow_button_cannot_reach_another_chats_custom_topic(bot: Bot) -> None:
    await bot.ask(OTHER, "/follow secret AND project AND codename")
    secret = await topic_id(bot.store, "secret project codename")
    menu = await bot.say(USER, "/topics")
    edits, answer = await bot.press(USER, menu, f"f:{secret}", forged=True)
    assert edits == [] and answer["text"] == EXPIRED  # the message never offered it
    assert await bot.subscriptions(USER) == []
    assert "secret" not in str(answer)


async def test_page_buttons_act_only_on_a_topics_page_and_keep_its_own_filter(bot: Bot) -> None:
    helped = await bot.say(USER, "/help")
    edits, answer = await bot.press(USER, helped, "tp:1", forged=True)
    assert edits == [] and answer["text"] == EXPIRED  # /help never offered pages

    catalogue = await bot.store.topics(kind="catalogue")
    wide = next(
        word
        for word in ("model", "language", "learning", "llm")
        if sum(word in f"{t.name} {t.description} {t.slug}".casefold() for t in catalogue)
        > TOPICS_PER_PAGE
    )
    first = await bot.say(USER, f"/topics {wide}")
    await bot.say(USER, "/topics reward")  # a later, different filter
    edits, _ = await bot.press(USER, first, f"tp:1:{wide}")
    assert len(edits) == 1 and edits[0].text is not None
    assert edits[0].text.startswith(f"<b>Topics</b> matching “{wide}” (page 2/")


async def test_a_long_filter_pages_by_its_digest(bot: Bot) -> None:
    words = "a " * 40 + "model"  # too long for 64 bytes of callback data
    shown = await bot.say(USER, f"/topics {words.strip()}")
    nav = [data for label, data in shown.buttons if label.startswith("Next")]
    if nav:
        assert len(nav[0].encode()) <= 64 and "#" in nav[0]
        edits, _ = await bot.press(USER, shown, nav[0])
        assert len(edits) == 1


async def test_a_removed_catalogue_topic_button_says_so_and_creates_nothing(bot: Bot) -> None:
    menu = await bot.say(USER, "/topics")
    data = menu.buttons[0][1]
    gone = int(data.split(":")[1])
    slug = (await bot.store.topic(gone)).slug  # type: ignore[union-attr]
    keep = [t.slug for t in await bot.store.topics(kind="catalogue") if t.slug != slug]
    await bot.store.deactivate_catalogue_topics(keep)
    before = await custom_count(bot)
    edits, answer = await bot.press(USER, menu, data)
    assert edits == [] and answer["text"] == "That topic is no longer available."
    assert await custom_count(bot) == before
    assert await bot.subscriptions(USER) == []


async def test_deep_links_follow_catalogue_slugs_only(bot: Bot) -> None:
    for payload in ("follow_grpo_AND_secret", "follow_zzz", "follow_", "follow_rl for lm"):
        answer = await bot.say(USER, f"/start {payload}")
        assert answer.text is not None and "not for a topic in the catalogue" in answer.text
    assert await bot.subscriptions(USER) == []
    assert await custom_count(bot) == 0
    linked = await bot.say(USER, "/start follow_rl_for_language_models")
    assert linked.text is not None and linked.text.startswith(f"✅ Now following <b>{RL}</b>")


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ("weekly mon tue", "Give one weekday"),
        ("weekly 08:00 09:00", "Give one time"),
        ("weekly friday fri", "Give one weekday"),
    ],
)
async def test_ambiguous_digest_settings_are_refused(bot: Bot, args: str, why: str) -> None:
    await bot.say(USER, "/digest weekly 09:30 fri")
    before = await bot.store.chat(USER)
    answer = await bot.say(USER, f"/digest {args}")
    assert answer.plain_text is not None and answer.plain_text.startswith(why)
    after = await bot.store.chat(USER)
    assert after == before


async def test_a_double_tap_on_unfollow_makes_no_refused_edit(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    await bot.ask(USER, "/follow grpo AND reasoning")
    listed = await bot.say(USER, "/list")
    data = listed.buttons[0][1]
    for _ in range(2):  # both taps arrive before the first is handled
        bot.fake.user_presses(USER, listed.message_id, data)
    await bot.idle()
    assert await bot.subscriptions(USER) == [RL]
    answers = list(bot.fake.callback_answers.values())[-2:]
    assert len(answers) == 2
    # check_traffic (fixture teardown): no 400 "message is not modified" was provoked
