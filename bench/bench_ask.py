"""/ask, measured: do the passages come from the papers a researcher would want to read?

The question set is ``evaluation/ask/questions.jsonl`` (written for this; ``GUIDE.md`` beside it
says how): each question, typed the way a researcher would, names a catalogue topic or none, and
lists the real papers (``../shared/arxiv-listings``, 5,861 papers) that answer it. Each ranking
answers every question from the store of the listings (within the topic's papers when one is
named), and an answer's papers — one per passage, best first — are scored:

- **recall@5**: the share of the question's papers among the answer's first 5;
- **MRR**: 1 / the rank of the first of them (0 if none in the first ``DEPTH``).

Rankings (``topicpulse.insight.ask``):

- ``newest``: the topic's newest papers (the question's words only when no topic is named) —
  what /latest shows, the honest baseline;
- ``papers``: the candidates in FTS5's BM25 order, each quoted by its best sentence;
- ``sentences``: BM25 over the candidates' sentences alone;
- ``blend w=…``: best sentence + w × the paper's rank score (w chosen on the ``tune`` split).

Figures are means with 95% bootstrap intervals, per split (``tune``: 15 questions used to
choose w; ``test``: 30 held out). Also tried on the tuning half and dropped (neither beat
``blend w=0.5``): adding the share of the question words' rarity that a paper holds, and
pseudo-relevance feedback (the 10 rarest words the 5 best candidates share, as extra weight).

    .venv/bin/python bench/bench_ask.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evaluation"))

from corpus import LISTINGS, MISSING, listings_store  # noqa: E402

from _support import mean_interval as interval  # noqa: E402
from topicpulse.insight import ask  # noqa: E402
from topicpulse.store import Store  # noqa: E402
from topicpulse.topics.catalogue import find_catalogue_topic, sync_catalogue  # noqa: E402
from topicpulse.topics.matching import match_new_papers  # noqa: E402

QUESTIONS = ROOT / "evaluation" / "ask" / "questions.jsonl"
K = 5
DEPTH = 10
WEIGHTS = (0.25, 0.5, 1.0, 2.0)


def read_questions(path: Path = QUESTIONS) -> list[dict]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def scores(ranked: list[str], relevant: set[str]) -> tuple[float, float]:
    """(recall@K, reciprocal rank within DEPTH) of one answer."""
    recall = len(set(ranked[:K]) & relevant) / len(relevant)
    rank = next((i for i, r in enumerate(ranked[:DEPTH], 1) if r in relevant), None)
    return recall, (1 / rank if rank else 0.0)


async def evaluate(
    store: Store, questions: list[dict], method: ask.Method, weight: float = ask.PAPER_WEIGHT
) -> tuple[list[float], list[float], list[float]]:
    """Per-question recall@K, reciprocal rank, and the seconds each answer took."""
    recalls, ranks, seconds = [], [], []
    for q in questions:
        topic = await find_catalogue_topic(store, q["topic"]) if q["topic"] else None
        if q["topic"] and topic is None:
            raise SystemExit(f"{q['id']}: unknown topic {q['topic']}")
        started = time.perf_counter()
        answer = await ask.ask(
            store, q["question"], topic=topic, limit=DEPTH, method=method, paper_weight=weight
        )
        seconds.append(time.perf_counter() - started)
        recall, rr = scores([p.paper.arxiv_id for p in answer.passages], set(q["relevant"]))
        recalls.append(recall)
        ranks.append(rr)
    return recalls, ranks, seconds


def line(name: str, recalls: list[float], ranks: list[float]) -> str:
    r_lo, r_hi = interval(recalls)
    m_lo, m_hi = interval(ranks)
    return (
        f"  {name:<14} recall@{K} {statistics.fmean(recalls):.2f} [{r_lo:.2f}–{r_hi:.2f}]"
        f"   MRR {statistics.fmean(ranks):.2f} [{m_lo:.2f}–{m_hi:.2f}]"
    )


async def main() -> int:
    if not LISTINGS.exists():
        print(MISSING)
        return 1
    questions = read_questions()
    async with listings_store() as store:
        await sync_catalogue(store)
        await match_new_papers(store, alerts=False)
        print(
            f"{len(questions)} questions over {await store.count_papers():,} papers"
            f" ({sum(1 for q in questions if q['topic'])} within a topic);"
            f" {statistics.fmean(len(q['relevant']) for q in questions):.1f} papers each"
        )
        rankings: list[tuple[str, ask.Method, float]] = [
            ("newest", "newest", 0.0),
            ("papers", "papers", 0.0),
            ("sentences", "sentences", 0.0),
        ] + [(f"blend w={w:g}", "blend", w) for w in WEIGHTS]
        timings: list[float] = []
        for split in ("tune", "test"):
            subset = [q for q in questions if q["split"] == split]
            print(f"\n{split} ({len(subset)} questions)")
            for name, method, weight in rankings:
                recalls, ranks, seconds = await evaluate(store, subset, method, weight)
                if method == "blend" and weight == ask.PAPER_WEIGHT:
                    timings += seconds
                    name += " *"
                print(line(name, recalls, ranks))
        timings.sort()
        print(
            f"\n* shipped (ask.PAPER_WEIGHT = {ask.PAPER_WEIGHT:g}); time per question:"
            f" p50 {timings[len(timings) // 2] * 1000:.0f} ms,"
            f" p95 {timings[int(len(timings) * 0.95)] * 1000:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
