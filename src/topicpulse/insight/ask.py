"""Ask about a topic: the sentences of stored abstracts that best answer a question.

Nothing is generated here: an answer is a handful of passages, each a sentence (or two short
ones) quoted from one paper's abstract, one passage per paper, best first.

How they are ranked (``bench/bench_ask.py`` measures each way on a labelled question set):

1. **Candidates.** The question's content words, OR-ed, searched in titles and abstracts with
   the store's FTS5 index and ranked by its BM25 (title ×10) — within the topic's papers when a
   topic is named — keep the best ``CANDIDATES`` papers.
2. **Sentences.** Every sentence of every candidate's abstract is scored by BM25 over
   sentences: a question word's weight is its rarity across the whole store (the number of
   papers using it, read from the full-text index's own vocabulary), so "hacking" counts for
   much more than "model", and a short sentence that holds several of the question's words
   beats a long one that mentions one. Words are stemmed by the index's own tokenizer.
3. **Blend.** A paper's score is its best sentence's score (scaled to the best of all) plus
   ``PAPER_WEIGHT`` × its rank score in step 1 (``1 / (rank + RANK_OFFSET)``, scaled), so
   a paper about the question as a whole is not beaten by one stray sentence elsewhere.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from topicpulse.insight.similarity import STOPWORDS
from topicpulse.models import StoredPaper, Topic
from topicpulse.store import Store
from topicpulse.topics import query as ql
from topicpulse.topics.stemming import stem_texts

CANDIDATES = 60  # papers whose sentences are scored
PASSAGES = 5  # passages in an answer (one per paper)
MAX_TERMS = 20  # question words searched
PAPER_WEIGHT = 0.5  # the paper's own rank, against its best sentence (chosen on the tune split)
RANK_OFFSET = 3
K1, B = 1.2, 0.75  # BM25's usual constants
SHORT_SENTENCE = 60  # characters: a sentence this short is quoted with the next one
MAX_PASSAGE = 420  # characters of a passage at most (cut at a word, with "…")
MAX_QUESTION = 300  # characters, as a typed query

Method = Literal["blend", "sentences", "papers", "newest"]

# Words of a question that say nothing about its subject (our own list, on top of the
# abstracts' boilerplate words that /similar ignores).
QUESTION_WORDS = frozenset(
    """
    anyone anybody someone people researchers folks know tell explain give list show find
    good best better way ways work works working doing done do does did get gets getting make
    makes making can could would should will shall is are was were be been am isn aren don
    doesn what which who whom how why when where whether there here any some papers paper
    recent recently latest new currently current today lately ever really actually exactly
    like kind kinds sort thing things stuff lot lots something anything approach approaches
    idea ideas about around in on of to is it an as at by or if so no we us my me be up vs
    """.split()  # noqa: SIM905 (a word list reads better as text)
)

# A sentence ends at . ! or ? before a capital, digit or bracket — not after "e.g." and kin.
_SENTENCE_END = re.compile(
    r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bal\.)(?<!\bvs\.)(?<!\bFig\.)(?<!\bEq\.)(?<!\bcf\.)"
    r"(?<=[.!?])\s+(?=[A-Z0-9(\[\"'$\\])"
)


class QuestionError(ValueError):
    """A question with nothing to search for (only question words, or too long)."""


@dataclass(frozen=True, slots=True)
class Passage:
    paper: StoredPaper
    text: str
    score: float


@dataclass(frozen=True, slots=True)
class Answer:
    question: str
    topic: Topic | None
    papers_in_scope: int  # the topic's papers (or the store's) the answer was drawn from
    passages: list[Passage]


def question_terms(question: str) -> list[str]:
    """The question's distinct content words, in order (two-letter ones such as "rl" count)."""
    seen: dict[str, None] = {}
    for token in ql.tokenize(question):
        if len(token) < 2 or token.isdigit() or token in STOPWORDS or token in QUESTION_WORDS:
            continue
        seen.setdefault(token, None)
    return list(seen)[:MAX_TERMS]


def sentences(abstract: str) -> list[str]:
    """An abstract's sentences; a very short one is kept with the next (it rarely stands alone)."""
    parts = [p.strip() for p in _SENTENCE_END.split(" ".join(abstract.split())) if p.strip()]
    merged: list[str] = []
    carry = ""
    for part in parts:
        text = f"{carry} {part}".strip() if carry else part
        if len(text) < SHORT_SENTENCE:
            carry = text
            continue
        merged.append(text)
        carry = ""
    if carry:
        if merged:
            merged[-1] = f"{merged[-1]} {carry}"
        else:
            merged.append(carry)
    return merged


def shorten(text: str, limit: int = MAX_PASSAGE) -> str:
    if len(text) <= limit:
        return text
    return text[: text.rfind(" ", 0, limit - 1) or limit - 1].rstrip(",;: ") + "…"


def search_expression(terms: list[str]) -> str:
    """The FTS5 expression for the candidates: any question word, in a title or an abstract."""
    return "{title abstract} : (" + " OR ".join(f'"{t}"' for t in terms) + ")"


def _bm25(sentence_stems: list[list[str]], query: set[str], idf: dict[str, float]) -> list[float]:
    lengths = [len(s) for s in sentence_stems]
    average = sum(lengths) / len(lengths) if lengths else 1.0
    scores = []
    for words, length in zip(sentence_stems, lengths, strict=True):
        counts = Counter(w for w in words if w in query)
        score = 0.0
        for stem, tf in counts.items():
            score += idf[stem] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
        scores.append(score)
    return scores


async def ask(
    store: Store,
    question: str,
    *,
    topic: Topic | None = None,
    limit: int = PASSAGES,
    method: Method = "blend",
    paper_weight: float = PAPER_WEIGHT,
) -> Answer:
    """The passages that best answer ``question`` from ``topic``'s papers (or all papers).

    Raises ``QuestionError`` when the question has no word to search for."""
    if len(question) > MAX_QUESTION:
        raise QuestionError(
            f"That question is {len(question)} characters; keep it under {MAX_QUESTION}."
        )
    terms = question_terms(question)
    if not terms:
        raise QuestionError("Ask with at least one word about the subject, e.g. reward hacking.")
    topic_id = topic.id if topic else None
    total = await store.count_papers()
    in_scope = await store.count_matches(topic_id=topic_id) if topic else total
    if method == "newest":  # the baseline: what /latest would show
        found = await store.matching_papers(
            topic_id=topic_id, fts=None if topic else search_expression(terms), limit=limit
        )
        return Answer(question, topic, in_scope, [_first(p) for p in found])
    candidates = await store.matching_papers(
        topic_id=topic_id, fts=search_expression(terms), order="relevance", limit=CANDIDATES
    )
    if not candidates:
        return Answer(question, topic, in_scope, [])
    per_paper = [sentences(p.abstract) or [p.abstract] for p in candidates]
    flat = [s for group in per_paper for s in group]
    *flat_stems, question_stems = await asyncio.to_thread(stem_texts, [*flat, " ".join(terms)])
    query = set(question_stems)
    documents = await store.term_documents(sorted(query))
    total = max(total, 1)
    idf = {
        s: math.log(1 + (total - documents.get(s, 0) + 0.5) / (documents.get(s, 0) + 0.5))
        for s in query
    }
    flat_scores = _bm25(flat_stems, query, idf)
    top_sentence = max(flat_scores) or 1.0
    scored: list[Passage] = []
    at = 0
    for rank, (paper, group) in enumerate(zip(candidates, per_paper, strict=True)):
        group_scores = flat_scores[at : at + len(group)]
        at += len(group)
        best = max(range(len(group)), key=group_scores.__getitem__)
        sentence_part = group_scores[best] / top_sentence
        paper_part = RANK_OFFSET / (rank + RANK_OFFSET)  # 1 for the best candidate
        score = {
            "sentences": sentence_part,
            "papers": paper_part,
            "blend": sentence_part + paper_weight * paper_part,
        }[method]
        scored.append(Passage(paper, shorten(group[best]), score))
    scored.sort(key=lambda p: -p.score)  # stable: ties keep the candidates' order
    return Answer(question, topic, in_scope, scored[:limit])


def _first(paper: StoredPaper) -> Passage:
    group = sentences(paper.abstract)
    return Passage(paper, shorten(group[0] if group else paper.abstract), 0.0)
