"""The simulated readers of ``bench_taste.py`` and their replays over the real listings.

A reader follows a topic and is shown its matches oldest first; it starts following ``join``
days into the listings, rates the first K papers it is shown truthfully, and is scored on what
comes after. Guide readers want what a topic's labels say (``evaluation/labels/``); narrower
readers want the part of a broad topic their own labels say (``evaluation/narrow/``, guides in
``evaluation/guides/narrow-readers.md``): every match of the followed topic is labelled, so
their stream is their labels' rows.

A ``Replay`` is one simulated reader, one join day and one K: the taste learned from its K
ratings (``insight.taste.fit`` on ``taste.vectors``, the bot's code, with the 300 papers
published just before the K-th rating as the background, as the bot takes the newest stored
ones), its scores for the later papers and for the reference (the followed topic's unrated
papers of the 4 weeks before the K-th rating: what the bot sets a hold-back floor from).
"""

from __future__ import annotations

import sys
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evaluation"))
sys.path.insert(0, str(ROOT / "src"))

from corpus import LISTINGS, MISSING, listings_store  # noqa: E402
from report import read_labels  # noqa: E402

from topicpulse.insight import taste  # noqa: E402
from topicpulse.insight.similarity import Vector  # noqa: E402
from topicpulse.models import StoredPaper, parse_iso  # noqa: E402

NARROW = ROOT / "evaluation" / "narrow"
TOP = 5  # a digest shows its best 5 in full
LISTINGS_MISSING = MISSING


@dataclass
class Reader:
    name: str
    narrow: bool
    stream: list[StoredPaper]  # the followed topic's matches, oldest first
    wanted: dict[str, bool]  # arXiv id → wanted (every paper of the stream, and more)
    matched: set[str]  # the followed topic's matches (for /foryou: what lies outside)


@dataclass
class Replay:
    reader: Reader
    join: int
    k: int
    model: taste.Taste | None  # None: not a single 👍 among the K, nothing learned
    later: list[StoredPaper]  # shown after the K ratings, oldest first
    scores: dict[str, float]  # arXiv id → the taste's score, for the later papers
    reference: list[Vector]  # the followed topic's unrated papers of the last 4 weeks
    foryou: float | None  # /foryou precision@5 outside the topic's matches
    picks: list[str]  # /foryou's 5 papers


async def listings() -> tuple[dict[str, Vector], list[StoredPaper]] | None:
    """Every listed paper's TF-IDF vector, and the papers oldest first (None: no listings)."""
    if not LISTINGS.exists():
        return None
    async with listings_store() as store:
        papers = await store.recent_papers(100_000)
        found = await taste.vectors(store, papers)
    vectors = {p.arxiv_id: v for p, v in zip(papers, found, strict=True)}
    return vectors, sorted(papers, key=lambda p: (p.published, p.arxiv_id))


def _stream(ids: set[str], by_id: dict[str, StoredPaper]) -> list[StoredPaper]:
    return sorted((by_id[a] for a in ids if a in by_id), key=lambda p: (p.published, p.arxiv_id))


def readers(by_id: dict[str, StoredPaper]) -> list[Reader]:
    found = []
    for slug, rows in read_labels().items():
        matched = {lb.arxiv_id for lb in rows if lb.stratum == "match"}
        wanted = {lb.arxiv_id: lb.label for lb in rows}
        found.append(Reader(f"guide:{slug}", False, _stream(matched, by_id), wanted, matched))
    for slug, rows in read_labels(NARROW).items():  # (outside: /foryou's picks, labelled too)
        matched = {lb.arxiv_id for lb in rows if lb.stratum == "match"}
        wanted = {lb.arxiv_id: lb.label for lb in rows}
        found.append(Reader(f"narrow:{slug}", True, _stream(matched, by_id), wanted, matched))
    return found


def replay(
    reader: Reader,
    join: int,
    k: int,
    vectors: dict[str, Vector],
    timeline: list[StoredPaper],
    settings: tuple[float, float],
) -> Replay | None:
    """The reader joining ``join`` days into the listings and rating its first ``k`` papers
    (None: fewer than ``k`` + 5 papers left to show it)."""
    c, weight = settings
    start = parse_iso(timeline[0].published) + timedelta(days=join)
    split = next((i for i, p in enumerate(reader.stream) if parse_iso(p.published) >= start), None)
    if split is None or len(reader.stream) - split < k + TOP:
        return None
    rated, later = reader.stream[split : split + k], reader.stream[split + k :]
    seen = {p.arxiv_id for p in rated}
    cut = rated[-1].published
    since = (parse_iso(cut) - timedelta(days=taste.REFERENCE_DAYS)).isoformat()
    reference = [
        vectors[p.arxiv_id]
        for p in reader.stream[: split + k]
        if p.arxiv_id not in seen and p.published >= since
    ]
    liked = [vectors[p.arxiv_id] for p in rated if reader.wanted[p.arxiv_id]]
    disliked = [vectors[p.arxiv_id] for p in rated if not reader.wanted[p.arxiv_id]]
    before = [p for p in timeline if p.published <= cut][-taste.BACKGROUND - k :]
    background = [vectors[p.arxiv_id] for p in before if p.arxiv_id not in seen]
    model = taste.fit(
        liked, disliked, background[-taste.BACKGROUND :], c=c, background_weight=weight
    )
    scores = {p.arxiv_id: model.score(vectors[p.arxiv_id]) for p in later} if model else {}
    foryou, picks = None, []
    if model is not None:  # the last 7 days of the listings, outside the topic's matches
        end = (parse_iso(timeline[-1].published) - timedelta(days=7)).isoformat()
        outside = [
            p
            for p in timeline
            if p.published >= end and p.arxiv_id not in reader.matched and p.arxiv_id not in seen
        ]
        picks = [
            p.arxiv_id
            for p in sorted(outside, key=lambda p: -model.score(vectors[p.arxiv_id]))[:TOP]
        ]
        foryou = precision(picks, reader.wanted) if picks else None
    return Replay(reader, join, k, model, later, scores, reference, foryou, picks)


def precision(ids: Sequence[str], wanted: dict[str, bool]) -> float:
    return sum(wanted.get(i, False) for i in ids) / len(ids)


def digests(run: Replay) -> list[tuple[float, float]]:
    """(taste's order, newest first) precision of the first 5 of each later weekly digest (a
    week of 5 papers or fewer is left out: every order shows the same five)."""
    weeks: dict[tuple[int, int], list[StoredPaper]] = {}
    for p in run.later:
        weeks.setdefault(parse_iso(p.published).isocalendar()[:2], []).append(p)
    found = []
    for papers in weeks.values():
        if len(papers) <= TOP:
            continue
        newest = [p.arxiv_id for p in sorted(papers, key=lambda p: p.published, reverse=True)]
        ours = sorted(newest, key=lambda a: -run.scores.get(a, 0.0))  # stable: newest first
        found.append(
            (precision(ours[:TOP], run.reader.wanted), precision(newest[:TOP], run.reader.wanted))
        )
    return found


def held(run: Replay, hold: float, most: float) -> set[str]:
    """The later papers an instant alert would hold back under these settings."""
    if run.model is None:
        return set()
    model = run.model.with_floor(run.reference, hold=hold, most=most)
    return {a for a, s in run.scores.items() if model.holds(s)}


def auc(run: Replay) -> float | None:
    """How well the taste ranks the later papers: the chance a wanted one outscores an unwanted
    one (None: no taste, or later papers of one kind only)."""
    wanted = [s for a, s in run.scores.items() if run.reader.wanted[a]]
    unwanted = sorted(s for a, s in run.scores.items() if not run.reader.wanted[a])
    if not wanted or not unwanted:
        return None
    wins = sum(
        bisect_left(unwanted, x) + (bisect_right(unwanted, x) - bisect_left(unwanted, x)) / 2
        for x in wanted
    )
    return wins / (len(wanted) * len(unwanted))
