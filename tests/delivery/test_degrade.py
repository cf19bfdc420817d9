"""Delivery that degrades gracefully (issue 9 §1): what reaches a chat when things go wrong.

* A group where the bot may send text but not photos gets its spike alerts as text; a chat where
  it may send nothing is deactivated (its subscriptions kept) and comes back when the bot's
  membership does (``my_chat_member``).
* A message that keeps failing is not retried forever: a permanent error drops it at once, a
  temporary one after a day of backing off — while the other chats keep flowing.
* Spike alerts go out as they come, never behind a chat's backlog of papers.
* A backlog folded by backpressure is one short catch-up: counts per topic, the best few papers,
  ``/latest`` per topic and a button each.
* Plurals and dates read right on any platform.

Engine tests run on virtual time (``VirtualClock`` for the engine's monotonic clock, a wall clock
derived from it); end-to-end tests drive the real Application against the fake Bot API.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import random
import re
import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from telegram import Bot as PTBBot
from test_delivery import FakeSender, check_once, pending
from test_faults import exactly_once, sends_to, session

from bot_harness import RL, USER, bot_session, check_traffic, links, paper, seed_papers
from clocks import VirtualClock
from fake_telegram import FakeTelegram
from fanout import ARXIV_LINK, fill_outbox
from owed import owed, owed_total
from telegram_html import utf16_len, validate_telegram_html
from topicpulse import delivery
from topicpulse.bot.sender import TelegramSender
from topicpulse.delivery import Delivery, TemporaryFailure, formatting
from topicpulse.delivery.digests import DigestPaper, _on_most_topics
from topicpulse.insight.momentum import Momentum, SpikeThresholds, check_spike, week_starts
from topicpulse.models import Paper, StoredPaper, Topic, iso
from topicpulse.store import Store
from topicpulse.topics import catalogue as topics
from topicpulse.topics.matching import match_new_papers

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", 16, 9) + b"\x08\x02\x00\x00\x00"
SUPERGROUP = -1_000_000_000_101


def wall_clock(clock: VirtualClock) -> Callable[[], datetime]:
    """A wall clock (the engine's ``clock``) that moves with the virtual monotonic one."""
    start, origin = datetime.now(UTC).replace(microsecond=0), clock()
    return lambda: start + timedelta(seconds=clock() - origin)


async def start_spike(store: Store, topic_name: str) -> None:
    topic = next(t for t in await store.topics(kind="custom") if t.name == topic_name)
    episode = await store.start_episode(
        topic.id, at=iso(datetime.now(UTC)), reason="4-week count up 300% (5 → 20)",
        last_4w=20, prev_4w=5, change_pct=300.0,
    )  # fmt: skip
    assert episode is not None


# ---------------------------------------------------------------------------------- 1. rights
@pytest.mark.parametrize(
    ("method", "status", "description", "expected"),
    [
        ("sendPhoto", 400, "Bad Request: not enough rights to send photos to the chat",
         "MediaForbidden"),
        ("sendPhoto", 400, "Bad Request: CHAT_SEND_PHOTOS_FORBIDDEN", "MediaForbidden"),
        ("sendMessage", 400, "Bad Request: not enough rights to send text messages to the chat",
         "ChatGone"),
        ("sendPhoto", 400, "Bad Request: not enough rights to send text messages to the chat",
         "ChatGone"),
        ("sendMessage", 400, "Bad Request: have no rights to send a message", "ChatGone"),
        ("sendMessage", 400, "Bad Request: CHAT_WRITE_FORBIDDEN", "ChatGone"),
        ("sendMessage", 400, "Bad Request: chat not found", "ChatGone"),
        ("sendMessage", 400, "Bad Request: need administrator rights in the channel chat",
         "ChatGone"),
        ("sendMessage", 403, "Forbidden: bot was kicked from the supergroup chat", "ChatGone"),
        ("sendPhoto", 403, "Forbidden: bot was blocked by the user", "ChatGone"),
        ("sendMessage", 400, 'Bad Request: can\'t parse entities: Unsupported start tag "x" at'
         " byte offset 3", "MessageRejected"),
        ("sendMessage", 400, "Bad Request: message is too long", "MessageRejected"),
        ("sendMessage", 400, "Bad Request: TOPIC_CLOSED", "TopicClosed"),  # (issue 23 §4)
        ("sendPhoto", 400, "Bad Request: TOPIC_CLOSED", "TopicClosed"),
        ("sendMessage", 400, "Bad Request: BUTTON_DATA_INVALID", "PermanentFailure"),
        ("sendMessage", 502, "Bad Gateway", "TemporaryFailure"),
        ("sendMessage", 500, "Internal Server Error", "TemporaryFailure"),
        ("sendMessage", 429, "Too Many Requests: retry after 7", "FloodWait"),
    ],
)  # fmt: skip
async def test_bot_api_errors_map_onto_the_engines_vocabulary(
    method: str, status: int, description: str, expected: str
) -> None:
    """Only a chat the bot can send nothing to is "gone"; a chat without photo rights is not."""
    async with FakeTelegram() as fake:
        fake.fail_next(method, status=status, description=description, retry_after=None)
        async with PTBBot(fake.token, base_url=fake.base_url) as bot:
            sender = TelegramSender(bot)
            with pytest.raises(delivery.DeliveryError) as caught:
                if method == "sendPhoto":
                    await sender.send_photo(SUPERGROUP, PNG, "📈 <b>x</b>")
                else:
                    await sender.send_text(SUPERGROUP, "<b>x</b>")
    assert type(caught.value).__name__ == expected, caught.value


async def test_a_group_that_may_not_send_photos_gets_its_spike_alert_as_text(
    tmp_path: Path,
) -> None:
    def restrict(fake: FakeTelegram) -> None:
        fake.set_bot_member(SUPERGROUP, "restricted", can_send_photos=False, notify=False)

    chat_ids = [SUPERGROUP, 2, 3]
    async with session(tmp_path, chat_ids=chat_ids, alerts=6, before_start=restrict) as s:
        await s.drained()  # the paper alerts are text: they reach the group as usual
        await start_spike(s.store, s.fan.keyword[SUPERGROUP])
        s.pipeline.wake.set()
        await s.drained()
        group = await s.store.chat(SUPERGROUP)
        subscriptions = await s.store.subscriptions(SUPERGROUP)
        counts = await s.store.outbox_counts()
    assert group is not None and group.active
    assert subscriptions
    photo_calls = [c for c in s.fake.calls_to("sendPhoto") if c.params["chat_id"] == SUPERGROUP]
    assert [c.result for c in photo_calls] == [400]  # tried once as a photo …
    alert = s.fake.messages_to(SUPERGROUP)[-1]  # … then sent as text: the caption, no chart
    assert alert.method == "sendMessage" and alert.parse_mode == "HTML"
    for other in (2, 3):
        photo = s.fake.messages_to(other)[-1]
        assert photo.method == "sendPhoto" and photo.photo_bytes
        assert alert.text == photo.text and "is spiking" in (alert.text or "")
    assert counts == {"sent": 3}  # the spike rows (alerts from the matches need none)
    exactly_once(s)


async def test_the_bots_membership_deactivates_and_reactivates_a_chat(tmp_path: Path) -> None:
    """Kicked or left → inactive, subscriptions kept; back as member, administrator, or a
    restricted member that may send messages → active again, and alerts resume."""
    group, admin = -1_000_000_004_242, 777
    async with bot_session(tmp_path, papers=seed_papers()) as bot:
        await bot.poll()
        bot.fake.set_chat_admins(group, {admin})
        await bot.say(group, f"/follow {RL}", user_id=admin, username="ann")
        allowed = bot.fake.calls_to("getUpdates")[-1].params.get("allowed_updates")
        assert "my_chat_member" in allowed  # Telegram sends these only when asked to

        async def active() -> bool:
            chat = await bot.store.chat(group)
            assert chat is not None
            return chat.active

        bot.fake.set_bot_member(group, "kicked", username="ann")
        await bot.idle()
        assert not await active()
        assert await bot.subscriptions(group) == [RL]  # kept: the chat can come back
        bot.arxiv.add(paper(601, "GRPO for language model alignment, while kicked"))
        await bot.poll_and_deliver()
        assert not sends_to(bot.fake, group)[1:]  # nothing queued for it, nothing tried

        bot.fake.set_bot_member(group, "member", username="ann")
        await bot.idle()
        assert await active()
        bot.arxiv.add(paper(602, "GRPO for language model alignment, welcome back"))
        await bot.poll_and_deliver()
        assert links(bot.fake.messages_to(group)[-1]) == ["2611.00602"]

        for status, may_text, expected in [
            ("restricted", False, False),  # may send nothing
            ("administrator", True, True),
            ("left", True, False),
            ("restricted", True, True),  # may send text (photos or not): alerts flow
        ]:
            bot.fake.set_bot_member(group, status, can_send_messages=may_text, username="ann")
            await bot.idle()
            assert await active() == expected, status

        await bot.ask(USER, f"/follow {RL}")  # a private chat: the user blocks, then unblocks
        bot.fake.set_bot_member(USER, "kicked")
        await bot.idle()
        user = await bot.store.chat(USER)
        assert user is not None and not user.active
        bot.fake.set_bot_member(USER, "member")
        await bot.idle()
        user = await bot.store.chat(USER)
        assert user is not None and user.active
        assert await bot.subscriptions(USER) == [RL]
        check_traffic(bot.fake)


# ---------------------------------------------------------------------------------- 2. give up
async def test_a_permanent_error_drops_the_message_and_the_chat_flows_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def fault(fake: FakeTelegram) -> None:
        fake.fail_next(
            "sendMessage",
            status=400,
            description="Bad Request: BUTTON_DATA_INVALID",  # (a closed topic is no such error)
            chat_id=6,
            count=5,
        )

    with caplog.at_level(logging.ERROR, logger="topicpulse.delivery"):
        async with session(
            tmp_path, chat_ids=list(range(1, 21)), alerts=40, before_start=fault
        ) as s:
            await s.drained()
            counts = await s.store.outbox_counts()
            chat = await s.store.chat(6)
    assert counts == {"dropped": 2}  # the refused message's papers, recorded
    assert chat is not None and chat.active  # the chat is not gone: only that message
    assert [c.result for c in sends_to(s.fake, 6)] == [400]  # not retried, no plain-text copy
    assert "button_data_invalid" in caplog.text.lower() and "dropping them" in caplog.text
    del s.fan.expected[6]
    exactly_once(s)


async def test_a_chat_that_keeps_failing_is_given_up_after_a_day_while_others_flow(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    fan = await fill_outbox(store, list(range(1, 11)), alerts=20)
    sender = FakeSender()
    sender.fail(4, *(TemporaryFailure("NetworkError: Bad Gateway") for _ in range(10_000)))
    clock = VirtualClock()
    wall = wall_clock(clock)
    # backing off up to an hour between tries: a day of trying is a few dozen passes
    engine = Delivery(store, sender, clock=wall, monotonic=clock, retry_max=3600)
    started = wall()
    with caplog.at_level(logging.WARNING, logger="topicpulse.delivery"):
        await engine.run_once()
        check_once(fan, sender, skip={4})  # everyone else at once
        while await pending(store) and wall() - started < timedelta(hours=48):
            due = engine.next_due()
            assert due is not None
            await clock.advance(due)
            await engine.run_once()
    assert await pending(store) == 0, "still retrying after two days"
    assert timedelta(hours=24) <= wall() - started <= timedelta(hours=25)
    assert await store.outbox_counts() == {"dropped": 2}  # its papers, given up
    assert engine.stats.pauses == 0  # one chat's trouble never paused the others
    assert 10 < sender.attempts[4] < 100
    assert "gave up" in caplog.text and "chat 4" in caplog.text


# ---------------------------------------------------------------------------------- 3. spikes
async def test_a_digest_chats_spike_is_not_held_behind_its_backlog(store: Store) -> None:
    await fill_outbox(store, [1, 2], alerts=2, extra={1: 600})
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    await store.update_chat(1, mode="daily", next_digest_at=iso(tomorrow))
    await start_spike(store, "solo1")  # queued behind 601 papers that wait for the digest
    sender = FakeSender()
    await Delivery(store, sender).run_once()
    assert [kind for kind, chat, _ in sender.sent if chat == 1] == ["photo"]
    assert len(await owed(store, 1)) == 601  # the digest still waits


async def test_an_instant_chats_spike_goes_before_its_backlog(store: Store) -> None:
    await fill_outbox(store, [1, 2], alerts=2, extra={1: 600})
    await start_spike(store, "solo1")
    sender = FakeSender()
    await Delivery(store, sender).run_once()
    assert [kind for kind, chat, _ in sender.sent if chat == 1] == ["photo", "html"]
    assert await pending(store) == 0


# ---------------------------------------------------------------------------------- 4. catch-up
def make_paper(n: int, title: str, hours_ago: float) -> Paper:
    stamp = iso(datetime.now(UTC) - timedelta(hours=hours_ago))
    return Paper(
        arxiv_id=f"2611.{n:05d}", version=1, title=title,
        abstract="We study this question in depth.",
        authors=("Ada Lovelace", "Alan Turing"), primary_category="cs.CL",
        categories=("cs.CL",), published=stamp, updated=stamp,
    )  # fmt: skip


async def backlog(store: Store, chat_id: int) -> tuple[Topic, Topic]:
    """193 new papers for one chat: 150 on alpha, 40 on beta, 3 on both (the newest of them
    hours older than the newest single-topic papers); titles full of ``<`` and ``&``."""
    alpha, beta = (
        await topics.custom_topic(store, "alpha"),
        await topics.custom_topic(store, "beta"),
    )
    await store.ensure_chat(chat_id)
    for topic in (alpha, beta):
        await store.subscribe(chat_id, topic.id)
    papers = [make_paper(n, f"Alpha study {n}: x < y & z", 1 + n / 10) for n in range(1, 151)]
    papers += [make_paper(n, f"Beta study {n} <fast> & small", 1 + n / 10) for n in range(151, 191)]
    papers += [make_paper(n, f"Alpha and beta {n}: <b> & co", 30 + n) for n in range(191, 194)]
    await store.upsert_papers(papers)
    assert (await match_new_papers(store)).chats_marked == 1
    return alpha, beta


def valid(text: str) -> None:
    ok, error, _ = validate_telegram_html(text)
    assert ok, (error, text)
    assert utf16_len(text) <= 4096


async def test_a_backlog_is_one_short_catch_up(store: Store) -> None:
    alpha, beta = await backlog(store, 1)
    sender = FakeSender()
    engine = Delivery(store, sender)
    await engine.run_once()
    [(kind, _, text)] = [s for s in sender.sent if s[1] == 1]
    assert kind == "html"
    valid(text)
    assert "193 new papers" in text
    assert "<b>alpha</b>: 153" in text and "<b>beta</b>: 43" in text
    assert "<code>/latest alpha</code>" in text and "<code>/latest beta</code>" in text
    [shown] = sender.buttons[1]
    assert [b for b in shown if isinstance(b, tuple)] == [
        ("🗞 alpha", f"l:{alpha.id}"),
        ("🗞 beta", f"l:{beta.id}"),
    ]
    # and a 👍 / 👎 row for each of the best papers it shows, numbered like them
    rated = [row for row in shown if isinstance(row, list)]
    assert [label for row in rated for label, _ in row] == [
        f"{thumb} {n}" for n in range(1, 6) for thumb in ("👍", "👎")
    ]
    assert all(f"{n}. <a href=" in text for n in range(1, 6))
    # the best few: matched by most of the chat's topics first, then the newest
    shown = ARXIV_LINK.findall(text + " ")
    assert shown == ["2611.00191", "2611.00192", "2611.00193", "2611.00001", "2611.00002"]
    assert "x &lt; y &amp; z" in text
    assert await pending(store) == 0  # every paper settled by that message
    assert engine.stats.folded == 1


async def test_a_huge_backlog_is_still_one_message(store: Store) -> None:
    fan = await fill_outbox(store, [1, 2], alerts=2, extra={1: 1200})
    sender = FakeSender()
    await Delivery(store, sender).run_once()
    [(_, _, text)] = [s for s in sender.sent if s[1] == 1]
    valid(text)
    assert "1201 new papers" in text
    assert len(sender.ids_to(1)) <= 5 and set(sender.ids_to(1)) <= fan.expected[1]
    assert await pending(store) == 0


def test_a_catch_ups_best_are_the_papers_on_most_topics_newest_first() -> None:
    """``_on_most_topics`` (taken level by level, the papers sharing a list per combination
    of topics) picks what ``heapq.nlargest`` by (topics, published, id) would, in its order."""
    rng = random.Random(7)
    topic_list = [
        Topic(id=i, kind="custom", slug=None, name=f"t{i}", description="", query="q", fts="q")
        for i in range(1, 5)
    ]
    for trial in range(200):
        shared = [topic_list[: rng.randint(1, 4)] for _ in range(rng.randint(1, 4))]
        papers = [
            DigestPaper(n, f"2026-01-{rng.randint(1, 9):02d}", rng.choice(shared))
            for n in range(1, rng.randint(2, 120))
        ]
        combinations = {id(p.topics): p.topics for p in papers}
        for k in (1, 5, 50):
            expected = heapq.nlargest(
                k, papers, key=lambda p: (len(p.topics), p.published, p.paper_id)
            )
            assert _on_most_topics(papers, combinations, k) == expected, (trial, k)


def test_a_catch_up_fits_whatever_the_names_and_titles() -> None:
    nasty = "&<>\"'" * 60
    topic_list = [
        Topic(id=i, kind="custom", slug=None, name=f"{i} {nasty}", description="", query="q",
              fts="q")
        for i in range(1, 51)
    ]  # fmt: skip
    best = [
        formatting.Alert(
            StoredPaper(id=n, stored_at=p.published, **dataclasses.asdict(p)),
            topic_list[:10],
        )
        for n in range(1, 6)
        for p in [make_paper(n, nasty * 2, n)]
    ]
    text, buttons = formatting.catch_up(
        total=12_345, counts=[(t, 1000 - t.id) for t in topic_list], best=best
    )
    valid(text)
    assert "12345 new papers" in text
    assert buttons and all(re.fullmatch(r"l:\d+", data) for _, data in buttons)
    assert len(buttons) <= 10


async def test_a_broad_topics_backlog_reaches_the_chat_as_one_message_with_a_button(
    tmp_path: Path,
) -> None:
    async with bot_session(tmp_path, papers=seed_papers()) as bot:
        await bot.poll()
        await bot.ask(USER, f"/follow {RL}")
        rl = next(t for t in await bot.store.topics() if t.name == RL)
        bot.arxiv.add(
            *(paper(n, f"GRPO for language model alignment & <more>, round {n}")
              for n in range(700, 760))
        )  # fmt: skip
        await bot.poll_and_deliver()
        [catch_up] = bot.fake.messages_to(USER)[1:]
        assert "60 new papers" in (catch_up.text or "")
        assert f"<code>/latest {RL}</code>" in (catch_up.text or "")
        assert catch_up.buttons[-1] == (f"🗞 {RL}", f"l:{rl.id}")
        assert [label for label, _ in catch_up.buttons[:2]] == ["👍 1", "👎 1"]  # the best 5
        assert await owed_total(bot.store) == 0
        latest, _ = await bot.press(USER, catch_up, f"l:{rl.id}")  # the rest, a tap away
        assert latest and all(RL in (m.text or "") for m in latest[:1])
        check_traffic(bot.fake)


# ---------------------------------------------------------------------------------- 5. wording
def test_one_paper_is_singular() -> None:
    as_of = datetime(2026, 5, 25, tzinfo=UTC)  # a Monday, midnight: the 12th week is complete
    counts = [0] * 11 + [1]
    m = Momentum(
        topic="Solo", query="solo", as_of=as_of, last_4w=1, prev_4w=0, change_pct=None,
        share_pct=0.1, total=1, weekly=list(zip(week_starts(as_of), counts, strict=True)),
    )  # fmt: skip
    text = formatting.momentum_text(m)
    assert "1 paper in all" in text and "1 paper in the last four weeks" in text
    assert "papers" not in text.replace("all new papers", "")
    spike = check_spike(m, SpikeThresholds(min_last_4w=10**6, min_week_papers=1))
    assert spike.spiking and "last week 1 paper vs" in spike.reason


def test_no_glibc_only_strftime_directives() -> None:
    """``%-d`` and friends are a glibc extension: elsewhere they raise or print garbage."""
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for n, line in enumerate(path.read_text("utf-8").splitlines(), start=1)
        if re.search(r"%-[a-zA-Z]", line)
    ]
    assert not found
