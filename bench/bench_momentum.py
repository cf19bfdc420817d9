"""Momentum benchmark: topic momentum and charts on a store of 150,000 papers over 12 weeks.

The store is made of re-dated copies of the real listings (``shared/arxiv-listings``): every
copy gets new arXiv ids and each paper a first-version date drawn uniformly from the 12 weeks
before AS_OF. The catalogue's topics (or, if ``catalogue.toml`` is missing or does not load, a
handful of realistic queries) are loaded and matched. The store is built once into
``bench/out/momentum-150k.db`` (git-ignored) and reused.

Measured, as p50/p95 over many calls:

* ``momentum.compute`` for a catalogue topic (goal p95 ≤ 50 ms), per topic and over all topics;
* ``charts.render_chart`` (goal p95 ≤ 300 ms), the first call excluded as a warm-up;
* a ``/momentum``-like call for an arbitrary query through the full-text index (information).

    .venv/bin/python bench/bench_momentum.py             # ~3 min the first time, then seconds
    .venv/bin/python bench/bench_momentum.py --rebuild
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import os
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _support import OUT, ROOT, percentile
from topicpulse import momentum
from topicpulse import query as ql
from topicpulse.charts import _render, render_chart
from topicpulse.ingest import read_papers_file
from topicpulse.models import Paper, Topic, iso
from topicpulse.store import Store
from topicpulse.topics import CatalogueEntry, load_catalogue, sync_catalogue

LISTINGS = Path(
    os.environ.get("TOPICPULSE_SHARED", ROOT.parent / "shared"), "arxiv-listings", "papers.jsonl"
)
PAPERS = 150_000
WEEKS = 12
AS_OF = datetime(2026, 5, 23, tzinfo=UTC)  # a Saturday, 00:00: the end of the 12 weeks
CHUNK = 5_000
GOAL_COMPUTE_MS = 50.0
GOAL_CHART_MS = 300.0
FALLBACK_CATALOGUE = [
    CatalogueEntry(
        "rl-for-language-models",
        "RL for Language Models",
        "",
        '("reinforcement learning" OR rlhf OR rlvr OR grpo OR "policy optimization")'
        ' AND (llm* OR "language model"*)',
    ),
    CatalogueEntry("llm-agents", "LLM Agents", "", 'ti:agent* OR "tool use" OR "agentic"'),
    CatalogueEntry("rag", "RAG", "", '"retrieval augmented generation" OR rag OR ti:retriev*'),
    CatalogueEntry("hallucination", "Hallucination", "", "hallucinat* OR factuality"),
    CatalogueEntry("safety", "AI Safety", "", "safety OR alignment OR jailbreak*"),
    CatalogueEntry("speech", "Speech", "", "speech OR cat:eess.AS"),
    CatalogueEntry("multimodal", "Multimodal", "", "multimodal OR cat:cs.CV OR vision-language"),
    CatalogueEntry("reasoning", "Reasoning", "", 'reasoning OR "chain of thought"'),
]
QUERIES = [  # arbitrary /momentum queries: broad, narrow, phrases, prefixes, fields, NOT
    "llm",
    '"language model" AND benchmark',
    "ti:agent* NOT robot*",
    '"direct preference optimization" OR dpo',
    "au:wang AND reasoning",
    "cat:cs.CL AND (translation OR multilingual)",
    "diffusion",
    "speech OR audio OR cat:eess.AS",
    '"knowledge graph"* AND ti:llm*',
    "hallucinat*",
]


def _catalogue() -> tuple[list[CatalogueEntry], str]:
    try:
        entries = load_catalogue()
    except (OSError, ValueError) as exc:
        return FALLBACK_CATALOGUE, f"{len(FALLBACK_CATALOGUE)} fallback topics ({exc})"
    return entries, f"catalogue.toml ({len(entries)} topics)"


def _copies(originals: list[Paper], count: int, seed: int = 2026) -> list[Paper]:
    """``count`` papers: copies of ``originals`` with new ids, dated over the 12 weeks."""
    rng = random.Random(seed)
    start = AS_OF - timedelta(weeks=WEEKS)
    span = (AS_OF - start).total_seconds()
    papers = []
    for k in range(count):
        copy, n = divmod(k, len(originals))
        stamp = iso(start + timedelta(seconds=rng.random() * span))
        papers.append(
            dataclasses.replace(
                originals[n], arxiv_id=f"{2600 + copy}.{n:05d}", published=stamp, updated=stamp
            )
        )
    return papers


async def build(path: Path, entries: list[CatalogueEntry]) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    papers = _copies(read_papers_file(LISTINGS), PAPERS)
    store = await Store.open(path)
    try:
        started = time.perf_counter()
        for at in range(0, len(papers), CHUNK):
            await store.upsert_papers(papers[at : at + CHUNK])
        print(f"  stored {len(papers):,} papers in {time.perf_counter() - started:.0f}s")
        started = time.perf_counter()
        await sync_catalogue(store, entries)
        print(f"  matched {len(entries)} topics in {time.perf_counter() - started:.0f}s")
    finally:
        await store.close()


async def timed(call: Callable[[], Awaitable[object]], repeat: int) -> list[float]:
    """Milliseconds of each of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def line(label: str, times: list[float], goal: float | None = None) -> str:
    p50, p95 = percentile(times, 50), percentile(times, 95)
    verdict = (
        "" if goal is None else f"; goal p95 ≤ {goal:.0f} ms: {'met' if p95 <= goal else 'MISSED'}"
    )
    return f"{label}: p50 {p50:.1f} ms, p95 {p95:.1f} ms (n={len(times)}){verdict}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached store")
    parser.add_argument("--repeat", type=int, default=40, help="timed calls per measurement")
    args = parser.parse_args()

    entries, source = _catalogue()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "momentum-150k.db"
    stamp = OUT / "momentum-150k.catalogue"
    fingerprint = hashlib.sha256(
        repr([(PAPERS, str(AS_OF)), *((e.slug, e.query) for e in entries)]).encode()
    ).hexdigest()
    if args.rebuild or not path.exists() or not stamp.exists() or stamp.read_text() != fingerprint:
        print(f"building {path.relative_to(ROOT)}: {PAPERS:,} papers, topics from {source}")
        await build(path, entries)
        stamp.write_text(fingerprint)
    else:
        print(f"reusing {path.relative_to(ROOT)} (topics from {source})")

    store = await Store.open(path)
    try:
        papers = await store.count_papers()
        first, last = await store.published_range()
        topics: list[Topic] = await store.topics(kind="catalogue")
        volumes = {t.id: await store.count_matches(topic_id=t.id) for t in topics}
        biggest = max(topics, key=lambda t: volumes[t.id])
        print(f"store: {papers:,} papers published {first} … {last}, {len(topics)} topics "
              f"({min(volumes.values()):,}–{max(volumes.values()):,} matches each)")  # fmt: skip
        print(f"as of {iso(AS_OF)}; {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f} at the start")  # fmt: skip
        print()

        def compute_for(topic: Topic) -> Callable[[], Awaitable[momentum.Momentum]]:
            return lambda: momentum.compute(store, topic=topic, as_of=AS_OF)

        await momentum.compute(store, topic=biggest, as_of=AS_OF)  # page cache warm
        one = await timed(compute_for(biggest), args.repeat)
        print(line(f"momentum.compute, biggest topic “{biggest.name}” ({volumes[biggest.id]:,} "
                   "matches)", one, GOAL_COMPUTE_MS))  # fmt: skip
        every: list[float] = []
        for topic in topics:
            every += await timed(compute_for(topic), max(3, args.repeat // 10))
        print(line(f"momentum.compute, all {len(topics)} topics", every, GOAL_COMPUTE_MS))

        m = await momentum.compute(store, topic=biggest, as_of=AS_OF)
        started = time.perf_counter()
        render_chart(m)  # warm-up: imports matplotlib, loads fonts
        warm_up = (time.perf_counter() - started) * 1000
        charts, cached = [], []
        for _ in range(args.repeat):
            _render.cache_clear()  # a chart not drawn before: the real rendering cost
            started = time.perf_counter()
            png = render_chart(m)
            charts.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            render_chart(m)  # the same numbers again: served from the cache of recent charts
            cached.append((time.perf_counter() - started) * 1000)
        print(line(f"render_chart, not cached ({len(png):,}-byte PNG; first call, "
                   f"{warm_up:.0f} ms, excluded as warm-up)", charts, GOAL_CHART_MS))  # fmt: skip
        print(line("render_chart, same chart again (cached)", cached, GOAL_CHART_MS))

        arbitrary: list[float] = []
        slowest = ("", 0.0)
        for text in QUERIES:
            fts = ql.compile_query(text)
            times = await timed(
                lambda fts=fts, text=text: momentum.compute(  # type: ignore[misc]
                    store, fts=fts, query=text, as_of=AS_OF
                ),
                max(3, args.repeat // 8),
            )
            arbitrary += times
            if max(times) > slowest[1]:
                slowest = (text, max(times))
        print(line(f"momentum.compute for {len(QUERIES)} arbitrary queries (fts, information)",
                   arbitrary) + f"; slowest {slowest[1]:.0f} ms for {slowest[0]!r}")  # fmt: skip
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
