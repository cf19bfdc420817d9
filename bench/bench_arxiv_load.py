"""arXiv load: requests per poll with 1 topic and 1 chat, then with 10,000 topics followed by
10,000 chats. topicpulse polls arXiv by category and matches topics locally, so the number of
requests must not depend on how many topics or chats there are.

Runs the real Application (build_application + running) against the fake arXiv
(tests/fake_arxiv.py, 2,500 papers of the last days on its OAI-PMH endpoint, pages of 2,000)
and the fake Bot API, and runs three poll rounds in each set-up.

    .venv/bin/python bench/bench_arxiv_load.py            # ~1 min
    .venv/bin/python bench/bench_arxiv_load.py --topics 2000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta

from _support import fresh_db
from fake_arxiv import FakeArxiv, make_paper
from fake_telegram import FakeTelegram
from topicpulse.bot.app import build_application, pipeline_of, running
from topicpulse.config import load_settings
from topicpulse.logs import setup_logging
from topicpulse.models import Paper
from topicpulse.store import Store
from topicpulse.topics import catalogue as topics

CATEGORIES = "cs.CL,cs.LG,cs.AI"
PAPERS = 2_500


def window_papers(n: int, n_topics: int) -> list[Paper]:
    """Papers of the last 6 days; paper i mentions keyword kw(i mod topics)."""
    now = datetime.now(UTC)
    cats = CATEGORIES.split(",")
    return [
        make_paper(
            f"2611.{i:05d}",
            now - timedelta(minutes=3 * i + 7),
            categories=(cats[i % 3], cats[(i + 1) % 3]),
            title=f"On kw{i % n_topics:05d} and related matters, study {i}",
            abstract=f"We look at kw{i % n_topics:05d} from a new angle; paper number {i}.",
        )
        for i in range(1, n + 1)
    ]


async def prepare(db_name: str, n_topics: int, n_chats: int) -> str:
    db = fresh_db(db_name)
    started = time.monotonic()
    async with await Store.open(db) as store:
        topic_ids = [(await topics.custom_topic(store, f"kw{t:05d}")).id for t in range(n_topics)]
        for c in range(n_chats):
            chat_id = c + 1
            await store.ensure_chat(chat_id)
            await store.subscribe(chat_id, topic_ids[c % n_topics])
    print(
        f"  prepared {db_name}: {n_topics} topics, {n_chats} chats "
        f"({time.monotonic() - started:.0f}s)"
    )
    return str(db)


async def measure(label: str, db: str, n_topics: int, rounds: int) -> list[int]:
    arxiv = FakeArxiv(window_papers(PAPERS, max(n_topics, 1)))
    await arxiv.start()
    fake = FakeTelegram(latency=0.0)
    await fake.start()
    settings = load_settings(
        telegram_bot_token=fake.token,
        TOPICPULSE_DB=db,
        TOPICPULSE_TELEGRAM_API_URL=fake.base_url,
        TOPICPULSE_ARXIV_API_URL=arxiv.url,
        TOPICPULSE_ARXIV_OAI_URL=arxiv.oai_url,
        TOPICPULSE_ARXIV_DELAY_SECONDS=0,
        TOPICPULSE_BACKFILL_WEEKS=0,
        TOPICPULSE_POLL_SECONDS=3600,
        TOPICPULSE_CATEGORIES=CATEGORIES,
    )
    per_round: list[int] = []
    app = build_application(settings, poll_first=3600)
    async with running(app, poll_timeout=1):
        pipeline = pipeline_of(app)
        pipeline.delivery.close()  # this benchmark is about arXiv: no need to send the alerts
        for n in range(rounds):
            before = len(arxiv.requests)
            started = time.monotonic()
            await pipeline.poll_round()
            seconds = time.monotonic() - started
            per_round.append(len(arxiv.requests) - before)
            run = await pipeline.store.last_run("poll")
            outbox = await pipeline.store.outbox_counts()
            print(
                f"  {label}, poll {n + 1}: {per_round[-1]} arXiv requests, "
                f"{run['new'] if run else '?'} new papers, "
                f"{sum(outbox.values())} alerts queued in all, {seconds:.1f}s"
            )
    await fake.stop()
    await arxiv.close()
    return per_round


async def main(args: argparse.Namespace) -> int:
    setup_logging(logging.WARNING)
    print("set-up:")
    small = await prepare("arxiv-1topic.db", 1, 1)
    large = await prepare("arxiv-many.db", args.topics, args.chats)
    print("polls:")
    one = await measure("1 topic, 1 chat", small, 1, args.rounds)
    label = f"{args.topics} topics, {args.chats} chats"
    many = await measure(label, large, args.topics, args.rounds)
    print("\n=== bench_arxiv_load: arXiv requests per poll ===")
    print(f"papers in the polling window   {PAPERS} (OAI-PMH pages of 2,000)")
    print(f"{'1 topic, 1 chat':<31}{one}")
    print(f"{label:<31}{many}")
    equal = one == many
    print("RESULT:", "equal (goal met)" if equal else "NOT equal (goal missed)")
    return 0 if equal else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--chats", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    raise SystemExit(asyncio.run(main(parser.parse_args())))
