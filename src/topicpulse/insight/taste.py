"""A taste per chat: what its 👍 / 👎 (and imported likes) say about the papers it wants.

Features are those of "more like this" (``similarity``): TF-IDF over the full-text index's
Porter stems, title words counted twice, inverse document frequency from the whole store. The
model is scikit-learn's L2 logistic regression, in the spirit of arxiv-sanity's per-tag SVM:
the liked papers are the positives; the disliked ones and a background of the newest stored
papers (which the reader mostly does not want: a topic is a small share of the store) are the
negatives, the background weighing less than a real 👎; the classes are balanced by weight.
``bench/bench_taste.py`` chose the settings (C, background weight, the hold-back floor's HOLD and
MOST) on a tuning split of simulated readers and reports them on the others (docs/taste.md).

A trained taste is a small JSON document (the ``MAX_TERMS`` heaviest weights) kept in the
store: nothing stays in memory per chat, and a chat that never rated has no taste and costs
nothing. Training runs in the worker process (``offload``), whenever a chat's ratings change.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from topicpulse import offload
from topicpulse.insight.similarity import HasText, Vector, content_words, paper_stems, tfidf
from topicpulse.models import StoredPaper, iso, parse_iso
from topicpulse.store import Rating, Store

log = logging.getLogger(__name__)

C = 3.0  # inverse regularisation strength (chosen by bench_taste.py on the tuning readers)
BACKGROUND = 300  # newest stored papers taken as mild negatives
BACKGROUND_WEIGHT = 0.1  # … each weighing this much of a 👎
MAX_TERMS = 1000  # weights kept in a saved taste
# Ratings before alerts may hold papers back: ≥ MIN_RATED in all, ≥ MIN_UP 👍 and ≥ MIN_DOWN 👎.
# MIN_UP chosen by ``bench/bench_taste.py --tune`` with HOLD and MOST (from 2 👍 the narrower
# tuning readers had 39% of their unwanted papers held for 9.9% of wanted, from 5 👍 16%:
# most of them have fewer than 5 👍 in their first 20 ratings); MIN_RATED keeps the issue's
# 5 + 3 (at 5 ratings the taste still guesses: docs/taste.md).
MIN_UP, MIN_DOWN, MIN_RATED = 2, 3, 8
# Holding back (``hold_floor``): a reader whose ratings say it wants a share s < MOST of its topics'
# papers has alerts hold back those its taste scores below the HOLD × (1 − s) quantile of the
# scores of the topics' unrated papers of the last REFERENCE_DAYS (so the expected held share is
# HOLD of what it does not want); one that wants MOST or more has nothing held back. Chosen by
# ``bench/bench_taste.py --tune`` at 20 ratings on its tuning readers: the largest HOLD that kept
# the narrower readers' held share of wanted papers within 10% once holding was on (docs/taste.md).
HOLD = 0.5
MOST = 0.5
REFERENCE_DAYS = 28
WHY_TERMS = 3  # words a "why?" names


@dataclass(frozen=True, slots=True)
class Taste:
    """A chat's learned taste: a weight per index stem, a bias, and how many ratings it is
    trained on. ``words`` gives a readable word for the heaviest stems (for "why?")."""

    weights: dict[str, float]
    bias: float
    up: int
    down: int
    words: dict[str, str] = field(default_factory=dict)
    floor: float = 0.0  # papers scored below it are held back (0: nothing is)

    def raw(self, vector: Vector) -> float:
        return self.bias + sum(x * self.weights.get(t, 0.0) for t, x in vector.items())

    def score(self, vector: Vector) -> float:
        """How likely the chat wants the paper, 0–1."""
        z = max(min(self.raw(vector), 30.0), -30.0)
        return 1.0 / (1.0 + math.exp(-z))

    @property
    def holds_back(self) -> bool:
        """Whether it has seen enough of both kinds to hold papers back."""
        return enough_ratings(self.up, self.down)

    def holds(self, score: float) -> bool:
        """Whether an instant alert would hold back a paper of this score."""
        return self.holds_back and score < self.floor

    def with_floor(
        self, reference: Sequence[Vector], *, hold: float = HOLD, most: float = MOST
    ) -> Taste:
        """This taste with its hold-back floor set from ``reference``: the vectors of the
        followed topics' recent unrated papers (see ``hold_floor``)."""
        scores = [self.score(v) for v in reference] if self.holds_back else []
        return replace(self, floor=hold_floor(scores, self.up, self.down, hold=hold, most=most))

    def reasons(self, vector: Vector, n: int = WHY_TERMS) -> tuple[list[str], list[str]]:
        """The words that weighed most for and against a paper."""
        parts = {t: x * self.weights.get(t, 0.0) for t, x in vector.items()}
        pro = sorted((t for t in parts if parts[t] > 0), key=lambda t: -parts[t])[:n]
        con = sorted((t for t in parts if parts[t] < 0), key=lambda t: parts[t])[:n]
        return [self.words.get(t, t) for t in pro], [self.words.get(t, t) for t in con]

    def to_json(self) -> str:
        return json.dumps(
            {
                "weights": {t: round(w, 5) for t, w in self.weights.items()},
                "bias": self.bias,
                "up": self.up,
                "down": self.down,
                "words": self.words,
                "floor": self.floor,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Taste:
        data = json.loads(text)
        return cls(
            data["weights"],
            data["bias"],
            data["up"],
            data["down"],
            data.get("words", {}),
            data.get("floor", 0.0),
        )


def enough_ratings(up: int, down: int) -> bool:
    """Whether a chat has rated enough, of both kinds, for alerts to hold papers back."""
    return up >= MIN_UP and down >= MIN_DOWN and up + down >= MIN_RATED


def hold_floor(
    scores: Sequence[float], up: int, down: int, *, hold: float = HOLD, most: float = MOST
) -> float:
    """The score below which alerts hold a paper back, from the taste's ``scores`` of the
    followed topics' recent unrated papers and the chat's rating counts: the ``hold`` × (1 − s)
    quantile of ``scores``, s = up / (up + down) the share of its topics the chat wants; 0
    (nothing held) before enough ratings (``enough_ratings``), for s ≥ ``most``, or without
    scores."""
    if not scores or not enough_ratings(up, down):
        return 0.0
    share = up / (up + down)
    if share >= most:
        return 0.0
    ordered = sorted(scores)
    return ordered[int(min(hold * (1 - share), 1.0) * (len(ordered) - 1))]


# ---------------------------------------------------------------------------------- features
async def vectors(store: Store, papers: Sequence[HasText]) -> list[Vector]:
    """Each paper's unit TF-IDF vector over the index's stems."""
    if not papers:
        return []
    counts = await asyncio.to_thread(paper_stems, papers)
    documents = await store.term_documents(sorted(set().union(*counts)))
    total = await store.count_papers()
    return [tfidf(c, documents, total) for c in counts]


def fit(
    liked: Sequence[Vector],
    disliked: Sequence[Vector],
    background: Sequence[Vector],
    *,
    c: float = C,
    background_weight: float = BACKGROUND_WEIGHT,
    max_terms: int = MAX_TERMS,
) -> Taste | None:
    """The taste of these ratings (None without a single like: nothing to learn yet)."""
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    if not liked or not (disliked or background):
        return None
    samples = [*liked, *disliked, *background]
    labels = [1] * len(liked) + [0] * (len(disliked) + len(background))
    negative = len(disliked) + background_weight * len(background)
    weights = [negative / len(liked)] * len(liked) + [1.0] * len(disliked)
    weights += [background_weight] * len(background)
    vectorizer = DictVectorizer()
    x = vectorizer.fit_transform(samples)
    model = LogisticRegression(C=c, solver="lbfgs", max_iter=500)
    model.fit(x, labels, sample_weight=weights)
    coef = model.coef_[0]
    names = vectorizer.get_feature_names_out()
    kept = sorted(range(len(coef)), key=lambda i: -abs(coef[i]))[:max_terms]
    return Taste(
        {str(names[i]): float(coef[i]) for i in kept if coef[i]},
        float(model.intercept_[0]),
        up=len(liked),
        down=len(disliked),
    )


def _surface_words(texts: Sequence[HasText], stems: Sequence[str]) -> dict[str, str]:
    """A readable word for each stem: the most common word of the texts that stems to it."""
    from topicpulse.topics.stemming import stem_texts

    words = Counter(w for t in texts for w in content_words(f"{t.title} {t.abstract}"))
    distinct = sorted(words)
    wanted = set(stems)
    best: dict[str, tuple[int, str]] = {}
    for word, stem in zip(distinct, stem_texts(distinct), strict=True):
        if stem and stem[0] in wanted and words[word] > best.get(stem[0], (0, ""))[0]:
            best[stem[0]] = (words[word], word)
    return {s: w for s, (_, w) in best.items()}


async def train(
    store: Store,
    ratings: Sequence[Rating],
    reference: Sequence[StoredPaper] = (),
    *,
    before_id: int | None = None,
    c: float = C,
    background_weight: float = BACKGROUND_WEIGHT,
) -> Taste | None:
    """The taste learned from ``ratings`` alone, against the newest stored papers (those below
    ``before_id``) as background, its hold-back floor set from ``reference`` (the followed
    topics' recent papers). Shared by the bot and ``topicpulse rank``."""
    liked = [r for r in ratings if r.value > 0 and (r.title or r.abstract)]
    disliked = [r for r in ratings if r.value < 0 and (r.title or r.abstract)]
    if not liked:
        return None
    rated = {r.item for r in ratings}
    background = [
        v for arxiv_id, v in await _background(store, before_id) if arxiv_id not in rated
    ][:BACKGROUND]
    vs = await vectors(store, [*liked, *disliked])
    n = len(liked)
    taste = fit(vs[:n], vs[n:], background, c=c, background_weight=background_weight)
    if taste is None:
        return None
    heavy = sorted(taste.weights, key=lambda t: -abs(taste.weights[t]))[:200]
    words = await asyncio.to_thread(_surface_words, [*liked, *disliked], heavy)
    taste = replace(taste, words=words)
    unrated = [p for p in reference if p.arxiv_id not in rated]  # (rated ones score in-sample)
    return taste.with_floor(await vectors(store, unrated)) if unrated else taste


# The background's vectors, per store and newest paper: the same for every chat, so a worker
# process computes them once, not once per training, until the store has grown a little.
_backgrounds: dict[tuple[str, int | None], tuple[int, list[tuple[str, Vector]]]] = {}
REFRESH_AFTER = 100  # new papers before the background is read again


async def _background(store: Store, before_id: int | None) -> list[tuple[str, Vector]]:
    newest = await store.max_paper_id()
    key = (store.path, before_id)
    cached = _backgrounds.get(key)
    if cached is None or newest - cached[0] >= REFRESH_AFTER or newest < cached[0]:
        papers = await store.recent_papers(2 * BACKGROUND, before_id=before_id)
        found = list(zip((p.arxiv_id for p in papers), await vectors(store, papers), strict=True))
        if len(_backgrounds) > 8:
            _backgrounds.clear()
        _backgrounds[key] = cached = (newest, found)
    return cached[1]


# ---------------------------------------------------------------------------------- per chat
async def learn(store: Store, chat_id: int) -> Taste | None:
    """Train the chat's taste from its ratings now and save it (none left: the taste is
    cleared). Returns it."""
    row = await store.taste(chat_id)
    if row is None:
        return None
    since = iso(store.clock() - timedelta(days=REFERENCE_DAYS))
    reference: dict[int, StoredPaper] = {}
    for sub in await store.subscriptions(chat_id):
        for p in await store.matching_papers(topic_id=sub.topic.id, since=since, limit=300):
            reference[p.id] = p
    taste = await train(store, await store.chat_ratings(chat_id), list(reference.values()))
    await store.save_taste_model(chat_id, row.changed, taste.to_json() if taste else None)
    return taste


def learn_apart(path: str, chat_id: int, now: str) -> bool:
    """``learn`` in the worker process, on a connection of its own. True if a taste was saved."""

    async def work(store: Store) -> bool:
        return await learn(store, chat_id) is not None

    return Store.run_apart(path, parse_iso(now), work)


async def load(store: Store, chat_id: int) -> tuple[Taste | None, bool]:
    """The chat's saved taste (None: it never rated, or has no like yet), and whether
    holding back is on."""
    row = await store.taste(chat_id)
    if row is None:
        return None, True
    return (Taste.from_json(row.model) if row.model else None), row.hold_back


async def scored(
    store: Store, taste: Taste, papers: Sequence[StoredPaper]
) -> list[tuple[StoredPaper, float]]:
    """``papers`` with the taste's score, best first (stable: newest-first ties stay)."""
    found = [taste.score(v) for v in await vectors(store, papers)]
    order = sorted(range(len(papers)), key=lambda n: -found[n])
    return [(papers[n], found[n]) for n in order]


class Trainer:
    """Retrains the tastes of chats whose ratings changed, one at a time, in the worker
    process (in this process for an in-memory store). ``mark`` is called after a rating is
    stored; ``run`` is the background task (it also picks up what was due before a restart)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._wake = asyncio.Event()
        self._wake.set()  # at start: whatever was due before a restart
        self.trained = 0

    def mark(self, chat_id: int) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while due := await self.store.tastes_due():
                for chat_id in due:
                    await self.train(chat_id)

    async def train(self, chat_id: int) -> None:
        try:
            if self.store.file_backed():
                now = iso(self.store.clock())
                await offload.run(learn_apart, self.store.path, chat_id, now)
            else:
                await learn(self.store, chat_id)
        except Exception:  # a bad model must never stop the others: log, mark trained
            log.exception("training the taste of chat %s failed", chat_id)
            row = await self.store.taste(chat_id)
            if row is not None:
                await self.store.save_taste_model(chat_id, row.changed, row.model)
        self.trained += 1
