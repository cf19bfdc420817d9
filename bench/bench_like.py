"""/follow like, measured: does a topic made from a few example papers find its topic?

For each of the 12 labelled topics of ``evaluation/`` (real listings in ``../shared``), take k
example papers at random among those labelled ON the topic in the tuning half, make the topic's
query from them (``topicpulse.insight.examples.like_query``, over a store of the 5,861
listings, with the last 4 weeks of the listings as its window), and score what it matches on
the held-out half with the stratified estimator of ``evaluation/report.py`` (precision and
recall of the labelled topic; matches outside the sampling frame count as false). 5 draws per
topic and k; the figures are means over topics and draws, with the spread over topics.

Rules compared:

- ``like``: ours — at least 2 of the examples' 6 most telling words (3 when 2 is too broad);
- ``any of 3``: a naive keyword rule — any of the examples' 3 most telling words;
- ``catalogue``: the topic's curated query (what a person writing a query reaches; no examples).

The rule's constants (``examples.WORDS``, ``SHARED_POWER``, ``MAX_SHARE``) were chosen by
scoring on the tuning half (the examples left out: ``SPLIT = "tune"``) among 3 × 3 × 2 settings;
the shipped one was best on F1 for k=3 and k=5 there (0.35 and 0.40).

    .venv/bin/python bench/bench_like.py
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evaluation"))

from corpus import LISTINGS, MISSING, STRATA, listings_store, matches  # noqa: E402
from report import _table, estimate, read_labels  # noqa: E402

from topicpulse.insight import examples, momentum  # noqa: E402
from topicpulse.models import iso, parse_iso  # noqa: E402
from topicpulse.store import Store  # noqa: E402
from topicpulse.topics.catalogue import load_catalogue  # noqa: E402

KS = (1, 3, 5)
DRAWS = 5


SPLIT = "test"  # "tune" (minus the examples) to choose the rule's constants


async def score(
    store: Store,
    slug: str,
    rule: str,
    frame: set[str],
    labels: list,
    sizes: dict[str, int],
    seeds: frozenset[str] = frozenset(),
) -> tuple[float, float]:
    ids = await matches(store, rule)
    held_out = [lb for lb in labels if lb.split == SPLIT and lb.arxiv_id not in seeds]
    e = estimate(held_out, ids.__contains__, sizes, len(ids - frame))
    return e.precision, e.recall


def f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def line(name: str, pairs: list[tuple[float, float]]) -> str:
    ps, rs = [p for p, _ in pairs], [r for _, r in pairs]
    fs = [f1(p, r) for p, r in pairs]
    return (
        f"  {name:<16} precision {statistics.fmean(ps):.2f}   recall {statistics.fmean(rs):.2f}"
        f"   F1 {statistics.fmean(fs):.2f} (per-topic F1 {min(fs):.2f}–{max(fs):.2f})"
    )


async def main() -> int:
    if not LISTINGS.exists():
        print(MISSING)
        return 1
    labels = read_labels()
    sizes_all = json.loads(STRATA.read_text("utf-8"))
    frame_q, vocabulary_q = _table("frame"), _table("vocabulary")
    catalogue = {e.slug: e.query for e in load_catalogue()}
    rng = random.Random(11)
    async with listings_store() as store:
        _, newest = await store.published_range()
        assert newest is not None
        end = parse_iso(newest) + timedelta(seconds=1)
        window = [iso(end - momentum.WINDOW), iso(end)]
        results: dict[str, list[tuple[float, float]]] = {}
        example_rules: list[str] = []
        for slug, rows in labels.items():
            sizes = {
                "match": sizes_all[slug]["matches"],
                "near_miss": sizes_all[slug]["near_misses"],
            }
            frame = await matches(store, frame_q[slug]) | await matches(store, vocabulary_q[slug])
            pool = sorted(lb.arxiv_id for lb in rows if lb.split == "tune" and lb.label)
            results.setdefault("catalogue", []).append(
                await score(store, slug, catalogue[slug], frame, rows, sizes)
            )
            for k in KS:
                for _ in range(DRAWS):
                    drawn = frozenset(rng.sample(pool, k))
                    seeds = [await store.get_paper(i) for i in sorted(drawn)]
                    papers = [p for p in seeds if p is not None]
                    rule = (await examples.like_rule(store, papers, window)).query
                    example_rules.append(rule)
                    results.setdefault(f"like k={k}", []).append(
                        await score(store, slug, rule, frame, rows, sizes, drawn)
                    )
                    words = await examples.describing_words(store, papers)
                    naive = examples.at_least(words[:3], 1)
                    results.setdefault(f"any of 3 k={k}", []).append(
                        await score(store, slug, naive, frame, rows, sizes, drawn)
                    )
    print(
        f"{len(labels)} labelled topics × {DRAWS} draws of k example papers (tuning half),"
        " scored on the held-out half:"
    )
    for name in ["catalogue", *(f"{r} k={k}" for k in KS for r in ("like", "any of 3"))]:
        print(line(name, results[name]))
    lengths = sorted(len(r) for r in example_rules)
    print(f"query length: median {lengths[len(lengths) // 2]}, max {lengths[-1]} characters")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
