"""More like this: the stored papers closest to a given one.

Two steps, both over the store's own full-text index (no model, nothing to train or download;
the ranking follows the store as it grows):

1. Candidates ("query by document"): the paper's distinct content words, OR-ed, searched in
   the titles and abstracts of the FTS5 index and ranked by BM25; the best ``CANDIDATES`` kept.
2. Ranking: TF-IDF cosine between the paper and each candidate, in the spirit of
   arxiv-sanity — log term frequency over the index's Porter stems (title words counted
   twice), inverse document frequency from the whole store (``Store.term_documents``), each
   vector normalised so a long abstract does not win by length.

``bench/bench_similar.py`` measures both steps against a TF-IDF over the whole listing and a
random order on the labelled evaluation set.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Protocol

from topicpulse.models import StoredPaper
from topicpulse.store import Store
from topicpulse.topics import query as ql
from topicpulse.topics.stemming import stem_texts

CANDIDATES = 100  # BM25's best, re-ranked by TF-IDF cosine
MAX_TERMS = 60  # content words of a paper in its query: title words first, then the abstract's
MIN_LENGTH = 3

# Words that carry no topic in an abstract (our own list: English function words and the
# boilerplate of paper abstracts).
STOPWORDS = frozenset(
    """
    about above after again against all also among and any are around based because been
    before being below between both but can could does doing done down during each either
    even every few for from further had has have having here how however into its itself
    just least less many may might more most much must near neither nor not now off often
    once only other our ours out over own paper papers per perhaps present propose proposed
    rather same several should show shows shown since some such than that the their theirs
    them then there these they this those though through thus too towards under until upon
    use used uses using very via was way ways well were what when where whether which while
    who whom whose why will with within without would yet you your results result approach
    approaches method methods new novel work works study studies first second third one two
    three furthermore moreover existing recent recently demonstrate demonstrates achieve
    achieves significantly
    """.split()  # noqa: SIM905 (a word list reads better as text)
)


def content_words(text: str) -> list[str]:
    """The words of ``text`` that can carry a topic: not stopwords, numbers or very short."""
    return [t for t in ql.tokenize(text) if is_content_word(t)]


def is_content_word(token: str) -> bool:
    return len(token) >= MIN_LENGTH and not token.isdigit() and token not in STOPWORDS


def content_terms(paper: StoredPaper) -> list[str]:
    """The paper's distinct content words, title first, at most ``MAX_TERMS``."""
    seen = dict.fromkeys(content_words(paper.title) + content_words(paper.abstract))
    return list(seen)[:MAX_TERMS]


def similarity_query(paper: StoredPaper) -> str | None:
    """The FTS5 expression of a paper's words, in titles and abstracts (None: no content)."""
    terms = content_terms(paper)
    if not terms:
        return None
    return "{title abstract} : (" + " OR ".join(f'"{t}"' for t in terms) + ")"


Vector = dict[str, float]


class HasText(Protocol):
    """A paper, or anything with a paper's text (an imported reference)."""

    @property
    def title(self) -> str: ...
    @property
    def abstract(self) -> str: ...


def paper_stems(papers: Sequence[HasText]) -> list[Counter[str]]:
    """Each paper's content words as index stems, counted, title words twice (blocking)."""
    texts = []
    for p in papers:
        texts += [" ".join(content_words(p.title)), " ".join(content_words(p.abstract))]
    stems = stem_texts(texts)
    return [Counter(stems[2 * n] * 2 + stems[2 * n + 1]) for n in range(len(papers))]


def tfidf(counts: Counter[str], documents: Mapping[str, int], total: int) -> Vector:
    """A unit TF-IDF vector: (1 + log tf) × log(N / df); a term the store lacks has df 1."""
    vector = {
        t: (1 + math.log(k)) * math.log(max(total, 2) / min(documents.get(t, 1), total))
        for t, k in counts.items()
    }
    norm = math.sqrt(sum(x * x for x in vector.values())) or 1.0
    return {t: x / norm for t, x in vector.items()}


def cosine(a: Vector, b: Vector) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(x * b.get(t, 0.0) for t, x in a.items())


async def rank_by_tfidf(
    store: Store, paper: StoredPaper, candidates: Sequence[StoredPaper]
) -> list[StoredPaper]:
    """``candidates`` ordered by TF-IDF cosine to ``paper``, closest first (stable on ties)."""
    return [p for p, _ in await scored_by_tfidf(store, paper, candidates)]


async def scored_by_tfidf(
    store: Store, paper: StoredPaper, candidates: Sequence[StoredPaper]
) -> list[tuple[StoredPaper, float]]:
    """``candidates`` with their TF-IDF cosine to ``paper`` (0–1), closest first."""
    if not candidates:
        return []
    counts = await asyncio.to_thread(paper_stems, [paper, *candidates])
    documents = await store.term_documents(sorted(set().union(*counts)))
    total = await store.count_papers()
    seed, *others = (tfidf(c, documents, total) for c in counts)
    closeness = [cosine(seed, v) for v in others]
    order = sorted(range(len(candidates)), key=lambda n: -closeness[n])
    return [(candidates[n], closeness[n]) for n in order]


async def similar_papers(store: Store, paper: StoredPaper, *, limit: int = 5) -> list[StoredPaper]:
    """The ``limit`` stored papers most like ``paper`` (never itself), best first."""
    return [p for p, _ in await scored_similar_papers(store, paper, limit=limit)]


async def scored_similar_papers(
    store: Store, paper: StoredPaper, *, limit: int = 5
) -> list[tuple[StoredPaper, float]]:
    """``similar_papers`` with each one's closeness to ``paper`` (TF-IDF cosine, 0–1)."""
    fts = similarity_query(paper)
    if fts is None:
        return []
    found = await store.matching_papers(fts=fts, order="relevance", limit=CANDIDATES + 1)
    candidates = [p for p in found if p.id != paper.id][:CANDIDATES]
    return (await scored_by_tfidf(store, paper, candidates))[:limit]
