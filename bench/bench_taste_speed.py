"""The taste's cost: training a chat's taste from its ratings (what the worker process does
after each change: ``insight.taste.learn``), scoring a digest, and what a trained taste
occupies, on a store of the 5,861 real listings (``../shared``).

CHATS chats each rate RATINGS random stored papers (a third 👎); each is trained once cold
(its stems' document counts not yet cached by the store) and again warm; then a digest of 50
papers is scored. Baseline: a chat that never rated — one indexed read, no model.

    .venv/bin/python bench/bench_taste_speed.py [--chats 20] [--ratings 50]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evaluation"))
sys.path.insert(0, str(ROOT / "src"))

from corpus import LISTINGS, MISSING, listings_store  # noqa: E402

from topicpulse.delivery import tastes  # noqa: E402
from topicpulse.insight import taste  # noqa: E402


def ms(values: list[float]) -> str:
    values = sorted(values)
    return (
        f"median {statistics.median(values) * 1000:.1f} ms, "
        f"p90 {values[int(0.9 * (len(values) - 1))] * 1000:.1f} ms"
    )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--ratings", type=int, default=50)
    args = parser.parse_args()
    if not LISTINGS.exists():
        print(MISSING)
        return 1
    rng = random.Random(3)
    async with listings_store() as store:
        papers = await store.recent_papers(100_000)
        cold, warm, digest, sizes = [], [], [], []
        for chat_id in range(1, args.chats + 1):
            await store.ensure_chat(chat_id)
            for n, p in enumerate(rng.sample(papers, args.ratings)):
                await store.toggle_rating(chat_id, p, -1 if n % 3 == 0 else 1)
            for times in (cold, warm):
                start = time.perf_counter()
                await taste.learn(store, chat_id)
                times.append(time.perf_counter() - start)
            row = await store.taste(chat_id)
            assert row is not None and row.model
            sizes.append(len(row.model.encode()))
            batch = rng.sample(papers, 50)
            start = time.perf_counter()
            await tastes.reader_order(store, chat_id, batch)
            digest.append(time.perf_counter() - start)
        start = time.perf_counter()
        for _ in range(100):
            await tastes.reader_order(store, 10**9, papers[:50])  # never rated
        none = (time.perf_counter() - start) / 100
    print(f"{args.chats} chats × {args.ratings} ratings on {len(papers):,} stored papers:")
    print(f"  train (cold store caches): {ms(cold)}")
    print(f"  train (warm):              {ms(warm)}")
    print(f"  score a 50-paper digest:   {ms(digest)}")
    print(f"  a chat that never rated:   {none * 1000:.2f} ms (one read, no model)")
    kb = statistics.median(sizes) / 1000
    print(
        f"  a trained taste: {kb:.0f} kB of JSON in the store (median), none in memory:"
        f" 10,000 such chats ≈ {kb * 10:.0f} MB on disk"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
