"""The bot under test, for every stage's end-to-end tests: a real Application on its own
database file, driven through the fake Bot API and the fake arXiv (``bot_session``), with the
papers, clock and checks those tests share."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from telegram.ext import Application

from fake_arxiv import FakeArxiv, Scripted, make_paper
from fake_telegram import FakeTelegram, SentMessage
from telegram_html import utf16_len, validate_telegram_html
from topicpulse.bot.app import Pipeline, build_application, pipeline_of, running
from topicpulse.bot.ratelimit import Limits, TelegramRateLimiter
from topicpulse.config import Settings, load_settings
from topicpulse.models import Paper
from topicpulse.store import Store
from waiting import wait_for

RL = "RL for Language Models"
USER = 1001  # a private chat (chat id == user id)
ADMIN = 4242  # in TOPICPULSE_ADMIN_IDS


class Clock:
    """An injectable, mutable clock: ``clock()`` returns ``clock.now``."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def paper(
    n: int,
    title: str,
    *,
    days_ago: float = 0.5,
    categories: Iterable[str] = ("cs.CL",),
    version: int = 1,
    abstract: str = "We study this question empirically.",
    now: datetime | None = None,
) -> Paper:
    """A synthetic paper published ``days_ago`` before ``now`` (default: the real time). A
    later version is dated a day per version after the first: arXiv announces a replacement
    on a later evening, and OAI-PMH dates its record then."""
    published = (now or datetime.now(UTC)) - timedelta(days=days_ago)
    return make_paper(
        f"2611.{n:05d}",
        published.replace(microsecond=0),
        categories=tuple(categories),
        version=version,
        updated=(published + timedelta(days=version - 1)).replace(microsecond=0),
        title=title,
        abstract=abstract,
        authors=("Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra"),
    )


def seed_papers(now: datetime | None = None) -> list[Paper]:
    """History for momentum and previews: 5 RL-for-LM papers in the last four weeks (3 of them
    about reasoning), 2 in the four weeks before, and 3 papers on other things (2 recent)."""
    rl = "GRPO for language model alignment, part {}"
    reasoning = "Group-relative rewards improve multi-step reasoning."
    return [
        paper(1, rl.format(1), days_ago=2, abstract=reasoning, now=now),
        paper(2, rl.format(2), days_ago=5, abstract=reasoning, now=now),
        paper(3, rl.format(3), days_ago=9, abstract=reasoning, now=now),
        paper(4, rl.format(4), days_ago=15, now=now),
        paper(5, rl.format(5), days_ago=20, now=now),
        paper(6, rl.format(6), days_ago=33, now=now),
        paper(7, rl.format(7), days_ago=45, now=now),
        paper(8, "Graph neural networks for molecules", days_ago=3, categories=["cs.LG"], now=now),
        paper(9, "Sparse attention kernels & <tricks>", days_ago=10, categories=["cs.LG"], now=now),
        paper(10, "A survey of image segmentation", days_ago=40, categories=["cs.CV"], now=now),
    ]


def fast_limiter() -> TelegramRateLimiter:
    """The bot's own flood control, 100 times faster: the fake does not enforce Telegram's
    limits here, and the tests send dozens of replies to one chat within a second."""
    return TelegramRateLimiter(Limits().scaled(100))


@dataclass
class Bot:
    """One running topicpulse bot and the two fakes it talks to."""

    fake: FakeTelegram
    arxiv: FakeArxiv
    settings: Settings
    clock: Clock
    app: Application | None = None  # type: ignore[type-arg]
    _stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    # -------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        assert self.app is None
        self._stack = contextlib.AsyncExitStack()
        app = build_application(
            self.settings,
            clock=self.clock,
            poll_first=3600,
            rate_limiter=fast_limiter(),
            webhook_backoff=0.01,
        )
        await self._stack.enter_async_context(running(app, poll_timeout=1))
        self.app = app

    async def stop(self) -> None:
        if self.app is not None:
            self.app = None
            await self._stack.aclose()

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    @property
    def pipeline(self) -> Pipeline:
        assert self.app is not None
        return pipeline_of(self.app)

    @property
    def store(self) -> Store:
        return self.pipeline.store

    # -------------------------------------------------------------- driving
    async def idle(self) -> None:
        """Wait until the bot fetched every queued update and finished handling it."""
        assert self.app is not None
        await wait_for(
            lambda: not self.fake.pending_updates,
            timeout=30,
            what=lambda: f"the updates to be fetched; {self.fake.summary()}",
        )
        await asyncio.wait_for(self.app.update_queue.join(), timeout=30)
        ticks = self.app.bot_data["topicpulse"].ticks  # (ratings' ticks follow their taps)
        await wait_for(ticks.idle, timeout=30, what="the ratings' ticks to be sent")

    async def ask(self, chat_id: int, text: str, **kwargs: Any) -> list[SentMessage]:
        """Send ``text`` as a user and return everything the bot sent to the chat in answer."""
        before = len(self.fake.messages_to(chat_id))
        self.fake.user_sends(chat_id, text, **kwargs)
        await self.idle()
        return self.fake.messages_to(chat_id)[before:]

    async def say(self, chat_id: int, text: str, **kwargs: Any) -> SentMessage:
        """Like ``ask`` for a command answered with exactly one message."""
        answer = await self.ask(chat_id, text, **kwargs)
        assert len(answer) == 1, [m.text for m in answer]
        return answer[0]

    async def press(
        self, chat_id: int, message: SentMessage, data: str, *, forged: bool = False, **kwargs: Any
    ) -> tuple[list[SentMessage], dict[str, Any]]:
        """Press a button; returns what the bot sent/edited and its answerCallbackQuery.
        ``forged``: send ``data`` although the message never had such a button (as a modified
        client can)."""
        if not forged:
            assert data in [value for _, value in message.buttons], message.buttons
        before = len(self.fake.messages_to(chat_id))
        answered = set(self.fake.callback_answers)
        self.fake.user_presses(chat_id, message.message_id, data, **kwargs)
        await self.idle()
        answers = [a for q, a in self.fake.callback_answers.items() if q not in answered]
        assert len(answers) == 1, answers
        return self.fake.messages_to(chat_id)[before:], answers[0]

    def stop_delivery_worker(self) -> None:
        workers = [t for t in self.pipeline.tasks if t.get_name() == "delivery"]
        assert len(workers) == 1
        workers[0].cancel()

    async def poll(self) -> None:
        """One ingestion round (poll arXiv → store → match → spikes)."""
        await self.pipeline.poll_round()

    async def deliver(self) -> int:
        """One delivery pass that does not race the background delivery worker."""
        delivery = self.pipeline.delivery
        await self._not_busy()
        settled = await delivery.run_once()
        await self._not_busy()
        return settled

    async def _not_busy(self) -> None:
        await wait_for(lambda: not self.pipeline.delivery._busy, timeout=30, what="delivery")

    async def poll_and_deliver(self) -> None:
        await self.poll()
        await self.deliver()

    async def subscriptions(self, chat_id: int) -> list[str]:
        return [s.topic.name for s in await self.store.subscriptions(chat_id)]


def check_traffic(fake: FakeTelegram, *, allowed: Iterable[str] = ()) -> None:
    """Every message the bot sent is valid Telegram HTML within the limits, and the fake
    answered no request with 400 (apart from the ``allowed`` descriptions)."""
    allowed = tuple(allowed)
    bad = [
        (c.method, c.description)
        for c in fake.calls
        if c.error_code == 400 and not any(a in (c.description or "") for a in allowed)
    ]
    assert not bad, bad
    for m in fake.sent:
        if m.text is None:
            continue
        if (m.parse_mode or "").upper() == "HTML":
            ok, error, _ = validate_telegram_html(m.text)
            assert ok, (error, m.text)
        limit = 1024 if m.method in ("sendPhoto", "editMessageCaption") else 4096
        assert utf16_len(m.plain_text or "") <= limit
        assert utf16_len(m.text) <= 4096


@contextlib.asynccontextmanager
async def bot_session(
    tmp_path: Path,
    *,
    papers: Iterable[Paper] = (),
    clock: Clock | None = None,
    name: str = "bot.db",
    arxiv_script: Iterable[Scripted] = (),
    oai_page_size: int | None = None,
    transport: str = "polling",
    **overrides: Any,
) -> AsyncIterator[Bot]:
    """A running bot against fresh fakes. ``arxiv_script``: the fake arXiv's first answers
    (scripted before the bot starts); ``oai_page_size``: records a page of its OAI-PMH;
    ``transport``: how updates reach the bot, "polling" or "webhook" (the fake POSTs them to
    the bot's server on 127.0.0.1); ``overrides``: settings, by their variable names."""
    fake = FakeTelegram()
    await fake.start()
    arxiv = FakeArxiv(papers)
    arxiv.script(*arxiv_script)
    if oai_page_size is not None:
        arxiv.oai.page_size = oai_page_size
    await arxiv.start()
    defaults: dict[str, Any] = dict(
        telegram_bot_token=fake.token,
        TOPICPULSE_DB=str(tmp_path / name),
        TOPICPULSE_TELEGRAM_API_URL=fake.base_url,
        TOPICPULSE_ARXIV_API_URL=arxiv.url,
        TOPICPULSE_ARXIV_OAI_URL=arxiv.oai_url,
        TOPICPULSE_ARXIV_DELAY_SECONDS=0,
        TOPICPULSE_BACKFILL_WEEKS=0,
        # the first intake of a new database reaches back this far (no backfill here): the
        # tests' papers of the last weeks are stored by the first poll
        TOPICPULSE_OVERLAP_DAYS=60,
        TOPICPULSE_POLL_SECONDS=3600,
        TOPICPULSE_ADMIN_IDS=str(ADMIN),
        # No spike alerts: whether a topic spikes depends on where today falls in the week.
        TOPICPULSE_SPIKE_MIN_PAPERS=10_000,
        TOPICPULSE_SPIKE_MIN_WEEK_PAPERS=10_000,
    )
    if transport == "webhook":
        port = free_port()
        defaults |= dict(
            TOPICPULSE_WEBHOOK_URL=f"http://127.0.0.1:{port}",
            TOPICPULSE_WEB_HOST="127.0.0.1",
            TOPICPULSE_WEB_PORT=port,
        )
    settings = load_settings(**(defaults | overrides))
    bot = Bot(fake, arxiv, settings, clock or Clock())
    try:
        await bot.start()
        yield bot
    finally:
        await bot.stop()
        await arxiv.close()
        await fake.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def links(message: SentMessage) -> list[str]:
    """arXiv ids linked from a message (abs links only, in order)."""
    return re.findall(r'href="https://arxiv\.org/abs/([^"]+)"', message.text or "")


async def topic_id(store: Store, name: str) -> int:
    found = [t.id for t in await store.topics() if t.name == name]
    assert len(found) == 1, name
    return found[0]
