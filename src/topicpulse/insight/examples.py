"""Topics defined by example papers: ``/follow like <id> [<id> …]``.

One to five stored papers stand for what the chat wants. They are turned into an ordinary
query of the topic language — the ``WORDS`` words that best tell the examples apart from the
rest of the store, and a paper matches when it holds at least ``MIN_SHARED`` of them (at least
3 when 2 would match too large a share of recent papers). So an example-defined topic is a
custom topic like any other: matched every round by the same engine, counted by momentum,
listed, digested and tagged, and its query can be read and copied.

A word's weight is how many of the examples use it (titles count double) times its inverse
document frequency in the whole store (read from the full-text index): words every example
shares and few other papers use come first. Words only a couple of stored papers use (a
method's own name, a typo) are left out: they find nothing new. ``bench/bench_like.py``
measures the rule against the labelled topics of ``evaluation/``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from topicpulse.insight.similarity import content_words
from topicpulse.models import StoredPaper
from topicpulse.sources import arxiv
from topicpulse.store import Store
from topicpulse.topics import query as ql
from topicpulse.topics.stemming import stem_texts

MAX_EXAMPLES = 5
WORDS = 6  # words that describe the examples
MIN_SHARED = 2  # … of which a paper must hold this many (3 for a broad set, see MAX_SHARE)
MAX_SHARE = 0.05  # "at least 2" matching more than this share of the last 4 weeks is too broad
MIN_DOCUMENTS = 3  # a word fewer stored papers use is too rare to find anything
TITLE_WEIGHT = 2
SHARED_POWER = 1  # words more of the examples use weigh more: (share of examples) ** this


class ExampleError(ValueError):
    """Examples that cannot define a topic (none, too many, unknown ids, no usable words)."""


def parse_ids(text: str) -> list[str]:
    """The arXiv ids (or links) of ``/follow like`` in order, without repeats."""
    ids: list[str] = []
    for word in text.split():
        arxiv_id = arxiv.typed_id(word)
        if arxiv_id is None:
            raise ExampleError(f"“{word[:40]}” is not an arXiv id or link, e.g. 2605.01234.")
        if arxiv_id not in ids:
            ids.append(arxiv_id)
    if not ids:
        raise ExampleError("Give one to five example papers, e.g. /follow like 2605.01234.")
    if len(ids) > MAX_EXAMPLES:
        raise ExampleError(f"At most {MAX_EXAMPLES} example papers, please.")
    return ids


async def describing_words(store: Store, papers: Sequence[StoredPaper]) -> list[str]:
    """The ``WORDS`` words that best describe ``papers`` against the whole store."""
    per_paper = []
    for paper in papers:
        uses = Counter(content_words(paper.abstract))
        for word in content_words(paper.title):
            uses[word] += TITLE_WEIGHT
        per_paper.append(uses)
    words = sorted(set().union(*per_paper))
    stem_of = {
        w: s[0] for w, s in zip(words, await asyncio.to_thread(stem_texts, words), strict=True) if s
    }
    # Per stem ("policy" and "policies" are one index term): weight and papers using it.
    weight: Counter[str] = Counter()
    shared: Counter[str] = Counter()
    surface: dict[str, Counter[str]] = {}
    for uses in per_paper:
        stems_here: Counter[str] = Counter()
        for word, n in uses.items():
            if word in stem_of:
                stems_here[stem_of[word]] += n
                surface.setdefault(stem_of[word], Counter())[word] += n
        for stem, n in stems_here.items():
            weight[stem] += 1 + math.log(n)  # repeated words are what a paper is about
            shared[stem] += 1
    documents = await store.term_documents(list(weight))
    total = max(await store.count_papers(), 1)
    scored = {
        stem: w
        * (shared[stem] / len(per_paper)) ** SHARED_POWER
        * math.log(total / documents[stem])
        for stem, w in weight.items()
        if documents.get(stem, 0) >= MIN_DOCUMENTS
    }
    best = sorted(scored, key=lambda s: (-scored[s], s))[:WORDS]
    return [surface[s].most_common(1)[0][0] for s in best]


def at_least(words: Sequence[str], k: int) -> str:
    """A query matching papers that hold at least ``k`` of ``words`` (every k-subset, with its
    last word an OR of the rest, so the text stays short)."""
    if k <= 1:
        return " OR ".join(words)
    clauses = []
    for head in itertools.combinations(range(len(words)), k - 1):
        rest = words[head[-1] + 1 :]
        if not rest:
            continue
        tail = rest[0] if len(rest) == 1 else "(" + " OR ".join(rest) + ")"
        clauses.append("(" + " ".join([*(words[i] for i in head), tail]) + ")")
    return " OR ".join(clauses)


@dataclass(frozen=True, slots=True)
class LikeRule:
    words: list[str]
    at_least: int
    query: str


async def like_rule(store: Store, papers: Sequence[StoredPaper], window: Sequence[str]) -> LikeRule:
    """The rule of a topic defined by ``papers``: at least 2 of its words, or 3 when 2 would
    match more than ``MAX_SHARE`` of the papers in ``window`` (the last 4 weeks)."""
    words = await describing_words(store, papers)
    if len(words) < MIN_SHARED:
        raise ExampleError("Those papers have too few distinctive words to define a topic.")
    k = MIN_SHARED
    query = at_least(words, k)
    (all_recent,) = await store.count_windows(window)
    (recent,) = await store.count_windows(window, fts=ql.to_fts(ql.parse(query, max_length=None)))
    if all_recent and recent / all_recent > MAX_SHARE and len(words) > MIN_SHARED:
        k += 1
        query = at_least(words, k)
    return LikeRule(words, k, query)
