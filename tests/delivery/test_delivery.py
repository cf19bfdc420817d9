"""The delivery engine (``delivery.Delivery``): every pending alert sent exactly once, per-chat
order, a worker pool that hides API latency, backpressure, per-chat deferral on 429, and the
other failure kinds — first against an in-memory sender, then end to end: a scaled-down fan-out
through the real Application against a fake Bot API that enforces Telegram's limits.

The engine's deferrals and backoff run on a virtual clock (``Delivery(monotonic=…)``) that the
tests move forward instead of sleeping; a sender that must be caught mid-send is held at a gate
(``FakeSender.hold``). End to end, rates are checked on the fake's recorded call times, and only
as upper bounds (what the fake enforces), never as speeds the machine has to reach."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clocks import VirtualClock
from fake_arxiv import FakeArxiv
from fake_telegram import FakeTelegram
from fanout import ARXIV_LINK, FanOut, fill_outbox, lost_and_duplicated
from owed import owed_total
from topicpulse.bot.app import build_application, pipeline_of, running
from topicpulse.bot.ratelimit import Limits, TelegramRateLimiter
from topicpulse.config import load_settings
from topicpulse.delivery import (
    CATCH_UP_BEST,
    ChatGone,
    ChatMoved,
    Delivery,
    FloodWait,
    MessageRejected,
    TemporaryFailure,
)
from topicpulse.delivery import messages as delivery_messages
from topicpulse.store import Store
from waiting import wait_for


class FakeSender:
    """An in-memory ``Sender``: records what it sent; ``fail(chat, exc, …)`` scripts errors;
    ``hold()`` makes sends wait (in flight) until ``release()``."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.gate = asyncio.Event()
        self.gate.set()
        self.sent: list[tuple[str, int, str]] = []  # (kind, chat, text)
        self.attempts: dict[int, int] = {}
        self.script: dict[int | None, list[Exception]] = {}
        self.down = False
        self.in_flight = self.max_in_flight = 0
        self.chat_in_flight: dict[int, int] = {}
        self.max_chat_in_flight = 0
        self.buttons: dict[int, list[list[tuple[str, str]]]] = {}  # chat → each text's buttons

    def fail(self, chat: int | None, *errors: Exception) -> None:
        self.script.setdefault(chat, []).extend(errors)

    def hold(self) -> None:
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    async def _send(self, kind: str, chat: int, text: str) -> None:
        self.attempts[chat] = self.attempts.get(chat, 0) + 1
        self.in_flight += 1
        self.chat_in_flight[chat] = self.chat_in_flight.get(chat, 0) + 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.max_chat_in_flight = max(self.max_chat_in_flight, self.chat_in_flight[chat])
        try:
            await self.gate.wait()
            await asyncio.sleep(self.latency)
            if self.down:
                raise TemporaryFailure("NetworkError: connection reset")
            for key in (chat, None):
                queue = self.script.get(key)
                if queue:
                    raise queue.pop(0)
            self.sent.append((kind, chat, text))
        finally:
            self.in_flight -= 1
            self.chat_in_flight[chat] -= 1

    async def send_text(
        self,
        chat_id: int,
        html: str,
        *,
        preview: bool = False,
        buttons: list[tuple[str, str]] | None = None,
    ) -> None:
        await self._send("html", chat_id, html)
        self.buttons.setdefault(chat_id, []).append(buttons or [])

    async def send_plain(self, chat_id: int, text: str) -> None:
        await self._send("plain", chat_id, text)

    async def send_photo(self, chat_id: int, png: bytes, caption_html: str) -> None:
        await self._send("photo", chat_id, caption_html)

    def ids_to(self, chat: int) -> list[str]:
        return [i for _, c, text in self.sent if c == chat for i in ARXIV_LINK.findall(text + " ")]

    def texts_to(self, chat: int) -> list[str]:
        return [text for _, c, text in self.sent if c == chat]


def check_once(fan: FanOut, sender: FakeSender, *, skip: set[int] = frozenset()) -> None:
    for chat, ids in fan.expected.items():
        if chat in skip:
            continue
        got = sender.ids_to(chat)
        assert sorted(got) == sorted(ids), chat


async def pending(store: Store) -> int:
    return await owed_total(store)


async def drain(engine: Delivery, clock: VirtualClock, *, passes: int = 100) -> None:
    """Run passes until nothing is pending, moving ``clock`` (the engine's) to each deferral or
    pause as it falls due."""
    for _ in range(passes):
        if not await pending(engine.store):
            return
        await engine.run_once()
        due = engine.next_due()
        if due:
            await clock.advance(due)
    raise AssertionError(f"not drained in {passes} passes: {await engine.store.outbox_counts()}")


# ---------------------------------------------------------------------------------- basics
async def test_every_pending_alert_is_sent_once_in_order(store: Store) -> None:
    fan = await fill_outbox(store, list(range(1, 31)), alerts=90)
    sender = FakeSender()
    engine = Delivery(store, sender)
    settled = await engine.run_once()
    assert settled == 90
    assert await owed_total(store) == 0
    check_once(fan, sender)
    for chat in fan.expected:  # papers in the order they were queued
        assert sender.ids_to(chat) == sorted(sender.ids_to(chat))
    assert await engine.run_once() == 0  # nothing twice
    assert len(sender.sent) == 30


async def test_workers_overlap_sends_to_hide_latency(store: Store) -> None:
    await fill_outbox(store, list(range(1, 81)), alerts=80)
    sender = FakeSender()
    sender.hold()  # every send stays in flight until released
    engine = Delivery(store, sender)
    task = asyncio.create_task(engine.run_once())
    # the limiter, not the latency, is meant to be the cap: every worker has a send out
    await wait_for(lambda: sender.in_flight == engine.concurrency, what="all workers sending")
    sender.release()
    await task
    assert len(sender.sent) == 80
    assert sender.max_in_flight == engine.concurrency
    assert sender.max_chat_in_flight == 1  # but one chat never has two sends at once


async def test_a_chats_messages_go_in_order(store: Store) -> None:
    fan = await fill_outbox(store, [1, 2], alerts=2, extra={1: 20})  # chat 1: 3 messages
    sender = FakeSender(latency=0.01)
    await Delivery(store, sender).run_once()
    texts = sender.texts_to(1)
    assert 2 <= len(texts) <= 3
    assert sender.ids_to(1) == sorted(fan.expected[1])
    assert sender.max_chat_in_flight == 1


async def test_a_big_backlog_is_folded_into_one_catch_up(store: Store) -> None:
    fan = await fill_outbox(store, [1, 2], alerts=2, extra={1: 60})
    sender = FakeSender()
    engine = Delivery(store, sender)
    await engine.run_once()
    [text] = sender.texts_to(1)  # 61 papers as alerts would take 7+ messages
    assert "Catch-up: 61 new papers" in text
    assert len(sender.ids_to(1)) == CATCH_UP_BEST and set(sender.ids_to(1)) <= fan.expected[1]
    assert await owed_total(store) == 0  # the one message settled all 61
    assert engine.stats.folded == 1
    assert len(sender.texts_to(2)) == 1 and "Catch-up" not in sender.texts_to(2)[0]


async def test_spike_chart_is_rendered_once_per_episode(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    fan = await fill_outbox(store, list(range(1, 6)), alerts=5, chats_per_topic=5)
    topic = next(t for t in await store.topics(kind="custom") if t.name == "kw00000")
    renders: list[object] = []

    def render(m: object) -> bytes:
        renders.append(m)
        return b"\x89PNG\r\n\x1a\n" + b"\0" * 16

    monkeypatch.setattr(delivery_messages, "render_chart", render)
    await store.start_episode(
        topic.id, at="2026-11-20T00:00:00Z", reason="doubled", last_4w=20, prev_4w=5,
        change_pct=300.0,
    )  # fmt: skip
    sender = FakeSender()
    await Delivery(store, sender).run_once()
    photos = [s for s in sender.sent if s[0] == "photo"]
    assert len(photos) == 5 and len(renders) == 1
    assert await pending(store) == 0
    check_once(fan, sender)


# ---------------------------------------------------------------------------------- faults
async def test_a_429_defers_only_that_chat(store: Store) -> None:
    fan = await fill_outbox(store, list(range(1, 21)), alerts=20)
    sender = FakeSender()
    sender.fail(5, FloodWait(30))
    clock = VirtualClock()
    engine = Delivery(store, sender, monotonic=clock)
    await engine.run_once()
    assert len(sender.sent) == 19  # the others went
    assert engine.stats.flood_waits == 1
    assert engine.next_due() == 30
    await clock.advance(29.9)
    await engine.run_once()  # too early: chat 5 is not tried again
    assert sender.attempts[5] == 1
    await clock.advance(0.1)
    assert engine.next_due() == 0.0
    await engine.run_once()
    assert sender.attempts[5] == 2
    check_once(fan, sender)
    assert await owed_total(store) == 0


async def test_a_gone_chat_is_deactivated(store: Store) -> None:
    fan = await fill_outbox(store, list(range(1, 11)), alerts=20)
    sender = FakeSender()
    sender.fail(3, ChatGone("Forbidden: bot was blocked by the user"))
    clock = VirtualClock()
    engine = Delivery(store, sender, monotonic=clock)
    await drain(engine, clock)
    chat = await store.chat(3)
    assert chat is not None and not chat.active
    assert await owed_total(store) == 0
    assert await store.outbox_counts() == {"dropped": 2}  # its message's papers, recorded
    assert sender.attempts[3] == 1
    check_once(fan, sender, skip={3})


async def test_a_rejected_message_is_resent_as_plain_text(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    fan = await fill_outbox(store, list(range(1, 6)), alerts=10)
    sender = FakeSender()
    sender.fail(2, MessageRejected("Bad Request: can't parse entities: Unsupported start tag"))
    engine = Delivery(store, sender)
    with caplog.at_level(logging.ERROR):
        await engine.run_once()
    kinds = [kind for kind, chat, _ in sender.sent if chat == 2]
    assert kinds == ["plain"]
    plain = sender.texts_to(2)[0]
    assert "<" not in plain and "https://arxiv.org/abs/" in plain
    check_once(fan, sender)
    assert await owed_total(store) == 0
    ids = [i.id for i in await store.pending_for_chat(2)] or None
    assert ids is None
    assert "outbox rows [" in caplog.text and "chat 2" in caplog.text


async def test_content_refused_even_as_plain_text_is_dropped_and_logged(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    await fill_outbox(store, [1, 2], alerts=4)
    sender = FakeSender()
    sender.fail(1, MessageRejected("Bad Request: message is too long"))
    sender.fail(1, MessageRejected("Bad Request: message is too long"))
    with caplog.at_level(logging.ERROR):
        await Delivery(store, sender).run_once()
    assert await store.outbox_counts() == {"dropped": 2}  # (the sent alert needs no row)
    assert await owed_total(store) == 0
    assert "dropping them" in caplog.text


async def test_temporary_failures_back_off_then_drain(store: Store) -> None:
    fan = await fill_outbox(store, list(range(1, 121)), alerts=120)
    sender = FakeSender()
    sender.down = True
    clock = VirtualClock()
    engine = Delivery(store, sender, monotonic=clock)
    await engine.run_once()
    assert engine.stats.pauses == 1 and engine.halted()
    # paused instead of trying every chat: only the sends already under way when the failures
    # began (one per worker) were made
    assert sum(sender.attempts.values()) <= engine.concurrency + 5
    assert await pending(store) == 120  # nothing dropped
    assert await engine.run_once() == 0  # paused: no pass
    assert engine.next_due() == pytest.approx(engine.retry_base)  # the first pause
    sender.down = False
    await drain(engine, clock)
    check_once(fan, sender)
    assert not engine.halted()


async def test_one_chats_5xx_is_retried_with_backoff(store: Store) -> None:
    fan = await fill_outbox(store, list(range(1, 6)), alerts=5)
    sender = FakeSender()
    sender.fail(4, *(TemporaryFailure("NetworkError: Bad Gateway") for _ in range(3)))
    clock = VirtualClock()
    engine = Delivery(store, sender, monotonic=clock)
    start = clock()
    await drain(engine, clock)
    assert sender.attempts[4] == 4 and engine.stats.failures == 3
    assert clock() - start == pytest.approx(1 + 2 + 4)  # backing off: 1 s, doubling
    assert engine.stats.pauses == 0  # other chats kept going
    check_once(fan, sender)
    rows = await store.pending_for_chat(4)
    assert rows == []


async def test_a_moved_group_gets_its_alerts_at_the_new_id(store: Store) -> None:
    fan = await fill_outbox(store, [-5, 6], alerts=4)
    sender = FakeSender()
    sender.fail(-5, ChatMoved(-1005))
    await Delivery(store, sender).run_once()
    assert sorted(sender.ids_to(-1005)) == sorted(fan.expected[-5])
    assert await store.chat(-5) is None and await store.chat(-1005) is not None
    assert await owed_total(store) == 0


async def test_a_kill_mid_send_leaves_the_rows_pending(store: Store) -> None:
    fan = await fill_outbox(store, list(range(1, 11)), alerts=10)
    sender = FakeSender()
    sender.hold()  # the sends never complete
    task = asyncio.create_task(Delivery(store, sender).run_once())
    await wait_for(lambda: sender.in_flight == 10, what="10 sends in flight")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await pending(store) == 10
    sender = FakeSender()
    await Delivery(store, sender).run_once()
    check_once(fan, sender)


async def test_close_finishes_the_sends_in_flight(store: Store) -> None:
    await fill_outbox(store, [1, 2, 3], alerts=3, extra={1: 100, 2: 100, 3: 100})
    sender = FakeSender()
    sender.hold()
    engine = Delivery(store, sender, fold_after=None)
    task = asyncio.create_task(engine.run_once())
    await wait_for(lambda: sender.in_flight == 3, what="a send to each chat in flight")
    engine.close()
    sender.release()
    await asyncio.wait_for(task, timeout=60)
    assert len(sender.sent) == 3  # the sends in flight, no more
    counts = await store.outbox_counts()
    sent_rows = sum(len(ARXIV_LINK.findall(text + " ")) for _, _, text in sender.sent)
    assert counts["sent"] == sent_rows  # every accepted message was marked, no more
    assert await owed_total(store) > 0
    assert await engine.run_once() == 0


# ---------------------------------------------------------------------------------- end to end
SCALE = 2  # the fake's limits and the bot's budgets twice Telegram's: the same shapes, faster


@pytest.fixture
async def fast_fake() -> AsyncIterator[FakeTelegram]:
    fake = FakeTelegram(
        enforce_limits=True,
        latency=0.1,
        global_rate=30 * SCALE,
        private_rate=1 * SCALE,
        private_burst=3,
        group_per_minute=20 * SCALE,
    )
    await fake.start()
    yield fake
    await fake.stop()


def within_bucket(times: list[float], rate: float, burst: float) -> bool:
    times = sorted(times)
    return all(
        j - i + 1 <= burst + rate * (times[j] - times[i]) + 1e-6
        for i in range(len(times))
        for j in range(i, len(times))
    )


async def test_fan_out_at_the_limits(fast_fake: FakeTelegram, tmp_path: Path) -> None:
    """300 alerts to 100 chats (10 of them groups, one with a backlog to fold) through the real
    Application: no 429, each alert exactly once, rates within the fake's limits."""
    db = tmp_path / "fan.db"
    chats = [*range(1, 91), *range(-100_001, -100_011, -1)]
    async with await Store.open(db) as store:
        fan = await fill_outbox(store, chats, alerts=300, extra={7: 80})
    async with FakeArxiv() as arxiv:
        settings = load_settings(
            telegram_bot_token=fast_fake.token,
            TOPICPULSE_DB=str(db),
            TOPICPULSE_TELEGRAM_API_URL=fast_fake.base_url,
            TOPICPULSE_ARXIV_API_URL=arxiv.url,
            TOPICPULSE_ARXIV_OAI_URL=arxiv.oai_url,
            TOPICPULSE_BACKFILL_WEEKS=0,
            TOPICPULSE_POLL_SECONDS=3600,
        )
        app = build_application(
            settings,
            poll_first=3600,
            rate_limiter=TelegramRateLimiter(Limits().scaled(SCALE)),
        )
        async with running(app, poll_timeout=1):
            store = pipeline_of(app).store

            async def drained() -> bool:
                return not await pending(store)

            await wait_for(drained, what=fast_fake.summary)
            assert await owed_total(store) == 0
    assert 429 not in fast_fake.stats["by_error_code"], fast_fake.stats
    folded = fan.expected.pop(7)  # its backlog went as one catch-up that shows a few
    lost, dupes = lost_and_duplicated(fan, fast_fake.sent)
    assert (lost, dupes) == (0, 0)
    sends = [c for c in fast_fake.calls if c.method == "sendMessage" and c.ok]
    times = [c.time for c in sends]
    # within the fake's limits (its global bucket holds one second's worth) on its recorded
    # times; that the bot paces below them is shown exactly, on a virtual clock, in
    # test_ratelimit.py
    assert within_bucket(times, rate=30 * SCALE, burst=30 * SCALE)
    for chat in chats:
        chat_times = [c.time for c in sends if c.params.get("chat_id") == chat]
        if chat > 0:
            assert within_bucket(chat_times, rate=SCALE, burst=3)
        else:
            assert len(chat_times) <= 20 * SCALE
    rate = (len(times) - 1) / (max(times) - min(times))
    assert rate <= 30 * SCALE + 30 * SCALE / (max(times) - min(times))
    # concurrent: the workers had several requests out at once (one at a time would manage
    # ~10/s at 100 ms latency)
    assert fast_fake.stats["max_in_flight"] > 1
    [catch_up] = fast_fake.messages_to(7)
    assert "Catch-up: 83 new papers" in (catch_up.text or "")
    assert set(ARXIV_LINK.findall(catch_up.text or "")) <= folded


async def test_no_new_chat_is_started_while_a_user_is_being_answered(store: Store) -> None:
    """Users first at the peak: while a command is served, workers start no new chat's
    messages; once its reply is out they all go ahead."""
    fan = await fill_outbox(store, list(range(1, 11)), alerts=10)
    sender = FakeSender()
    engine = Delivery(store, sender, users_first=60.0)
    with store.serving():
        task = asyncio.create_task(engine.run_once())
        # every chat taken, and its worker waiting for the user before sending anything
        await wait_for(lambda: len(store.users._waiting) == 10, what="workers waiting")
        assert sender.attempts == {}
    assert await task == 10
    check_once(fan, sender)
