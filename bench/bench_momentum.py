"""Momentum benchmark: topic momentum and charts on a store of 150,000 distinct papers.

The store holds 150,000 distinct synthetic papers (``topicpulse.synthetic.generate_papers``)
first published over the 16 weeks before AS_OF, with arXiv's weekday rhythm (Monday and
Tuesday heavy, weekends light) and growth over time (+1 % a week on top of the themes' own
trends). ``--real`` builds it instead from re-dated copies of the real listings
(``shared/arxiv-listings``: every copy gets new arXiv ids and each paper a first-version date
drawn uniformly from the 12 weeks before AS_OF; the same 5,861 texts over and over). The
catalogue's topics (or, if ``catalogue.toml`` is missing or does not load, a handful of
realistic queries) are loaded and matched. The store is built once into /tmp (a file named by
its parameters and the generator's source, so a change rebuilds it) and reused.

Measured, as p50/p95, COLD and WARM separately:

* cold: the first call on a freshly opened ``Store`` (a new connection: SQLite's page cache
  empty) after the OS page cache was dropped (``/proc/sys/vm/drop_caches``, when writable: as
  root), so every page comes from disk — a restarted bot on a cold machine. Where the OS cache
  cannot be dropped (or with ``--no-drop``), cold means only the fresh connection, and the
  output says so. For a chart, cold is the first chart a new process draws (it imports
  matplotlib and loads the fonts), measured in a child process;
* warm: repeated calls on an open store (the bot's steady state);
* ``momentum.compute`` for every catalogue topic and for the biggest one (goal p95 ≤ 50 ms);
* ``charts.render_chart`` (goal p95 ≤ 300 ms), and the same chart again (cached);
* a ``/momentum``-like call for an arbitrary query through the full-text index (information).

    .venv/bin/python bench/bench_momentum.py             # builds the store the first time (~20 s)
    .venv/bin/python bench/bench_momentum.py --real      # the store from the real listings
    .venv/bin/python bench/bench_momentum.py --rebuild --no-drop
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import os
import pickle
import random
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _support import ROOT, percentile
from topicpulse.insight import momentum
from topicpulse.insight.charts import _render, render_chart
from topicpulse.models import Paper, Topic, iso
from topicpulse.sources.ingest import read_papers_file
from topicpulse.store import Store
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import CatalogueEntry, load_catalogue, sync_catalogue

LISTINGS = Path(
    os.environ.get("TOPICPULSE_SHARED", ROOT.parent / "shared"), "arxiv-listings", "papers.jsonl"
)
CACHE = Path(os.environ.get("TOPICPULSE_BENCH_CACHE", "/tmp/topicpulse-bench"))
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
PAPERS = 150_000
AS_OF = datetime(2026, 5, 23, tzinfo=UTC)  # a Saturday, 00:00: the end of the stored weeks
# the synthetic store: 16 weeks (the 12 of the histogram and some history before them)
SYNTHETIC = {
    "count": PAPERS,
    "start": (AS_OF - timedelta(weeks=16)).date(),
    "days": 16 * 7,
    "per_weekday": 1_500,  # the rhythm's scale; ``count`` rescales it to exactly PAPERS
    "growth": 0.01,  # +1 % a week
    "seed": 2026,
}
REAL_WEEKS = 12
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
# a child process drawing its first chart: matplotlib imported and fonts loaded on that call,
# as in a freshly started bot (topicpulse.insight.charts itself is imported at start-up, untimed)
FIRST_CHART = """
import pickle, sys, time
from topicpulse.insight.charts import render_chart
m = pickle.loads(sys.stdin.buffer.read())
started = time.perf_counter()
render_chart(m)
print((time.perf_counter() - started) * 1000)
"""


def _catalogue() -> tuple[list[CatalogueEntry], str]:
    try:
        entries = load_catalogue()
    except (OSError, ValueError) as exc:
        return FALLBACK_CATALOGUE, f"{len(FALLBACK_CATALOGUE)} fallback topics ({exc})"
    return entries, f"catalogue.toml ({len(entries)} topics)"


# ------------------------------------------------------------------------------- the papers
def _synthetic() -> list[Paper]:
    from topicpulse.synthetic import generate_papers

    return generate_papers(**SYNTHETIC)  # type: ignore[arg-type]


def _copies(originals: list[Paper], count: int, seed: int = 2026) -> list[Paper]:
    """``count`` papers: copies of ``originals`` with new ids, dated over the 12 weeks."""
    rng = random.Random(seed)
    start = AS_OF - timedelta(weeks=REAL_WEEKS)
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


def _source_fingerprint(real: bool) -> str:
    """What the papers are made from: the generator's source and its parameters, or the
    listing file (size and modification time)."""
    if real:
        stat = LISTINGS.stat()
        return f"real {REAL_WEEKS} weeks {stat.st_size} {stat.st_mtime_ns}"
    src = ROOT / "src" / "topicpulse"
    files = sorted([*src.glob("synthetic*.py"), *src.glob("synthetic*.toml")])
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
    return f"synthetic {sorted(SYNTHETIC.items())} {digest}"


def store_path(real: bool, entries: list[CatalogueEntry]) -> Path:
    key = repr(
        [PAPERS, str(AS_OF), _source_fingerprint(real), [(e.slug, e.query) for e in entries]]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return CACHE / f"momentum-{'real' if real else 'synthetic'}-{PAPERS}-{digest}.db"


async def build(path: Path, real: bool, entries: list[CatalogueEntry]) -> None:
    """Build into a temporary file, renamed when complete (an interrupted build is not reused);
    older builds of the same kind are removed (each is a few hundred MB)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    kind = "real" if real else "synthetic"
    for old in CACHE.glob(f"momentum-{kind}-*.db*"):
        old.unlink()
    partial = path.with_suffix(".partial")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{partial}{suffix}").unlink(missing_ok=True)
    started = time.perf_counter()
    papers = _copies(read_papers_file(LISTINGS), PAPERS) if real else _synthetic()
    assert len({p.arxiv_id for p in papers}) == PAPERS
    print(f"  made {len(papers):,} {kind} papers in {time.perf_counter() - started:.0f}s")
    store = await Store.open(partial)
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
    for suffix in ("-wal", "-shm"):
        Path(f"{partial}{suffix}").unlink(missing_ok=True)  # checkpointed on close
    partial.rename(path)


# ------------------------------------------------------------------------------- timing
def drop_os_cache() -> bool:
    """Empty the OS page cache (root only): every page read next comes from the disk."""
    try:
        os.sync()
        DROP_CACHES.write_text("3\n")
    except OSError:
        return False
    return True


async def timed(call: Callable[[], Awaitable[object]], repeat: int) -> list[float]:
    """Milliseconds of each of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return times


async def cold(
    path: Path, call: Callable[[Store], Awaitable[object]], drop: bool
) -> float:  # fmt: skip
    """Milliseconds of the first call on a freshly opened store (after dropping the OS cache)."""
    if drop:
        drop_os_cache()
    store = await Store.open(path)
    try:
        started = time.perf_counter()
        await call(store)
        return (time.perf_counter() - started) * 1000
    finally:
        await store.close()


def first_chart(m: momentum.Momentum, drop: bool) -> float:
    """Milliseconds of the first chart drawn in a new process."""
    if drop:
        drop_os_cache()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    child = subprocess.run(
        [sys.executable, "-c", FIRST_CHART],
        input=pickle.dumps(m),
        capture_output=True,
        env=env,
        check=True,
        timeout=120,
    )
    return float(child.stdout.decode().split()[-1])


def line(label: str, times: list[float], goal: float | None = None) -> str:
    p50, p95 = percentile(times, 50), percentile(times, 95)
    verdict = (
        "" if goal is None else f"; goal p95 ≤ {goal:.0f} ms: {'met' if p95 <= goal else 'MISSED'}"
    )
    return (
        f"  {label}: p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {max(times):.1f} ms "
        f"(n={len(times)}){verdict}"
    )


# ------------------------------------------------------------------------------- main
async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", action="store_true", help="copies of the real listings")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached store")
    parser.add_argument("--repeat", type=int, default=40, help="timed warm calls")
    parser.add_argument("--cold", type=int, default=10, help="cold calls for the biggest topic")
    parser.add_argument("--charts", type=int, default=3, help="new processes for first charts")
    parser.add_argument("--no-drop", action="store_true", help="never drop the OS page cache")
    args = parser.parse_args()

    entries, source = _catalogue()
    path = store_path(args.real, entries)
    if args.rebuild or not path.exists():
        print(f"building {path}: {PAPERS:,} {'real' if args.real else 'synthetic'} papers, "
              f"topics from {source}")  # fmt: skip
        await build(path, args.real, entries)
    else:
        print(f"reusing {path} (topics from {source})")
    drop = not args.no_drop and drop_os_cache()
    cold_means = (
        "a freshly opened Store after dropping the OS page cache (every page from disk)"
        if drop
        else "a freshly opened Store (SQLite's page cache empty); the OS page cache NOT dropped"
        + (" (--no-drop)" if args.no_drop else f" ({DROP_CACHES} not writable)")
    )

    store = await Store.open(path)
    try:
        papers = await store.count_papers()
        first, last = await store.published_range()
        topics: list[Topic] = await store.topics(kind="catalogue")
        volumes = {t.id: await store.count_matches(topic_id=t.id) for t in topics}
        biggest = max(topics, key=lambda t: volumes[t.id])
        edges = [datetime(w.year, w.month, w.day, tzinfo=UTC) for w in momentum.week_starts(AS_OF)]
        all_weeks = await store.count_windows([*map(iso, edges), iso(AS_OF)])
        print(f"store: {papers:,} papers published {first} … {last} "
              f"({os.path.getsize(path) / 2**20:,.0f} MB), {len(topics)} topics "
              f"({min(volumes.values()):,}–{max(volumes.values()):,} matches each)")  # fmt: skip
        print(f"papers per week, the 12 weeks before {iso(AS_OF)}: "
              f"{', '.join(f'{n:,}' for n in all_weeks)}")  # fmt: skip
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
        print(f"cold = {cold_means}")
        print()

        def compute_for(topic: Topic) -> Callable[[Store], Awaitable[momentum.Momentum]]:
            return lambda s: momentum.compute(s, topic=topic, as_of=AS_OF)

        def compute_query(text: str) -> Callable[[Store], Awaitable[momentum.Momentum]]:
            fts = ql.compile_query(text)
            return lambda s: momentum.compute(s, fts=fts, query=text, as_of=AS_OF)

        # -- cold
        cold_all = [await cold(path, compute_for(t), drop) for t in topics]
        cold_big = [await cold(path, compute_for(biggest), drop) for _ in range(args.cold)]
        cold_queries = [await cold(path, compute_query(q), drop) for q in QUERIES]
        fresh_all = [await cold(path, compute_for(t), False) for t in topics]
        m = await momentum.compute(store, topic=biggest, as_of=AS_OF)
        cold_charts = [first_chart(m, drop) for _ in range(args.charts)]
        fresh_charts = [first_chart(m, False) for _ in range(args.charts)] if drop else []

        # -- warm
        await momentum.compute(store, topic=biggest, as_of=AS_OF)
        warm_big = await timed(lambda: compute_for(biggest)(store), args.repeat)
        warm_all: list[float] = []
        for topic in topics:
            warm_all += await timed(
                lambda t=topic: compute_for(t)(store), max(3, args.repeat // 10)
            )
        render_chart(m)  # this process's first chart (matplotlib import, fonts): measured above
        charts, cached = [], []
        for _ in range(args.repeat):
            _render.cache_clear()  # a chart not drawn before: the real rendering cost
            started = time.perf_counter()
            png = render_chart(m)
            charts.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            render_chart(m)  # the same numbers again: served from the cache of recent charts
            cached.append((time.perf_counter() - started) * 1000)
        warm_queries: list[float] = []
        slowest = ("", 0.0)
        for text in QUERIES:
            times = await timed(lambda q=text: compute_query(q)(store), max(3, args.repeat // 8))
            warm_queries += times
            if max(times) > slowest[1]:
                slowest = (text, max(times))

        big = f"biggest topic “{biggest.name}” ({volumes[biggest.id]:,} matches)"
        print(f"momentum.compute, all {len(topics)} catalogue topics:")
        print(line("cold, each topic once", cold_all, GOAL_COMPUTE_MS))
        print(line("fresh connection, OS cache warm, each topic once", fresh_all))
        print(line("warm", warm_all, GOAL_COMPUTE_MS))
        print(f"momentum.compute, {big}:")
        print(line("cold", cold_big, GOAL_COMPUTE_MS))
        print(line("warm", warm_big, GOAL_COMPUTE_MS))
        print(f"render_chart ({len(png):,}-byte PNG):")
        print(line("cold, a new process's first chart (imports matplotlib, loads fonts)"
                   + ("; OS cache dropped" if drop else ""), cold_charts))  # fmt: skip
        if fresh_charts:
            print(line("a new process's first chart, OS cache warm", fresh_charts))
        print(line("warm, a chart not drawn before", charts, GOAL_CHART_MS))
        print(line("warm, the same chart again (cached)", cached, GOAL_CHART_MS))
        print(f"momentum.compute for {len(QUERIES)} arbitrary queries (full-text index, "
              "information):")  # fmt: skip
        print(line("cold, each query once", cold_queries))
        print(line("warm", warm_queries) + f"; slowest {slowest[1]:.0f} ms for {slowest[0]!r}")
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
