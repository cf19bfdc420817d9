"""``topicpulse run``: the python-telegram-bot Application, wired to the pipeline.

Jobs (python-telegram-bot's JobQueue): an ingestion round every TOPICPULSE_POLL_SECONDS
(backfill first, in the background, when the store is empty), followed by matching and spike
detection; a delivery worker that sends the outbox as soon as a round queued something (and
every few seconds for digests that fall due). Shutdown on SIGINT/SIGTERM abandons in-flight
work safely — every round and every delivery is settled in the store transactionally — and
closes the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime

from telegram import Update
from telegram.ext import AIORateLimiter, Application, ApplicationBuilder, ContextTypes

from topicpulse import momentum
from topicpulse.arxiv import ArxivClient
from topicpulse.bot import handlers
from topicpulse.bot.sender import TelegramSender
from topicpulse.config import Settings
from topicpulse.delivery import Delivery
from topicpulse.ingest import Ingestor
from topicpulse.matching import match_new_papers
from topicpulse.models import utcnow
from topicpulse.store import Store
from topicpulse.topics import sync_catalogue

log = logging.getLogger(__name__)

DELIVERY_TICK = 5.0  # seconds between delivery passes when nothing wakes the worker


@dataclass(slots=True)
class Pipeline:
    """The running engine: ingest → match → spikes → delivery."""

    store: Store
    ingestor: Ingestor
    delivery: Delivery
    clock: Callable[[], datetime]
    thresholds: momentum.SpikeThresholds = field(default_factory=momentum.SpikeThresholds)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def after_ingest(self) -> None:
        """Match what the round stored, detect spikes, and wake the delivery worker."""
        await match_new_papers(self.store)
        opened = await momentum.detect_spikes(
            self.store,
            await self.store.followed_topics(),
            now=self.clock(),
            thresholds=self.thresholds,
        )
        if opened:
            log.info("%d spike episode(s) started", len(opened))
        self.wake.set()

    async def poll_round(self) -> None:
        await self.ingestor.poll()
        await self.after_ingest()

    async def backfill(self, weeks: float) -> None:
        stats, _ = await self.ingestor.backfill(weeks, progress=_log_progress)
        log.info(
            "backfill finished: %d new papers (%s)", stats.new, "ok" if stats.ok else stats.message
        )
        await self.after_ingest()

    async def delivery_worker(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=DELIVERY_TICK)
            self.wake.clear()
            try:
                await self.delivery.run_once()
            except Exception:
                log.exception("delivery pass failed; retrying on the next tick")


def _log_progress(done: int, total: int, label: str) -> None:
    if done == total or done % 7 == 0:
        log.info("backfill %d/%d days (%s)", done, total, label)


def pipeline_of(app: Application) -> Pipeline:  # type: ignore[type-arg]
    return app.bot_data["pipeline"]  # type: ignore[no-any-return]


async def _poll_job(context: ContextTypes.DEFAULT_TYPE) -> None:
    try:
        await pipeline_of(context.application).poll_round()
    except Exception:
        log.exception("ingestion round failed; trying again next round")


def build_application(
    settings: Settings,
    *,
    clock: Callable[[], datetime] = utcnow,
    arxiv_backoff: float = 5.0,
    poll_first: float = 1.0,
) -> Application:  # type: ignore[type-arg]
    """The Application with handlers, jobs and the engine attached (started in post_init)."""
    assert settings.telegram_bot_token, "TELEGRAM_BOT_TOKEN is required"

    async def post_init(app: Application) -> None:  # type: ignore[type-arg]
        store = await Store.open(settings.db)
        await sync_catalogue(store)
        client = ArxivClient(
            settings.arxiv_api_url,
            delay=settings.arxiv_delay_seconds,
            timeout=settings.arxiv_timeout_seconds,
            retries=settings.arxiv_retries,
            backoff=arxiv_backoff,
        )
        ingestor = Ingestor(
            store,
            client,
            settings.categories,
            page_size=settings.arxiv_page_size,
            overlap_days=settings.overlap_days,
            clock=clock,
        )
        pipeline = Pipeline(
            store, ingestor, Delivery(store, TelegramSender(app.bot), clock=clock), clock
        )
        app.bot_data["pipeline"] = pipeline
        app.bot_data["topicpulse"] = handlers.BotContext(
            store=store, settings=settings, clock=clock, wake_delivery=pipeline.wake.set
        )
        await app.bot.set_my_commands(handlers.bot_commands())
        pipeline.tasks.append(asyncio.create_task(pipeline.delivery_worker(), name="delivery"))
        if settings.backfill_weeks and await store.count_papers() == 0:
            log.info("empty store: backfilling %d weeks in the background", settings.backfill_weeks)
            pipeline.tasks.append(
                asyncio.create_task(pipeline.backfill(settings.backfill_weeks), name="backfill")
            )
        assert app.job_queue is not None
        app.job_queue.run_repeating(
            _poll_job,
            interval=settings.poll_seconds,
            first=poll_first,
            name="poll",
            job_kwargs={"max_instances": 1, "coalesce": True},
        )
        log.info("topicpulse is running as @%s", app.bot.username)

    async def post_shutdown(app: Application) -> None:  # type: ignore[type-arg]
        pipeline = app.bot_data.get("pipeline")
        if pipeline is None:
            return
        for task in pipeline.tasks:
            task.cancel()
        await asyncio.gather(*pipeline.tasks, return_exceptions=True)
        await pipeline.ingestor.client.aclose()
        await pipeline.store.close()
        log.info("topicpulse stopped; database closed")

    app = (
        ApplicationBuilder()
        .token(settings.telegram_bot_token)
        .base_url(settings.telegram_api_url)
        .base_file_url(_file_url(settings.telegram_api_url))
        .rate_limiter(AIORateLimiter(overall_max_rate=29, overall_time_period=1, max_retries=0))
        .concurrent_updates(16)
        .post_init(post_init)
        .post_shutdown(post_shutdown)
        .build()
    )
    handlers.register(app)
    return app


def _file_url(api_url: str) -> str:
    """The file endpoint beside a Bot API base URL (".../bot" → ".../file/bot")."""
    head, _, tail = api_url.rstrip("/").rpartition("/")
    return f"{head}/file/{tail}" if head else api_url


@contextlib.asynccontextmanager
async def running(app: Application, *, poll_timeout: float = 10) -> AsyncIterator[Application]:  # type: ignore[type-arg]
    """Run the application inside an existing event loop (as ``run_polling`` does, step by
    step): for embedding and end-to-end tests."""
    await app.initialize()
    if app.post_init:
        await app.post_init(app)
    assert app.updater is not None
    await app.updater.start_polling(
        poll_interval=0, timeout=poll_timeout, allowed_updates=Update.ALL_TYPES
    )
    await app.start()
    try:
        yield app
    finally:
        if app.updater.running:
            await app.updater.stop()
        if app.running:
            await app.stop()
        await app.shutdown()
        if app.post_shutdown:
            await app.post_shutdown(app)


def run_bot(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM (long polling)."""
    build_application(settings).run_polling(allowed_updates=Update.ALL_TYPES)
