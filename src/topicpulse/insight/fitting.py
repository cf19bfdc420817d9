"""The taste's regression, fast: its samples as a sparse matrix, scikit-learn's liblinear, and
the background's rows built once per worker process (``insight.taste`` uses them).

The solver is liblinear's trust-region Newton method (≈ 4 ms for 50 ratings and the 300
background papers, where lbfgs took 10–40 ms: its cost grows with the stems, thousands here).
liblinear regularises the intercept as one more feature, of value ``INTERCEPT_SCALING``; at 10
that penalty is practically nil, as lbfgs has none: the weights agree with lbfgs run to
convergence within 1e-4 (lbfgs at its default tolerance, as used before: within 4e-3), and
``bench/bench_taste.py`` prints the same figures with either. numpy, scipy and scikit-learn are
imported on first use, in the worker process: the bot's own process never needs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from topicpulse.insight import features
from topicpulse.insight.similarity import Vector
from topicpulse.store import Store

INTERCEPT_SCALING = 10.0
REFRESH_AFTER = 100  # new papers before the background is read again


def matrix(samples: Sequence[Vector], vocabulary: dict[str, int]) -> Any:
    """The samples as a CSR matrix, a column per stem of ``vocabulary`` (in its order), which
    gains the samples' new stems."""
    import numpy as np
    from scipy.sparse import csr_matrix

    indices: list[int] = []
    data: list[float] = []
    indptr = [0]
    for v in samples:
        for t in v:
            if t not in vocabulary:
                vocabulary[t] = len(vocabulary)
        indices.extend(map(vocabulary.__getitem__, v))
        data.extend(v.values())
        indptr.append(len(indices))
    x = csr_matrix(
        (np.array(data), np.array(indices, dtype=np.int32), np.array(indptr, dtype=np.int32)),
        shape=(len(samples), len(vocabulary)),
    )
    x.sort_indices()
    return x


def solve(
    x: Any,
    names: Sequence[str],
    counts: tuple[int, int, int],
    *,
    c: float,
    background_weight: float,
    max_terms: int,
) -> tuple[dict[str, float], float]:
    """The L2 logistic regression on ``x`` (rows liked, then disliked, then background: their
    ``counts``; a column per stem of ``names``), positives weighed to balance the negatives,
    the background at ``background_weight``. Returns the ``max_terms`` heaviest non-zero
    weights by stem, and the intercept."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    liked, disliked, background = counts
    labels = np.zeros(liked + disliked + background, dtype=np.int8)
    labels[:liked] = 1
    weights = np.full(len(labels), background_weight)
    weights[:liked] = (disliked + background_weight * background) / liked
    weights[liked : liked + disliked] = 1.0
    model = LogisticRegression(
        C=c, solver="liblinear", intercept_scaling=INTERCEPT_SCALING, max_iter=500, random_state=0
    )
    model.fit(x, labels, sample_weight=weights)
    coef = model.coef_[0]
    kept = np.argsort(-np.abs(coef), kind="stable")[:max_terms]
    return {names[i]: float(coef[i]) for i in kept if coef[i]}, float(model.intercept_[0])


@dataclass(frozen=True, slots=True)
class Background:
    """The newest stored papers as rows of a matrix, for every chat's training."""

    newest: int  # the store's newest paper id when it was read
    ids: list[str]  # arXiv ids, newest first
    rows: Any  # CSR, a row per paper
    vocabulary: dict[str, int]  # stem → column

    def stacked(self, rated: Sequence[Vector], chosen: Sequence[int]) -> tuple[Any, list[str]]:
        """The matrix of the rated vectors above the ``chosen`` background rows, its stems."""
        from scipy.sparse import csr_matrix, vstack

        vocabulary = dict(self.vocabulary)
        top = matrix(rated, vocabulary)
        part = self.rows[list(chosen)]
        below = csr_matrix((part.data, part.indices, part.indptr), (len(chosen), len(vocabulary)))
        return vstack([top, below], format="csr"), list(vocabulary)


# Per store and ``before_id``: the same for every chat, so a worker process builds it once,
# not once per training, until the store has grown a little.
_backgrounds: dict[tuple[str, int | None], Background] = {}


async def background(store: Store, size: int, before_id: int | None) -> Background:
    """The ``size`` newest stored papers (below ``before_id``) as a ``Background``."""
    newest = await store.max_paper_id()
    key = (features.store_key(store), before_id)
    cached = _backgrounds.get(key)
    if cached is None or newest - cached.newest >= REFRESH_AFTER or newest < cached.newest:
        papers = await store.recent_papers(size, before_id=before_id)
        vocabulary: dict[str, int] = {}
        rows = matrix(await features.vectors(store, papers), vocabulary)
        if len(_backgrounds) > 8:
            _backgrounds.clear()
        ids = [p.arxiv_id for p in papers]
        _backgrounds[key] = cached = Background(newest, ids, rows, vocabulary)
    return cached
