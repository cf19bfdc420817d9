"""The taste's engine for the commands and messages: importing liked examples (arXiv ids or
a BibTeX/RIS export), what a chat's taste has learned, the reader's order of a list of
papers, which alert papers to hold back, and a one-line "why?"."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from topicpulse.delivery.chats import UserError
from topicpulse.insight import taste as tastes
from topicpulse.insight.similarity import cosine
from topicpulse.models import StoredPaper, iso
from topicpulse.sources import arxiv, references
from topicpulse.store import Imported, Store

MAX_IDS = 100  # arXiv ids one /taste message may carry


@dataclass(frozen=True, slots=True)
class ImportResult:
    added: int  # new likes
    known: int  # already rated: kept as they were
    by_text: int  # entries not in the store, learned from their own title and abstract
    skipped: int = 0  # entries neither an arXiv paper nor with an abstract


async def import_ids(store: Store, chat_id: int, text: str) -> ImportResult:
    """``/taste <ids or links>``: each paper a like (one bad word: nothing imported)."""
    ids: list[str] = []
    for word in text.split():
        arxiv_id = arxiv.typed_id(word)
        if arxiv_id is None:
            raise UserError(
                f"“{word[:40]}” is not an arXiv id or link (e.g. 2605.01234); nothing was imported."
            )
        ids.append(arxiv_id)
    if len(ids) > MAX_IDS:
        raise UserError(f"At most {MAX_IDS} papers at a time, please; nothing was imported.")
    refs = [references.Reference(i, "", "") for i in dict.fromkeys(ids)]
    return await _import(store, chat_id, refs, 0)


async def import_file(store: Store, chat_id: int, data: bytes, name: str) -> ImportResult:
    """A BibTeX or RIS export: its arXiv papers and abstracts become likes, all or nothing."""
    try:
        refs, skipped = references.parse(data, name)
    except references.ReferenceError as exc:
        raise UserError(str(exc)) from None
    return await _import(store, chat_id, refs, skipped)


async def _import(
    store: Store, chat_id: int, refs: Sequence[references.Reference], skipped: int
) -> ImportResult:
    entries = []
    by_text = 0
    for ref in refs:
        paper = await store.get_paper(ref.arxiv_id) if ref.arxiv_id else None
        if paper is not None:
            entries.append(Imported(ref.item, paper.id))
        else:  # its own text now; the stored paper's, should it arrive later (same item)
            by_text += bool(ref.abstract)
            entries.append(Imported(ref.item, None, ref.title, ref.abstract))
    added, known = await store.import_likes(chat_id, entries)
    return ImportResult(added, known, by_text, skipped)


@dataclass(frozen=True, slots=True)
class Summary:
    up: int
    down: int
    hold_back: bool
    taste: tastes.Taste | None
    training: bool  # ratings changed since the taste was trained

    @property
    def liked_words(self) -> list[str]:
        return self._words(1)

    @property
    def disliked_words(self) -> list[str]:
        return self._words(-1)

    def _words(self, sign: int, n: int = 6) -> list[str]:
        if self.taste is None:
            return []
        w = self.taste.weights
        best = sorted((t for t in w if w[t] * sign > 0), key=lambda t: -w[t] * sign)[:n]
        return [self.taste.words.get(t, t) for t in best]


async def summary(store: Store, chat_id: int) -> Summary:
    up, down = await store.rating_counts(chat_id)
    row = await store.taste(chat_id)
    taste, hold = await tastes.load(store, chat_id)
    return Summary(up, down, hold, taste, row is not None and row.changed > row.trained)


async def reader_order(
    store: Store, chat_id: int, papers: Sequence[StoredPaper]
) -> tuple[list[StoredPaper], dict[int, float]]:
    """``papers`` in the chat's order (best first) and each one's score; unchanged, and no
    scores, for a chat without a taste (it costs one indexed read)."""
    taste, _ = await tastes.load(store, chat_id)
    return await in_order(store, taste, papers)


async def in_order(
    store: Store, taste: tastes.Taste | None, papers: Sequence[StoredPaper]
) -> tuple[list[StoredPaper], dict[int, float]]:
    """``reader_order`` with the chat's taste already loaded."""
    if taste is None or not papers:
        return list(papers), {}
    ranked = await tastes.scored(store, taste, papers)
    return [p for p, _ in ranked], {p.id: s for p, s in ranked}


async def to_hold_back(
    store: Store, chat_id: int, papers: Sequence[StoredPaper]
) -> dict[int, float]:
    """The papers of an instant alert the taste rates very unlikely (paper id → score): none
    before enough ratings of both kinds, or with holding back turned off."""
    taste, hold = await tastes.load(store, chat_id)
    if taste is None or not hold or not taste.holds_back or not papers:
        return {}
    return {p.id: s for p, s in await tastes.scored(store, taste, papers) if taste.holds(s)}


FOR_YOU = 5  # papers /foryou lists
FOR_YOU_DAYS = 7
FOR_YOU_PAGE = 250  # papers of the pool read, stemmed and scored at a time


async def for_you(
    store: Store, chat_id: int, now: datetime, *, limit: int = FOR_YOU
) -> list[tuple[StoredPaper, float]] | None:
    """/foryou: the papers of the last 7 days the taste rates highest among those none of the
    chat's topics matched (and it has not rated), best first (ties: newest first). None: no
    taste yet. The week's papers (thousands) are read and scored a page at a time, so the
    bot's memory holds a page, not the week."""
    taste, _ = await tastes.load(store, chat_id)
    if taste is None:
        return None
    pool = await store.paper_ids_published(iso(now - timedelta(days=FOR_YOU_DAYS)), iso(now))
    best: list[tuple[float, int, StoredPaper]] = []  # a min-heap of (score, -rank, paper)
    for start in range(0, len(pool), FOR_YOU_PAGE):
        page = pool[start : start + FOR_YOU_PAGE]
        # (a paper the chat left out of a topic's view is no paper its topics missed)
        matched = await store.chat_topics_for_papers(chat_id, page, view=False)
        rated = await store.ratings_for(chat_id, page)
        outside = [i for i in page if not matched.get(i) and i not in rated]
        papers = await store.papers_by_ids(outside, cached=False)
        for rank, (paper, score) in enumerate(
            zip(papers, await tastes.scores(store, taste, papers), strict=True), start
        ):
            entry = (score, -rank, paper)
            if len(best) < limit:
                heapq.heappush(best, entry)
            elif entry[:2] > best[0][:2]:
                heapq.heapreplace(best, entry)
    return [(paper, score) for score, _, paper in sorted(best, key=lambda e: e[:2], reverse=True)]


async def why(store: Store, chat_id: int, paper: StoredPaper) -> str:
    """One line: the paper's score, the ratings most like it and the words that weighed."""
    taste, _ = await tastes.load(store, chat_id)
    if taste is None:
        return "No taste yet: rate a few papers with 👍 / 👎 first."
    ratings = [r for r in await store.chat_ratings(chat_id) if r.title or r.abstract]
    vector, *rated = await tastes.vectors(store, [paper, *ratings])
    score = taste.score(vector)
    near = sorted(range(len(ratings)), key=lambda n: -cosine(vector, rated[n]))[:2]
    liked = [f"{'👍' if ratings[n].value > 0 else '👎'} “{ratings[n].title[:60]}”" for n in near]
    pro, con = taste.reasons(vector)
    words = ", ".join([*(f"{w} (+)" for w in pro), *(f"{w} (−)" for w in con)][:4])
    return (
        f"{score:.0%} for you — most like your {' and '.join(liked) or 'ratings'}"
        f"{'; words: ' + words if words else ''}."
    )
