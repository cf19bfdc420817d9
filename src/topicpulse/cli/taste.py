"""``topicpulse rank``: a topic's papers in a window, in the order a taste learned from given
ratings alone puts them, each with its score and whether an alert would hold it back. The
taste is trained and applied by the code the bot runs (``insight.taste``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from topicpulse.cli.common import CommandError, print_json, topic_or_query
from topicpulse.config import Settings
from topicpulse.insight import taste
from topicpulse.models import iso, parse_iso, utcnow
from topicpulse.sources import arxiv
from topicpulse.store import Rating, Store


def read_ids(path: str) -> list[str]:
    """FILE: one arXiv id (or link) per line; blank lines and # comments ignored."""
    try:
        lines = Path(path).read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from None
    ids = []
    for n, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        arxiv_id = arxiv.typed_id(text)
        if arxiv_id is None:
            raise CommandError(f"{path}:{n}: {text!r} is not an arXiv id, e.g. 2605.01234")
        ids.append(arxiv_id)
    return ids


def window(args: argparse.Namespace, now: datetime) -> tuple[str, str]:
    if args.days is not None and args.days < 1:
        raise CommandError(f"--days {args.days}: give 1 or more")
    if args.since:
        try:
            start = datetime.fromisoformat(args.since).replace(tzinfo=now.tzinfo)
        except ValueError:
            raise CommandError(f"--since {args.since!r}: use YYYY-MM-DD") from None
        end = start + timedelta(days=args.days) if args.days else now
        return iso(start), iso(end)
    return iso(now - timedelta(days=args.days or 28)), iso(now)


async def ratings_of(store: Store, ids: list[str], value: int) -> list[Rating]:
    found = []
    for arxiv_id in dict.fromkeys(ids):
        paper = await store.get_paper(arxiv_id)
        if paper is None:
            print(f"warning: {arxiv_id} is not stored; left out", file=sys.stderr)
            continue
        found.append(Rating(arxiv_id, paper.id, value, "import", paper.title, paper.abstract, ""))
    return found


async def cmd_rank(args: argparse.Namespace, settings: Settings) -> int:
    since, until = window(args, utcnow())
    liked, disliked = read_ids(args.liked), read_ids(args.disliked)
    async with await Store.open(settings.db) as store:
        topic, fts = await topic_or_query(store, args)
        ratings = await ratings_of(store, liked, 1) + await ratings_of(store, disliked, -1)
        if topic is not None:
            await store.refresh_topic_matches(topic)
        reference = await store.matching_papers(  # as the bot: the topic's last 4 weeks
            topic_id=topic.id if topic else None,
            fts=fts or None,
            since=iso(parse_iso(until) - timedelta(days=taste.REFERENCE_DAYS)),
            until=until,
        )
        learned = await taste.train(store, ratings, reference)
        if learned is None:
            raise CommandError(f"no liked paper of {args.liked} is stored: nothing to learn from")
        papers = await store.matching_papers(
            topic_id=topic.id if topic else None, fts=fts or None, since=since, until=until
        )
        ranked = await taste.scored(store, learned, papers)
    query = topic.query if topic else args.query
    rows = [
        {
            "arxiv_id": p.arxiv_id,
            "title": p.title,
            "published": p.published,
            "score": round(score, 4),
            "held_back": learned.holds(score),
        }
        for p, score in ranked
    ]
    if args.json:
        print_json({"query": query, "count": len(rows), "papers": rows})
        return 0
    print(
        f"{len(rows)} papers {since[:10]} … {until[:10]} for {query}, in the order of a taste"
        f" learned from {learned.up} 👍 and {learned.down} 👎"
    )
    for row in rows:
        mark = "held" if row["held_back"] else "    "
        print(
            f"  {row['score']:.3f} {mark} {row['published'][:10]}  {row['arxiv_id']:<12}"
            f" {row['title']}"
        )
    return 0


def add_rank(add: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``rank`` subcommand and its arguments (``add``: the CLI's subcommand maker)."""
    command = add("rank", cmd_rank, "a topic's papers in the order of a taste learned from ratings")
    chosen = command.add_mutually_exclusive_group()
    chosen.add_argument("query", nargs="?", metavar="QUERY", help="a query, e.g. 'grpo AND llm'")
    chosen.add_argument("--topic", metavar="NAME", help="a catalogue topic name or slug")
    command.add_argument(
        "--liked", required=True, metavar="FILE", help="liked arXiv ids, one a line"
    )
    command.add_argument(
        "--disliked", required=True, metavar="FILE", help="disliked arXiv ids, one a line"
    )
    command.add_argument("--since", metavar="YYYY-MM-DD", help="window start (default: N days ago)")
    command.add_argument("--days", type=int, help="window length in days (default 28)")
    command.add_argument("--json", action="store_true")
