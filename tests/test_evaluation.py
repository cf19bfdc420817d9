"""The topic-quality evaluation set (``evaluation/``): its labels, its estimator, and the held-out
precision and recall of every evaluated catalogue topic, kept from falling when a query is edited.

The estimator is checked by hand on a small made-up sample (runs anywhere); the labels and the
figures need the real listings (``../shared``) and are skipped without them. The floors are the
held-out (``test`` split) figures docs/topic-quality.md reports, rounded down: a query edit
that lowers one fails here, and the edit must be measured on the tuning split and argued for
before the floor moves (see evaluation/README.md).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from conftest import ROOT, requires_listings

sys.path.insert(0, str(ROOT / "evaluation"))

import report
from report import Label, estimate, read_labels

from topicpulse.topics.catalogue import load_catalogue

# Held-out (test split) precision and recall floors, as measured by evaluation/report.py.
FLOORS: dict[str, tuple[float, float]] = {
    "rl-for-language-models": (0.84, 0.87),
    "grpo": (0.91, 1.00),
    "reward-modeling": (0.83, 0.66),
    "llm-alignment": (0.79, 0.66),
    "rlvr": (0.74, 0.73),
    "rl-for-language-model-reasoning": (0.76, 0.84),
    "agentic-rl": (0.85, 0.73),
    "knowledge-distillation": (0.81, 0.78),
    "retrieval-augmented-generation": (0.72, 0.78),
    "diffusion-models": (0.93, 0.92),
    "speech-language-models": (0.82, 0.85),
    "medical-llms": (0.90, 0.83),
}
SLACK = 0.005  # the floors are two-decimal roundings


def _label(arxiv_id: str, label: bool, stratum: str) -> Label:
    return Label(arxiv_id, "t", label, stratum, "test", "made up")


def test_the_stratified_estimator_weights_each_label_by_its_stratum() -> None:
    # 100 matches (4 labelled: 3 relevant) and 900 near misses (3 labelled: 1 relevant).
    labels = [
        _label("m1", True, "match"),
        _label("m2", True, "match"),
        _label("m3", True, "match"),
        _label("m4", False, "match"),
        _label("n1", True, "near_miss"),
        _label("n2", False, "near_miss"),
        _label("n3", False, "near_miss"),
    ]
    sizes = {"match": 100, "near_miss": 900}
    # The rule: all matches but m3, plus n1. Weights: 25 per match label, 300 per near miss.
    chosen = {"m1", "m2", "m4", "n1"}
    e = estimate(labels, chosen.__contains__, sizes)
    tp, fp, fn = 25 + 25 + 300, 25, 25
    assert e.precision == pytest.approx(tp / (tp + fp))
    assert e.recall == pytest.approx(tp / (tp + fn))
    assert e.precision_ci[0] <= e.precision <= e.precision_ci[1]
    # Matches outside the sampling frame are unlabelled and count as false.
    worse = estimate(labels, chosen.__contains__, sizes, outside=50)
    assert worse.precision == pytest.approx(tp / (tp + fp + 50))
    assert worse.recall == e.recall


@requires_listings
def test_every_evaluated_topic_has_a_guide_and_a_well_formed_stratified_sample() -> None:
    slugs = {e.slug for e in load_catalogue()}
    labels = read_labels()
    assert len(labels) >= 10 and set(labels) == set(FLOORS)
    listings = {}
    with (report.LISTINGS).open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            listings[row["arxiv_id"]] = row["title"].casefold()
    for slug, rows in labels.items():
        assert slug in slugs
        assert (ROOT / "evaluation" / "guides" / f"{slug}.md").exists()
        assert len(rows) >= 100, slug
        assert len({r.arxiv_id for r in rows}) == len(rows), f"{slug}: a paper labelled twice"
        for split in ("tune", "test"):
            for stratum in ("match", "near_miss"):
                assert any(r.split == split and r.stratum == stratum for r in rows), slug
        for r in rows:
            assert r.topic == slug and r.arxiv_id in listings and r.reason.strip()
            assert len(r.reason) < 200 and listings[r.arxiv_id] not in r.reason.casefold()


@requires_listings
def test_held_out_precision_and_recall_do_not_fall_below_the_reported_figures() -> None:
    labels = read_labels()
    sizes = json.loads(report.STRATA.read_text("utf-8"))
    catalogue = {e.slug: e.query for e in load_catalogue()}
    found = asyncio.run(report.rule_matches({slug: catalogue[slug] for slug in labels}))
    low = []
    for slug, (min_precision, min_recall) in FLOORS.items():
        held_out = [lb for lb in labels[slug] if lb.split == "test"]
        strata = {"match": sizes[slug]["matches"], "near_miss": sizes[slug]["near_misses"]}
        rule = found[slug]
        e = estimate(held_out, rule.ids.__contains__, strata, len(rule.outside))
        if e.precision < min_precision - SLACK or e.recall < min_recall - SLACK:
            low.append(f"{slug}: P {e.precision:.2f} R {e.recall:.2f}")
    assert not low, "held-out figures fell: " + "; ".join(low)


def test_the_evaluation_scripts_live_where_the_readme_says() -> None:
    for name in ("report.py", "sample.py", "corpus.py", "frame.toml", "vocabulary.toml"):
        assert (Path(ROOT) / "evaluation" / name).exists(), name
