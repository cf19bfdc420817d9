"""The ``topicpulse`` command line: run the bot, and the offline commands around the store.

Each sub-command is a small function ``cmd_<name>(args, settings) -> int``; ``main`` turns
expected failures (bad configuration, unreadable files, arXiv down) into one line on stderr and
a non-zero exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import sys
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path

from topicpulse import __version__, momentum
from topicpulse import query as ql
from topicpulse.charts import render_chart
from topicpulse.config import ConfigError, Settings, load_settings
from topicpulse.ingest import Ingestor, Progress, import_files
from topicpulse.logs import setup_logging
from topicpulse.models import StoredPaper, Topic, iso, utcnow
from topicpulse.momentum import as_of_day
from topicpulse.store import MigrationError, Store
from topicpulse.topics import UnknownTopic, resolve_topic, sync_catalogue
from topicpulse.wording import day_label, plural

log = logging.getLogger("topicpulse")


class CommandError(Exception):
    """An expected failure: printed as one line, exit code 1."""


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
            stats, _ = await ingestor.backfill(weeks, progress=_progress())
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


# ---------------------------------------------------------------------------------- topics
def _as_of(value: str | None) -> datetime:
    if not value:
        return utcnow()
    try:
        return as_of_day(date.fromisoformat(value))
    except ValueError:
        raise CommandError(f"--as-of {value!r} is not a date: use YYYY-MM-DD") from None


async def _topic_or_query(store: Store, args: argparse.Namespace) -> tuple[Topic | None, str]:
    """``--topic NAME`` → the catalogue topic; a positional QUERY → its compiled FTS string."""
    if args.topic:
        await sync_catalogue(store)
        try:
            return await resolve_topic(store, args.topic), ""
        except UnknownTopic as exc:
            raise CommandError(str(exc)) from None
    if not args.query:
        raise CommandError("give a QUERY or --topic NAME")
    try:
        return None, ql.compile_query(args.query)
    except ql.QueryError as exc:
        raise CommandError(f"bad query: {exc}") from None


def _print_json(value: object) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _print_papers(
    args: argparse.Namespace, query: str, count: int, papers: list[StoredPaper], heading: str
) -> None:
    """preview/search output: the documented JSON shape, or a heading and one line a paper."""
    if args.json:
        _print_json({"query": query, "count": count, "papers": [p.to_json() for p in papers]})
        return
    print(heading)
    for p in papers:
        print(f"  {p.published[:10]}  {p.arxiv_id:<12} {p.primary_category:<8} {p.title}")


async def cmd_topics(args: argparse.Namespace, settings: Settings) -> int:
    async with await Store.open(settings.db) as store:
        await sync_catalogue(store)
        topics = await store.topics(kind="catalogue")
    if args.json:
        _print_json([{"name": t.name, "slug": t.slug, "query": t.query} for t in topics])
    else:
        for t in topics:
            print(f"{t.name}  [{t.slug}]\n    {t.description}\n    {t.query}")
    return 0


async def cmd_preview(args: argparse.Namespace, settings: Settings) -> int:
    as_of = _as_of(args.as_of)
    async with await Store.open(settings.db) as store:
        topic, fts = await _topic_or_query(store, args)
        papers = await store.matching_papers(
            topic_id=topic.id if topic else None,
            fts=fts or None,
            since=iso(as_of - timedelta(days=args.days)),
            until=iso(as_of),
        )
    query = topic.query if topic else args.query
    heading = (
        f"{plural(len(papers), 'paper')} in the {args.days} days before {iso(as_of)[:10]}"
        f" for {query}"
    )
    _print_papers(
        args, query, len(papers), papers[: args.limit] if not args.json else papers, heading
    )
    return 0


async def cmd_momentum(args: argparse.Namespace, settings: Settings) -> int:
    as_of = _as_of(args.as_of)
    async with await Store.open(settings.db) as store:
        topic, fts = await _topic_or_query(store, args)
        m = await momentum.compute(
            store, topic=topic, fts=fts or None, query=args.query or "", as_of=as_of
        )
    if args.chart:
        Path(args.chart).write_bytes(render_chart(m))
    if args.json:
        _print_json(m.to_json())
        return 0
    print(f"{m.topic or m.query} (as of {iso(as_of)[:10]})")
    print(momentum.headline(m))
    print(
        f"{plural(m.total, 'paper')} in all.  {momentum.sparkline([c for _, c in m.weekly])}  "
        f"(weeks of {day_label(m.weekly[0][0])} … {day_label(m.weekly[-1][0])})"
    )
    if args.chart:
        print(f"chart written to {args.chart}")
    return 0


async def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    try:
        fts = ql.compile_query(args.query)
    except ql.QueryError as exc:
        raise CommandError(f"bad query: {exc}") from None
    async with await Store.open(settings.db) as store:
        papers = await store.matching_papers(
            fts=fts, limit=args.limit, order="newest" if args.newest else "relevance"
        )
        count = await store.count_matches(fts=fts)
    heading = f"{plural(count, 'paper')} match {args.query}; showing {len(papers)}"
    _print_papers(args, args.query, count, papers, heading)
    return 0


async def cmd_trending(args: argparse.Namespace, settings: Settings) -> int:
    as_of = _as_of(args.as_of)
    async with await Store.open(settings.db) as store:
        await sync_catalogue(store)
        ranked = await momentum.trending(
            store, as_of=as_of, min_volume=args.min_volume, limit=args.limit
        )
    if args.json:
        _print_json([m.to_json() for m in ranked])
        return 0
    if not ranked:
        print(f"no catalogue topic has {args.min_volume}+ papers in the last four weeks")
    for m in ranked:
        print(f"{m.topic}: {momentum.headline(m)}  {momentum.sparkline([c for _, c in m.weekly])}")
    return 0


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.telegram_bot_token:
        raise CommandError("TELEGRAM_BOT_TOKEN is not set: get a token from @BotFather and set it")
    from telegram.error import InvalidToken, NetworkError

    from topicpulse.bot.app import run_bot

    try:
        run_bot(settings)
    except InvalidToken:
        raise CommandError(
            "Telegram rejected TELEGRAM_BOT_TOKEN: check it with @BotFather"
        ) from None
    except NetworkError as exc:  # at start-up only; once running, outages are retried
        raise CommandError(
            f"cannot reach the Bot API at {settings.telegram_api_url} ({exc.message})"
        ) from None
    return 0


async def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """The web pages alone, from the store (no bot, no polling)."""
    from aiohttp import web

    from topicpulse.web.server import WebContext, build_web_app

    host, port = args.host or settings.web_host, args.port or settings.web_port or 8080
    async with await Store.open(settings.db) as store:
        await sync_catalogue(store)
        context = WebContext(
            store, poll_seconds=settings.poll_seconds, bot_username=settings.bot_username
        )
        runner = web.AppRunner(build_web_app(context))
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        print(f"serving the topic pages on http://{host}:{port}/ (Ctrl-C stops)")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
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
    serve = add("serve", cmd_serve, "serve the topic pages on the web from the store")
    serve.add_argument("--host", help="address to listen on (default: TOPICPULSE_WEB_HOST)")
    serve.add_argument("--port", type=int, help="port (default: TOPICPULSE_WEB_PORT, PORT, 8080)")
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

    topics = add("topics", cmd_topics, "list the catalogue of curated topics")
    topics.add_argument("--json", action="store_true")

    def topic_or_query(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "query", nargs="?", metavar="QUERY", help="a query, e.g. 'grpo AND llm'"
        )
        command.add_argument("--topic", metavar="NAME", help="a catalogue topic name or slug")
        command.add_argument("--as-of", metavar="YYYY-MM-DD", help="end of that day (default: now)")
        command.add_argument("--json", action="store_true")

    preview = add("preview", cmd_preview, "papers a topic or query matches, newest first")
    topic_or_query(preview)
    preview.add_argument("--days", type=int, default=28, help="look back N days (default 28)")
    preview.add_argument("--limit", type=int, default=20, help="lines to print (text output)")
    mom = add("momentum", cmd_momentum, "4-week momentum and 12-week histogram")
    topic_or_query(mom)
    mom.add_argument("--chart", metavar="FILE.png", help="also write the chart as a PNG")
    search = add("search", cmd_search, "full-text search, best matches first (BM25)")
    search.add_argument("query", metavar="QUERY")
    search.add_argument("--limit", type=int, default=10)
    search.add_argument("--newest", action="store_true", help="newest first instead of best first")
    search.add_argument("--json", action="store_true")
    trend = add("trending", cmd_trending, "catalogue topics ranked by momentum")
    trend.add_argument("--as-of", metavar="YYYY-MM-DD")
    trend.add_argument("--min-volume", type=int, default=5, help="least papers in 4 weeks")
    trend.add_argument("--limit", type=int, default=10)
    trend.add_argument("--json", action="store_true")
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
        if not settings.db.parent.is_dir():  # sqlite would only say "unable to open database file"
            raise CommandError(f"cannot open {settings.db}: folder {settings.db.parent} is missing")
        outcome = args.handler(args, settings)
        if asyncio.iscoroutine(outcome):
            outcome = asyncio.run(outcome)
        sys.stdout.flush()  # here, where a closed pipe is caught below, not at exit
        return int(outcome or 0)
    except (CommandError, MigrationError) as exc:
        print(f"topicpulse: {exc}", file=sys.stderr)
        return 1
    except sqlite3.Error as exc:  # e.g. TOPICPULSE_DB is not a database, or is read-only
        print(f"topicpulse: database {settings.db}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("topicpulse: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`topicpulse topics | head`): stop quietly, and keep Python's
        # final flush of stdout from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
