"""Precision and recall of catalogue topics on the labelled evaluation set, with intervals.

Each evaluated topic's labels (``evaluation/labels/<slug>.jsonl``) are a stratified random
sample of the real listings (see ``evaluation/sample.py``): papers the topic's query matched when
the sample was drawn (``match``) and papers that use the topic's vocabulary but were not matched
(``near_miss``). Every labelled paper stands for ``N_stratum / n_stratum`` papers of its stratum
(the stratified estimator), so

    precision = TP / (TP + FP),  recall = TP / (TP + FN)

with TP, FP, FN summed over labelled papers with those weights, for whatever decides a match
(today's catalogue query, or any candidate rule). Papers outside both strata are taken as not
relevant: recall is over the papers that use the topic's vocabulary, and a rule that matches a
paper outside the sampling frame (``frame.toml`` ∪ ``vocabulary.toml``) counts it as a false
match, weight 1 (unlabelled, so the estimate errs low). The 95% intervals are
percentile bootstraps (papers resampled within each stratum). Figures are reported on the
``test`` split (held out) and the ``tune`` split (what rules may be tuned on) separately.

    .venv/bin/python evaluation/report.py [--split test|tune|all] [--errors] [--markdown]
    .venv/bin/python evaluation/report.py --split tune --topic grpo --query 'GRPO OR ...' --errors
    .venv/bin/python evaluation/report.py --before   # the frozen frame's queries, for comparison
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from corpus import LABELS, LISTINGS, MISSING, ROOT, STRATA, listings_store, matches

from topicpulse.topics.catalogue import load_catalogue

BOOTSTRAP = 2000


@dataclass(frozen=True, slots=True)
class Label:
    arxiv_id: str
    topic: str
    label: bool
    stratum: str  # "match" or "near_miss"
    split: str  # "tune" or "test"
    reason: str


@dataclass(frozen=True, slots=True)
class Estimate:
    precision: float
    recall: float
    precision_ci: tuple[float, float]
    recall_ci: tuple[float, float]
    labels: int
    positives: int


def read_labels(folder: Path = LABELS) -> dict[str, list[Label]]:
    found: dict[str, list[Label]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
        found[path.stem] = [Label(**row) for row in rows]
    return found


def _point(
    labels: Iterable[Label], predicted: Callable[[str], bool], sizes: dict[str, int], outside: int
) -> tuple[float, float]:
    chosen = list(labels)
    per_stratum = {s: sum(1 for lb in chosen if lb.stratum == s) for s in sizes}
    tp, fp, fn = 0.0, float(outside), 0.0
    for lb in chosen:
        weight = sizes[lb.stratum] / per_stratum[lb.stratum]
        hit = predicted(lb.arxiv_id)
        if hit and lb.label:
            tp += weight
        elif hit:
            fp += weight
        elif lb.label:
            fn += weight
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall


def estimate(
    labels: list[Label],
    predicted: Callable[[str], bool],
    sizes: dict[str, int],
    outside: int = 0,
    seed: int = 7,
) -> Estimate:
    """Stratified precision and recall of ``predicted`` on ``labels``, with bootstrap CIs.

    ``outside`` counts the rule's matches outside the sampling frame (taken as false)."""
    precision, recall = _point(labels, predicted, sizes, outside)
    by_stratum = {s: [lb for lb in labels if lb.stratum == s] for s in sizes}
    rng = random.Random(seed)
    ps, rs = [], []
    for _ in range(BOOTSTRAP):
        resample = [
            rng.choice(group) for group in by_stratum.values() if group for _ in range(len(group))
        ]
        p, r = _point(resample, predicted, sizes, outside)
        ps.append(p)
        rs.append(r)
    ps.sort()
    rs.sort()
    lo, hi = int(0.025 * BOOTSTRAP), int(0.975 * BOOTSTRAP) - 1
    return Estimate(
        precision,
        recall,
        (ps[lo], ps[hi]),
        (rs[lo], rs[hi]),
        len(labels),
        sum(lb.label for lb in labels),
    )


def _table(name: str) -> dict[str, str]:
    path = ROOT / "evaluation" / f"{name}.toml"
    return tomllib.loads(path.read_text("utf-8"))[name]  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Matched:
    ids: set[str]  # what the rule matches
    outside: set[str]  # of those, the ones outside the sampling frame (unlabelled)


async def rule_matches(rules: dict[str, str]) -> dict[str, Matched]:
    """What each topic's rule (a query) matches in the real listings, and how much of it falls
    outside the topic's sampling frame."""
    frame, vocabulary = _table("frame"), _table("vocabulary")
    found: dict[str, Matched] = {}
    async with listings_store() as store:
        for slug, rule in rules.items():
            ids = await matches(store, rule)
            in_frame = await matches(store, frame[slug]) | await matches(store, vocabulary[slug])
            found[slug] = Matched(ids, ids - in_frame)
    return found


def titles(ids: Iterable[str]) -> dict[str, str]:
    """Titles of real papers, for reading errors on the terminal (never written to the repo)."""
    wanted, found = set(ids), {}
    with LISTINGS.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row.get("arxiv_id") in wanted:
                found[row["arxiv_id"]] = " ".join(row.get("title", "").split())
    return found


def _pct(x: float) -> str:
    return f"{x:.2f}"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=("test", "tune", "all"), default="test")
    parser.add_argument("--errors", action="store_true", help="list the papers the rule gets wrong")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--topic", help="only this topic (slug)")
    parser.add_argument("--query", help="score this candidate query instead (needs --topic)")
    parser.add_argument("--before", action="store_true", help="score the frozen frame's queries")
    parser.add_argument("--titles", action="store_true", help="with --errors: show titles")
    args = parser.parse_args()
    if not LISTINGS.exists():
        print(MISSING, file=sys.stderr)
        return 1
    labels = read_labels()
    if args.topic:
        labels = {args.topic: labels[args.topic]}
    sizes = json.loads(STRATA.read_text("utf-8"))
    if args.query:
        rules, what = {args.topic: args.query}, "the query given"
    elif args.before:
        rules, what = {s: _table("frame")[s] for s in labels}, "the frozen frame's query (before)"
    else:
        catalogue = {e.slug: e.query for e in load_catalogue()}
        rules, what = {s: catalogue[s] for s in labels}, "the catalogue query as it is now"
    found = await rule_matches(rules)
    named = titles(lb.arxiv_id for rows in labels.values() for lb in rows) if args.titles else {}
    header = "| topic | labels (+) | precision [95% CI] | recall [95% CI] |"
    print(f"split: {args.split} · rule: {what}")
    print(header if args.markdown else "")
    if args.markdown:
        print("|---|---|---|---|")
    for slug, rows in labels.items():
        chosen = [lb for lb in rows if args.split == "all" or lb.split == args.split]
        strata = {"match": sizes[slug]["matches"], "near_miss": sizes[slug]["near_misses"]}
        rule = found[slug]
        outside = len(rule.outside)
        e = estimate(chosen, rule.ids.__contains__, strata, outside)
        p = f"{_pct(e.precision)} [{_pct(e.precision_ci[0])}–{_pct(e.precision_ci[1])}]"
        r = f"{_pct(e.recall)} [{_pct(e.recall_ci[0])}–{_pct(e.recall_ci[1])}]"
        if args.markdown:
            print(f"| {slug} | {e.labels} ({e.positives}) | {p} | {r} |")
        else:
            print(f"{slug:34} {e.labels:4} ({e.positives:3})  P {p:20}  R {r}", end="")
            print(f"  matches {len(rule.ids)}, outside frame {outside}")
        if args.errors:
            for lb in chosen:
                hit = lb.arxiv_id in rule.ids
                if hit != lb.label:
                    kind = "FP" if hit else "FN"
                    print(f"    {kind} {lb.arxiv_id} [{lb.stratum}] {lb.reason}")
                    if lb.arxiv_id in named:
                        print(f"         {named[lb.arxiv_id]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
