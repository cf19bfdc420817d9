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
nothing. Training runs in the training worker process (``offload.TRAINING``), whenever a chat's
ratings change.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from topicpulse import offload
from topicpulse.insight import features, fitting
from topicpulse.insight.similarity import HasText, Vector, is_content_word
from topicpulse.models import StoredPaper, iso, parse_iso
from topicpulse.store import PaperText, Rating, Store, TasteRow
from topicpulse.topics.query import tokenize

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
        weights, total = self.weights, 0.0
        for t, x in vector.items():
            if t in weights:
                total += x * weights[t]
        return self.bias + total

    def score(self, vector: Vector) -> float:
        """How likely the chat wants the paper, 0–1."""
        z = max(min(self.raw(vector), 30.0), -30.0)
        return 1.0 / (1.0 + math.exp(-z))

    def scores(self, vectors: Sequence[Vector]) -> list[float]:
        """``score`` of each vector (``features.Vectors``: without building them)."""
        if not isinstance(vectors, features.Vectors):
            return [self.score(v) for v in vectors]
        bias = self.bias
        return [
            1.0 / (1.0 + math.exp(-max(min(bias + d, 30.0), -30.0)))
            for d in vectors.dots(self.weights)
        ]

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
        scores = self.scores(reference) if self.holds_back else []
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
    """Each paper's unit TF-IDF vector over the index's stems (stems cached: ``features``)."""
    return await features.vectors(store, papers)


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
    if not liked or not (disliked or background):
        return None
    vocabulary: dict[str, int] = {}
    x = fitting.matrix([*liked, *disliked, *background], vocabulary)
    counts = (len(liked), len(disliked), len(background))
    weights, bias = fitting.solve(
        x, list(vocabulary), counts, c=c, background_weight=background_weight, max_terms=max_terms
    )
    return Taste(weights, bias, up=len(liked), down=len(disliked))


def _surface_words(texts: Sequence[HasText], stems: Sequence[str]) -> dict[str, str]:
    """A readable word for each stem: the most common word of the texts that stems to it."""
    tokens: Counter[str] = Counter()
    for t in texts:
        tokens.update(tokenize(f"{t.title} {t.abstract}"))
    words = {w: k for w, k in tokens.items() if is_content_word(w)}  # (content_words's)
    distinct = sorted(words)
    wanted = set(stems)
    best: dict[str, tuple[int, str]] = {}
    for word, stem in zip(distinct, features.stem_words(distinct), strict=True):
        if stem in wanted and words[word] > best.get(stem, (0, ""))[0]:
            best[stem] = (words[word], word)
    return {s: w for s, (_, w) in best.items()}


async def train(
    store: Store,
    ratings: Sequence[Rating],
    reference: Sequence[StoredPaper | PaperText] = (),
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
    cached = await fitting.background(store, 2 * BACKGROUND, before_id)  # (rated ones left out)
    chosen = [n for n, arxiv_id in enumerate(cached.ids) if arxiv_id not in rated][:BACKGROUND]
    if not disliked and not chosen:
        return None
    # ``fit``, with the background's rows built once per worker process
    x, names = cached.stacked(await vectors(store, [*liked, *disliked]), chosen)
    weights, bias = fitting.solve(
        x,
        names,
        (len(liked), len(disliked), len(chosen)),
        c=c,
        background_weight=background_weight,
        max_terms=MAX_TERMS,
    )
    taste = Taste(weights, bias, up=len(liked), down=len(disliked))
    heavy = sorted(taste.weights, key=lambda t: -abs(taste.weights[t]))[:200]
    words = await asyncio.to_thread(_surface_words, [*liked, *disliked], heavy)
    taste = replace(taste, words=words)
    unrated = [p for p in reference if p.arxiv_id not in rated]  # (rated ones score in-sample)
    # (built only if read: a reader wanting most of its topics has no floor to set)
    return taste.with_floor(await features.lazy_vectors(store, unrated)) if unrated else taste


# ---------------------------------------------------------------------------------- per chat
BATCH = 16  # chats one call of the worker process trains (one connection, topics read once)
DUTY = 0.5  # the share of the time the Trainer keeps a worker process busy, at most
BUSY_POLL = 0.5  # seconds between looks at whether the round that holds training back ended


async def learn(
    store: Store, chat_id: int, *, topics: dict[int, list[PaperText]] | None = None
) -> Taste | None:
    """Train the chat's taste from its ratings now and save it (none left: the taste is
    cleared). Returns it. ``topics``: the followed topics' recent papers read already (by
    the other chats of a batch), and where the ones read now are kept."""
    row = await store.taste(chat_id)
    if row is None:
        return None
    since = iso(store.clock() - timedelta(days=REFERENCE_DAYS))
    topics = {} if topics is None else topics
    reference: dict[int, PaperText] = {}
    for sub in await store.subscriptions(chat_id):
        if sub.topic.id not in topics:
            topics[sub.topic.id] = await store.topic_texts(sub.topic.id, since=since, limit=300)
        reference.update((p.id, p) for p in topics[sub.topic.id])
    taste = await train(store, await store.chat_ratings(chat_id), list(reference.values()))
    await store.save_taste_model(chat_id, row.changed, taste.to_json() if taste else None)
    return taste


async def learn_many(store: Store, chat_ids: Sequence[int]) -> int:
    """``learn`` each chat; one whose training fails is logged and marked trained (its model
    kept as it was: a bad model must never stop the others). Returns how many have a taste."""
    topics: dict[int, list[PaperText]] = {}
    learned = 0
    for chat_id in chat_ids:
        try:
            learned += await learn(store, chat_id, topics=topics) is not None
        except Exception:
            log.exception("training the taste of chat %s failed", chat_id)
            await _keep(store, chat_id)
    return learned


async def _keep(store: Store, chat_id: int) -> None:
    row = await store.taste(chat_id)
    if row is not None:
        await store.save_taste_model(chat_id, row.changed, row.model)


def learn_apart(path: str, chat_ids: Sequence[int], now: str) -> int:
    """``learn_many`` in the worker process, on a connection of its own."""

    async def work(store: Store) -> int:
        return await learn_many(store, chat_ids)

    return Store.run_apart(path, parse_iso(now), work)


async def load(store: Store, chat_id: int) -> tuple[Taste | None, bool]:
    """The chat's saved taste (None: it never rated, or has no like yet), and whether
    holding back is on."""
    return from_row(await store.taste(chat_id))


def from_row(row: TasteRow | None) -> tuple[Taste | None, bool]:
    """``load`` from a taste row already read (``Store.chat_matches`` reads it)."""
    if row is None:
        return None, True
    return (Taste.from_json(row.model) if row.model else None), row.hold_back


async def scored(
    store: Store, taste: Taste, papers: Sequence[StoredPaper]
) -> list[tuple[StoredPaper, float]]:
    """``papers`` with the taste's score, best first (stable: newest-first ties stay)."""
    found = await scores(store, taste, papers)
    order = sorted(range(len(papers)), key=lambda n: -found[n])
    return [(papers[n], found[n]) for n in order]


async def scores(store: Store, taste: Taste, papers: Sequence[HasText]) -> list[float]:
    """The taste's score of each paper, in order (each vector built, scored and dropped)."""
    return taste.scores(await features.lazy_vectors(store, papers))


class Trainer:
    """Retrains the tastes of chats whose ratings changed, ``BATCH`` at a time, in the training
    worker process (in this process for an in-memory store). ``mark`` is called after a rating is
    stored; ``run`` is the background task (it also picks up what was due before a restart).

    It yields: no batch starts while ``busy()`` (an intake round is running: its matching
    needs the worker processes), and after each batch it rests as long as the batch took
    (``DUTY``), so that a thousand readers rating at once keep one worker process half busy,
    not the machine."""

    def __init__(self, store: Store, *, busy: Callable[[], bool] = lambda: False) -> None:
        self.store = store
        self.busy = busy
        self._wake = asyncio.Event()
        self._wake.set()  # at start: whatever was due before a restart
        self.trained = 0

    def mark(self, chat_id: int) -> None:
        self._wake.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while due := await self.store.tastes_due():
                for start in range(0, len(due), BATCH):
                    while self.busy():
                        await asyncio.sleep(BUSY_POLL)
                    began = loop.time()
                    await self.train(due[start : start + BATCH])
                    await asyncio.sleep((loop.time() - began) * (1 - DUTY) / DUTY)

    async def train(self, chat_ids: Sequence[int]) -> None:
        try:
            if self.store.file_backed():
                now = iso(self.store.clock())
                await offload.run(
                    learn_apart, self.store.path, list(chat_ids), now, pool=offload.TRAINING
                )
            else:
                await learn_many(self.store, chat_ids)
        except Exception:  # the worker failed: keep their models, mark them trained
            log.exception("training the tastes of chats %s failed", list(chat_ids))
            for chat_id in chat_ids:
                await _keep(self.store, chat_id)
        self.trained += len(chat_ids)
