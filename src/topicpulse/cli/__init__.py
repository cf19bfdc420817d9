"""The ``topicpulse`` command line: run the bot, and the offline commands around the store.

Each sub-command is a small function ``cmd_<name>(args, settings) -> int``; ``main`` turns
expected failures (bad configuration, unreadable files, arXiv down) into one line on stderr and
a non-zero exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sqlite3
import sys
from collections.abc import Callable

from topicpulse import __version__
from topicpulse.cli.backups import cmd_backup, cmd_restore
from topicpulse.cli.common import CommandError
from topicpulse.cli.operating import (
    cmd_backfill,
    cmd_import,
    cmd_migrate,
    cmd_poll,
    cmd_run,
    cmd_serve,
    cmd_stats,
)
from topicpulse.cli.papers import cmd_ask, cmd_paper, cmd_similar
from topicpulse.cli.reading import cmd_momentum, cmd_preview, cmd_search, cmd_topics, cmd_trending
from topicpulse.cli.taste import add_rank
from topicpulse.config import ConfigError, Settings, load_settings
from topicpulse.logs import redact, setup_logging
from topicpulse.store import MigrationError

# ---------------------------------------------------------------------------------- parser
Handler = Callable[[argparse.Namespace, Settings], object]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="topicpulse",
        description="Follow research topics on arXiv from Telegram. Settings come from the "
        "environment or .env (see docs/configuration.md).",
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
    backup = add("backup", cmd_backup, "write a consistent copy of the database (bot running)")
    backup.add_argument("file", metavar="FILE", help="the copy to write (replaced if there)")
    restore = add(
        "restore", cmd_restore, "check a backup and put it in place of the database (bot stopped)"
    )
    restore.add_argument("file", metavar="FILE", help="a file written by topicpulse backup")

    topics = add("topics", cmd_topics, "list the catalogue of curated topics")
    topics.add_argument("--json", action="store_true")

    def topic_or_query(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "query", nargs="?", metavar="QUERY", help="a query, e.g. 'grpo AND llm'"
        )
        command.add_argument("--topic", metavar="NAME", help="a catalogue topic name or slug")
        command.add_argument("--as-of", metavar="YYYY-MM-DD", help="end of that day (default: now)")
        command.add_argument("--json", action="store_true")

    preview = add("preview", cmd_preview, "papers a topic, query or example papers match")
    chosen = preview.add_mutually_exclusive_group()
    chosen.add_argument("query", nargs="?", metavar="QUERY", help="a query, e.g. 'grpo AND llm'")
    chosen.add_argument("--topic", metavar="NAME", help="a catalogue topic name or slug")
    chosen.add_argument(
        "--like", metavar="ID[,ID…]", help="the topic of /follow like: 1-5 stored papers' ids"
    )
    preview.add_argument("--as-of", metavar="YYYY-MM-DD", help="end of that day (default: now)")
    preview.add_argument("--json", action="store_true")
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
    paper = add("paper", cmd_paper, "one stored paper in full, with its topic tags")
    paper.add_argument("id", metavar="ID", help="an arXiv id or link, e.g. 2605.01234")
    paper.add_argument("--json", action="store_true")
    similar = add("similar", cmd_similar, "the stored papers most like one paper")
    similar.add_argument("id", metavar="ID", help="an arXiv id or link, e.g. 2605.01234")
    similar.add_argument("--limit", type=int, default=5, help="papers to list (default 5)")
    similar.add_argument("--json", action="store_true")
    ask = add("ask", cmd_ask, "passages of stored abstracts that answer a question")
    ask.add_argument("question", nargs="+", metavar="QUESTION")
    ask.add_argument("--topic", metavar="NAME", help="a catalogue topic (default: all papers)")
    ask.add_argument("--json", action="store_true")
    add_rank(add)
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
    except Exception as exc:  # a failure nobody foresaw: one line; -v shows where it came from
        if args.verbose:
            raise
        line = redact(f"{type(exc).__name__}: {exc}", [settings.telegram_bot_token or ""])
        print(f"topicpulse: {line} (-v shows the traceback)", file=sys.stderr)
        return 1
