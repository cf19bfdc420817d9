"""More like this: the stored papers closest to a given one.

A paper's own words are the query ("query by document"): the distinct content words of its
title and abstract, OR-ed, searched in the titles and abstracts of the store's FTS5 index and
ranked by BM25 — so a word many papers use weighs little and a rare one shared by both papers
weighs a lot (BM25's inverse document frequency), with title matches weighted as in /search.
No model, nothing to train or download, and the ranking follows the store as it grows.
``bench/bench_similar.py`` measures it against TF-IDF cosine and a random order on the
labelled evaluation set.
"""

from __future__ import annotations

from topicpulse import query as ql
from topicpulse.models import StoredPaper
from topicpulse.store import Store

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
    return [
        t
        for t in ql.tokenize(text)
        if len(t) >= MIN_LENGTH and not t.isdigit() and t not in STOPWORDS
    ]


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


async def similar_papers(store: Store, paper: StoredPaper, *, limit: int = 5) -> list[StoredPaper]:
    """The ``limit`` stored papers most like ``paper`` (never itself), best first."""
    fts = similarity_query(paper)
    if fts is None:
        return []
    found = await store.matching_papers(fts=fts, order="relevance", limit=limit + 1)
    return [p for p in found if p.id != paper.id][:limit]
