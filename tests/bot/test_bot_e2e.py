"""End-to-end tests: the real Application against the fake Bot API and the fake arXiv.

Every test builds the bot with ``build_application`` on its own database file, talks to it the
way Telegram would (``FakeTelegram.user_sends`` / ``user_presses``), triggers ingestion rounds
and delivery passes explicitly, and checks the exact messages the fake received. The periodic
poll job is pushed an hour out (``poll_first``) so nothing happens on a timer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot_harness import (
    ADMIN,
    RL,
    USER,
    Bot,
    Clock,
    bot_session,
    check_traffic,
    links,
    paper,
    seed_papers,
    topic_id,
)
from fake_arxiv import FakeArxiv
from fake_telegram import FakeTelegram, SentMessage
from owed import owed, owed_total
from topicpulse.bot import common, following, handlers
from topicpulse.config import load_settings
from topicpulse.delivery import chats
from topicpulse.delivery.formatting import esc
from topicpulse.topics.catalogue import load_catalogue

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["polling", "webhook"])
async def bot(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Bot]:
    """A running bot whose store already holds the seed papers (one poll); every test that
    uses it runs twice, with updates by long polling and by webhook."""
    async with bot_session(tmp_path, papers=seed_papers(), transport=request.param) as running_bot:
        await running_bot.poll()
        yield running_bot
        check_traffic(running_bot.fake)


def test_catalogue_has_the_topic_the_tests_use() -> None:
    assert RL in [entry.name for entry in load_catalogue()]


# ---------------------------------------------------------------------------------- commands
async def test_start_and_help(bot: Bot) -> None:
    welcome = await bot.say(USER, "/start")
    assert welcome.text is not None and welcome.text.startswith("👋 <b>topicpulse</b>")
    examples = re.findall(r"<code>(/\w+ [^<]+)</code>", welcome.text)
    assert examples == [
        "/follow RL for Language Models",
        "/follow grpo AND (math OR reasoning)",
        "/momentum Reward Modeling",
        "/ask RL for Language Models: how do people stop reward hacking?",
    ]
    helped = await bot.say(USER, "/help")
    assert helped.text == handlers.HELP
    assert helped.link_preview_disabled
    chat = await bot.store.chat(USER)
    assert chat is not None and chat.active and chat.type == "private"
    # A deep link (t.me/<bot>?start=follow_<slug>) follows a catalogue topic.
    linked = await bot.say(USER, "/start follow_rl_for_language_models")
    assert linked.text is not None and linked.text.startswith(f"✅ Now following <b>{RL}</b>")
    assert await bot.subscriptions(USER) == [RL]


async def test_follow_catalogue_topic_shows_preview_and_undo_unfollows(bot: Bot) -> None:
    rl_id = await topic_id(bot.store, RL)
    msg = await bot.say(USER, f"/follow {RL}")
    assert msg.text is not None
    lines = msg.text.split("\n")
    assert lines[0] == f"✅ Now following <b>{RL}</b>"
    assert lines[1] == "5 papers in the last 4 weeks. Latest:"
    assert links(msg) == ["2611.00001", "2611.00002", "2611.00003"]
    assert lines[-1] == "New papers will reach this chat once each."
    assert len(lines) == 6
    assert msg.buttons == [("↩️ Undo", f"u:{rl_id}")]
    assert await bot.subscriptions(USER) == [RL]

    again = await bot.say(USER, "/follow rl-for-language-models")  # the slug
    assert again.text is not None and again.text.startswith(f"✅ Already following <b>{RL}</b>")
    assert again.buttons == []  # nothing to undo
    assert await bot.subscriptions(USER) == [RL]

    edits, answer = await bot.press(USER, msg, f"u:{rl_id}")
    assert [(m.method, m.message_id, m.text) for m in edits] == [
        ("editMessageText", msg.message_id, f"Unfollowed <b>{RL}</b>.")
    ]
    assert answer["text"] == f"Unfollowed {RL}"
    assert await bot.subscriptions(USER) == []


async def test_follow_custom_query_and_its_spellings(bot: Bot) -> None:
    msg = await bot.say(USER, "/follow grpo AND reasoning")
    assert msg.text is not None
    custom = await bot.store.topics(kind="custom")
    assert [t.name for t in custom] == ["grpo reasoning"]  # shared: named by the canonical query
    assert msg.text.split("\n")[:3] == [
        "✅ Now following <b>grpo AND reasoning</b>",  # as this chat wrote it
        "Query: <code>grpo reasoning</code>",
        "3 papers in the last 4 weeks. Latest:",
    ]
    assert links(msg) == ["2611.00001", "2611.00002", "2611.00003"]

    # Another chat writing the same query shares the topic but sees its own spelling, and can
    # unfollow it by that spelling.
    other = 2002
    shared = await bot.say(other, '/follow "GRPO" reasoning')
    assert shared.text is not None
    assert shared.text.startswith("✅ Now following <b>&quot;GRPO&quot; reasoning</b>")
    assert len(await bot.store.topics(kind="custom")) == 1
    gone = await bot.say(other, '/unfollow "GRPO" reasoning')
    assert gone.text == "Unfollowed <b>&quot;GRPO&quot; reasoning</b>."
    assert await bot.subscriptions(other) == []
    assert await bot.subscriptions(USER) == ["grpo AND reasoning"]

    # Invisible characters never get in: a right-to-left override, NUL and escape codes are
    # stripped at the edge, and no chat ever sees another chat's spelling.
    third = 2003
    sneaky = await bot.say(third, "/follow \u202egrpo\x00 AND \x1b[31mreasoning")
    assert sneaky.text is not None
    assert sneaky.text.startswith("✅ Now following <b>grpo AND [31mreasoning</b>")
    assert not any(ch in sneaky.text for ch in "\u202e\x00\x1b")
    listed = await bot.say(USER, "/list")
    assert listed.text is not None and "\u202e" not in listed.text and "[31m" not in listed.text


async def test_bad_input_gets_one_line_and_changes_nothing(bot: Bot) -> None:
    bad = await bot.say(USER, "/follow (grpo")
    assert bad.plain_text == (
        'Could not read that query: unbalanced parenthesis at position 0: add a ")" or remove '
        'the "("'
    )
    long_query = "/follow " + "x" * 301
    too_long = await bot.say(USER, long_query)
    assert too_long.text == "That topic name or query is 301 characters; the limit is 300."
    too_long_search = await bot.say(USER, "/search " + "y" * 301)
    assert too_long_search.text == "That query is 301 characters; the limit is 300."
    empty = await bot.say(USER, "/follow")
    assert empty.text == (
        "Follow what? E.g. <code>/follow RL for Language Models</code> or "
        "<code>/follow grpo AND reasoning</code>. Browse with /topics."
    )
    for message in (bad, too_long, too_long_search, empty):
        assert "\n" not in (message.text or "")
    assert await bot.store.subscriptions(USER) == []
    assert await bot.store.topics(kind="custom") == []


async def test_momentum_of_a_topic_and_of_followed_topics(bot: Bot) -> None:
    nothing = await bot.say(USER, "/momentum")
    assert nothing.text == (
        "Follow a topic first, or ask about one: <code>/momentum RL for Language Models</code>."
    )
    text, photo = await bot.ask(USER, f"/momentum {RL}")
    assert text.method == "sendMessage" and photo.method == "sendPhoto"
    assert text.text is not None
    assert text.text.split("\n")[:2] == [
        f"📊 <b>{RL}</b>",
        "5 papers in the last four weeks, up 150% on the four weeks before. 71% of all new papers.",
    ]
    assert text.text.split("\n")[2].startswith("7 papers in all · 12 weeks: ")
    assert photo.photo_bytes is not None and photo.photo_bytes.startswith(b"\x89PNG")
    assert photo.text == f"{RL} — 12 weeks"

    unknown = await bot.say(USER, "/momentum Quantum Basket Weaving")
    assert unknown.text is not None and unknown.text.startswith(
        "No topic called “Quantum Basket Weaving”."
    )

    await bot.ask(USER, f"/follow {RL}")
    await bot.ask(USER, "/follow grpo AND reasoning")
    ranked = await bot.say(USER, "/momentum")
    assert ranked.text is not None
    lines = ranked.text.split("\n")
    assert lines[0] == "<b>Your topics, rising first</b> (papers in 4 weeks, change):"
    assert [line.split(" ", 1)[1] for line in lines[1:]] == [
        f"<b>{RL}</b>: 5 (+150%)",
        "<b>grpo AND reasoning</b>: 3 (new)",
    ]


WINTER = datetime(2027, 1, 12, 5, 0, tzinfo=UTC)  # a Tuesday; Berlin is UTC+1
DIGEST_USAGE = "Use /digest instant, /digest daily 08:00 or /digest weekly 08:00 mon."


async def test_digest_timezone_and_settings(tmp_path: Path) -> None:
    async with bot_session(tmp_path, clock=Clock(WINTER)) as bot:
        daily = await bot.say(USER, "/digest daily 08:00")
        assert daily.text == "Delivery: <b>daily digest at 08:00 UTC</b>."
        zone = await bot.say(USER, "/timezone Europe/Berlin")
        assert zone.text == (
            "Time zone set to <b>Europe/Berlin</b> (daily digest at 08:00 Europe/Berlin)."
        )
        expected_settings = (
            "<b>Settings</b>\n"
            "Delivery: daily digest at 08:00 Europe/Berlin\n"
            "Next digest: Tue 12 Jan 08:00 (Europe/Berlin)\n"
            "Time zone: Europe/Berlin\n"
            "Alerts: on · Spike alerts: on\n"
            "Topics followed: 0/50"
        )
        shown = await bot.say(USER, "/settings")
        assert shown.text == expected_settings

        for bad in ("Mars/Base", "Europe", "Europe/", "posix/Europe/Berlin", "x" * 80):
            error = await bot.say(USER, f"/timezone {bad}")
            assert error.plain_text is not None
            assert error.plain_text.startswith("Unknown time zone “")
            assert error.plain_text.endswith(
                "”. Use an IANA name such as Europe/Berlin or America/New_York."
            )
        missing = await bot.say(USER, "/timezone")
        assert missing.text == "Which time zone? E.g. <code>/timezone Europe/Berlin</code>."
        for bad, answer in [
            ("/digest hourly", DIGEST_USAGE),
            ("/digest daily 25:00", "“25:00” is not a time. Use 24-hour HH:MM, e.g. 08:00."),
            ("/digest daily fri", "Daily digests have no weekday; e.g. /digest weekly 08:00 mon."),
            ("/digest daily 08:00 09:00", DIGEST_USAGE),
            ("/digest instant 08:00", DIGEST_USAGE),
        ]:
            assert (await bot.say(USER, bad)).plain_text == answer, bad
        assert (await bot.say(USER, "/settings")).text == expected_settings  # unchanged

        fixed = await bot.say(USER, "/timezone america/new_york")  # case fixed up
        assert fixed.text == (
            "Time zone set to <b>America/New_York</b> (daily digest at 08:00 America/New_York)."
        )
        chat = await bot.store.chat(USER)
        assert chat is not None and chat.next_digest_at == "2027-01-12T13:00:00Z"
        weekly = await bot.say(USER, "/digest weekly 9:30 Friday")
        assert weekly.text == "Delivery: <b>weekly digest, Fri 09:30 America/New_York</b>."
        chat = await bot.store.chat(USER)
        assert chat is not None and chat.next_digest_at == "2027-01-15T14:30:00Z"
        instant = await bot.say(USER, "/digest instant")
        assert instant.text == "Delivery: <b>instant alerts</b>."
        chat = await bot.store.chat(USER)
        assert chat is not None and chat.mode == "instant" and chat.next_digest_at is None
        check_traffic(bot.fake)


async def test_unfollow_and_list_buttons(bot: Bot) -> None:
    empty = await bot.say(USER, "/list")
    assert empty.text == (
        "This chat follows no topics yet. Try /topics or "
        "<code>/follow RL for Language Models</code>."
    )
    assert empty.buttons == []
    await bot.ask(USER, "/follow grpo AND reasoning")
    await bot.ask(USER, f"/follow {RL}")
    rl_id = await topic_id(bot.store, RL)
    custom_id = await topic_id(bot.store, "grpo reasoning")  # the shared topic's canonical name
    listed = await bot.say(USER, "/list")
    assert listed.text is not None
    lines = listed.text.split("\n")
    assert lines[0] == "<b>Following 2 topics</b> · instant alerts"
    assert [line.split(" ", 1)[1] for line in lines[1:]] == [
        "<b>grpo AND reasoning</b>: 3 (new)",
        f"<b>{RL}</b>: 5 (+150%)",
    ]
    assert listed.buttons == [
        ("✖ grpo AND reasoning", f"ul:{custom_id}"),
        (f"✖ {RL}", f"ul:{rl_id}"),
    ]
    bare = await bot.say(USER, "/unfollow")  # without a name: the list, to tap
    assert (bare.text, bare.buttons) == (listed.text, listed.buttons)

    edits, answer = await bot.press(USER, listed, f"ul:{custom_id}")
    assert answer["text"] == "Unfollowed grpo AND reasoning"
    assert len(edits) == 1 and edits[0].method == "editMessageText"
    assert edits[0].message_id == listed.message_id
    assert edits[0].text is not None
    assert edits[0].text.split("\n")[0] == "<b>Following 1 topic</b> · instant alerts"
    assert edits[0].buttons == [(f"✖ {RL}", f"ul:{rl_id}")]
    assert await bot.subscriptions(USER) == [RL]
    # A second tap on the stale button changes nothing and is no error: the message no longer
    # offers that button.
    edits, answer = await bot.press(USER, listed, f"ul:{custom_id}")
    assert edits == [] and answer["text"] == "This button has expired."

    gone = await bot.say(USER, f"/unfollow {RL.lower()}")
    assert gone.text == f"Unfollowed <b>{RL}</b>."
    assert await bot.subscriptions(USER) == []
    again = await bot.say(USER, f"/unfollow {RL}")
    assert again.plain_text == f"This chat does not follow “{RL}”. See /list."
    unknown = await bot.say(USER, "/unfollow Quantum Basket Weaving")
    assert unknown.plain_text is not None
    assert unknown.plain_text.startswith("No topic called “Quantum Basket Weaving”.")
    assert (await bot.say(USER, "/list")).text == empty.text


async def test_topics_pages_and_follow_button(bot: Bot) -> None:
    catalogue = sorted(await bot.store.topics(kind="catalogue"), key=lambda t: t.name.casefold())
    per_page = handlers.TOPICS_PER_PAGE
    assert len(catalogue) > 2 * per_page, "the catalogue should fill three pages"
    pages = -(-len(catalogue) // per_page)
    first = await bot.say(USER, "/topics")
    assert first.text is not None
    lines = first.text.split("\n")
    assert lines[0] == f"<b>Topics</b> (page 1/{pages}) — tap to follow:"
    assert len(lines) == 1 + per_page
    assert first.buttons == [
        *[(f"➕ {t.name}", f"f:{t.id}") for t in catalogue[:per_page]],
        ("Next ▶", "tp:1"),
    ]

    edits, _ = await bot.press(USER, first, "tp:1")
    assert len(edits) == 1
    second = edits[0]
    assert (second.method, second.message_id) == ("editMessageText", first.message_id)
    assert second.text is not None
    assert second.text.startswith(f"<b>Topics</b> (page 2/{pages})")
    assert second.buttons == [
        *[(f"➕ {t.name}", f"f:{t.id}") for t in catalogue[per_page : 2 * per_page]],
        ("◀ Prev", "tp:0"),
        ("Next ▶", "tp:2"),
    ]
    edits, _ = await bot.press(USER, first, "tp:1")  # a double tap: no change, no error
    assert edits == []

    pick = catalogue[per_page]
    sent, answer = await bot.press(USER, second, f"f:{pick.id}")
    assert answer["text"] == f"Following {pick.name}"
    assert len(sent) == 1 and sent[0].method == "sendMessage"
    assert sent[0].text is not None
    assert sent[0].text.startswith(f"✅ Now following <b>{esc(pick.name)}</b>")
    assert await bot.subscriptions(USER) == [pick.name]
    sent, answer = await bot.press(USER, second, f"f:{pick.id}")
    assert answer["text"] == "Already following"

    rl = next(t for t in catalogue if t.name == RL)
    filtered = await bot.say(USER, f"/topics {rl.slug}")
    assert filtered.text is not None
    assert filtered.text.split("\n") == [
        f"<b>Topics</b> matching “{rl.slug}” (page 1/1) — tap to follow:",
        f"• <b>{RL}</b> — {esc(rl.description)}",
    ]
    assert filtered.buttons == [(f"➕ {RL}", f"f:{rl.id}")]
    none = await bot.say(USER, "/topics zzzzqqq")
    assert none.text == "No catalogue topic matches “zzzzqqq”. Try /topics without words."
    assert none.buttons == []


async def test_latest_search_and_trending(bot: Bot) -> None:
    trending = await bot.say(USER, "/trending")
    assert trending.text is not None
    lines = trending.text.split("\n")
    assert lines[0] == "📈 <b>Trending topics</b> (papers in 4 weeks, change):"
    assert any(line.endswith(f"<b>{RL}</b>: 5 (+150%)") for line in lines[1:])

    latest = await bot.say(USER, f"/latest {RL} 3")
    assert latest.text is not None
    assert latest.text.split("\n")[0] == f"🗞 <b>Latest in {RL}</b>"
    assert links(latest) == ["2611.00001", "2611.00002", "2611.00003"]
    assert latest.text.count("\n   #") == 3  # each paper's catalogue topics
    assert links(await bot.say(USER, f"/latest {RL}")) == [f"2611.0000{n}" for n in range(1, 6)]
    missing = await bot.say(USER, "/latest")
    assert missing.text == "Which topic? E.g. <code>/latest Reward Modeling 5</code>."

    bot.arxiv.add(
        paper(20, "Verifiable rewards for theorem proving", days_ago=6),
        paper(21, "Theorem proving at scale", days_ago=1, abstract="We use verifiable rewards."),
    )
    await bot.poll()
    found = await bot.say(USER, "/search verifiable rewards")
    assert found.text is not None
    assert found.text.split("\n")[0] == (
        "🔎 <b>2 papers</b> match <code>verifiable rewards</code>; best 2:"
    )
    assert links(found) == ["2611.00020", "2611.00021"]  # the title match ranks first
    nothing = await bot.say(USER, "/search zzzzqqq")
    assert nothing.text == "No stored paper matches <code>zzzzqqq</code>."
    what = await bot.say(USER, "/search")
    assert what.text == 'Search for what? E.g. <code>/search "reward model" AND ti:math</code>.'
    broken = await bot.say(USER, "/search reward AND")
    assert broken.plain_text is not None
    assert broken.plain_text.startswith("Could not read that query: ")


async def test_pause_resume_and_spikes(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    paused = await bot.say(USER, "/pause")
    assert paused.text == "⏸ Paused: no alerts until /resume."
    chat = await bot.store.chat(USER)
    assert chat is not None and chat.paused
    bot.arxiv.add(paper(30, "GRPO while you were away"))
    await bot.poll_and_deliver()
    listed = await bot.say(USER, "/list")
    assert listed.text is not None and listed.text.split("\n")[0].endswith(" · ⏸ paused")

    resumed = await bot.say(USER, "/resume")
    assert resumed.text == "▶️ Resumed: new papers will arrive again."
    bot.arxiv.add(paper(31, "GRPO after the break"))
    before = len(bot.fake.messages_to(USER))
    await bot.poll_and_deliver()
    alerts = bot.fake.messages_to(USER)[before:]
    assert [links(m) for m in alerts] == [["2611.00031"]]  # papers of the pause are skipped

    off = await bot.say(USER, "/spikes off")
    assert off.text == "Spike alerts <b>off</b>."
    chat = await bot.store.chat(USER)
    assert chat is not None and not chat.spikes and not chat.paused
    usage = await bot.say(USER, "/spikes maybe")
    assert usage.text == "Use /spikes on or /spikes off."
    shown = await bot.say(USER, "/settings")
    assert shown.text is not None and "Alerts: on · Spike alerts: off" in shown.text
    on = await bot.say(USER, "/spikes ON")
    assert on.text == "Spike alerts <b>on</b>."


async def test_stats_only_for_admins(bot: Bot) -> None:
    refused = await bot.say(USER, "/stats")
    assert refused.text == "Sorry — /stats is for the bot's administrators."
    stats = await bot.say(ADMIN, "/stats")
    assert stats.text is not None
    lines = stats.text.split("\n")
    catalogue = len(await bot.store.topics(kind="catalogue"))
    assert lines[:5] == [
        "<b>topicpulse stats</b>",
        "Papers: 10",
        f"Topics: {catalogue} (0 custom)",
        "Chats: 2 active, 0 inactive · 0 subscriptions",
        "Queue: 0 pending, 0 sent, 0 dropped · 0 chats owed alerts",
    ]
    assert re.fullmatch(r"Last poll: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(ok, 10 new\)", lines[5])
    assert lines[6] == "Ingest errors (24 h): 0"


async def test_a_stored_query_the_parser_now_rejects_costs_only_that_topic(
    tmp_path: Path,
) -> None:
    """A custom topic left by an older version, whose query the parser now rejects: the round
    (matched in the worker process) matches it from its compiled form, queues every alert, goes
    on to spike detection, and /stats counts the topic."""
    other = 2002
    async with bot_session(tmp_path, papers=seed_papers()) as bot:
        await bot.poll()
        await bot.ask(USER, f"/follow {RL}")
        old = await bot.store.custom_topic(name="gr*", query="gr*", normalised="gr*", fts='"gr" *')
        await bot.store.ensure_chat(other)
        assert await bot.store.subscribe(other, old)
        bot.stop_delivery_worker()  # the alerts stay pending, to be counted
        bot.arxiv.add(paper(401, "GRPO for language model alignment, after an upgrade"))
        await bot.poll()
        assert await owed(bot.store, USER) == ["2611.00401"]
        assert await owed(bot.store, other) == ["2611.00401"]
        stats = await bot.say(ADMIN, "/stats")
        assert stats.text is not None
        assert "Stale queries (last round): 1 matched as compiled, 0 skipped" in (
            stats.text.split("\n")
        )
        check_traffic(bot.fake)


async def test_unknown_command_and_plain_text_get_a_hint(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    unknown = await bot.say(USER, "/frobnicate now")
    assert unknown.text == "I don't know that command. /help lists what I can do."
    plain = await bot.say(USER, "reward models please")
    assert plain.text == (
        "Send /follow followed by a topic or a query, e.g. "
        "<code>/follow RL for Language Models</code>. /help shows everything."
    )
    monkeypatch.setattr(common, "COMMAND_RATE", (2, 60.0))  # these count towards the limit
    too_fast = await bot.say(USER, "more text")
    assert too_fast.text == "You are sending commands too fast. Please wait a minute."


async def test_follow_cap(bot: Bot) -> None:
    words = " OR ".join(f"filler{n}" for n in range(12))
    await bot.store.ensure_chat(USER)
    for n in range(chats.MAX_FOLLOWS - 1):  # quicker than 49 commands (and the rate limit)
        await chats.follow(bot.store, USER, f"capword{n} OR {words}")
    last = await bot.say(USER, f"/follow capword49 OR {words}")
    assert last.text is not None and last.text.startswith("✅ Now following <b>capword49 OR")
    refused = await bot.say(USER, "/follow one more query")
    assert refused.text == (
        "This chat already follows 50 topics, the most allowed. Unfollow one first (/list)."
    )
    again = await bot.say(USER, f"/follow capword0 OR {words}")  # already followed: fine
    assert again.text is not None and again.text.startswith("✅ Already following")
    assert await bot.store.count_subscriptions(USER) == chats.MAX_FOLLOWS

    listed = await bot.ask(USER, "/list")  # too long for one message: split between lines
    assert len(listed) == 2
    assert listed[0].buttons == []
    assert len(listed[1].buttons) == chats.MAX_FOLLOWS
    body = "\n".join(m.text or "" for m in listed).split("\n")
    assert body[0] == "<b>Following 50 topics</b> · instant alerts"
    assert len(body) == 51
    ranked = await bot.ask(USER, "/momentum")
    assert len(ranked) == 2


async def test_per_user_command_rate_limit(bot: Bot) -> None:
    for _ in range(common.COMMAND_RATE[0]):
        assert (await bot.say(USER, "/help")).text == handlers.HELP
    slow_down = await bot.say(USER, "/help")
    assert slow_down.text == "You are sending commands too fast. Please wait a minute."
    assert await bot.ask(USER, f"/follow {RL}") == []  # told once; then ignored for a while
    assert await bot.store.subscriptions(USER) == []
    assert (await bot.say(USER + 1, "/help")).text == handlers.HELP  # others are not limited


# ---------------------------------------------------------------------------------- alerts
def block_of(message: SentMessage, arxiv_id: str) -> str:
    """The part of an alert message about one paper."""
    assert message.text is not None
    blocks = [b for b in message.text.split("\n\n") if f"abs/{arxiv_id}" in b]
    assert len(blocks) == 1, message.text
    return blocks[0]


async def test_new_papers_alert_each_chat_exactly_once(bot: Bot) -> None:
    other, bystander = 2002, 3003
    await bot.ask(USER, f"/follow {RL}")
    await bot.ask(USER, "/follow grpo AND reasoning")
    await bot.ask(other, "/follow grpo AND reasoning")
    await bot.ask(bystander, "/follow protein AND folding")
    before = {c: len(bot.fake.messages_to(c)) for c in (USER, other, bystander)}

    bot.arxiv.add(
        paper(101, "GRPO sharpens reasoning in small language models"),  # both topics
        paper(102, "GRPO fine-tuning for helpful assistants"),  # the catalogue topic only
        paper(103, "Graph transformers for molecules", categories=["cs.LG"]),  # nothing followed
        paper(  # cross-listed in three polled categories: still one paper, one alert
            104,
            "Process rewards and GRPO for reasoning",
            categories=["cs.LG", "cs.CL", "stat.ML"],
        ),
    )
    await bot.poll_and_deliver()

    def new(chat: int) -> list[SentMessage]:
        return bot.fake.messages_to(chat)[before[chat] :]

    [alert] = new(USER)
    assert alert.text is not None and alert.text.startswith("🆕 <b>3 new papers</b>\n\n")
    assert sorted(links(alert)) == ["2611.00101", "2611.00102", "2611.00104"]
    for arxiv_id in ("2611.00101", "2611.00104"):
        followed, others = tag_line(block_of(alert, arxiv_id))
        assert sorted(followed) == [f"#{RL}", "#grpo AND reasoning"]
        assert "#Group Relative Policy Optimization" in others  # every catalogue tag, after
    assert tag_line(block_of(alert, "2611.00102"))[0] == [f"#{RL}"]
    assert alert.link_preview_disabled  # several papers: no preview
    [alert] = new(other)
    assert alert.text is not None and alert.text.startswith("🆕 <b>2 new papers</b>\n\n")
    assert sorted(links(alert)) == ["2611.00101", "2611.00104"]
    followed, others = tag_line(block_of(alert, "2611.00101"))
    assert followed == ["#grpo AND reasoning"] and f"#{RL}" in others  # not followed here
    assert new(bystander) == []

    # A new version of an alerted paper, and a round that finds nothing new: no messages.
    bot.arxiv.add(paper(101, "GRPO sharpens reasoning in small language models (v2)", version=2))
    await bot.poll_and_deliver()
    await bot.poll_and_deliver()
    stored = await bot.store.get_paper("2611.00101")
    assert stored is not None and stored.version == 2
    assert [len(new(c)) for c in (USER, other, bystander)] == [1, 1, 0]

    # One paper alone: no header, and the link preview is on.
    bot.arxiv.add(paper(105, "GRPO from human preferences"))
    await bot.poll_and_deliver()
    single = new(USER)[-1]
    assert links(single) == ["2611.00105"]
    assert single.text is not None and single.text.startswith("<b><a href=")
    assert not single.link_preview_disabled
    assert [len(new(c)) for c in (USER, other, bystander)] == [2, 1, 0]
    assert await owed_total(bot.store) == 0
    assert await bot.store.outbox_counts() == {}  # alerts leave no rows: the watermark moved


async def test_restart_resends_nothing_and_delivers_what_was_pending(tmp_path: Path) -> None:
    other = 2002
    async with bot_session(tmp_path, papers=seed_papers()) as bot:
        await bot.poll()
        await bot.ask(USER, f"/follow {RL}")
        await bot.ask(other, f"/follow {RL}")
        bot.stop_delivery_worker()  # no background delivery: this test says when to deliver
        bot.arxiv.add(paper(201, "GRPO before the restart"))
        bot.fake.fail_next("sendMessage", status=502, description="Bad Gateway", chat_id=other)
        await bot.poll_and_deliver()
        assert [links(m) for m in bot.fake.messages_to(USER)[1:]] == [["2611.00201"]]
        assert bot.fake.messages_to(other)[1:] == []  # the send failed: still pending
        assert await bot.store.outbox_counts() == {"pending": 1}  # the failed alert's paper
        assert await owed(bot.store, other) == ["2611.00201"] and await owed(bot.store, USER) == []

        await bot.restart()  # a new Application on the same database file
        await bot.deliver()
        await bot.poll_and_deliver()
        assert [links(m) for m in bot.fake.messages_to(USER)[1:]] == [["2611.00201"]]
        assert [links(m) for m in bot.fake.messages_to(other)[1:]] == [["2611.00201"]]

        bot.arxiv.add(paper(202, "GRPO after the restart"))
        await bot.poll_and_deliver()
        assert [links(m) for m in bot.fake.messages_to(USER)[1:]] == [
            ["2611.00201"],
            ["2611.00202"],
        ]
        assert [links(m) for m in bot.fake.messages_to(other)[1:]] == [
            ["2611.00201"],
            ["2611.00202"],
        ]
        assert await bot.store.outbox_counts() == {"sent": 1}  # the retried row
        assert await owed_total(bot.store) == 0
        check_traffic(bot.fake)


async def test_blocked_chat_is_deactivated_until_it_starts_again(bot: Bot) -> None:
    other = 2002
    await bot.ask(USER, f"/follow {RL}")
    await bot.ask(other, f"/follow {RL}")
    bot.fake.block_chat(USER)
    bot.arxiv.add(paper(301, "GRPO for the blocked"))
    await bot.poll_and_deliver()
    chat = await bot.store.chat(USER)
    assert chat is not None and not chat.active
    assert [c.result for c in bot.fake.calls_to("sendMessage") if c.params["chat_id"] == USER][
        -1
    ] == 403
    assert len(bot.fake.messages_to(USER)) == 1  # only the follow confirmation
    assert [links(m) for m in bot.fake.messages_to(other)[1:]] == [["2611.00301"]]
    assert await bot.store.outbox_counts() == {"dropped": 1}  # the blocked chat's paper

    bot.arxiv.add(paper(302, "GRPO while blocked"))
    await bot.poll_and_deliver()  # an inactive chat gets nothing queued
    assert await bot.store.outbox_counts() == {"dropped": 1}
    assert await owed(bot.store, USER) == []

    bot.fake.unblock_chat(USER)
    welcome = await bot.say(USER, "/start")
    assert welcome.text is not None and welcome.text.startswith("👋")
    chat = await bot.store.chat(USER)
    assert chat is not None and chat.active
    assert await bot.subscriptions(USER) == [RL]
    bot.arxiv.add(paper(303, "GRPO welcome back"))
    await bot.poll_and_deliver()
    assert [links(m) for m in bot.fake.messages_to(USER)[2:]] == [["2611.00303"]]


async def test_group_migrated_to_supergroup_gets_alerts_at_the_new_id(bot: Bot) -> None:
    group, supergroup, admin = -4001, -1004001, 777
    bot.fake.set_chat_admins(group, {admin})
    followed = await bot.say(group, f"/follow {RL}", user_id=admin, username="ann")
    assert followed.text is not None and followed.text.startswith("✅ Now following")
    bot.fake.migrate_chat(group, supergroup)
    bot.arxiv.add(paper(401, "GRPO for the supergroup"))
    await bot.poll_and_deliver()
    assert [links(m) for m in bot.fake.messages_to(supergroup)] == [["2611.00401"]]
    assert await bot.store.chat(group) is None
    moved = await bot.store.chat(supergroup)
    assert moved is not None and moved.type == "supergroup" and moved.active
    assert await bot.subscriptions(supergroup) == [RL]

    bot.arxiv.add(paper(402, "GRPO again"))
    await bot.poll_and_deliver()
    assert [links(m) for m in bot.fake.messages_to(supergroup)] == [
        ["2611.00401"],
        ["2611.00402"],
    ]
    assert len(bot.fake.messages_to(group)) == 1  # the follow confirmation, before the move
    upgraded = [c for c in bot.fake.calls if c.error_code == 400]
    assert len(upgraded) == 1  # the first send to the old id told the bot where the group went
    bot.fake.calls.remove(upgraded[0])  # expected; the fixture checks for any other 400


def tag_line(block: str) -> tuple[list[str], list[str]]:
    """A card's last line: (the tags the chat follows, marked bold; the other tags)."""
    pieces = re.sub(r" \+\d+$", "", block.split("\n")[-1]).split(" · ")
    followed = [p.removeprefix("<b>").removesuffix("</b>") for p in pieces if p.startswith("<b>")]
    return followed or pieces, [p for p in pieces if not p.startswith("<b>")] if followed else []


# ---------------------------------------------------------------------------------- digests
def digest_groups(message: SentMessage) -> dict[str, list[str]]:
    """A digest as {heading line: sorted arXiv ids listed under it}."""
    assert message.text is not None
    groups: dict[str, list[str]] = {}
    for section in message.text.split("\n\n"):
        heading, *lines = section.split("\n")
        # each entry: its number (as on its 👍 / 👎) and line, then its abstract, collapsed
        entries = [e for e in lines if not e.startswith("<blockquote expandable>")]
        assert all(re.match(r"[0-9]+\. <a href=", e) for e in entries), section
        groups[heading] = sorted(i for e in entries for i in re.findall(r"abs/([\d.]+)", e))
    return groups


async def test_daily_digest_in_berlin_time(tmp_path: Path) -> None:
    clock = Clock(WINTER)  # Tuesday 05:00 UTC = 06:00 in Berlin
    instant = 2002
    async with bot_session(tmp_path, clock=clock) as bot:
        await bot.ask(USER, f"/follow {RL}")
        await bot.ask(USER, "/follow protein AND folding")
        await bot.ask(USER, "/digest daily 08:00")
        await bot.ask(USER, "/timezone Europe/Berlin")
        await bot.ask(instant, f"/follow {RL}")
        chat = await bot.store.chat(USER)
        assert chat is not None and chat.next_digest_at == "2027-01-12T07:00:00Z"
        before = len(bot.fake.messages_to(USER))

        bot.arxiv.add(
            # published just before the injected clock: news, not history
            paper(501, "GRPO for long-horizon reasoning", now=clock.now),
            paper(502, "GRPO & friends: <a survey>", now=clock.now),
            paper(503, "Protein folding with diffusion", categories=["cs.LG"], now=clock.now),
        )
        await bot.poll_and_deliver()
        assert len(bot.fake.messages_to(instant)) == 2  # instant chats: at once
        assert len(bot.fake.messages_to(USER)) == before  # the digest chat: nothing yet

        clock.now = datetime(2027, 1, 12, 6, 59, 59, tzinfo=UTC)
        await bot.deliver()
        assert len(bot.fake.messages_to(USER)) == before
        clock.now = datetime(2027, 1, 12, 7, 0, 30, tzinfo=UTC)  # 08:00:30 in Berlin
        await bot.deliver()
        [digest] = bot.fake.messages_to(USER)[before:]
        assert digest.text is not None
        assert digest_groups(digest) == {
            "📬 <b>Your daily digest</b>: 3 new papers": [],
            f"<b>2 new in {RL}</b>": ["2611.00501", "2611.00502"],
            "<b>1 new in protein AND folding</b>": ["2611.00503"],
        }
        assert "GRPO &amp; friends: &lt;a survey&gt;" in digest.text
        chat = await bot.store.chat(USER)
        assert chat is not None and chat.next_digest_at == "2027-01-13T07:00:00Z"
        await bot.deliver()
        assert len(bot.fake.messages_to(USER)) == before + 1

        # Nothing new by the next digest time: no message, but the schedule moves on.
        clock.now = datetime(2027, 1, 13, 7, 1, tzinfo=UTC)
        await bot.deliver()
        assert len(bot.fake.messages_to(USER)) == before + 1
        chat = await bot.store.chat(USER)
        assert chat is not None and chat.next_digest_at == "2027-01-14T07:00:00Z"

        bot.arxiv.add(paper(504, "GRPO, one more time", now=clock.now))
        await bot.poll_and_deliver()
        clock.now = datetime(2027, 1, 14, 7, 0, 5, tzinfo=UTC)
        await bot.deliver()
        [digest] = bot.fake.messages_to(USER)[before + 1 :]
        assert digest_groups(digest) == {
            "📬 <b>Your daily digest</b>: 1 new paper": [],
            f"<b>1 new in {RL}</b>": ["2611.00504"],
        }
        check_traffic(bot.fake)


async def test_weekly_digest_on_the_chosen_weekday(tmp_path: Path) -> None:
    clock = Clock(WINTER)  # Tuesday
    async with bot_session(tmp_path, clock=clock) as bot:
        await bot.ask(USER, f"/follow {RL}")
        await bot.ask(USER, "/timezone Europe/Berlin")
        reply = await bot.say(USER, "/digest weekly 09:30 fri")
        assert reply.text == "Delivery: <b>weekly digest, Fri 09:30 Europe/Berlin</b>."
        shown = await bot.say(USER, "/settings")
        assert shown.text is not None
        assert "\nNext digest: Fri 15 Jan 09:30 (Europe/Berlin)\n" in shown.text
        before = len(bot.fake.messages_to(USER))
        bot.arxiv.add(paper(601, "GRPO on Tuesday", now=clock.now))
        await bot.poll_and_deliver()
        for now in (
            datetime(2027, 1, 13, 8, 31, tzinfo=UTC),  # Wednesday, at the time of day
            datetime(2027, 1, 14, 8, 31, tzinfo=UTC),  # Thursday
            datetime(2027, 1, 15, 8, 29, tzinfo=UTC),  # Friday, a minute early
        ):
            clock.now = now
            await bot.deliver()
            assert len(bot.fake.messages_to(USER)) == before, now
        clock.now = datetime(2027, 1, 15, 8, 31, tzinfo=UTC)
        await bot.deliver()
        [digest] = bot.fake.messages_to(USER)[before:]
        assert digest_groups(digest) == {
            "📬 <b>Your weekly digest</b>: 1 new paper": [],
            f"<b>1 new in {RL}</b>": ["2611.00601"],
        }
        chat = await bot.store.chat(USER)
        assert chat is not None and chat.next_digest_at == "2027-01-22T08:30:00Z"
        check_traffic(bot.fake)


# ---------------------------------------------------------------------------------- robustness
SORRY = "Something went wrong on my side; please try again."


async def test_an_error_in_a_handler_is_logged_answered_and_survived(
    bot: Bot, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    topics_page = await bot.say(USER, "/topics")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the engine broke")

    monkeypatch.setattr(handlers.momentum, "trending", broken)
    monkeypatch.setattr(following, "_topics_page", broken)
    with caplog.at_level(logging.ERROR, logger="topicpulse"):
        sorry = await bot.say(USER, "/trending")
        assert sorry.text == SORRY
        edits, answer = await bot.press(USER, topics_page, "tp:1")
        assert edits == [] and answer["text"] == SORRY
    failures = [r for r in caplog.records if r.getMessage() == "error while handling an update"]
    assert len(failures) == 2
    assert all(r.exc_info and "the engine broke" in str(r.exc_info[1]) for r in failures)
    assert (await bot.say(USER, "/help")).text == handlers.HELP  # still serving
    assert (await bot.say(USER + 1, "/start")).text is not None


@pytest.mark.parametrize("transport", ["polling", "webhook"])
async def test_the_token_is_in_no_log_line(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    """Nor the webhook's secret token."""
    caplog.set_level(logging.DEBUG)
    for name in ("topicpulse", "telegram", "httpx", "httpcore", "apscheduler", "aiohttp"):
        caplog.set_level(logging.DEBUG, logger=name)
    async with bot_session(tmp_path, papers=seed_papers(), transport=transport) as bot:
        token = bot.fake.token
        await bot.poll()
        await bot.ask(USER, "/start")
        await bot.ask(USER, f"/follow {RL}")
        await bot.ask(USER, f"/momentum {RL}")  # a photo upload
        await bot.ask(2002, f"/follow {RL}")
        bot.fake.block_chat(2002)  # a 403 on delivery
        bot.fake.fail_next("sendMessage", status=502, description="Bad Gateway", chat_id=USER)
        bot.arxiv.add(paper(701, "GRPO in the logs"))
        await bot.poll_and_deliver()
        await bot.deliver()
        monkeypatch.setattr(handlers.momentum, "trending", lambda *a, **k: 1 / 0)
        await bot.ask(USER, "/trending")  # a traceback
        await bot.restart()
        await bot.ask(USER, "/list")
        check_traffic(bot.fake)
        secrets = [c.params["secret_token"] for c in bot.fake.calls_to("setWebhook")]
    text = caplog.text
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) > 100
    assert len(secrets) == (2 if transport == "webhook" else 0)  # at each start
    for needle in (token, token.split(":", 1)[1], *secrets):
        assert needle not in text
        assert not [m for m in messages if needle in m]
        assert not [r for r in caplog.records if r.exc_text and needle in r.exc_text]
    # The check is not vacuous: the lines that used to carry the token are there, redacted.
    assert any(m.startswith("topicpulse is running as @topicpulse_test_bot:") for m in messages)
    assert any(m.startswith("Set Bot API URL: ") and m.endswith("/bot<redacted>") for m in messages)
    if transport == "webhook":  # setWebhook's parameters are logged, its secret redacted
        assert "'secret_token': '<redacted>'" in text
    assert "error while handling an update" in messages
    assert "ZeroDivisionError" in text
    assert any("is gone" in m or "blocked" in m for m in messages)


# ---------------------------------------------------------------------------------- spikes
async def test_a_spike_alerts_followers_with_spikes_on_once(tmp_path: Path) -> None:
    """A followed topic that jumps (2 papers → 12 in four weeks, +500%) starts one spike
    episode: followers with spike alerts on get one photo with the sentence and the chart,
    followers with them off get none, and the next round sends nothing again."""
    fake = FakeTelegram()
    await fake.start()
    arxiv = FakeArxiv()
    await arxiv.start()
    settings = load_settings(
        telegram_bot_token=fake.token,
        TOPICPULSE_DB=str(tmp_path / "spikes.db"),
        TOPICPULSE_TELEGRAM_API_URL=fake.base_url,
        TOPICPULSE_ARXIV_API_URL=arxiv.url,
        TOPICPULSE_ARXIV_OAI_URL=arxiv.oai_url,
        TOPICPULSE_ARXIV_DELAY_SECONDS=0,
        TOPICPULSE_BACKFILL_WEEKS=0,
        TOPICPULSE_OVERLAP_DAYS=60,
        TOPICPULSE_POLL_SECONDS=3600,
    )  # default spike thresholds: ≥ 10 papers in 4 weeks and ≥ +50%
    bot = Bot(fake, arxiv, settings, Clock())
    await bot.start()
    try:
        quiet = USER + 1
        for chat_id in (USER, quiet):
            await bot.ask(chat_id, "/follow grpo")
        await bot.say(quiet, "/spikes off")
        history = [paper(n, f"GRPO study {n}", days_ago=30 + n) for n in (1, 2)]
        burst = [paper(n, f"GRPO burst {n}", days_ago=n) for n in range(10, 22)]
        arxiv.replace([*history, *burst])
        await bot.poll_and_deliver()

        photos = [m for m in fake.messages_to(USER) if m.method == "sendPhoto"]
        assert len(photos) == 1
        caption = photos[0].text or ""
        assert "Group Relative Policy Optimization is spiking" in caption  # /follow grpo: a slug
        assert "12 papers in the last four weeks, up 500% on the four weeks before." in caption
        assert photos[0].photo_bytes is not None and photos[0].photo_bytes.startswith(b"\x89PNG")
        assert not [m for m in fake.messages_to(quiet) if m.method == "sendPhoto"]

        await bot.poll_and_deliver()  # still spiking: the same episode, no second alert
        assert len([m for m in fake.messages_to(USER) if m.method == "sendPhoto"]) == 1
        check_traffic(fake)
    finally:
        await bot.stop()
        await arxiv.close()
        await fake.stop()


# ---------------------------------------------------------------------------------- /paper
async def test_paper_shows_the_whole_card_and_follows_one_of_its_topics(bot: Bot) -> None:
    card = await bot.say(USER, "/paper https://arxiv.org/abs/2611.00001v1")
    assert card.text is not None and links(card)[0] == "2611.00001"
    assert "<blockquote>Group-relative rewards improve multi-step reasoning.</blockquote>" in (
        card.text
    )  # unfolded: the whole abstract
    assert 'href="https://arxiv.org/pdf/2611.00001">PDF</a>' in card.text
    assert 'href="https://arxiv.org/html/2611.00001">HTML</a>' in card.text
    followed, others = tag_line(card.text.rsplit("\n", 1)[0])
    assert f"#{RL}" in followed + others
    # the chat follows nothing yet: a ➕ for each of the paper's catalogue topics (up to 4)
    up, down, more, *follows = card.buttons
    assert (up[0], down[0]) == ("👍", "👎")
    assert more[0] == "🔁 More like this"
    labels = [label for label, _ in follows]
    assert labels and len(labels) <= 4 and all(label.startswith("➕ Follow ") for label in labels)
    label, data = follows[0]
    await bot.press(USER, card, data)
    [name] = await bot.subscriptions(USER)
    assert label.removeprefix("➕ Follow ").rstrip("…") in name
    again = await bot.say(USER, "/paper 2611.00001")
    assert label not in [label for label, _ in again.buttons]
    assert again.text is not None and f"<b>#{name}</b>" in again.text  # followed: first, bold

    unknown = await bot.say(USER, "/paper 2611.99999")
    assert unknown.text is not None and unknown.text.startswith("I have no paper 2611.99999")
    bad = await bot.say(USER, "/paper <b>not an id</b>")
    assert bad.text == (
        "“&lt;b&gt;not an id&lt;/b&gt;” is not an arXiv id or link: try e.g. /paper 2605.01234"
    )
    what = await bot.say(USER, "/paper")
    assert what.text is not None and what.text.startswith("Which paper?")


async def test_latest_reads_a_name_that_ends_in_a_number_as_a_name(bot: Bot) -> None:
    """'/latest grpo 2' is the followed query "grpo 2", not "grpo" and a count of 2."""
    await bot.say(USER, "/follow grpo 2")
    latest = await bot.say(USER, "/latest grpo 2")
    assert latest.text is not None and latest.text.startswith("🗞 <b>Latest in grpo 2</b>")
    assert "2611.00002" in links(latest)
    counted = await bot.say(USER, f"/latest {RL} 2")  # no topic is called "… 2": a count
    assert links(counted) == ["2611.00001", "2611.00002"]


async def test_similar_lists_the_papers_most_like_one_by_command_and_by_button(bot: Bot) -> None:
    similar = await bot.say(USER, "/similar 2611.00001")
    assert similar.text is not None and similar.text.startswith("🔁 <b>Most like</b>")
    found = links(similar)
    assert "2611.00001" not in found and 1 <= len(found) <= 5
    assert found[0] in {"2611.00002", "2611.00003"}  # same title words and the same abstract
    assert "2611.00008" not in found[:3]  # molecules: nothing in common but stopwords
    card = await bot.say(USER, "/paper 2611.00001")
    sent, answer = await bot.press(USER, card, dict(card.buttons)["🔁 More like this"])
    assert [links(m) for m in sent] == [found] and answer.get("text") in (None, "")
    forged, answer = await bot.press(USER, card, "m:99999", forged=True)
    assert forged == [] and answer["text"] == "This button has expired."
    bad = await bot.say(USER, "/similar nothing")
    assert bad.text is not None and "is not an arXiv id or link" in bad.text
