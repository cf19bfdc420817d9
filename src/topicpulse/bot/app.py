"""``topicpulse run``: the python-telegram-bot Application, wired to the pipeline.

Jobs (python-telegram-bot's JobQueue): an intake round (OAI-PMH, ``sources/ingest.py``) at
every start, then shortly after each update arXiv's calendar expects, with backoff while it
has not appeared (``sources/calendar.Schedule``), or every TOPICPULSE_POLL_SECONDS; each
followed by matching and spike detection (at start, an incomplete history of the configured
backfill weeks is harvested in the background); the daily maintenance (``delivery/upkeep``);
a delivery worker that sends as soon as a round queued something (and every few seconds for
digests that fall due, or a deferred chat). Every message goes through
``bot.ratelimit.TelegramRateLimiter`` (Telegram's limits; replies ahead of alerts). SIGINT or
SIGTERM lets the sends in flight finish (``DELIVERY_GRACE``), abandons the rest safely (every
round and delivery is settled in the store transactionally) and closes the database.

Updates arrive by long polling, or, with TOPICPULSE_WEBHOOK_URL, by webhook: ``<url>/telegram``
with a secret token, POSTed to the pages' server in this process, which hands each update to
the Application (one server serves the pages, /healthz and the updates).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aiohttp import web
from telegram import Update
from telegram.ext import Application, ApplicationBuilder, BaseRateLimiter, ContextTypes

from topicpulse import heap
from topicpulse.bot import handlers, membership, starting
from topicpulse.bot.ratelimit import TelegramRateLimiter
from topicpulse.bot.sender import SendTimeouts, TelegramSender
from topicpulse.bot.serving import STOPPING, queue_update, register_webhook, start_web
from topicpulse.bot.transport import bot_request, close_sessions, file_url, updates_request
from topicpulse.config import Settings
from topicpulse.delivery import Delivery
from topicpulse.delivery.upkeep import run_maintenance
from topicpulse.insight import momentum, taste
from topicpulse.insight.llm import answer_writer
from topicpulse.logs import protect_secrets
from topicpulse.models import utcnow
from topicpulse.sources.calendar import Calendar, Schedule
from topicpulse.sources.ingest import Ingestor
from topicpulse.store import Store
from topicpulse.topics.catalogue import sync_catalogue
from topicpulse.topics.matching import match_new_papers
from topicpulse.web.server import WEBHOOK_PATH, WebContext, Webhook

log = logging.getLogger(__name__)

DELIVERY_TICK = 5.0  # seconds between delivery passes when nothing wakes the worker
DELIVERY_GRACE = 3.0  # seconds the sends in flight get to finish when the bot stops
MAINTENANCE_SECONDS = 24 * 3600  # the daily upkeep (delivery/upkeep.py)
MAINTENANCE_FIRST = 600  # seconds after a start
BACKUP_FIRST = 60  # seconds after a start: the day's snapshot (TOPICPULSE_BACKUP_DIR), if due
# Updates handled at once. Replies wait for their chat's pacing (~1/s) inside the handler, so a
# user who fires 20 commands holds 20 handlers for 20 s; handlers are cheap coroutines, and the
# per-user command limit (handlers.COMMAND_RATE) bounds what one user can hold.
CONCURRENT_UPDATES = 256


@dataclass(slots=True)
class Pipeline:
    """The running engine: ingest → match → spikes → delivery, and the daily upkeep.

    One engine pass (match, then spikes) runs at a time (``engine_lock``): a backfill's pass and
    a poll's pass never match the same papers twice or race each other into the spike table.
    Background tasks are started with ``spawn``, which logs a task's death at once."""

    store: Store
    ingestor: Ingestor
    delivery: Delivery
    clock: Callable[[], datetime]
    thresholds: momentum.SpikeThresholds = field(default_factory=momentum.SpikeThresholds)
    backfill_weeks: float = 0
    schedule: Schedule | None = None  # None: a fixed polling interval
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    engine_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    web_runner: web.AppRunner | None = None  # the topic pages, when a port is configured
    rounds: int = 0  # intake rounds and backfills running now

    def in_round(self) -> bool:
        """Whether an intake round (or a backfill) is running, or its matching."""
        return self.rounds > 0 or self.engine_lock.locked()

    @contextlib.contextmanager
    def _round(self) -> Iterator[None]:
        self.rounds += 1
        try:
            yield
        finally:
            self.rounds -= 1

    def delivery_state(self) -> str:
        """For /healthz: "halted" (Telegram keeps failing), "stopped", or "running"."""
        if self.delivery.closed:
            return "stopped"
        return "halted" if self.delivery.halted() else "running"

    def heard_from(self, chat_id: int) -> None:
        """A command came from the chat: alerts held for its closed forum topic are tried
        again now (an admin may just have reopened it)."""
        if self.delivery.heard_from(chat_id):
            self.wake.set()

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run ``coro`` in the background; if it dies, its traceback is logged right away."""
        task = asyncio.create_task(coro, name=name)
        task.add_done_callback(_report_death)
        self.tasks = [t for t in self.tasks if not t.done()]
        self.tasks.append(task)
        return task

    def running(self, name: str) -> bool:
        return any(t.get_name() == name and not t.done() for t in self.tasks)

    async def after_ingest(self) -> None:
        """Match what the rounds stored, detect spikes, and wake the delivery worker."""
        async with self.engine_lock:
            await match_new_papers(self.store, clock=self.clock, in_process=True)
            opened = await momentum.detect_followed_spikes(
                self.store, now=self.clock(), thresholds=self.thresholds, in_process=True
            )
        if opened:
            log.info("%d spike episode(s) started", len(opened))
        self.wake.set()

    async def poll_round(self) -> None:
        """An intake round; then the history, if a harvest of it stopped (arXiv failed), so
        momentum never keeps a hole; then match."""
        with self._round():
            await self.ingestor.poll()
            if (
                self.backfill_weeks
                and not self.running("backfill")
                and await self.ingestor.history_missing(self.backfill_weeks)
            ):
                await self._backfill_days()
            await self.after_ingest()

    async def next_look(self) -> timedelta:
        """How long until the calendar's next intake round (after this one)."""
        assert self.schedule is not None
        now = self.clock()
        at = self.schedule.next_look(now, await self.ingestor.newest_stamp())
        return max(at - now, timedelta(seconds=1))

    async def backfill(self) -> None:
        """The history at start (the configured weeks, where not complete), then a match."""
        with self._round():
            await self._backfill_days()
            await self.after_ingest()

    async def _backfill_days(self) -> None:
        progress = starting.ProgressLog()
        stats, _ = await self.ingestor.backfill(self.backfill_weeks, progress=progress)
        log.info(progress.finished(stats, self.backfill_weeks))

    async def maintain(self) -> None:
        async with self.engine_lock:  # never prune a topic while a round matches it
            await run_maintenance(self.store, now=self.clock())

    async def delivery_worker(self) -> None:
        while not self.delivery.closed:
            # Sleep until woken, the next tick, a deferred chat (429, retry) or a digest falls due.
            timeout = await self.delivery.next_wake(DELIVERY_TICK)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=timeout)
            self.wake.clear()
            async with self.engine_lock:  # not while a round matches: it wakes us when done
                pass
            try:
                await self.delivery.run_once()
            except Exception:
                log.exception("delivery pass failed; retrying on the next tick")

    async def stop_delivery(self, grace: float = DELIVERY_GRACE) -> None:
        """Let the sends in flight finish (a restart then re-sends nothing), then stop."""
        self.delivery.close()
        self.wake.set()
        worker = [t for t in self.tasks if t.get_name() == "delivery" and not t.done()]
        if worker:
            _, late = await asyncio.wait(worker, timeout=grace)
            for task in late:
                task.cancel()


def _report_death(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("background task %r died", task.get_name(), exc_info=exc)


def pipeline_of(app: Application) -> Pipeline:  # type: ignore[type-arg]
    return app.bot_data["pipeline"]  # type: ignore[no-any-return]


async def _poll_job(context: ContextTypes.DEFAULT_TYPE) -> None:
    try:
        await pipeline_of(context.application).poll_round()
    except Exception:
        log.exception("ingestion round failed; trying again next round")


async def _calendar_job(context: ContextTypes.DEFAULT_TYPE) -> None:
    """An intake round, then the next one booked where arXiv's calendar says."""
    pipeline = pipeline_of(context.application)
    await _poll_job(context)
    try:
        wait = await pipeline.next_look()
    except Exception:
        log.exception("could not read the intake's state; looking again in an hour")
        wait = timedelta(hours=1)
    log.info("next look at arXiv in %s", str(wait).split(".")[0])
    assert context.job_queue is not None
    context.job_queue.run_once(_calendar_job, when=wait, name="poll")


async def _backup_job(context: ContextTypes.DEFAULT_TYPE) -> None:
    tp = context.application.bot_data["topicpulse"]
    await starting.daily_snapshot(tp.settings, tp.clock().date())


async def _maintenance_job(context: ContextTypes.DEFAULT_TYPE) -> None:
    try:
        await pipeline_of(context.application).maintain()
    except Exception:
        log.exception("maintenance failed; trying again tomorrow")


def build_application(
    settings: Settings,
    *,
    clock: Callable[[], datetime] = utcnow,
    arxiv_backoff: float = 5.0,
    poll_first: float = 1.0,
    webhook_backoff: float = 2.0,
    rate_limiter: BaseRateLimiter | None = None,  # type: ignore[type-arg]
    send_timeouts: SendTimeouts | None = None,
) -> Application:  # type: ignore[type-arg]
    """The Application with handlers, jobs and the engine attached (started in post_init).

    Every message goes through ``rate_limiter`` (default: ``TelegramRateLimiter()``, Telegram's
    limits); alerts as bulk sends, replies to users ahead of them, each with ``send_timeouts``
    (default ``SendTimeouts()``; see ``bot.sender``)."""
    assert settings.telegram_bot_token, "TELEGRAM_BOT_TOKEN is required"
    webhook_secret = settings.webhook_secret or secrets.token_urlsafe(32)
    # httpx and PTB log URLs with the token; PTB logs setWebhook's parameters
    protect_secrets([settings.telegram_bot_token, webhook_secret])

    async def post_init(app: Application) -> None:  # type: ignore[type-arg]
        store = await Store.open(settings.db, clock=clock)
        await sync_catalogue(store)
        ingestor = Ingestor.from_settings(store, settings, clock=clock, backoff=arxiv_backoff)
        thresholds = momentum.SpikeThresholds(
            min_last_4w=settings.spike_min_papers,
            min_change_pct=settings.spike_min_change_pct,
            min_sigma=settings.spike_sigma,
            min_week_papers=settings.spike_min_week_papers,
        )
        pipeline = Pipeline(
            store,
            ingestor,
            Delivery(store, TelegramSender(app.bot, send_timeouts), clock=clock),
            clock,
            thresholds=thresholds,
            backfill_weeks=settings.backfill_weeks,
            schedule=None
            if settings.poll_seconds
            else Schedule(Calendar.of(settings.arxiv_holidays)),
        )
        app.bot_data["pipeline"] = pipeline
        trainer = taste.Trainer(store, busy=pipeline.in_round)  # (training waits for rounds)
        app.bot_data["topicpulse"] = handlers.BotContext(
            store=store,
            settings=settings,
            clock=clock,
            wake_delivery=pipeline.wake.set,
            heard_from=pipeline.heard_from,
            on_rated=trainer.mark,
            answer_writer=answer_writer(settings),
            lookup=ingestor.lookup,
        )
        if settings.listen_port is not None:
            pipeline.web_runner = await start_web(
                WebContext(
                    store,
                    poll_seconds=settings.page_cache_seconds,
                    fresh_seconds=settings.fresh_seconds,
                    bot_username=app.bot.username,
                    clock=clock,
                    trusted_proxies=settings.trusted_proxies,
                    delivery_state=pipeline.delivery_state,
                    webhook=Webhook(webhook_secret, queue_update(app))
                    if settings.webhook_url
                    else None,
                ),
                settings.web_host,
                settings.listen_port,
            )
        if settings.webhook_url:
            # Every start: the address or the secret may have changed. Updates Telegram held
            # while the bot was down are delivered now.
            await register_webhook(
                app.bot,
                settings.webhook_url.rstrip("/") + WEBHOOK_PATH,
                webhook_secret,
                backoff=webhook_backoff,
            )
        await app.bot.set_my_commands(handlers.bot_commands())
        pipeline.wake.set()  # deliver what the outbox holds (e.g. after a restart) right away
        pipeline.spawn(pipeline.delivery_worker(), "delivery")
        pipeline.spawn(trainer.run(), "taste")  # retrains the tastes whose ratings changed
        weeks = settings.backfill_weeks
        missing = bool(weeks) and await ingestor.history_missing(weeks)
        if missing:
            # every start: a history never harvested, or whose harvest stopped, is read now
            first = (await store.intake_state(ingestor.categories_key)).pending_from is None
            log.info(
                starting.backfill_announcement(
                    weeks, len(ingestor.sets), settings.arxiv_delay_seconds, first=first
                )
            )
            pipeline.spawn(pipeline.backfill(), "backfill")
        assert app.job_queue is not None
        app.job_queue.run_repeating(
            _maintenance_job,
            interval=MAINTENANCE_SECONDS,
            first=MAINTENANCE_FIRST,  # soon after every start: restarts must not postpone it
            name="maintenance",
            job_kwargs={"max_instances": 1, "coalesce": True},
        )
        if settings.backup_dir is not None:  # checked hourly, written once a day
            app.job_queue.run_repeating(
                _backup_job, interval=3600, first=BACKUP_FIRST, name="backup"
            )
        if settings.poll_seconds:
            app.job_queue.run_repeating(
                _poll_job,
                interval=settings.poll_seconds,
                first=poll_first,
                name="poll",
                job_kwargs={"max_instances": 1, "coalesce": True},
            )
        else:  # arXiv's calendar decides: the first look now (it catches up on missed days)
            app.job_queue.run_once(_calendar_job, when=poll_first, name="poll")
        # Everything loaded so far (PTB, matplotlib, the catalogue) lives as long as the bot:
        # out of the collector's full passes, which would otherwise stall the event loop for a
        # fifth of a second now and then (replies to users wait meanwhile).
        heap.freeze_startup()
        log.info(starting.ready_line(app.bot.username, bool(missing)))

    async def post_stop(app: Application) -> None:  # type: ignore[type-arg]
        # Before the bot's HTTP client closes: sends in flight complete and get marked sent.
        pipeline = app.bot_data.get("pipeline")
        if pipeline is not None:
            await pipeline.stop_delivery()

    async def post_shutdown(app: Application) -> None:  # type: ignore[type-arg]
        pipeline = app.bot_data.get("pipeline")
        if pipeline is None:
            return
        for task in pipeline.tasks:
            task.cancel()
        await asyncio.gather(*pipeline.tasks, return_exceptions=True)
        await pipeline.ingestor.client.aclose()
        if pipeline.web_runner is not None:
            await pipeline.web_runner.cleanup()
        tp = app.bot_data.get("topicpulse")
        if tp is not None and tp.answer_writer is not None:
            await tp.answer_writer.close()
        await pipeline.store.close()
        log.info("topicpulse stopped; database closed")

    builder = ApplicationBuilder().request(bot_request()).get_updates_request(updates_request())
    if settings.webhook_url:
        builder = builder.updater(None)  # updates come in through the pages' server
    app = (
        builder.token(settings.telegram_bot_token)
        .base_url(settings.telegram_api_url)
        .base_file_url(file_url(settings.telegram_api_url))
        .rate_limiter(rate_limiter or TelegramRateLimiter())
        .concurrent_updates(CONCURRENT_UPDATES)
        .post_init(post_init)
        .post_stop(post_stop)
        .post_shutdown(post_shutdown)
        .build()
    )
    handlers.register(app)
    membership.register(app)
    return app


@contextlib.asynccontextmanager
async def running(app: Application, *, poll_timeout: float = 10) -> AsyncIterator[Application]:  # type: ignore[type-arg]
    """Run the application inside an existing event loop (as ``run_polling`` does, step by
    step): for embedding and end-to-end tests."""
    try:  # a start that fails half-way (e.g. Telegram refuses the webhook) is undone too
        await app.initialize()
        if app.post_init:
            await app.post_init(app)
        if app.updater is not None:  # None in webhook mode
            await app.updater.start_polling(
                poll_interval=0, timeout=poll_timeout, allowed_updates=Update.ALL_TYPES
            )
        await app.start()
        yield app
    finally:
        app.bot_data[STOPPING] = True  # webhook updates from now on: "try again later"
        if app.updater is not None and app.updater.running:
            await app.updater.stop()
        if app.running:
            await app.stop()
            if app.post_stop:
                await app.post_stop(app)
        await app.shutdown()
        await close_sessions(app.bot)  # (opened by a bot whose initialize failed: getMe)
        if app.post_shutdown:
            await app.post_shutdown(app)


def run_bot(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM: long polling, or webhook mode when a webhook URL is set.

    The signals only set an event that the running bot waits on (``running``): one that
    arrives while the bot is still starting stops it right after the start, cleanly, instead
    of breaking into a request half sent (python-telegram-bot's own handlers raise
    ``SystemExit`` wherever the loop is, which could leave the database open)."""
    heap.limit_arenas()  # before any thread starts (topicpulse.heap)
    heap.favour_replies()
    app = build_application(settings)

    async def until_stopped() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        async with running(app):
            await stop.wait()

    asyncio.run(until_stopped())
