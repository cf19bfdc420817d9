"""Refining a topic from 👎, through the fake Bot API: the offer a third 👎 sharing a word
triggers (once), accepting it (a catalogue topic: the chat's view — alerts and digests leave
such papers out, another topic still brings them; a custom query: the query gains NOT word),
↩️ Undo and /taste's ✖, No thanks, groups (admins only) and stale or forged buttons."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot_harness import RL, USER, Bot, Clock, bot_session, check_traffic, paper, seed_papers
from fake_telegram import SentMessage
from owed import owed
from topicpulse.bot import callbacks
from topicpulse.bot.common import NOT_ADMIN
from topicpulse.models import Paper

pytestmark = pytest.mark.timeout(90)

NOW = datetime(2026, 11, 10, 9, 0, tzinfo=UTC)
ALL_RL = "Reinforcement Learning"  # a second catalogue topic that matches every GRPO paper


def trading(n: int, days_ago: float = 3) -> Paper:
    return paper(
        n,
        f"GRPO for stock trading agents, study {n}",
        days_ago=days_ago,
        abstract="GRPO agents trade stock: stock trading with agents.",
        now=NOW,
    )


def aligned(n: int, days_ago: float = 3) -> Paper:
    return paper(
        n,
        f"GRPO for language model alignment, part {n}",
        days_ago=days_ago,
        abstract="Group-relative rewards improve the alignment of language models.",
        now=NOW,
    )


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    history = [trading(700 + n) for n in range(4)] + [aligned(600 + n) for n in range(4)]
    async with bot_session(tmp_path, papers=seed_papers(NOW) + history, clock=Clock(NOW)) as b:
        await b.poll()
        yield b
        check_traffic(b.fake)


def data_of(message: SentMessage, prefix: str) -> list[str]:
    return [d or "" for _, d in message.buttons if (d or "").startswith(prefix)]


async def dislike_trading(
    bot: Bot, count: int, chat_id: int = USER, **user: object
) -> list[list[SentMessage]]:
    """👍 two alignment papers (imported), then 👎 ``count`` trading papers from a /search
    list; returns what each 👎 made the bot send."""
    await bot.ask(chat_id, "/taste 2611.00001 2611.00002", **user)
    [listed] = await bot.ask(chat_id, '/search "stock trading"', **user)
    downs = [d for label, d in listed.buttons if label.startswith("👎") and d]
    assert len(downs) >= count
    sent = []
    for data in downs[:count]:
        messages, answer = await bot.press(chat_id, listed, data, **user)
        assert answer["text"].startswith("👎 Noted")
        sent.append(messages)
    return sent


def offers(messages: list[SentMessage]) -> list[SentMessage]:
    return [m for m in messages if "Leave out papers about" in (m.text or "")]


async def offered(bot: Bot, chat_id: int = USER, **user: object) -> SentMessage:
    """The offer the third 👎 brings (the first two bring none)."""
    first, second, third = await dislike_trading(bot, 3, chat_id, **user)
    assert not offers(first) and not offers(second)
    [offer] = offers(third)
    return offer


def links_in(message: SentMessage) -> str:
    return message.text or ""


# ---------------------------------------------------------------------------------- the offer
async def test_the_third_shared_dislike_offers_once(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    offer = await offered(bot)
    text = offer.text or ""
    # "stock" and "trade" are in every 👎 and no 👍; "agents" is the topic's own ("search
    # agent"*); GRPO is its query: the tie goes to the first stem
    assert "Leave out papers about <b>stock</b> from <b>RL for Language Models</b>?" in text
    assert "3 of your 👎 there mention it" in text
    [accept] = data_of(offer, "lo:")
    [no] = data_of(offer, "ln:")
    assert [label for label, _ in offer.buttons] == ["✂️ Leave out stock", "No thanks"]
    assert accept.split(":")[1] == no.split(":")[1]
    # the 4th 👎 brings no offer (one per three 👎 in a topic), nor does a restart
    await bot.restart()
    [listed] = await bot.ask(USER, '/search "stock trading"')
    downs = [d for label, d in listed.buttons if label.startswith("👎") and d]
    rated = await bot.store.ratings_for(USER, [int(d.split(":")[1]) for d in downs])
    fourth = next(d for d in downs if int(d.split(":")[1]) not in rated)
    sent, _ = await bot.press(USER, listed, fourth)
    assert not offers(sent)
    assert len(await bot.store.refinements(USER)) == 1


async def test_no_offer_when_the_likes_use_the_word(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    await bot.ask(USER, "/taste 2611.00703")  # a liked trading paper: its words are wanted
    sent = await dislike_trading(bot, 3)
    assert not any(offers(m) for m in sent)
    assert await bot.store.refinements(USER) == []


async def test_no_thanks_is_never_asked_again(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    offer = await offered(bot)
    [no] = data_of(offer, "ln:")
    _, answer = await bot.press(USER, offer, no)
    assert answer["text"] == "OK"
    shown = bot.fake.message(USER, offer.message_id)
    assert shown is not None and "won't offer to leave out stock" in shown["text"]
    assert not shown.get("reply_markup")
    [x] = await bot.store.refinements(USER)
    assert x.state == "declined"
    # stale: the old buttons, pressed again (a second client's copy), have expired
    for data in (no, *data_of(offer, "lo:")):
        _, answer = await bot.press(USER, offer, data, forged=True)
        assert answer["text"] == callbacks.EXPIRED
    assert (await bot.store.refinements(USER))[0].state == "declined"


# -------------------------------------------------------------------------- a catalogue topic
async def test_leaving_out_keeps_such_papers_out_of_alerts_and_undo(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    offer = await offered(bot)
    [accept] = data_of(offer, "lo:")
    _, answer = await bot.press(USER, offer, accept)
    assert answer["text"] == "Left out: stock"
    done = bot.fake.message(USER, offer.message_id)
    assert done is not None and "Left out papers about stock" in done["text"]
    [[undo]] = done["reply_markup"]["inline_keyboard"]
    assert undo["text"] == "↩️ Undo" and undo["callback_data"].startswith("lu:")
    # the next round: the stock paper is left out, the other one arrives
    bot.arxiv.add(trading(801, 0.2), aligned(802, 0.2))
    await bot.poll_and_deliver()
    alert = bot.fake.messages_to(USER)[-1]
    assert "2611.00802" in links_in(alert) and "2611.00801" not in links_in(alert)
    assert await bot.store.outbox_counts() == {} and await owed(bot.store, USER) == []
    # /list counts the topic as the chat sees it, and says so
    [listing] = await bot.ask(USER, "/list")
    assert "RL for Language Models (without stock)" in (listing.text or "")
    # ↩️ Undo: papers about it are back
    _, answer = await bot.press(USER, offer, undo["callback_data"], forged=True)
    assert answer["text"] == "Back: stock"
    back = bot.fake.message(USER, offer.message_id)
    assert back is not None and "are back in RL for Language Models" in back["text"]
    bot.arxiv.add(trading(803, 0.1))
    await bot.poll_and_deliver()
    assert "2611.00803" in links_in(bot.fake.messages_to(USER)[-1])
    # undone once: its button has expired
    _, answer = await bot.press(USER, offer, undo["callback_data"], forged=True)
    assert answer["text"] == callbacks.EXPIRED


async def test_another_topic_still_brings_a_left_out_paper(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    await bot.ask(USER, f"/follow {ALL_RL}")
    offer = await offered(bot)
    await bot.press(USER, offer, data_of(offer, "lo:")[0])
    bot.arxiv.add(trading(811, 0.2))
    await bot.poll_and_deliver()
    alert = bot.fake.messages_to(USER)[-1]
    text = links_in(alert)
    assert "2611.00811" in text
    # it came through Reinforcement Learning: that is the topic it is tagged with, in bold
    assert "<b>#Reinforcement Learning</b>" in text and "<b>#RL for Language Models</b>" not in text


async def test_digests_leave_such_papers_out_while_another_topic_brings_them(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    await bot.ask(USER, "/digest daily 10:00")
    offer = await offered(bot)
    await bot.press(USER, offer, data_of(offer, "lo:")[0])
    bot.arxiv.add(trading(821, 0.3), aligned(822, 0.3))
    await bot.poll()
    bot.clock.advance(hours=2)
    await bot.deliver()
    digest = bot.fake.messages_to(USER)[-1]
    assert "Your daily digest" in (digest.text or "")
    assert "2611.00822" in links_in(digest) and "2611.00821" not in links_in(digest)
    # the next day the chat follows Reinforcement Learning too: its stock paper arrives there
    await bot.ask(USER, f"/follow {ALL_RL}")
    bot.arxiv.add(trading(823, 0.1), aligned(824, 0.1))
    await bot.poll()
    bot.clock.advance(days=1)
    await bot.deliver()
    digest = bot.fake.messages_to(USER)[-1]
    # each paper under the first of the chat's topics that has it in view
    sections = dict(part.split("</b>", 1) for part in links_in(digest).split("new in ")[1:])
    assert set(sections) == {RL, ALL_RL}
    assert "2611.00824" in sections[RL] and "2611.00823" not in sections[RL]
    assert "2611.00823" in sections[ALL_RL]


async def test_taste_lists_what_is_left_out_and_puts_it_back(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    offer = await offered(bot)
    await bot.press(USER, offer, data_of(offer, "lo:")[0])
    page = await bot.say(USER, "/taste")
    assert "✂️ Left out of <b>RL for Language Models</b>: stock" in (page.text or "")
    [remove] = data_of(page, "lr:")
    assert ("✖ stock (RL for Language Models)", remove) in page.buttons
    _, answer = await bot.press(USER, page, remove)
    assert answer["text"] == "Back: stock"
    redrawn = bot.fake.message(USER, page.message_id)
    assert redrawn is not None and "Left out" not in redrawn["text"]
    assert [x.state for x in await bot.store.refinements(USER)] == ["restored"]
    _, answer = await bot.press(USER, page, remove, forged=True)
    assert answer["text"] == callbacks.EXPIRED


# ----------------------------------------------------------------------------- a custom query
async def test_a_custom_query_gains_not_word_and_loses_it_again(bot: Bot) -> None:
    await bot.ask(USER, "/follow GRPO or rlhf")
    offer = await offered(bot)
    # "agents" is no word of this query; it ties with stock and trade, and comes first
    assert "Leave out papers about <b>agents</b> from <b>GRPO or rlhf</b>?" in (offer.text or "")
    _, answer = await bot.press(USER, offer, data_of(offer, "lo:")[0])
    assert answer["text"] == "Left out: agents"
    refined = "(grpo OR rlhf) NOT agents"
    assert await bot.subscriptions(USER) == [refined]  # (named by the query itself now)
    [sub] = await bot.store.subscriptions(USER)
    assert sub.topic.query == refined and sub.topic.is_custom
    done = bot.fake.message(USER, offer.message_id)
    assert done is not None and f"Now following {refined}" in done["text"]
    bot.arxiv.add(trading(831, 0.2), aligned(832, 0.2))
    await bot.poll_and_deliver()
    alert = bot.fake.messages_to(USER)[-1]
    assert "2611.00832" in links_in(alert) and "2611.00831" not in links_in(alert)
    [listing] = await bot.ask(USER, "/list")
    assert refined in (listing.text or "")
    # /taste's ✖ takes it out of the query again
    page = await bot.say(USER, "/taste")
    assert f"✂️ Left out of <b>{refined}</b>: agents" in (page.text or "")
    await bot.press(USER, page, data_of(page, "lr:")[0])
    assert await bot.subscriptions(USER) == ["grpo OR rlhf"]
    bot.arxiv.add(trading(833, 0.1))
    await bot.poll_and_deliver()
    assert "2611.00833" in links_in(bot.fake.messages_to(USER)[-1])


# --------------------------------------------------------------------------- groups, forgery
GROUP, ADMIN_ID, MEMBER_ID = -4001, 777, 888


async def test_in_a_group_only_admins_accept(bot: Bot) -> None:
    bot.fake.set_chat_admins(GROUP, {ADMIN_ID})
    admin = {"user_id": ADMIN_ID, "username": "ann"}
    member = {"user_id": MEMBER_ID, "username": "bob"}
    await bot.ask(GROUP, f"/follow {RL}", **admin)
    offer = await offered(bot, GROUP, **admin)  # (any member's 👎 count for the group)
    [accept] = data_of(offer, "lo:")
    for data in (accept, *data_of(offer, "ln:")):
        _, answer = await bot.press(GROUP, offer, data, **member)
        assert answer["text"] == NOT_ADMIN and answer["show_alert"]
    assert (await bot.store.refinements(GROUP))[0].state == "offered"
    _, answer = await bot.press(GROUP, offer, accept, **admin)
    assert answer["text"] == "Left out: stock"
    assert (await bot.store.refinements(GROUP))[0].state == "left_out"


async def test_forged_refining_buttons_have_expired(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    offer = await offered(bot)
    [accept] = data_of(offer, "lo:")
    own = int(accept.split(":")[1])
    other = -4002  # another chat's offer cannot be taken from this one
    for forged in (f"lo:{own + 1}", f"lu:{own}", f"lr:{own}", "lo:0", "lo:x", f"lo:{own}:1"):
        _, answer = await bot.press(USER, offer, forged, forged=True)
        assert answer["text"] == callbacks.EXPIRED, forged
    _, answer = await bot.press(other, offer, accept, forged=True)
    assert answer["text"] == callbacks.EXPIRED
    # unfollowed meanwhile: the offer is stale
    await bot.ask(USER, f"/unfollow {RL}")
    _, answer = await bot.press(USER, offer, accept)
    assert answer["text"] == callbacks.EXPIRED
    assert (await bot.store.refinements(USER))[0].state == "offered"
