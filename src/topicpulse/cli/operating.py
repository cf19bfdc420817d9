"""The commands that run and tend a deployment: the bot, the web pages, the schema, and the
rounds that bring papers in (poll, backfill, import), and the store's figures (stats)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING

from topicpulse.cli.common import CommandError, log, progress
from topicpulse.config import Settings
from topicpulse.sources.ingest import Ingestor, import_files
from topicpulse.sources.pace import backfill_plan, weeks_text
from topicpulse.store import Store
from topicpulse.topics.catalogue import sync_catalogue

if TYPE_CHECKING:  # imported by `run` alone: the other commands never load telegram
    from telegram.error import TelegramError


async def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    async with await Store.open(settings.db, migrate=False) as store:
        applied = await store.migrate()
    print(f"applied {len(applied)} migration(s): {', '.join(applied)}" if applied else "up to date")
    return 0


async def cmd_poll(args: argparse.Namespace, settings: Settings) -> int:
    async with await Store.open(settings.db) as store:
        ingestor = Ingestor.from_settings(store, settings)
        try:
            stats, _ = await ingestor.poll()
        finally:
            await ingestor.client.aclose()
    if not stats.ok:
        raise CommandError(f"poll failed: {stats.message}")
    print(
        f"poll: {stats.new} new, {stats.updated} updated, {stats.requests} request(s), "
        f"{stats.duration_s:.1f}s"
    )
    return 0


async def cmd_backfill(args: argparse.Namespace, settings: Settings) -> int:
    weeks = settings.backfill_weeks if args.weeks is None else args.weeks
    async with await Store.open(settings.db) as store:
        ingestor = Ingestor.from_settings(store, settings)
        try:
            delay = settings.arxiv_delay_seconds
            if await ingestor.history_missing(weeks):
                plan = backfill_plan(weeks, len(ingestor.sets), delay)
                log.info("backfill of the last %s: %s", weeks_text(weeks), plan.describe(delay))
            stats, _ = await ingestor.backfill(weeks, progress=progress())
        finally:
            await ingestor.client.aclose()
    if not stats.ok:
        raise CommandError(f"backfill interrupted (run it again to resume): {stats.message}")
    print(f"backfill: {stats.new} new, {stats.updated} updated, {stats.requests} request(s)")
    return 0


async def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    paths = [Path(p) for p in args.files]
    for path in paths:
        if not path.is_file():
            raise CommandError(f"cannot read {path}: no such file")
    async with await Store.open(settings.db) as store:
        try:
            stats, _ = await import_files(store, paths)
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"cannot import: {exc}") from None
    print(f"import: {stats.new} new, {stats.updated} updated from {len(paths)} file(s)")
    return 0


async def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    async with await Store.open(settings.db) as store:
        papers = await store.count_papers()
        per_category = await store.primary_category_counts()
        first, last = await store.published_range()
        last_poll = await store.last_run("poll")
        size = await store.database_bytes()
    print(f"database:  {settings.db} ({size / 1e6:.1f} MB)")
    print(f"papers:    {papers}" + (f" (published {first[:10]} … {last[:10]})" if first else ""))
    if last_poll:
        state = "ok" if last_poll["ok"] else f"failed: {last_poll['message']}"
        print(
            f"last poll: {last_poll['started_at']} — {last_poll['new']} new, "
            f"{last_poll['updated']} updated, {last_poll['requests']} request(s), {state}"
        )
    else:
        print("last poll: never")
    if per_category:
        print("by primary category:")
        for category, count in per_category[:20]:
            print(f"  {category:<12} {count}")
        if len(per_category) > 20:
            print(f"  … and {len(per_category) - 20} more")
    return 0


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.telegram_bot_token:
        raise CommandError("TELEGRAM_BOT_TOKEN is not set: get a token from @BotFather and set it")
    from telegram.error import TelegramError

    from topicpulse.bot.app import run_bot

    try:
        run_bot(settings)
    except (TelegramError, OSError) as exc:
        log.debug("the start failed", exc_info=True)  # -v: where it came from
        raise CommandError(start_failure(exc, settings)) from None
    return 0


def start_failure(exc: TelegramError | OSError, settings: Settings) -> str:
    """What failed and what to check, in one line."""
    from telegram.error import InvalidToken, NetworkError

    if isinstance(exc, OSError):
        return listen_failure(exc, settings.web_host, settings.listen_port)
    if isinstance(exc, InvalidToken):
        return "Telegram rejected TELEGRAM_BOT_TOKEN: check it with @BotFather"
    if isinstance(exc, NetworkError):  # at start-up only; once running, outages are retried
        return (
            f"cannot reach the Bot API at {settings.telegram_api_url} ({exc.message}): check "
            "the network, a proxy or firewall, and TOPICPULSE_TELEGRAM_API_URL"
        )
    return f"Telegram refused the start: {exc.message}"  # e.g. setWebhook refused the address


def listen_failure(exc: OSError, host: str, port: int | None) -> str:
    """One line for a port that cannot be opened (or any other system error at start)."""
    if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
        return (
            f"cannot listen on {host}:{port} ({os.strerror(exc.errno).lower()}): choose "
            "another TOPICPULSE_WEB_PORT (or PORT), or TOPICPULSE_WEB_HOST"
        )
    return f"cannot start: {exc.strerror or exc}"


async def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """The web pages alone, from the store (no bot, no polling)."""
    from aiohttp import web

    from topicpulse.web.server import WebContext, build_web_app

    host, port = args.host or settings.web_host, args.port or settings.web_port or 8080
    async with await Store.open(settings.db) as store:
        await sync_catalogue(store)
        context = WebContext(
            store,
            poll_seconds=settings.page_cache_seconds,
            fresh_seconds=settings.fresh_seconds,
            bot_username=settings.bot_username,
            trusted_proxies=settings.trusted_proxies,
        )
        runner = web.AppRunner(build_web_app(context))
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as exc:
            await runner.cleanup()
            raise CommandError(listen_failure(exc, host, port)) from None
        print(f"serving the topic pages on http://{host}:{port}/ (Ctrl-C stops)")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
    return 0
