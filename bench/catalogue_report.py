"""How well does each catalogue topic's query pick out its papers?

Loads the real arXiv listings (../shared/arxiv-listings/papers.jsonl, 5,861 cs.CL/cs.AI papers
over 8 weeks) and the saved arXiv API samples (../shared/arxiv-samples/*.xml, 100 papers found
by searching "testing") into a fresh store, runs every topic's compiled FTS5 query against the
real index, and prints per topic: matches in the listings (and their share), matches among the
samples and, for topics with hand labels (tests/fixtures/labels.jsonl), precision, recall, F1
and the label counts. ``--errors`` also lists the labelled papers each query gets wrong.

    .venv/bin/python bench/catalogue_report.py [--errors] [--topic SLUG ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from topicpulse.sources.ingest import import_files  # noqa: E402
from topicpulse.store import Store  # noqa: E402
from topicpulse.topics import query as ql  # noqa: E402
from topicpulse.topics.catalogue import CatalogueEntry, load_catalogue  # noqa: E402

SHARED = Path(os.environ.get("TOPICPULSE_SHARED", ROOT.parent / "shared"))
LISTINGS = SHARED / "arxiv-listings" / "papers.jsonl"
SAMPLES = SHARED / "arxiv-samples"
LABELS = ROOT / "tests" / "fixtures" / "labels.jsonl"


@dataclass(frozen=True)
class Label:
    arxiv_id: str
    topic: str
    label: bool
    reason: str


def read_labels(path: Path = LABELS) -> dict[str, list[Label]]:
    """Hand labels by topic slug."""
    by_topic: dict[str, list[Label]] = defaultdict(list)
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                by_topic[row["topic"]].append(Label(**row))
    return dict(by_topic)


async def build_corpus(db_path: Path) -> None:
    """A store holding the listings and the samples, through the normal import path."""
    store = await Store.open(db_path)
    try:
        await import_files(store, [LISTINGS, *sorted(SAMPLES.glob("*.xml"))])
    finally:
        await store.close()


class Corpus:
    """Read-only view of a built store: which papers (by arXiv id) a topic query matches."""

    def __init__(self, db_path: Path) -> None:
        self._db = sqlite3.connect(db_path)
        with LISTINGS.open(encoding="utf-8") as handle:
            self.listing_ids = {json.loads(line)["arxiv_id"] for line in handle if line.strip()}
        all_ids = {row[0] for row in self._db.execute("SELECT arxiv_id FROM papers")}
        self.sample_ids = all_ids - self.listing_ids

    def matches(self, query: str) -> set[str]:
        return {
            row[0]
            for row in self._db.execute(
                "SELECT p.arxiv_id FROM papers_fts JOIN papers p ON p.id = papers_fts.rowid"
                " WHERE papers_fts MATCH ?",
                (ql.to_fts(ql.parse(query, max_length=None)),),
            )
        }

    def close(self) -> None:
        self._db.close()


@dataclass(frozen=True)
class Score:
    positives: int
    negatives: int
    true_pos: int
    false_pos: int
    false_neg: int

    @property
    def precision(self) -> float:
        found = self.true_pos + self.false_pos
        return self.true_pos / found if found else 1.0

    @property
    def recall(self) -> float:
        return self.true_pos / self.positives if self.positives else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score(labels: list[Label], matched: set[str]) -> Score:
    pos = [x for x in labels if x.label]
    neg = [x for x in labels if not x.label]
    true_pos = sum(x.arxiv_id in matched for x in pos)
    false_pos = sum(x.arxiv_id in matched for x in neg)
    return Score(len(pos), len(neg), true_pos, false_pos, len(pos) - true_pos)


def report(entries: list[CatalogueEntry], corpus: Corpus, labels: dict[str, list[Label]],
           errors: bool) -> str:  # fmt: skip
    total = len(corpus.listing_ids)
    lines = [
        f"{'topic':<36} {'len':>4} {'matches':>8} {'share':>6} {'samples':>7}"
        f" {'labels +/-':>10} {'P':>5} {'R':>5} {'F1':>5}",
        "-" * 96,
    ]
    for entry in entries:
        matched = corpus.matches(entry.query)
        in_listings = len(matched & corpus.listing_ids)
        row = (
            f"{entry.slug:<36} {len(entry.query):>4} {in_listings:>8}"
            f" {in_listings / total:>6.1%} {len(matched & corpus.sample_ids):>7}"
        )
        topic_labels = labels.get(entry.slug)
        if topic_labels:
            s = score(topic_labels, matched)
            row += (
                f" {f'{s.positives}/{s.negatives}':>10}"
                f" {s.precision:>5.2f} {s.recall:>5.2f} {s.f1:>5.2f}"
            )
        lines.append(row)
        if errors and topic_labels:
            for label in topic_labels:
                if label.label != (label.arxiv_id in matched):
                    kind = "missed" if label.label else "wrong "
                    lines.append(f"    {kind} {label.arxiv_id} — {label.reason}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="list misclassified labels")
    parser.add_argument("--topic", action="append", help="only these slugs (repeatable)")
    args = parser.parse_args(argv)

    entries = load_catalogue(ROOT / "src" / "topicpulse" / "topics" / "catalogue.toml")
    if args.topic:
        entries = [e for e in entries if e.slug in set(args.topic)]
    labels = read_labels()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        db_path = Path(tmp) / "corpus.db"
        asyncio.run(build_corpus(db_path))
        corpus = Corpus(db_path)
        try:
            print(
                f"{len(corpus.listing_ids)} listing papers + {len(corpus.sample_ids)} sample"
                f" papers, {len(entries)} topics, {sum(map(len, labels.values()))} labels"
                f" ({time.monotonic() - started:.1f}s to load)\n"
            )
            print(report(entries, corpus, labels, args.errors))
        finally:
            corpus.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
