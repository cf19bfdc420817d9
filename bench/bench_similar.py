"""More like this, measured: does a paper's nearest neighbours share its topic?

The task comes from the topic-quality labels (``evaluation/labels``, real listings in
``../shared``): for every paper labelled ON a topic (the seed), rank the topic's OTHER labelled
papers — on-topic ones and off-topic ones that use the same vocabulary (the near-miss stratum
makes these hard) — by similarity to the seed, and ask how many of the top 5 are on topic
(precision@5) and how early they come (average precision). Ranked three ways:

- ``random``: the pool shuffled (what any order would give by chance);
- ``tfidf``: TF-IDF cosine over title+abstract (log tf, idf over the whole listing, title words
  counted twice) — the arxiv-sanity baseline;
- ``bm25-mlt``: step 1 of ours alone: the seed's content words OR-ed, BM25 over the store's
  FTS5 index, restricted here to the pool (what /similar shipped before);
- ``ours``: what ``topicpulse.insight.similarity`` ships: BM25's best ``CANDIDATES`` re-ranked by
  TF-IDF cosine over the index's stems, document frequencies from the store.

Figures are means over seeds with 95% bootstrap intervals. Then, over the whole store (not a
pool): how many of the exact whole-listing TF-IDF top 5 survive step 1's candidate cut, and
the time per /similar query on the 5,861-paper store.

    .venv/bin/python bench/bench_similar.py
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evaluation"))

from corpus import LISTINGS, MISSING, listings_store  # noqa: E402
from report import read_labels  # noqa: E402

from _support import mean_interval as interval  # noqa: E402
from topicpulse.insight.similarity import (  # noqa: E402
    CANDIDATES,
    STOPWORDS,
    cosine,
    rank_by_tfidf,
    similar_papers,
    similarity_query,
    tfidf,
)
from topicpulse.models import StoredPaper  # noqa: E402
from topicpulse.topics import query as ql  # noqa: E402

K = 5


def _words(p: StoredPaper) -> Counter[str]:
    title = [t for t in ql.tokenize(p.title) if len(t) >= 3 and t not in STOPWORDS]
    body = [t for t in ql.tokenize(p.abstract) if len(t) >= 3 and t not in STOPWORDS]
    return Counter(title * 2 + body)


def tfidf_vectors(papers: dict[str, StoredPaper]) -> dict[str, dict[str, float]]:
    """Whole-listing TF-IDF over exact words (not stems): the arxiv-sanity baseline."""
    counts = {i: _words(p) for i, p in papers.items()}
    df: Counter[str] = Counter()
    for c in counts.values():
        df.update(c.keys())
    return {i: tfidf(c, df, len(papers)) for i, c in counts.items()}


def scores(ranked: list[str], relevant: set[str]) -> tuple[float, float]:
    """(precision@K, average precision) of a ranking."""
    hits, precisions = 0, []
    for n, i in enumerate(ranked, start=1):
        if i in relevant:
            hits += 1
            precisions.append(hits / n)
    p_at_k = sum(1 for i in ranked[:K] if i in relevant) / min(K, len(ranked))
    return p_at_k, (sum(precisions) / len(relevant) if relevant else 0.0)


async def main() -> int:
    if not LISTINGS.exists():
        print(MISSING, file=sys.stderr)
        return 1
    labels = read_labels()
    async with listings_store() as store:
        papers = {p.arxiv_id: p for p in await store.papers_after(0)}
        vectors = tfidf_vectors(papers)
        results: dict[str, list[tuple[float, float]]] = {
            "random": [],
            "tfidf": [],
            "bm25-mlt": [],
            "ours": [],
        }
        timings: list[float] = []
        rng = random.Random(11)
        for rows in labels.values():
            judged = {lb.arxiv_id: lb.label for lb in rows}
            for seed_id, on_topic in judged.items():
                if not on_topic:
                    continue
                pool = [i for i in judged if i != seed_id]
                relevant = {i for i in pool if judged[i]}
                shuffled = pool[:]
                rng.shuffle(shuffled)
                results["random"].append(scores(shuffled, relevant))
                seed = vectors[seed_id]
                by_cosine = sorted(pool, key=lambda i: -cosine(seed, vectors[i]))
                results["tfidf"].append(scores(by_cosine, relevant))
                fts = similarity_query(papers[seed_id])
                found = await store.matching_papers(fts=fts, order="relevance")
                ranked = [p.arxiv_id for p in found if p.arxiv_id in set(pool)]
                ranked += [i for i in pool if i not in set(ranked)]  # unmatched: last
                results["bm25-mlt"].append(scores(ranked, relevant))
                candidates = [papers[i] for i in ranked[:CANDIDATES]]
                reranked = [
                    q.arxiv_id for q in await rank_by_tfidf(store, papers[seed_id], candidates)
                ]
                reranked += ranked[CANDIDATES:]
                results["ours"].append(scores(reranked, relevant))
        kept: list[float] = []
        for p in list(papers.values())[::50]:  # what /similar costs: the top 5 of the store
            started = time.perf_counter()
            shown = await similar_papers(store, p, limit=K)
            timings.append(time.perf_counter() - started)
            exact = sorted(
                (i for i in papers if i != p.arxiv_id),
                key=lambda i: -cosine(vectors[p.arxiv_id], vectors[i]),
            )[:K]
            kept.append(len(set(exact) & {q.arxiv_id for q in shown}) / K)
    seeds = len(results["random"])
    print(f"seeds: {seeds} on-topic labelled papers over {len(labels)} topics; pools: each "
          "topic's other labelled papers (on- and off-topic)")  # fmt: skip
    for name, values in results.items():
        p5 = [v[0] for v in values]
        ap = [v[1] for v in values]
        lo, hi = interval(p5)
        alo, ahi = interval(ap)
        print(f"  {name:9} precision@{K} {statistics.fmean(p5):.3f} [{lo:.3f}–{hi:.3f}]   "
              f"MAP {statistics.fmean(ap):.3f} [{alo:.3f}–{ahi:.3f}]")  # fmt: skip
    timings.sort()
    p50, p95 = timings[len(timings) // 2], timings[int(len(timings) * 0.95)]
    lo, hi = interval(kept)
    print(f"whole store, {len(kept)} papers: /similar's top {K} share {statistics.fmean(kept):.2f}"
          f" [{lo:.2f}–{hi:.2f}] of the exact whole-listing TF-IDF top {K}")  # fmt: skip
    print(f"/similar (ours, top {K}) on {len(papers):,} papers: p50 {p50 * 1000:.1f} ms,"
          f" p95 {p95 * 1000:.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
