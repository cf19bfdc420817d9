"""What the sub-commands share: the one-line failure, the progress display, and reading a
topic, a query or a date from the arguments; printing JSON and paper lists."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import date, datetime

from topicpulse.insight.momentum import as_of_day
from topicpulse.models import StoredPaper, Topic, utcnow
from topicpulse.sources.ingest import Progress
from topicpulse.sources.pace import Pace
from topicpulse.store import Store
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import UnknownTopic, resolve_topic, sync_catalogue

log = logging.getLogger("topicpulse")


class CommandError(Exception):
    """An expected failure: printed as one line, exit code 1."""


def progress() -> Progress:
    """A progress bar on a terminal, progress lines in the log otherwise."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(unit="page", desc="backfill", file=sys.stderr)

        def update(done: int, total: int, label: str) -> None:
            bar.total = total
            bar.n = done
            bar.set_postfix_str(label)
            bar.refresh()

        return update

    pace = Pace()

    def log_line(done: int, total: int, label: str) -> None:
        log.info(
            "backfill: %d of about %d page(s) (set %s), %s", done, total, label,
            pace.left(done, total),
        )  # fmt: skip

    return log_line


def as_of_arg(value: str | None) -> datetime:
    if not value:
        return utcnow()
    try:
        return as_of_day(date.fromisoformat(value))
    except ValueError:
        raise CommandError(f"--as-of {value!r} is not a date: use YYYY-MM-DD") from None


async def catalogue_topic(store: Store, name: str) -> Topic:
    """``--topic NAME``: the catalogue topic by name or slug (the catalogue synced first)."""
    await sync_catalogue(store)
    try:
        return await resolve_topic(store, name)
    except UnknownTopic as exc:
        raise CommandError(str(exc)) from None


async def topic_or_query(store: Store, args: argparse.Namespace) -> tuple[Topic | None, str]:
    """``--topic NAME`` → the catalogue topic; a positional QUERY → its compiled FTS string."""
    if args.topic:
        return await catalogue_topic(store, args.topic), ""
    if not args.query:
        raise CommandError("give a QUERY or --topic NAME")
    try:
        return None, ql.compile_query(args.query)
    except ql.QueryError as exc:
        raise CommandError(f"bad query: {exc}") from None


def print_json(value: object) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def print_papers(
    args: argparse.Namespace, query: str, count: int, papers: list[StoredPaper], heading: str
) -> None:
    """preview/search output: the documented JSON shape, or a heading and one line a paper."""
    if args.json:
        print_json({"query": query, "count": count, "papers": [p.to_json() for p in papers]})
        return
    print(heading)
    for p in papers:
        print(f"  {p.published[:10]}  {p.arxiv_id:<12} {p.primary_category:<8} {p.title}")
