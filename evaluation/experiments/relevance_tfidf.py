"""Experiment (not shipped): a per-topic TF-IDF + logistic-regression relevance layer, in the
spirit of arxiv-sanity's per-tag SVMs, on top of the catalogue query.

Trained on the topic's tune split; the model's C and two thresholds chosen by 5-fold
cross-validation on the tune split, maximising the lower of precision and recall of the rule
"(query AND score >= t1) OR score >= t2" (t2 > 1: a filter on the query only); scored once on
the held-out test split against the query alone, with the stratified estimator.

Result on 2026-12-01 for rl-for-language-models (509 tune labels, 518 held out): held out,
the query (as of commit 3268967) 0.82 / 0.88; the layer 0.83-0.84 / 0.84-0.86 over 12 settings
(word 1-2-grams or words, C in 1/4/16, class-balanced or stratum weights). It does not beat
the query. Needs
scikit-learn (`pip install scikit-learn`), which the project does not depend on.

    .venv/bin/python evaluation/experiments/relevance_tfidf.py [slug]
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import report

from topicpulse.topics import load_catalogue

GRID = np.arange(0.05, 0.96, 0.05)


def layer(
    scores: dict[str, float], matched: set[str], t1: float, t2: float
) -> Callable[[str], bool]:
    """The rule: the query's match with a score of at least t1, or any score of at least t2."""
    return lambda i: (i in matched and scores[i] >= t1) or scores[i] >= t2


async def main(slug: str) -> None:
    labels = report.read_labels()[slug]
    sizes = json.loads(report.STRATA.read_text("utf-8"))[slug]
    strata = {"match": sizes["matches"], "near_miss": sizes["near_misses"]}
    with report.LISTINGS.open(encoding="utf-8") as handle:
        listing = {row["arxiv_id"]: row for row in map(json.loads, handle)}
    query = {e.slug: e.query for e in load_catalogue()}[slug]
    found = (await report.rule_matches({slug: query}))[slug]
    matched, outside = found.ids, len(found.outside)

    def text(arxiv_id: str) -> str:  # the title counts twice
        paper = listing[arxiv_id]
        return f"{paper['title']} . {paper['title']} . {paper['abstract']}"

    tune = [r for r in labels if r.split == "tune"]
    test = [r for r in labels if r.split == "test"]
    y = np.array([r.label for r in tune])
    counts = {s: sum(1 for r in tune if r.stratum == s) for s in strata}
    held_out_query = report._point(test, matched.__contains__, strata, outside)
    for ngrams in ((1, 2), (1, 1)):
        vec = TfidfVectorizer(ngram_range=ngrams, min_df=2, sublinear_tf=True, stop_words="english")
        vec.fit([text(i) for i in listing])
        x_tune = vec.transform([text(r.arxiv_id) for r in tune])
        x_test = vec.transform([text(r.arxiv_id) for r in test])
        for c in (1.0, 4.0, 16.0):
            for weighting in ("balanced", "strata"):
                weights = np.array([strata[r.stratum] / counts[r.stratum] for r in tune])
                sw = weights if weighting == "strata" else None
                balance = "balanced" if weighting == "balanced" else None
                clf = LogisticRegression(C=c, class_weight=balance, max_iter=3000)
                scores = np.zeros(len(tune))
                folds = StratifiedKFold(5, shuffle=True, random_state=1)
                for train, held in folds.split(x_tune, y):
                    fold_weights = None if sw is None else sw[train]
                    clf.fit(x_tune[train], y[train], sample_weight=fold_weights)
                    scores[held] = clf.predict_proba(x_tune[held])[:, 1]
                cv = dict(zip([r.arxiv_id for r in tune], scores, strict=True))
                best = (-1.0, 0.0, 0.0)
                for t1 in GRID:
                    for t2 in [*GRID, 1.1]:
                        if t2 >= t1:
                            rule = layer(cv, matched, t1, t2)
                            pr = report._point(tune, rule, strata, outside)
                            best = max(best, (min(pr), float(t1), float(t2)))
                _, t1, t2 = best
                clf.fit(x_tune, y, sample_weight=sw)
                proba = clf.predict_proba(x_test)[:, 1]
                held = dict(zip([r.arxiv_id for r in test], proba, strict=True))
                result = report._point(test, layer(held, matched, t1, t2), strata, outside)
                print(
                    f"{ngrams} C={c:g} {weighting:8}: t1={t1:.2f} t2={t2:.2f} | held out: query"
                    f" P{held_out_query[0]:.2f} R{held_out_query[1]:.2f}, layer"
                    f" P{result[0]:.2f} R{result[1]:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "rl-for-language-models"))
