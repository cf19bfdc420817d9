"""Memory: resident set size of the running bot with 150,000 papers, 10,000 chats and 30,000
subscriptions in its store, while it polls arXiv, matches, sends alerts and answers commands
(/momentum with its chart, /trending, /search, /latest, /list).

The store is built once from the real papers of shared/arxiv-listings (without ../shared:
generated ones, ``fake_arxiv.synthetic_listing``), recycled with new ids and dates spread over
30 weeks, and cached in bench/out/memory.db; each run works on a copy.
The bot is ``python -m topicpulse run`` in a child process (the fakes run here), so its RSS is
its own.

    .venv/bin/python bench/bench_memory.py             # ~2 min the first time, then ~1.5 min
    .venv/bin/python bench/bench_memory.py --fresh     # rebuild the store
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _support import OUT, BotProcess, RssSampler, bot_env, mb, outbox_counts, wait_until
from fake_arxiv import FakeArxiv, listing_papers
from fake_telegram import FakeTelegram
from topicpulse.models import Paper, iso
from topicpulse.store import Store
from topicpulse.topics import catalogue as topics
from topicpulse.topics.catalogue import load_catalogue

PAPERS, CHATS, FOLLOWS, CUSTOM_TOPICS = 150_000, 10_000, 3, 2_000
CATEGORIES = "cs.CL,cs.LG,cs.AI,cs.CV,stat.ML"


def recycled(templates: list[Paper], n: int, *, first: int, newest: datetime, span: timedelta):
    """``n`` papers made from the templates, ids from ``first``, published over ``span``."""
    step = span / n
    for i in range(n):
        t = templates[i % len(templates)]
        stamp = iso(newest - step * (n - 1 - i))
        number = first + i
        yield dataclasses.replace(
            t,
            arxiv_id=f"3{number // 100_000:03d}.{number % 100_000:05d}",
            version=1,
            title=f"{t.title} ({number})",
            published=stamp,
            updated=stamp,
        )


async def build(db: Path, templates: list[Paper]) -> None:
    started = time.monotonic()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    async with await Store.open(db) as store:
        newest = datetime.now(UTC) - timedelta(days=1)
        batch: list[Paper] = []
        for paper in recycled(templates, PAPERS, first=1, newest=newest, span=timedelta(weeks=30)):
            batch.append(paper)
            if len(batch) == 5_000:
                await store.upsert_papers(batch)
                batch = []
        if batch:
            await store.upsert_papers(batch)
        print(f"  {PAPERS} papers stored ({time.monotonic() - started:.0f}s)")
        await topics.sync_catalogue(store)
        rng = random.Random(1)
        words = sorted(
            {w.lower() for p in templates for w in p.title.split() if w.isalpha() and len(w) > 6}
        )
        firsts, seconds = rng.sample(words, CUSTOM_TOPICS), rng.sample(words, CUSTOM_TOPICS)
        queries = [f"{a} AND {b}" for a, b in zip(firsts, seconds, strict=True)]
        topic_ids = [t.id for t in await store.topics(kind="catalogue")]
        for q in queries:
            topic_ids.append((await topics.custom_topic(store, q)).id)
        print(f"  {len(topic_ids)} topics ({time.monotonic() - started:.0f}s)")
        for c in range(CHATS):
            chat_id = c + 1 if c % 20 else -(1_000_000_000_000 + c)  # 5% groups
            await store.ensure_chat(chat_id, type="supergroup" if chat_id < 0 else "private")
            for k in range(FOLLOWS):
                await store.subscribe(chat_id, topic_ids[(c * FOLLOWS + k) % len(topic_ids)])
        counts = await store.chat_counts()
        print(
            f"  {counts['active']} chats, {counts['subscriptions']} subscriptions "
            f"({time.monotonic() - started:.0f}s)"
        )


async def users(fake: FakeTelegram, names: list[str], stop: asyncio.Event) -> int:
    """Users typing commands, one a second."""
    rng = random.Random(2)
    sent = 0
    while not stop.is_set():
        chat = rng.randrange(1, CHATS)
        if chat % 20 == 0:
            chat += 1
        command = rng.choice(
            [
                f"/momentum {rng.choice(names)}",
                "/trending",
                "/search language model",
                f"/latest {rng.choice(names)} 10",
                "/list",
                "/momentum",
            ]
        )
        fake.user_sends(chat, command)
        sent += 1
        await asyncio.sleep(1.0)
    return sent


async def main(args: argparse.Namespace) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    cached = OUT / "memory.db"
    templates = listing_papers()
    if args.fresh or not cached.exists():
        print("building the store (cached for the next runs):")
        await build(cached, templates)
    db = OUT / "memory-run.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(cached, db)
    size = db.stat().st_size
    now = datetime.now(UTC)
    fresh = list(recycled(templates, 400, first=PAPERS + 1, newest=now, span=timedelta(hours=20)))
    fresh = [dataclasses.replace(p, categories=("cs.CL", "cs.LG")) for p in fresh]
    fresh = [dataclasses.replace(p, primary_category="cs.CL") for p in fresh]
    arxiv = FakeArxiv(fresh)
    await arxiv.start()
    fake = FakeTelegram(enforce_limits=True, latency=0.1)
    await fake.start()
    env = bot_env(
        fake,
        arxiv,
        db,
        TOPICPULSE_CATEGORIES="cs.CL,cs.LG",
        TOPICPULSE_POLL_SECONDS=str(args.poll_every),
    )
    log_path = OUT / "memory-bot.log"
    log_path.unlink(missing_ok=True)
    names = [e.name for e in load_catalogue()]
    bot = await BotProcess(env, log_path).start()
    rss = RssSampler(bot.pid).start()
    try:
        if not await wait_until(lambda: fake.stats["ok"] >= 2, timeout=60):
            print("the bot did not start; see", log_path)
            return 1
        await asyncio.sleep(1)
        started_rss = rss.sample()
        stop = asyncio.Event()
        typing = asyncio.create_task(users(fake, names, stop))
        await asyncio.sleep(args.seconds)
        stop.set()
        commands = await typing
        await asyncio.sleep(3)
        end_rss = rss.sample()
    finally:
        await bot.stop()
        await rss.stop()
    counts = outbox_counts(db)
    await arxiv.close()
    await fake.stop()
    polls = log_path.read_text("utf-8", "replace").count("poll round:")
    photos = sum(1 for m in fake.sent if m.method == "sendPhoto")

    print("\n=== bench_memory: the bot's resident memory ===")
    print(f"store                  {PAPERS} papers, {CHATS} chats, {CHATS * FOLLOWS} subscriptions"
          f" ({size / 2**20:.0f} MB database)")  # fmt: skip
    print(f"activity               {polls} polls ({len(fresh)} new papers), "
          f"{counts.get('sent', 0)} alerts sent, {commands} commands "
          f"({photos} charts) in {args.seconds:.0f}s")  # fmt: skip
    print(f"RSS after start        {mb(started_rss)}")
    print(f"RSS at the end         {mb(end_rss)}")
    print(f"peak RSS               {mb(rss.peak)} (goal ≤ 200 MB)")
    ok = rss.peak <= 200 * 2**20
    print("RESULT:", "goal met" if ok else "goal missed")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh", action="store_true", help="rebuild the cached store")
    parser.add_argument("--seconds", type=float, default=60, help="how long users type commands")
    parser.add_argument("--poll-every", type=float, default=20, help="TOPICPULSE_POLL_SECONDS")
    raise SystemExit(asyncio.run(main(parser.parse_args())))
