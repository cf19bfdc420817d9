"""The commands that read the store as the chat does: the catalogue, a topic's papers, its
momentum, full-text search and the trending topics; text by default, JSON with ``--json``."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta
from pathlib import Path

from topicpulse.cli.common import (
    CommandError,
    as_of_arg,
    print_json,
    print_papers,
    topic_or_query,
)
from topicpulse.config import Settings
from topicpulse.delivery import chats
from topicpulse.delivery.chats import UserError
from topicpulse.insight import momentum
from topicpulse.insight.charts import render_chart
from topicpulse.models import iso
from topicpulse.store import Store
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import sync_catalogue
from topicpulse.wording import day_label, plural


async def cmd_topics(args: argparse.Namespace, settings: Settings) -> int:
    async with await Store.open(settings.db) as store:
        await sync_catalogue(store)
        topics = await store.topics(kind="catalogue")
    if args.json:
        print_json([{"name": t.name, "slug": t.slug, "query": t.query} for t in topics])
    else:
        for t in topics:
            print(f"{t.name}  [{t.slug}]\n    {t.description}\n    {t.query}")
    return 0


async def example_query(store: Store, ids: str, as_of: datetime) -> tuple[str, str]:
    """The query (canonical text, FTS expression) of the topic ``/follow like <ids>`` would
    make at ``as_of``: its words weighed over the four weeks before, as the chat does."""
    window = [iso(as_of - momentum.WINDOW), iso(as_of)]
    try:
        _, rule = await chats.example_rule(store, ids.replace(",", " "), window)
    except UserError as exc:
        raise CommandError(str(exc).replace("/search", "topicpulse search")) from None
    node = ql.parse(rule.query, max_length=None)
    return ql.unparse(node), ql.to_fts(node)


async def cmd_preview(args: argparse.Namespace, settings: Settings) -> int:
    as_of = as_of_arg(args.as_of)
    if args.days < 1:
        raise CommandError(f"--days {args.days}: give 1 or more")
    async with await Store.open(settings.db) as store:
        if args.like:
            topic, (query, fts) = None, await example_query(store, args.like, as_of)
        else:
            topic, fts = await topic_or_query(store, args)
            query = topic.query if topic else args.query
        papers = await store.matching_papers(
            topic_id=topic.id if topic else None,
            fts=fts or None,
            since=iso(as_of - timedelta(days=args.days)),
            until=iso(as_of),
        )
    heading = (
        f"{plural(len(papers), 'paper')} in the {args.days} days before {iso(as_of)[:10]}"
        f" for {query}"
    )
    print_papers(
        args, query, len(papers), papers[: args.limit] if not args.json else papers, heading
    )
    return 0


async def cmd_momentum(args: argparse.Namespace, settings: Settings) -> int:
    as_of = as_of_arg(args.as_of)
    async with await Store.open(settings.db) as store:
        topic, fts = await topic_or_query(store, args)
        m = await momentum.compute(
            store, topic=topic, fts=fts or None, query=args.query or "", as_of=as_of
        )
    if args.chart:
        Path(args.chart).write_bytes(render_chart(m))
    if args.json:
        print_json(m.to_json())
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
    print_papers(args, args.query, count, papers, heading)
    return 0


async def cmd_trending(args: argparse.Namespace, settings: Settings) -> int:
    as_of = as_of_arg(args.as_of)
    async with await Store.open(settings.db) as store:
        await sync_catalogue(store)
        ranked = await momentum.trending(
            store, as_of=as_of, min_volume=args.min_volume, limit=args.limit
        )
    if args.json:
        print_json([m.to_json() for m in ranked])
        return 0
    if not ranked:
        print(f"no catalogue topic has {args.min_volume}+ papers in the last four weeks")
    for m in ranked:
        print(f"{m.topic}: {momentum.headline(m)}  {momentum.sparkline([c for _, c in m.weekly])}")
    return 0
