"""The topic page's speed: ``GET /topics/<slug>`` on a 150,000-paper store (goal: p95 ≤ 100 ms).

The store is ``bench_momentum``'s (150,000 synthetic papers over 16 weeks, the catalogue
matched; built once and cached). A real server (``topicpulse.web``) on 127.0.0.1 answers an
aiohttp client: every catalogue topic's page, ``--rounds`` times, with the page cache off (each
request renders: momentum, the last 28 days' papers, 20 cards with tags, the SVG chart, the
template), then the same pages from the cache (what a second visitor within a poll interval
gets), and the catalogue page ``/``. Times are the client's: request sent → whole body read.

    .venv/bin/python bench/bench_web.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_momentum  # noqa: E402
from topicpulse.store import Store  # noqa: E402
from topicpulse.web import server  # noqa: E402


def summary(label: str, times: list[float], goal: float | None = None) -> str:
    times = sorted(times)
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    verdict = "" if goal is None else ("  PASS" if p95 <= goal else "  FAIL")
    return (
        f"  {label:<34} n={len(times):4}  p50 {statistics.median(times):6.1f} ms"
        f"  p95 {p95:6.1f} ms  max {times[-1]:6.1f} ms{verdict}"
    )


async def fetch(client: TestClient, path: str) -> float:
    started = time.perf_counter()
    async with client.get(path) as response:
        await response.read()
        assert response.status == 200, (path, response.status)
    return (time.perf_counter() - started) * 1000


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    entries, source = bench_momentum._catalogue()
    path = bench_momentum.store_path(False, entries)
    if not path.exists():
        print(f"building {path} (topics from {source})")
        await bench_momentum.build(path, False, entries)
    server.RATE = (10**9, 60.0)  # one client asks for every page: no rate limit here
    async with await Store.open(path) as store:
        papers = await store.count_papers()
        slugs = [t.slug for t in await store.topics(kind="catalogue") if t.slug]
        context = server.WebContext(store, poll_seconds=0)  # every request renders
        context.clock = lambda: bench_momentum.AS_OF
        client = TestClient(TestServer(server.build_web_app(context), host="127.0.0.1"))
        await client.start_server()
        try:
            for slug in slugs[:3]:  # warm-up: imports, templates compiled, SQLite pages read
                await fetch(client, f"/topics/{slug}")
            rendered = [
                await fetch(client, f"/topics/{slug}") for _ in range(args.rounds) for slug in slugs
            ]
            catalogue = [await fetch(client, "/") for _ in range(5)]
            context.poll_seconds = 1800  # now cached for the poll interval
            for slug in slugs:
                await fetch(client, f"/topics/{slug}")
            cached = [await fetch(client, f"/topics/{slug}") for slug in slugs]
        finally:
            await client.close()
    print(f"store: {papers:,} papers, {len(slugs)} catalogue topics ({path.name})")
    print(summary("/topics/<slug>, rendered", rendered, goal=100))
    print(summary("/topics/<slug>, from the page cache", cached))
    print(summary("/ (catalogue, 60 topics' momentum)", catalogue))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
