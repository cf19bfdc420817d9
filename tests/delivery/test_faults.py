"""Fault injection through the real Application: every error kind the Bot API can answer with
during a fan-out (429 for one chat, 403, chat not found, unparseable HTML / too long, 5xx, an
unreachable Telegram), faulty arXiv answers during full polls, and security: the token in no
log line, group settings for admins only, per-chat caps.

Nothing may be lost or sent twice, and the bot must keep answering. The bot's rate limiter and
delivery engine and the fake Bot API share one ``SteerableClock``: real time, which a test can
stop or move forward, so that no assertion depends on how fast the machine is (a 429's hour-long
penalty is skipped, not waited for; pacing is frozen to show who waits for whom). Waits are on
conditions, with generous timeouts only as a safety net."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from telegram.ext import Application

import fake_arxiv
from clocks import SteerableClock
from fake_arxiv import FakeArxiv, make_paper
from fake_telegram import FakeTelegram
from fanout import FanOut, fill_outbox, lost_and_duplicated
from owed import owed, owed_total
from topicpulse.bot.app import Pipeline, build_application, pipeline_of, running
from topicpulse.bot.ratelimit import Limits, TelegramRateLimiter
from topicpulse.bot.sender import SendTimeouts
from topicpulse.config import load_settings
from topicpulse.delivery import chats
from topicpulse.logs import setup_logging
from topicpulse.store import Store
from topicpulse.topics import catalogue as topics
from waiting import wait_for

ADMIN = 4242


@dataclass
class Session:
    fake: FakeTelegram
    arxiv: FakeArxiv
    app: Application  # type: ignore[type-arg]
    fan: FanOut
    clock: SteerableClock  # the limiter's, the delivery engine's and the fake's

    @property
    def pipeline(self) -> Pipeline:
        return pipeline_of(self.app)

    @property
    def store(self) -> Store:
        return self.pipeline.store

    async def pending(self) -> int:
        return await owed_total(self.store)

    async def drained(self) -> None:
        async def nothing_pending() -> bool:
            return await self.pending() == 0

        await wait_for(nothing_pending, what=self.fake.summary)

    async def idle(self) -> None:
        """Every update the fake queued was fetched and handled (its replies sent)."""
        await wait_for(lambda: self.fake.pending_updates == 0, what=self.fake.summary)
        await asyncio.wait_for(self.app.update_queue.join(), timeout=60)

    async def answers_help(self, chat_id: int = 1) -> None:
        """The bot is alive: /help gets its answer."""
        before = len(self.fake.messages_to(chat_id))
        self.fake.user_sends(chat_id, "/help")
        await self.fake.wait_for(
            lambda m: m.chat_id == chat_id and (m.text or "").startswith("<b>topicpulse"),
            timeout=60,
        )
        assert len(self.fake.messages_to(chat_id)) > before


@contextlib.asynccontextmanager
async def session(
    tmp_path: Path,
    *,
    chat_ids: list[int] | None = None,
    alerts: int = 0,
    before_start: Callable[[FakeTelegram], None] | None = None,
    papers: list[Any] | None = None,
    scale: float = 10,
    send_timeouts: SendTimeouts | None = None,
    **fake_kwargs: Any,
) -> AsyncIterator[Session]:
    """A bot (limits scaled ×``scale`` for speed) over a prepared outbox, against the fakes;
    ``send_timeouts``: the bulk sends' (default: production's)."""
    db = tmp_path / "faults.db"
    async with await Store.open(db) as store:
        fan = await fill_outbox(store, chat_ids, alerts=alerts) if chat_ids else FanOut()
    clock = SteerableClock()
    fake = FakeTelegram(**{"latency": 0.02, "clock": clock, **fake_kwargs})
    await fake.start()
    arxiv = FakeArxiv(papers or [])
    await arxiv.start()
    settings = load_settings(
        telegram_bot_token=fake.token,
        TOPICPULSE_DB=str(db),
        TOPICPULSE_TELEGRAM_API_URL=fake.base_url,
        TOPICPULSE_ARXIV_API_URL=arxiv.url,
        TOPICPULSE_ARXIV_OAI_URL=arxiv.oai_url,
        TOPICPULSE_ARXIV_DELAY_SECONDS=0,
        TOPICPULSE_ARXIV_TIMEOUT_SECONDS=1,
        TOPICPULSE_ARXIV_RETRIES=1,
        TOPICPULSE_BACKFILL_WEEKS=0,
        TOPICPULSE_POLL_SECONDS=3600,
        TOPICPULSE_CATEGORIES="cs.CL,cs.LG",
    )
    if before_start:
        before_start(fake)
    app = build_application(
        settings,
        poll_first=3600,
        arxiv_backoff=0.05,
        rate_limiter=TelegramRateLimiter(Limits().scaled(scale), clock=clock, sleep=clock.sleep),
        send_timeouts=send_timeouts,
    )
    try:
        async with running(app, poll_timeout=1):
            # (it reads time.monotonic until now: the same time, as long as nobody steered it)
            pipeline_of(app).delivery.monotonic = clock
            yield Session(fake, arxiv, app, fan, clock)
    finally:
        await arxiv.close()
        await fake.stop()


def exactly_once(s: Session) -> None:
    lost, dupes = lost_and_duplicated(s.fan, s.fake.sent)
    assert (lost, dupes) == (0, 0), s.fake.summary()


def sends_to(fake: FakeTelegram, chat_id: int) -> list[Any]:
    return [
        c for c in fake.calls if c.method == "sendMessage" and c.params.get("chat_id") == chat_id
    ]


# ---------------------------------------------------------------------------------- Bot API
async def test_429_for_one_chat_while_the_others_keep_flowing(tmp_path: Path) -> None:
    penalty = 3600  # skipped by moving the clock forward, not waited for

    def fault(fake: FakeTelegram) -> None:
        fake.fail_next(
            "sendMessage",
            status=429,
            description=f"Too Many Requests: retry after {penalty}",
            retry_after=penalty,
            chat_id=5,
        )

    chat_ids = list(range(1, 151))
    async with session(tmp_path, chat_ids=chat_ids, alerts=300, before_start=fault) as s:

        async def only_chat_5_left() -> bool:
            left = len(await owed(s.store, 5))
            return bool(sends_to(s.fake, 5)) and await s.pending() == left > 0

        # every other chat gets all its alerts while chat 5 serves its penalty …
        await wait_for(only_chat_5_left, what=s.fake.summary)
        served = {c.params.get("chat_id") for c in s.fake.calls if c.ok}
        assert served >= set(chat_ids) - {5}  # (no global stall)
        assert len(sends_to(s.fake, 5)) == 1  # … and chat 5 is not tried again meanwhile
        s.clock.jump(penalty)
        s.pipeline.wake.set()
        await s.drained()
        await s.answers_help()
        stats = s.pipeline.delivery.stats
        limiter = s.app.bot.rate_limiter
    calls = sends_to(s.fake, 5)
    assert [c.result for c in calls[:2]] == [429, "ok"]
    flood_at, retried_at = calls[0].time, calls[1].time
    assert retried_at - flood_at >= penalty  # retry_after honoured for that chat
    assert stats.flood_waits == 1 and stats.pauses == 0
    assert isinstance(limiter, TelegramRateLimiter) and limiter.stats.global_floods == 0
    exactly_once(s)


async def test_403_deactivates_the_chat(tmp_path: Path) -> None:
    async with session(
        tmp_path, chat_ids=list(range(1, 31)), alerts=60, before_start=lambda f: f.block_chat(3)
    ) as s:
        await s.drained()
        chat = await s.store.chat(3)
        counts = await s.store.outbox_counts()
    assert chat is not None and not chat.active
    assert counts == {"dropped": 2}  # its message's papers (the others need no row)
    assert len(sends_to(s.fake, 3)) == 1  # not tried again
    del s.fan.expected[3]
    exactly_once(s)


async def test_chat_not_found_deactivates_the_chat(tmp_path: Path) -> None:
    def fault(fake: FakeTelegram) -> None:
        fake.fail_next(
            "sendMessage", status=400, description="Bad Request: chat not found", chat_id=4
        )

    async with session(tmp_path, chat_ids=list(range(1, 31)), alerts=30, before_start=fault) as s:
        await s.drained()
        chat = await s.store.chat(4)
    assert chat is not None and not chat.active
    del s.fan.expected[4]
    exactly_once(s)


@pytest.mark.parametrize(
    "description",
    [
        'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 12',
        "Bad Request: message is too long",
    ],
)
async def test_a_refused_message_is_logged_and_sent_as_plain_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, description: str
) -> None:
    def fault(fake: FakeTelegram) -> None:
        fake.fail_next("sendMessage", status=400, description=description, chat_id=6)

    with caplog.at_level(logging.ERROR, logger="topicpulse.delivery"):
        async with session(
            tmp_path, chat_ids=list(range(1, 21)), alerts=40, before_start=fault
        ) as s:
            await s.drained()
            rows = [
                r
                for r in await s.store.pending_for_chat(6)  # nothing left pending
            ]
    assert rows == []
    message = s.fake.messages_to(6)[-1]
    assert message.parse_mode is None and "<" not in (message.text or "")
    assert "https://arxiv.org/abs/" in (message.text or "")
    assert "outbox rows [" in caplog.text
    assert description.split(": ", 1)[1][:20].lower() in caplog.text.lower()
    exactly_once(s)  # the plain text carries the same papers (their links written out)


async def test_5xx_is_retried_with_backoff(tmp_path: Path) -> None:
    def fault(fake: FakeTelegram) -> None:
        fake.fail_next("sendMessage", status=502, description="Bad Gateway", count=2)
        fake.fail_next("sendMessage", status=500, description="Internal Server Error", count=1)

    async with session(tmp_path, chat_ids=list(range(1, 41)), alerts=40, before_start=fault) as s:
        await s.drained()
        failures = s.pipeline.delivery.stats.failures
    assert failures == 3
    assert s.fake.stats["by_error_code"] == {502: 2, 500: 1}
    exactly_once(s)


async def test_telegram_unreachable_for_a_while_then_drains(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    later = [
        make_paper(f"2611.9{i:04d}", now - timedelta(hours=1), title=f"kw00000 {i}")
        for i in range(5)
    ]
    async with session(tmp_path, chat_ids=list(range(1, 61)), alerts=60) as s:
        delivery = s.pipeline.delivery
        delivery.halt_max = 1.0
        await wait_for(lambda: len(s.fake.sent) >= 5, what="the first alerts")
        s.fake.set_unreachable(3600)  # until the test ends the outage
        before = await s.pending()
        # alerts keep being queued, durably, while Telegram is away
        s.arxiv.add(*later)
        await s.pipeline.poll_round()
        grown = await s.pending()
        assert grown > before
        await wait_for(lambda: delivery.stats.pauses >= 1, what="delivery to pause")
        s.fake.set_unreachable(0)
        await s.drained()
        await s.answers_help(2)
        stats = s.pipeline.delivery.stats
    assert s.fake.stats["dropped"] > 0 and stats.pauses >= 1
    for chat in range(1, 61, 6):  # the followers of kw00000 get the 5 later papers too
        s.fan.expected[chat] |= {p.arxiv_id for p in later}
    exactly_once(s)


# ---------------------------------------------------------------------------------- arXiv
@pytest.mark.parametrize(
    "faults",
    [
        [fake_arxiv.unavailable(retry_after="1")] * 2,  # the client retries once: round fails
        [fake_arxiv.empty_page()] * 5,
        [fake_arxiv.truncated()],
        [fake_arxiv.html_page()],
        [fake_arxiv.slow(3)] * 2,  # past the 1 s timeout, twice
        [fake_arxiv.server_error()],  # then the retry succeeds
    ],
    ids=["503-retry-after", "empty-page", "truncated", "html-page", "slow", "500-then-ok"],
)
async def test_faulty_arxiv_answers_lose_nothing(tmp_path: Path, faults: list[Any]) -> None:
    now = datetime.now(UTC)

    def grpo(i: int) -> Any:
        return make_paper(
            f"2611.0{i:04d}", now - timedelta(hours=i), title=f"GRPO for reasoning, part {i}"
        )

    async with session(tmp_path, papers=[grpo(i) for i in range(1, 4)]) as s:
        followers = [11, 12, -100_013]
        topic = await topics.custom_topic(s.store, "grpo")
        for chat in followers:
            await s.store.ensure_chat(chat)
            await s.store.subscribe(chat, topic.id)
        s.arxiv.add(*(grpo(i) for i in range(4, 9)))
        s.arxiv.script(*faults)
        await s.pipeline.poll_round()  # fails (or succeeds after a retry)
        await s.pipeline.poll_round()  # a normal round
        await s.drained()
        await s.answers_help()
        stored = await s.store.count_papers()
    assert stored == 8
    starts = [r.started for r in s.arxiv.requests]
    if faults[0].retry_after:  # Retry-After honoured between the attempts
        assert starts[1] - starts[0] >= 1.0
    expected = {f"2611.0{i:04d}" for i in range(1, 9)}
    s.fan.expected = dict.fromkeys(followers, expected)
    exactly_once(s)


# ---------------------------------------------------------------------------------- security
@pytest.fixture
def restore_logging() -> Any:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


async def test_the_token_is_in_no_log_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    """A full run with every kind of failure, logging at DEBUG through the production set-up."""
    token = FakeTelegram().token

    def faults(fake: FakeTelegram) -> None:
        fake.block_chat(2)
        fake.fail_next("sendMessage", status=429, description="Too Many Requests", chat_id=3)
        fake.fail_next("sendMessage", status=502, description="Bad Gateway", chat_id=4)
        fake.fail_next(
            "sendMessage", status=400, description="Bad Request: can't parse entities", chat_id=5
        )

    setup_logging(logging.DEBUG, secrets=[token])
    async with session(tmp_path, chat_ids=list(range(1, 21)), alerts=20, before_start=faults) as s:
        await s.drained()
        s.fake.set_unreachable(3600)
        await wait_for(lambda: s.fake.stats["dropped"] > 0, what="a dropped request")
        s.fake.set_unreachable(0)
        await s.answers_help()
        s.fake.user_sends(1, "/momentum nothing-like-this")
        await s.idle()
    logged = capsys.readouterr().err
    assert "can't parse entities" in logged.lower() and "Bad Gateway" in logged  # failures logged
    assert "getUpdates" in logged  # and PTB's own debug lines
    assert token not in logged
    assert token.split(":", 1)[1] not in logged


async def test_only_group_admins_change_its_subscriptions(tmp_path: Path) -> None:
    group = -100_777
    async with session(tmp_path) as s:
        s.fake.set_chat_admins(group, {ADMIN})
        s.fake.user_sends(group, "/follow grpo", username="bob")
        refused = await s.fake.wait_for(lambda m: m.chat_id == group, timeout=10)
        assert "administrators" in (refused.text or "")
        assert await s.store.subscriptions(group) == []
        s.fake.user_sends(group, "/follow grpo", user_id=ADMIN, username="alice")
        await s.fake.wait_for(lambda m: "following" in (m.text or "").lower(), timeout=10)
        followed = [x.topic.id for x in await s.store.subscriptions(group)]
        assert len(followed) == 1
        s.fake.user_sends(group, "/unfollow grpo", username="bob")
        s.fake.user_sends(group, "/digest daily 07:00", username="bob")
        await s.fake.wait_for_messages(group, 4, timeout=10)
        assert [x.topic.id for x in await s.store.subscriptions(group)] == followed
        chat = await s.store.chat(group)
        assert chat is not None and chat.mode == "instant"


async def test_per_chat_caps_hold(tmp_path: Path) -> None:
    async with session(tmp_path) as s:
        await s.store.ensure_chat(77)
        for i in range(chats.MAX_FOLLOWS):
            await chats.follow(s.store, 77, f"capword{i}")
        with pytest.raises(chats.UserError):
            await chats.follow(s.store, 77, "one more")
        s.fake.user_sends(77, "/follow yet another")
        reply = await s.fake.wait_for(lambda m: m.chat_id == 77, timeout=10)
        assert str(chats.MAX_FOLLOWS) in (reply.text or "")
        assert await s.store.count_subscriptions(77) == chats.MAX_FOLLOWS
        # and one user cannot make the bot talk without bound
        for _ in range(30):
            s.fake.user_sends(78, "/help")
        await s.idle()  # all 30 handled
        replies = s.fake.messages_to(78)
        assert len(replies) <= 30  # 20 a minute answered, and at most a warning per command
        assert sum("too fast" in (m.text or "") for m in replies) >= 1


async def test_one_users_command_burst_does_not_hold_up_the_others(tmp_path: Path) -> None:
    """Replies wait for their chat's pacing (1/s) inside the handlers: a burst of commands
    from one user must not take every handler slot while other users wait.

    The clock stands still while the bursts are in, so their replies stay paced in their
    handlers: another user's command that needed one of those slots would never be answered."""
    scale = 20  # the bot's budgets and the fake's limits 20× Telegram's (to drain at the end)
    async with session(
        tmp_path,
        scale=scale,
        latency=0.1,
        enforce_limits=True,
        global_rate=30 * scale,
        private_rate=scale,
        group_per_minute=20 * scale,
    ) as s:
        s.clock.freeze()
        for _ in range(25):
            s.fake.user_sends(78, "/help")
            s.fake.user_sends(79, "/help")
        s.fake.user_sends(5, "/help")  # queued behind both bursts
        answer = await s.fake.wait_for(lambda m: m.chat_id == 5, timeout=60)
        assert answer.text is not None and answer.text.startswith("<b>topicpulse")
        private_burst = Limits().private_burst
        # the bursts are still being paced: at most their burst went out
        assert len(s.fake.messages_to(78)) <= private_burst
        assert len(s.fake.messages_to(79)) <= private_burst
        s.clock.resume()
        await s.idle()
        assert len(s.fake.messages_to(78)) > private_burst  # … and then drain
    assert 429 not in s.fake.stats["by_error_code"]
