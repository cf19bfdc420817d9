"""Experiment (not shipped): a per-topic TF-IDF + logistic-regression relevance layer, in the
spirit of arxiv-sanity's per-tag SVMs, trained on the tune split (plus the tune positives of its
sub-topics for RL for Language Models), C and threshold chosen by 5-fold cross-validation on the
tune split, scored on the held-out test split against the catalogue query.

Result on 2026-12-01 (about 60 tune labels per topic): it does not beat the queries; too few
labels per topic. Needs scikit-learn (`pip install scikit-learn`), which the project does not
depend on.

    .venv/bin/python evaluation/experiments/relevance_tfidf.py
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_predict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import report

SUBTOPICS = {
    "rl-for-language-models": ["rl-for-language-model-reasoning", "agentic-rl", "grpo", "rlvr"]
}
THRESHOLDS = np.arange(0.2, 0.8, 0.05)


def f1(pr: tuple[float, float]) -> float:
    return 2 * pr[0] * pr[1] / (pr[0] + pr[1] + 1e-9)


async def main() -> None:
    labels = report.read_labels()
    sizes = json.loads(report.STRATA.read_text("utf-8"))
    with report.LISTINGS.open(encoding="utf-8") as handle:
        listing = {row["arxiv_id"]: row for row in map(json.loads, handle)}
    matches = await report.query_matches(labels)

    def text(arxiv_id: str) -> str:  # the title counts twice
        paper = listing[arxiv_id]
        return f"{paper['title']} . {paper['title']} . {paper['abstract']}"

    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, stop_words="english")
    vec.fit([text(i) for i in listing])
    for slug, rows in labels.items():
        tune = [r for r in rows if r.split == "tune"]
        test = [r for r in rows if r.split == "test"]
        held_out = {r.arxiv_id for r in test}
        train = tune + [
            r
            for other in SUBTOPICS.get(slug, [])
            for r in labels[other]
            if r.split == "tune" and r.label and r.arxiv_id not in held_out
        ]
        x = vec.transform([text(r.arxiv_id) for r in train])
        y = np.array([r.label for r in train])
        strata = {"match": sizes[slug]["matches"], "near_miss": sizes[slug]["near_misses"]}
        best = (-1.0, 1.0, 0.5)
        for c in (1.0, 4.0, 16.0):
            clf = LogisticRegression(C=c, class_weight="balanced", max_iter=2000)
            proba = cross_val_predict(clf, x, y, cv=5, method="predict_proba")[:, 1]
            scored = dict(zip([r.arxiv_id for r in train], proba, strict=True))
            for th in THRESHOLDS:
                score = f1(report._point(tune, lambda i, t=th, s=scored: s[i] >= t, strata))
                best = max(best, (score, c, float(th)))
        _, c, th = best
        clf = LogisticRegression(C=c, class_weight="balanced", max_iter=2000).fit(x, y)
        proba = clf.predict_proba(vec.transform([text(r.arxiv_id) for r in test]))[:, 1]
        keep = {r.arxiv_id for r, p in zip(test, proba, strict=True) if p >= th}
        matched = matches[slug]
        q = report._point(test, matched.__contains__, strata)
        m = report._point(test, keep.__contains__, strata)
        both = report._point(test, (keep & matched).__contains__, strata)
        print(
            f"{slug:32} query P{q[0]:.2f} R{q[1]:.2f} | model(C={c:g}, t={th:.2f})"
            f" P{m[0]:.2f} R{m[1]:.2f} | both P{both[0]:.2f} R{both[1]:.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
