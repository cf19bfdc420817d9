"""Matching benchmark: one round of 2,000 new real papers against 10,000 distinct custom topics.

The store first holds the other 3,861 papers of ``shared/arxiv-listings/papers.jsonl``; 10,000
custom topics are created through ``Store.custom_topic`` (queries generated from the catalogue's
vocabulary and the corpus's frequent title words and bigrams, combined with AND/OR/NOT and
fields, every one valid for ``query.parse`` and distinct once normalised), and 2,000 chats follow
five topics each (every topic has exactly one follower, so every topic is live). Then the last
2,000 papers of the corpus are stored.

The baseline is the natural implementation: index the batch's new papers in an FTS5 table (the
same ``BatchIndex`` ours builds) and run each topic's compiled FTS query (``topic.fts``) once —
10,000 FTS5 queries. Ours is ``matching.match_batch``: each distinct term of the topics' queries
runs once on that index and each topic's AND/OR/NOT is evaluated over the shared id sets. Both
run on the same 2,000 papers × 10,000 topics and must return identical matches (checked, every
topic). Measured:

* matching alone, ours vs per-topic FTS5: "cold" is ours' first call in a process (it parses the
  10,000 stored queries once, then keeps the ASTs), "warm" every later round of a running bot;
* the whole round (the real ``match_new_papers``: matching, then ``Store.record_matches``
  durably recording the matches and queuing the alerts), on a fresh copy of the store each time,
  with ``match_batch`` and with the per-topic FTS5 baseline in its place, for two workloads:
  "news" (the papers re-dated to the last two days, so the round also queues the alerts) and
  "history" (the listing's own, months-old dates: a backfill, matched and recorded but never
  alerted). Every round is cross-checked against the store's full-text index for 100 topics;
* for information: each topic's query on the store's own ``papers_fts`` restricted to the
  batch's rowids (its cost grows with the store, here only 5,861 papers), and the per-pair
  Python evaluation (``query.matches``) on a random sample of pairs, extrapolated.

    .venv/bin/python bench/bench_matching.py            # builds bench/out/matching-base.db once
    .venv/bin/python bench/bench_matching.py --rounds 3 --rebuild
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import itertools
import os
import random
import shutil
import sqlite3
import statistics
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _support import OUT, ROOT
from topicpulse.models import Paper, StoredPaper, Topic, iso
from topicpulse.sources.ingest import read_papers_file
from topicpulse.store import Store
from topicpulse.topics import matching
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import load_catalogue
from topicpulse.topics.matching import BatchIndex, match_new_papers

LISTINGS = Path(
    os.environ.get("TOPICPULSE_SHARED", ROOT.parent / "shared"), "arxiv-listings", "papers.jsonl"
)
NEW_PAPERS = 2_000
TOPICS = 10_000
TOPICS_PER_CHAT = 5
CHATS = TOPICS // TOPICS_PER_CHAT
GOAL_SECONDS = 1.0
FALLBACK_QUERIES = [  # used when catalogue.toml is missing or does not load
    '("reinforcement learning" OR rlhf OR rlvr OR grpo) AND (llm OR "language model")',
    '"retrieval augmented generation" OR rag OR ti:retriev*',
    "ti:agent* OR (agent AND (tool OR planning))",
    "hallucination OR factuality OR ti:faithful*",
    '"chain of thought" OR reasoning OR ti:math*',
    "safety OR alignment OR jailbreak* OR red-teaming",
    "cat:cs.CV OR multimodal OR vision-language OR ti:image",
    "speech OR cat:eess.AS OR audio",
    "benchmark OR evaluation OR ti:leaderboard",
    '"knowledge graph" OR ontology OR cat:cs.DB',
    "ti:(diffusion OR flow) AND generative",
    "translation OR multilingual OR low-resource",
]
STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "based", "be", "by", "can", "for", "from", "how",
        "in", "into", "is", "it", "its", "large", "learning", "model", "models", "language", "of",
        "on", "or", "the", "to", "towards", "toward", "using", "via", "vs", "we", "what", "when",
        "with", "without", "your", "our", "their", "do", "does", "not", "beyond", "through",
        "across", "under", "over", "more", "less",
    }
)  # fmt: skip


# ------------------------------------------------------------------------------- vocabulary
def catalogue_queries() -> tuple[list[str], str]:
    try:
        entries = load_catalogue()
    except (OSError, ValueError) as exc:
        return FALLBACK_QUERIES, f"fallback queries (catalogue unavailable: {exc})"
    return [e.query for e in entries], f"catalogue.toml ({len(entries)} topics)"


def vocabulary(queries: list[str], papers: list[Paper]) -> tuple[list[str], list[str]]:
    """Atoms in the query language, as (specific, broad): the catalogue's phrases and the
    corpus's frequent title bigrams are specific; the catalogue's single words are broad."""
    specific: set[str] = set()
    broad: set[str] = set()
    for text in queries:
        for term in ql.terms(ql.parse(text, max_length=None)):
            (broad if len(term.tokens) == 1 else specific).add(ql.unparse(term))
    bigrams: Counter[tuple[str, str]] = Counter()
    for paper in papers:
        tokens = [t for t in ql.tokenize(paper.title) if not t.isdigit()]
        bigrams.update(
            (a, b)
            for a, b in itertools.pairwise(tokens)
            if a not in STOPWORDS and b not in STOPWORDS and len(a) > 2 and len(b) > 2
        )
    specific.update(f'"{a} {b}"' for (a, b), _ in bigrams.most_common(800))
    return sorted(specific), sorted(broad)


def generate_queries(specific: list[str], broad: list[str], count: int, seed: int = 42
                     ) -> list[str]:  # fmt: skip
    """``count`` valid queries, distinct once normalised: phrases alone or OR-ed together,
    single words narrowed by AND, exclusions with NOT, fields and categories."""
    rng = random.Random(seed)
    categories = ["cs.CL", "cs.AI", "cs.LG", "cs.CV", "cs.IR", "cs.HC", "cs.CY", "cs.MA", "stat.ML"]

    def field(text: str) -> str:
        return text if ":" in text or rng.random() > 0.25 else f"{rng.choice(['ti', 'abs'])}:{text}"

    def s() -> str:
        return field(rng.choice(specific))

    def b() -> str:
        return field(rng.choice(broad))

    def bare(text: str) -> str:
        return text.split(":")[-1]

    templates = [
        lambda: s(),
        lambda: f"{s()} OR {s()}",
        lambda: f"{s()} OR {s()} OR {s()}",
        lambda: f"{b()} AND {s()}",
        lambda: f"{b()} {b()}",
        lambda: f"({s()} OR {s()}) {b()}",
        lambda: f"({b()} OR {b()}) AND ({s()} OR {s()})",
        lambda: f"{s()} NOT {b()}",
        lambda: f"({s()} OR {s()}) NOT {s()}",
        lambda: f"cat:{rng.choice(categories)} AND ({s()} OR {b()})",
        lambda: f"ti:({bare(s())} OR {bare(s())})",
        lambda: f"ti:{bare(b())} AND abs:{bare(s())}",
    ]
    seen: set[str] = set()
    queries: list[str] = []
    while len(queries) < count:
        text = rng.choice(templates)()
        try:
            normalised = ql.normalise(text)
        except ql.QueryError:
            continue
        if normalised not in seen:
            seen.add(normalised)
            queries.append(text)
    return queries


# ------------------------------------------------------------------------------- the matchers
Matcher = Callable[[list[StoredPaper], list[Topic]], dict[int, list[int]]]
OURS: Matcher = matching.match_batch  # the real one (``_instrument`` wraps the module's name)


def per_topic_fts(papers: list[StoredPaper], topics: list[Topic]) -> dict[int, list[int]]:
    """The baseline: the batch's papers in an FTS5 index (the same ``BatchIndex`` ours builds),
    then each topic's compiled FTS query (``topic.fts``, stored with the topic) run once."""
    index = BatchIndex(papers)
    try:
        return {
            topic.id: sorted(pid for pid in index.match(topic.fts) if pid > topic.matched_through)
            for topic in topics
        }
    finally:
        index.close()


def store_fts(db: Path, topics: list[Topic], after: int) -> tuple[float, dict[int, list[int]]]:
    """Information: each topic's query on the store's own ``papers_fts``, restricted to the
    batch's rowids, on a plain (synchronous) connection. Its cost grows with the store."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        conn.execute("SELECT count(*) FROM papers_fts").fetchone()  # the page cache warm
        started = time.perf_counter()
        found = {
            topic.id: [
                row[0]
                for row in conn.execute(
                    "SELECT rowid FROM papers_fts WHERE papers_fts MATCH ? AND rowid > ?"
                    " ORDER BY rowid",
                    (topic.fts, max(after, topic.matched_through)),
                )
            ]
            for topic in topics
        }
        return time.perf_counter() - started, found
    finally:
        conn.close()


def differences(a: dict[int, list[int]], b: dict[int, list[int]]) -> int:
    """Topics whose matches differ between two results."""
    return sum(1 for topic in a.keys() | b.keys() if a.get(topic) != b.get(topic))


# ------------------------------------------------------------------------------- phases
PHASES: dict[str, float] = {}
MATCHER: dict[str, Matcher] = {"use": OURS}  # what match_new_papers calls for match_batch


def _instrument() -> None:
    """Time the round's two phases: matching in memory (with the matcher chosen in MATCHER),
    and recording (matches + alerts)."""
    record = Store.record_matches

    def timed_match(papers: list[StoredPaper], topics: list[Topic]) -> dict[int, list[int]]:
        started = time.perf_counter()
        try:
            return MATCHER["use"](papers, topics)
        finally:
            PHASES["match"] = PHASES.get("match", 0) + time.perf_counter() - started

    async def timed_record(self: Store, matches: dict[int, list[int]], **kwargs: object) -> int:
        started = time.perf_counter()
        try:
            return await record(self, matches, **kwargs)
        finally:
            PHASES["record"] = PHASES.get("record", 0) + time.perf_counter() - started

    matching.match_batch = timed_match  # type: ignore[assignment]
    Store.record_matches = timed_record  # type: ignore[assignment,method-assign]


# ------------------------------------------------------------------------------- the store
async def build_base(path: Path, old: list[Paper], queries: list[str]) -> None:
    """Old papers, 10,000 custom topics (matched as they are created) and their followers."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    store = await Store.open(path)
    try:
        await store.upsert_papers(old)
        started = time.perf_counter()
        topic_ids = []
        for text in queries:
            node = ql.parse(text)
            topic_ids.append(
                await store.custom_topic(
                    name=text, query=ql.unparse(node), normalised=ql.normalise(text),
                    fts=ql.to_fts(node),
                )
            )  # fmt: skip
        print(f"  created {len(topic_ids):,} topics in {time.perf_counter() - started:.1f}s")
        rng = random.Random(7)
        order = list(topic_ids)
        rng.shuffle(order)  # chat c follows five topics; every topic has exactly one follower
        async with store._write() as conn:  # bulk set-up of followers (not what is measured)
            await conn.executemany(
                "INSERT INTO chats (chat_id, created_at, updated_at) VALUES (?, '', '')",
                [(c,) for c in range(1, CHATS + 1)],
            )
            await conn.executemany(
                "INSERT INTO subscriptions (chat_id, topic_id, after_paper_id, created_at)"
                " VALUES (?, ?, (SELECT max(id) FROM papers), '')",
                [(1 + n // TOPICS_PER_CHAT, topic_id) for n, topic_id in enumerate(order)],
            )
    finally:
        await store.close()


def _fresh_copy(base: Path, run: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{run}{suffix}").unlink(missing_ok=True)
    shutil.copy(base, run)


async def batch_and_topics(
    base: Path, run: Path, new: list[Paper]
) -> tuple[list[StoredPaper], list[Topic], int]:
    """The round's input as ``match_new_papers`` reads it: the stored new papers, the live
    topics, and the last paper id before them."""
    _fresh_copy(base, run)
    store = await Store.open(run)
    try:
        before = await store.max_paper_id()
        await store.upsert_papers(new)
        return await store.papers_after(before), await store.live_topics(), before
    finally:
        await store.close()


async def one_round(base: Path, run: Path, new: list[Paper]) -> tuple[float, dict[str, float]]:
    """One timed ``match_new_papers`` round (with the matcher in MATCHER) on a fresh copy."""
    _fresh_copy(base, run)
    store = await Store.open(run)
    try:
        before = await store.max_paper_id()
        live = len(await store.live_topics())
        started = time.perf_counter()
        await store.upsert_papers(new)
        stored = time.perf_counter() - started
        PHASES.clear()
        started, cpu = time.perf_counter(), time.process_time()
        result = await match_new_papers(store)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert result.papers == len(new), result
        # cross-check 100 topics against the full index for the new id range
        rng = random.Random(3)
        sample = rng.sample(await store.live_topics(), 100)
        for topic in sample:
            full = {p.id for p in await store.matching_papers(fts=topic.fts) if p.id > before}
            mine = {p.id for p in await store.matching_papers(topic_id=topic.id) if p.id > before}
            assert full == mine, topic.query
        return seconds, {
            "live": live, "stored_s": stored, "matches": result.matches,
            "alerts": result.chats_marked, "cpu_s": cpu, **PHASES,
        }  # fmt: skip
    finally:
        await store.close()


# ------------------------------------------------------------------------------- per pair
def naive_per_pair(new: list[Paper], queries: list[str], pairs: int) -> tuple[float, int]:
    """Seconds per (paper, topic) pair with ``query.matches``, on a random sample of pairs."""
    rng = random.Random(11)
    nodes = [ql.parse(q) for q in queries]
    dicts = [
        {"title": p.title, "abstract": p.abstract, "authors": list(p.authors),
         "categories": list(p.categories)}
        for p in new
    ]  # fmt: skip
    sample = [(rng.choice(dicts), rng.choice(nodes)) for _ in range(pairs)]
    hits = 0
    started = time.perf_counter()
    for paper, node in sample:
        hits += ql.matches(node, paper)
    return (time.perf_counter() - started) / pairs, hits


# ------------------------------------------------------------------------------- main
def spread(times: list[float]) -> str:
    return (
        f"median {statistics.median(times):.3f}s "
        f"(min {min(times):.3f}s, max {max(times):.3f}s, n={len(times)})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="whole rounds per workload/matcher")
    parser.add_argument("--repeat", type=int, default=5, help="timed matching-only calls")
    parser.add_argument("--pairs", type=int, default=3_000, help="per-pair sample to time")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached base store")
    args = parser.parse_args()

    papers = read_papers_file(LISTINGS)
    old, new = papers[:-NEW_PAPERS], papers[-NEW_PAPERS:]
    seed_queries, source = catalogue_queries()
    specific, broad = vocabulary(seed_queries, old)
    queries = generate_queries(specific, broad, TOPICS)
    print(f"vocabulary: {len(specific):,} phrases and {len(broad):,} words from {source} "
          "and the corpus's frequent title bigrams")  # fmt: skip
    print(f"queries: {len(queries):,} distinct, e.g. {queries[0]!r}, {queries[1]!r}")

    OUT.mkdir(parents=True, exist_ok=True)
    base = OUT / "matching-base.db"
    run = OUT / "matching-run.db"
    stamp = OUT / "matching-base.queries"
    fingerprint = hashlib.sha256("\n".join([f"{CHATS}", *queries]).encode()).hexdigest()
    if args.rebuild or not base.exists() or not stamp.exists() or stamp.read_text() != fingerprint:
        print(f"building {base.relative_to(ROOT)}: {len(old):,} papers, {TOPICS:,} topics, "
              f"{CHATS:,} chats × {TOPICS_PER_CHAT} follows")  # fmt: skip
        await build_base(base, old, queries)
        stamp.write_text(fingerprint)
    else:
        print(f"reusing {base.relative_to(ROOT)}")

    # -- matching alone, on the same input: ours (cold, then warm) vs one FTS5 query per topic
    batch, topics, before = await batch_and_topics(base, run, new)
    cold: list[float] = []
    warm: list[float] = []
    fts: list[float] = []
    ours: dict[int, list[int]] = {}
    baseline: dict[int, list[int]] = {}
    for _ in range(args.repeat):  # interleaved, so that load on the machine hits all alike
        matching._PARSED.clear()  # as in a freshly started bot: no query parsed yet
        started = time.perf_counter()
        ours = OURS(batch, topics)
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        again = OURS(batch, topics)  # the queries parsed: every later round of a running bot
        warm.append(time.perf_counter() - started)
        started = time.perf_counter()
        baseline = per_topic_fts(batch, topics)
        fts.append(time.perf_counter() - started)
        assert again == ours
    differ = differences(ours, baseline)
    total_matches = sum(len(ids) for ids in ours.values())
    store_s, in_store = store_fts(run, topics, before)
    differ_store = differences(ours, in_store)
    print(f"  matching alone: ours cold {spread(cold)}, warm {spread(warm)}; "
          f"per-topic FTS5 {spread(fts)}")  # fmt: skip

    # -- whole rounds: match_new_papers with ours, then with the baseline in its place
    now = datetime.now(UTC)
    workloads = {
        # the round's papers first published in the last two days, so alerts queue (the worst
        # case: a whole day's papers in one round)
        "news": [
            dataclasses.replace(p, published=iso(now - timedelta(minutes=n)), updated=iso(now))
            for n, p in enumerate(new)
        ],
        # the listing's own dates, months old, as in a backfill: matched and recorded only
        "history": new,
    }
    matchers: dict[str, Matcher] = {"ours": OURS, "per-topic FTS5": per_topic_fts}
    _instrument()
    rounds: dict[tuple[str, str], list[tuple[float, dict[str, float]]]] = {}
    for label, papers_in in workloads.items():
        for n in range(args.rounds):
            for name, matcher in matchers.items():  # interleaved too
                MATCHER["use"] = matcher
                seconds, info = await one_round(base, run, papers_in)
                rounds.setdefault((label, name), []).append((seconds, info))
                print(f"  {label} round {n + 1}, {name}: {seconds:.3f}s wall, "
                      f"{info['cpu_s']:.3f}s CPU (matching {info['match']:.3f}s, "
                      f"record_matches {info['record']:.3f}s)")  # fmt: skip

    per_pair, hits = naive_per_pair(new, queries, args.pairs)
    full_pairs = len(new) * len(queries)
    naive_total = per_pair * full_pairs

    print()
    print(f"MATCHING {len(batch):,} new papers × {len(topics):,} live topics "
          f"({total_matches:,} matches):")  # fmt: skip
    print(f"  baseline, one FTS5 query per topic on the batch's FTS5 index: {spread(fts)}")
    print(f"  ours, match_batch (each distinct term once): warm {spread(warm)}")
    print(f"  ours cold (a process's first round: parses the {len(topics):,} queries too): "
          f"{spread(cold)}")  # fmt: skip
    print(f"  speed-up over per-topic FTS5: {statistics.median(fts) / statistics.median(warm):.1f}×"
          f" warm, {statistics.median(fts) / statistics.median(cold):.1f}× cold")  # fmt: skip
    print(f"  identical matches, all {len(topics):,} topics: "
          f"{'yes' if not differ else f'NO, {differ:,} topics differ'}")  # fmt: skip
    print(f"  (information) one query per topic on the store's papers_fts, rowid > {before:,}: "
          f"{store_s:.3f}s on a {before + len(batch):,}-paper store (grows with the store); "
          f"identical: {'yes' if not differ_store else f'NO, {differ_store:,} differ'}"
          )  # fmt: skip
    print(f"  (information) per-pair Python, query.matches on {args.pairs:,} random pairs "
          f"({hits} matched): {per_pair * 1e6:.0f} µs/pair → {naive_total:,.0f}s ≈ "
          f"{naive_total / 3600:.1f} h for all {full_pairs:,} pairs (extrapolated, not run): "
          f"{naive_total / statistics.median(warm):,.0f}× ours warm")  # fmt: skip
    for label in workloads:
        mine = rounds[(label, "ours")]
        theirs = rounds[(label, "per-topic FTS5")]
        info = mine[-1][1]
        same = all(
            (i["matches"], i["alerts"]) == (info["matches"], info["alerts"])
            for _, i in mine + theirs
        )
        ours_med = statistics.median(s for s, _ in mine)
        fts_med = statistics.median(s for s, _ in theirs)
        print(f"WHOLE ROUND, {label}: match_new_papers, matching + recording "
              f"{int(info['matches']):,} matches and queuing {int(info['alerts']):,} alerts for "
              f"{CHATS:,} chats (same counts with both matchers: "
              f"{'yes' if same else 'NO'})")  # fmt: skip
        print(f"  baseline (per-topic FTS5): {spread([s for s, _ in theirs])}; matching "
              f"{statistics.median(i['match'] for _, i in theirs):.3f}s")  # fmt: skip
        print(f"  ours: {spread([s for s, _ in mine])}; matching "
              f"{statistics.median(i['match'] for _, i in mine):.3f}s, recording "
              f"{statistics.median(i['record'] for _, i in mine):.3f}s; goal ≤ "
              f"{GOAL_SECONDS:.1f}s: {'met' if ours_med <= GOAL_SECONDS else 'MISSED'}"
              )  # fmt: skip
        print(f"  speed-up of the whole round over the baseline: {fts_med / ours_med:.2f}×")
    print(f"storing the papers (before the round, not timed in it): "
          f"{rounds[('news', 'ours')][-1][1]['stored_s']:.2f}s")  # fmt: skip
    print(
        "cross-check, every round: 100 sampled topics' matches equal the full-index matches; "
        "whole rounds run with the queries already parsed (warm), as in a running bot"
    )
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    asyncio.run(main())
