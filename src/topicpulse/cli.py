"""The ``topicpulse`` command line: run the bot, and the offline commands around the store.

Each sub-command is a small function ``cmd_<name>(args, settings) -> int``; ``main`` turns
expected failures (bad configuration, unreadable files, arXiv down) into one line on stderr and
a non-zero exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from topicpulse import __version__
from topicpulse.arxiv import ArxivClient
from topicpulse.config import ConfigError, Settings, load_settings
from topicpulse.ingest import Ingestor, Progress, import_files
from topicpulse.logs import setup_logging
from topicpulse.store import MigrationError, Store

log = logging.getLogger("topicpulse")


class CommandError(Exception):
    """An expected failure: printed as one line, exit code 1."""


def _client(settings: Settings) -> ArxivClient:
    return ArxivClient(
        settings.arxiv_api_url,
        delay=settings.arxiv_delay_seconds,
        timeout=settings.arxiv_timeout_seconds,
        retries=settings.arxiv_retries,
    )


def _progress() -> Progress:
    """A progress bar on a terminal, progress lines in the log otherwise."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(unit="day", desc="backfill", file=sys.stderr)

        def update(done: int, total: int, label: str) -> None:
            bar.total = total
            bar.n = done
            bar.set_postfix_str(label)
            bar.refresh()

        return update

    def log_line(done: int, total: int, label: str) -> None:
        log.info("backfill %d/%d days (%s)", done, total, label)

    return log_line


# ---------------------------------------------------------------------------------- commands
async def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    async with await Store.open(settings.db, migrate=False) as store:
        applied = await store.migrate()
    print(f"applied {len(applied)} migration(s): {', '.join(applied)}" if applied else "up to date")
    return 0


async def cmd_poll(args: argparse.Namespace, settings: Settings) -> int:
    async with await Store.open(settings.db) as store, _client(settings) as client:
        ingestor = Ingestor(
            store, client, settings.categories,
            page_size=settings.arxiv_page_size, overlap_days=settings.overlap_days,
        )  # fmt: skip
        stats, _ = await ingestor.poll()
    if not stats.ok:
        raise CommandError(f"poll failed: {stats.message}")
    print(f"poll: {stats.new} new, {stats.updated} updated, {stats.requests} request(s), "
          f"{stats.duration_s:.1f}s")  # fmt: skip
    return 0


async def cmd_backfill(args: argparse.Namespace, settings: Settings) -> int:
    weeks = settings.backfill_weeks if args.weeks is None else args.weeks
    async with await Store.open(settings.db) as store, _client(settings) as client:
        ingestor = Ingestor(
            store, client, settings.categories,
            page_size=settings.arxiv_page_size, overlap_days=settings.overlap_days,
        )  # fmt: skip
        stats, _ = await ingestor.backfill(weeks, progress=_progress())
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
    from topicpulse.bot.app import run_bot

    run_bot(settings)
    return 0


# ---------------------------------------------------------------------------------- parser
Handler = Callable[[argparse.Namespace, Settings], object]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="topicpulse",
        description="Follow research topics on arXiv from Telegram. Settings come from the "
        "environment or .env (see README).",
    )
    parser.add_argument("--version", action="version", version=f"topicpulse {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(handler=handler)
        return command

    add("run", cmd_run, "run the Telegram bot (needs TELEGRAM_BOT_TOKEN)")
    add("migrate", cmd_migrate, "create or upgrade the database schema")
    add("poll", cmd_poll, "fetch new papers from arXiv once")
    backfill = add("backfill", cmd_backfill, "fetch the last N weeks of papers (resumable)")
    backfill.add_argument(
        "--weeks", type=float, help="weeks of history (default: TOPICPULSE_BACKFILL_WEEKS)"
    )
    imp = add(
        "import",
        cmd_import,
        "store papers from saved arXiv API responses (.xml) or .jsonl listings",
    )
    imp.add_argument("files", nargs="+", metavar="FILE")
    add("stats", cmd_stats, "papers stored, per category, last poll, database size")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"topicpulse: {exc}", file=sys.stderr)
        return 2
    setup_logging(
        logging.DEBUG if args.verbose else logging.INFO,
        secrets=[settings.telegram_bot_token or ""],
    )
    try:
        outcome = args.handler(args, settings)
        if asyncio.iscoroutine(outcome):
            outcome = asyncio.run(outcome)
        return int(outcome or 0)
    except (CommandError, MigrationError) as exc:
        print(f"topicpulse: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("topicpulse: interrupted", file=sys.stderr)
        return 130
