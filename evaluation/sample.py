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

Labellers write ``evaluation/labels/<slug>.jsonl`` ({arxiv_id, topic, label, reason}) without
seeing the strata; ``--attach`` then adds each label's ``stratum`` and ``split``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import sys
import tomllib

from corpus import LISTINGS, MISSING, ROOT, STRATA, listings_store, matches

from topicpulse.store import Store
from topicpulse.topics import load_catalogue

VOCABULARY = ROOT / "evaluation" / "vocabulary.toml"
OUT = ROOT / "bench" / "out" / "eval_candidates"


def split_of(arxiv_id: str, topic: str) -> str:
    """``tune`` or ``test``, half and half, fixed by the paper and the topic."""
    digest = hashlib.sha256(f"{topic}/{arxiv_id}".encode()).digest()
    return "tune" if digest[0] < 128 else "test"


def vocabulary() -> dict[str, str]:
    return tomllib.loads(VOCABULARY.read_text("utf-8"))["vocabulary"]  # type: ignore[no-any-return]


async def strata(
    store: Store, slug: str, topic_query: str, vocab: str
) -> tuple[set[str], set[str]]:
    """(matches, near misses) of one topic over the whole store, as arXiv ids."""
    matched = await matches(store, topic_query)
    return matched, await matches(store, vocab) - matched


def attach() -> int:
    """Add ``stratum`` and ``split`` to every label file whose sample is known."""
    for path in sorted((ROOT / "evaluation" / "labels").glob("*.jsonl")):
        which = json.loads((OUT / f"{path.stem}.strata.json").read_text("utf-8"))
        rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
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
    args = parser.parse_args()
    if args.attach:
        return attach()
    if not LISTINGS.exists():
        print(MISSING, file=sys.stderr)
        return 1
    catalogue = {e.slug: e for e in load_catalogue()}
    OUT.mkdir(parents=True, exist_ok=True)
    sizes: dict[str, dict[str, int]] = {}
    async with listings_store() as store:
        papers = {p.arxiv_id: p for p in await store.papers_after(0)}
        for slug, vocab in vocabulary().items():
            matched, near = await strata(store, slug, catalogue[slug].query, vocab)
            sizes[slug] = {"matches": len(matched), "near_misses": len(near)}
            rng = random.Random(f"{args.seed}/{slug}")
            sample = {
                "match": rng.sample(sorted(matched), min(args.per_stratum, len(matched))),
                "near_miss": rng.sample(sorted(near), min(args.per_stratum, len(near))),
            }
            which = {i: stratum for stratum, ids in sample.items() for i in ids}
            order = sorted(which)
            rng.shuffle(order)
            with (OUT / f"{slug}.jsonl").open("w", encoding="utf-8") as handle:
                for arxiv_id in order:
                    p = papers[arxiv_id]
                    row = {"arxiv_id": arxiv_id, "title": p.title, "abstract": p.abstract}
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            (OUT / f"{slug}.strata.json").write_text(json.dumps(which, indent=1))
            print(
                f"{slug:34} matches {len(matched):5}  near misses {len(near):5}"
                f"  sampled {len(sample['match'])} + {len(sample['near_miss'])}"
            )
    STRATA.write_text(json.dumps(sizes, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
