"""Draw the labelling sample of each evaluated catalogue topic from the real listings.

For every topic in ``evaluation/vocabulary.toml`` the real listings (``../shared``) fall into
two strata: *matches* (what the topic's catalogue query matches) and *near misses* (papers that
use the topic's vocabulary, the stratum's query, but that the topic's query leaves out). From
each stratum a seeded random sample is drawn; each sampled paper goes to the ``tune`` or the
``test`` split by a hash of its id and the topic, so the split never depends on the order of
labelling. Written:

- ``evaluation/strata.json``: the size of each stratum (corpus figures, for the estimator);
- ``bench/out/eval_candidates/<slug>.jsonl``: the sample, shuffled and without its stratum, with
  each paper's title and abstract for the labeller (outside the repository: that text is not
  ours to copy);
- ``bench/out/eval_candidates/<slug>.strata.json``: which stratum each sampled paper is in.

    .venv/bin/python evaluation/sample.py [--per-stratum 60] [--seed 2026]
    .venv/bin/python evaluation/sample.py --attach   # after labelling: add stratum and split
    .venv/bin/python evaluation/sample.py --more 40  # a further draw, disjoint from the labels
    .venv/bin/python evaluation/sample.py --more 400 --topic rl-for-language-models
    .venv/bin/python evaluation/sample.py --attach-more

Labellers write ``evaluation/labels/<slug>.jsonl`` ({arxiv_id, topic, label, reason}) without
seeing the strata; ``--attach`` then adds each label's ``stratum`` and ``split``. A further draw
(``--more K``: K more per stratum, none already labelled) goes to ``<slug>.more.jsonl``; its
labels (``<slug>.more.labels.jsonl`` beside it) are appended by ``--attach-more``. The strata are
always those of the frozen sampling frame (``frame.toml``), never of the catalogue as it is now.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import sys
import tomllib
from pathlib import Path

from corpus import LISTINGS, MISSING, ROOT, STRATA, listings_store, matches

from topicpulse.store import Store

VOCABULARY = ROOT / "evaluation" / "vocabulary.toml"
FRAME = ROOT / "evaluation" / "frame.toml"
OUT = ROOT / "bench" / "out" / "eval_candidates"


def split_of(arxiv_id: str, topic: str) -> str:
    """``tune`` or ``test``, half and half, fixed by the paper and the topic."""
    digest = hashlib.sha256(f"{topic}/{arxiv_id}".encode()).digest()
    return "tune" if digest[0] < 128 else "test"


def vocabulary() -> dict[str, str]:
    return tomllib.loads(VOCABULARY.read_text("utf-8"))["vocabulary"]  # type: ignore[no-any-return]


def frame() -> dict[str, str]:
    """Each topic's query as it was when its sample was drawn (defines the match stratum)."""
    return tomllib.loads(FRAME.read_text("utf-8"))["frame"]  # type: ignore[no-any-return]


async def strata(
    store: Store, slug: str, topic_query: str, vocab: str
) -> tuple[set[str], set[str]]:
    """(matches, near misses) of one topic over the whole store, as arXiv ids."""
    matched = await matches(store, topic_query)
    return matched, await matches(store, vocab) - matched


def _read(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def attach_more() -> int:
    """Append the labels of a further draw, with stratum and split, to each topic's labels."""
    for more in sorted(OUT.glob("*.more.labels.jsonl")):
        slug = more.name.removesuffix(".more.labels.jsonl")
        which = json.loads((OUT / f"{slug}.more.strata.json").read_text("utf-8"))
        rows = {str(r["arxiv_id"]): r for r in _read(more) if r["arxiv_id"] in which}
        if set(which) - set(rows):
            print(f"{slug}: {len(set(which) - set(rows))} drawn papers have no label")
            return 1
        path = ROOT / "evaluation" / "labels" / f"{slug}.jsonl"
        known = {r["arxiv_id"] for r in _read(path)}
        with path.open("a", encoding="utf-8") as handle:
            for arxiv_id, row in rows.items():
                if arxiv_id in known:
                    continue
                row = {"arxiv_id": arxiv_id, "topic": slug, "label": bool(row["label"])}
                row |= {"reason": rows[arxiv_id]["reason"], "stratum": which[arxiv_id]}
                row["split"] = split_of(arxiv_id, slug)
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{slug}: +{len(rows)} labels")
    return 0


def attach() -> int:
    """Add ``stratum`` and ``split`` to every label file whose sample is known."""
    for path in sorted((ROOT / "evaluation" / "labels").glob("*.jsonl")):
        which = json.loads((OUT / f"{path.stem}.strata.json").read_text("utf-8"))
        rows = _read(path)
        missing = set(which) - {r["arxiv_id"] for r in rows}
        if missing:
            print(f"{path.stem}: {len(missing)} sampled papers have no label", file=sys.stderr)
            return 1
        with path.open("w", encoding="utf-8") as handle:
            for row in rows:
                row["stratum"] = which[row["arxiv_id"]]
                row["split"] = split_of(row["arxiv_id"], path.stem)
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{path.stem}: {len(rows)} labels")
    return 0


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-stratum", type=int, default=60)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--attach", action="store_true", help="add strata and splits to labels")
    parser.add_argument("--more", type=int, metavar="K", help="draw K more per stratum")
    parser.add_argument("--attach-more", action="store_true", help="append a further draw's labels")
    parser.add_argument("--topic", help="with --more: draw for this topic only")
    args = parser.parse_args()
    if args.attach:
        return attach()
    if args.attach_more:
        return attach_more()
    if not LISTINGS.exists():
        print(MISSING, file=sys.stderr)
        return 1
    frozen = frame()
    OUT.mkdir(parents=True, exist_ok=True)
    sizes: dict[str, dict[str, int]] = {}
    async with listings_store() as store:
        papers = {p.arxiv_id: p for p in await store.papers_after(0)}
        for slug, vocab in vocabulary().items():
            if args.more and args.topic and slug != args.topic:
                continue
            matched, near = await strata(store, slug, frozen[slug], vocab)
            sizes[slug] = {"matches": len(matched), "near_misses": len(near)}
            stem = slug
            if args.more:
                stem = f"{slug}.more"
                labelled = {
                    r["arxiv_id"] for r in _read(ROOT / "evaluation" / "labels" / f"{slug}.jsonl")
                }
                matched, near = matched - labelled, near - labelled
            rng = random.Random(f"{args.seed}/{slug}" + ("/more" if args.more else ""))
            k = args.more or args.per_stratum
            sample = {
                "match": rng.sample(sorted(matched), min(k, len(matched))),
                "near_miss": rng.sample(sorted(near), min(k, len(near))),
            }
            which = {i: stratum for stratum, ids in sample.items() for i in ids}
            order = sorted(which)
            rng.shuffle(order)
            with (OUT / f"{stem}.jsonl").open("w", encoding="utf-8") as handle:
                for arxiv_id in order:
                    p = papers[arxiv_id]
                    row = {"arxiv_id": arxiv_id, "title": p.title, "abstract": p.abstract}
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            (OUT / f"{stem}.strata.json").write_text(json.dumps(which, indent=1))
            print(
                f"{slug:34} matches {len(matched):5}  near misses {len(near):5}"
                f"  sampled {len(sample['match'])} + {len(sample['near_miss'])}"
            )
    if not args.more:
        STRATA.write_text(json.dumps(sizes, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
