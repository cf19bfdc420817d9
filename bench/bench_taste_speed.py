"""The taste's cost: training a chat's taste from its ratings (what the worker process does
after each change: ``insight.taste.learn``), scoring a digest, and what a trained taste
occupies, on a store of the 5,861 real listings (``../shared``).

CHATS chats each follow FOLLOWS catalogue topics (their papers of the last 4 weeks set the
hold-back floor) and rate RATINGS random stored papers (a third 👎). Each is trained in this
process once cold (its papers' stems and their document counts not yet cached) and again warm,
then twice as the bot does it after a rating changes: ``offload.run(taste.learn_apart, …)``,
in the worker process, timed from the bot's side (the call, the worker's own connection, the
write); the second time the worker has met the chat's papers. Digests: 50 papers
scored for a chat, the first time this process meets them (cold: the first chat of a round)
and again for the next chat (warm: the same round's papers). Baseline: a chat that never
rated — one indexed read, no model.

    .venv/bin/python bench/bench_taste_speed.py [--chats 20] [--ratings 50] [--follows 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evaluation"))
sys.path.insert(0, str(ROOT / "src"))

from corpus import LISTINGS, MISSING, listings_store  # noqa: E402

from topicpulse import offload  # noqa: E402
from topicpulse.delivery import tastes  # noqa: E402
from topicpulse.insight import taste  # noqa: E402
from topicpulse.models import iso, parse_iso  # noqa: E402
from topicpulse.topics.catalogue import sync_catalogue  # noqa: E402
from topicpulse.topics.matching import match_new_papers  # noqa: E402


def ms(values: list[float], cpu: list[float] | None = None) -> str:
    values = sorted(values)
    return (
        f"median {statistics.median(values) * 1000:.1f} ms, "
        f"p90 {values[int(0.9 * (len(values) - 1))] * 1000:.1f} ms"
        + (f" (CPU median {statistics.median(cpu) * 1000:.1f} ms)" if cpu else "")
    )


class Timer:
    """Wall and CPU time of each ``with`` block (CPU: this process's, all its threads)."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __enter__(self) -> None:
        self._start = time.perf_counter(), time.process_time()

    def __exit__(self, *exc: object) -> None:
        self.wall.append(time.perf_counter() - self._start[0])
        self.cpu.append(time.process_time() - self._start[1])

    def __str__(self) -> str:
        return ms(self.wall, self.cpu)


def timed_learn(path: str, chat_id: int, now: str) -> tuple[float, float]:
    """``taste.learn_apart`` in the worker process, with its wall and CPU time there."""
    start = time.perf_counter(), time.process_time()
    taste.learn_apart(path, [chat_id], now)
    return time.perf_counter() - start[0], time.process_time() - start[1]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--ratings", type=int, default=50)
    parser.add_argument("--follows", type=int, default=3, help="topics each chat follows")
    args = parser.parse_args()
    if not LISTINGS.exists():
        print(MISSING)
        return 1
    rng = random.Random(3)
    async with listings_store() as store:
        await sync_catalogue(store)
        await match_new_papers(store, alerts=False)
        papers = await store.recent_papers(100_000)
        newest = max(p.published for p in papers)
        store.clock = lambda: parse_iso(newest) + timedelta(days=1)  # the listings' "now"
        topics = [t for t in await store.topics(kind="catalogue")]
        cold, warm, first, again = Timer(), Timer(), Timer(), Timer()
        apart: list[list[float]] = [[], []]  # the bot's wall time, first and second training
        inside: list[list[tuple[float, float]]] = [[], []]  # the worker's wall and CPU time
        sizes, reference = [], []
        now = iso(store.clock())
        # started, as in a running bot (training has a worker process of its own)
        await offload.run(taste.learn_apart, store.path, [10**9], now, pool=offload.TRAINING)
        for chat_id in range(1, args.chats + 1):
            await store.ensure_chat(chat_id)
            for topic in rng.sample(topics, args.follows):
                await store.subscribe(chat_id, topic.id)
            for n, p in enumerate(rng.sample(papers, args.ratings)):
                await store.toggle_rating(chat_id, p, -1 if n % 3 == 0 else 1)
            for timer in (cold, warm):
                with timer:
                    await taste.learn(store, chat_id)
            for n in range(2):
                await store.toggle_rating(chat_id, papers[chat_id], 1)  # a change: due again
                start = time.perf_counter()
                inside[n].append(
                    await offload.run(timed_learn, store.path, chat_id, now, pool=offload.TRAINING)
                )
                apart[n].append(time.perf_counter() - start)
            row = await store.taste(chat_id)
            assert row is not None and row.model and row.trained == row.changed
            sizes.append(len(row.model.encode()))
            since = iso(store.clock() - timedelta(days=taste.REFERENCE_DAYS))
            found = set()
            for sub in await store.subscriptions(chat_id):
                for p in await store.matching_papers(topic_id=sub.topic.id, since=since, limit=300):
                    found.add(p.id)
            reference.append(len(found))
            batch = rng.sample(papers, 50)  # a round's papers, new to this process
            for timer in (first, again):
                with timer:
                    await tastes.reader_order(store, chat_id, batch)
        # every chat's ratings change at once: the Trainer's batches, BATCH chats a call
        chats = list(range(1, args.chats + 1))
        for chat_id in chats:
            await store.toggle_rating(chat_id, papers[chat_id], 1)
        start = time.perf_counter()
        for n in range(0, len(chats), taste.BATCH):
            await offload.run(
                taste.learn_apart,
                store.path,
                chats[n : n + taste.BATCH],
                now,
                pool=offload.TRAINING,
            )
        batched = (time.perf_counter() - start) / len(chats)
        assert not await store.tastes_due()
        start = time.perf_counter()
        for _ in range(100):
            await tastes.reader_order(store, 10**9, papers[:50])  # never rated
        none = (time.perf_counter() - start) / 100
    offload.shutdown()
    print(
        f"{args.chats} chats × {args.ratings} ratings, following {args.follows} topics each "
        f"(median {statistics.median(reference):.0f} papers of theirs in the last 4 weeks), "
        f"on {len(papers):,} stored papers:"
    )
    print(f"  train (cold caches):              {cold}")
    print(f"  train (warm):                     {warm}")
    for n, label in enumerate(
        ("train in the worker, as the bot:", "… its ratings changed again:   ")
    ):
        walls, cpus = [w for w, _ in inside[n]], [c for _, c in inside[n]]
        print(f"  {label}  {ms(apart[n])}; in the worker {ms(walls, cpus)}")
    print(f"  … in the Trainer's batches of {taste.BATCH}:   {batched * 1000:.1f} ms a chat")
    print(f"  score a 50-paper digest:          {first} (papers new to the process)")
    print(f"  … the same papers again:          {again} (the next chat of the round)")
    print(f"  a chat that never rated:          {none * 1000:.2f} ms (one read, no model)")
    kb = statistics.median(sizes) / 1000
    print(
        f"  a trained taste: {kb:.0f} kB of JSON in the store (median), none in memory:"
        f" 10,000 such chats ≈ {kb * 10:.0f} MB on disk"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
