"""A reader's taste, measured the way a reader feels it: simulated readers replayed in time
order over the real listings (``../shared``), against today's behaviour (newest first,
nothing held back).

Each reader follows a topic and is shown its matches (the papers its catalogue query matched
when the labels were drawn), oldest first. It rates the first K it is shown truthfully
(K = 5, 10, 20, 40), the bot learns its taste from those alone (``insight.taste.fit`` on
``taste.vectors``: the code the bot runs, with the 300 papers published just before the K-th
as the background, as the bot takes the newest stored ones), and the reader is scored on
what comes after:

- digests: the later papers by week of publication (weekly digests; a week of 5 papers or
  fewer is left out: every order shows the same five); precision of the first 5 of each
  digest, in the taste's order vs newest first;
- instant alerts with holding back (only once K holds ≥ 5 👍 and ≥ 3 👎): precision of what
  was sent, the share of wanted papers held back (the price) and of unwanted ones (the gain).
  The reader follows the topic 4 weeks into the listings, so the bot has the topic's papers
  of those 4 weeks: a paper is held back when it scores below the HOLD × (1 − share)
  quantile of theirs, the share being what the reader's ratings say it wants (nothing is
  held back for a reader who wants half or more);
- /foryou: the 5 papers of the last 7 days the taste rates highest *outside* the topic's
  matches; precision@5 counts only papers labelled wanted (an unlabelled one counts as not
  wanted: a lower bound).

Readers (guides: ``evaluation/guides/``): the guide reader of each of the 12 labelled topics
(wanted = labelled on the topic), and narrower readers (``NARROW``) who follow a broad topic
but want only a part of it — a sub-field, an application area, a method family —, labelled
by the labels of the narrower topic (``evaluation/guides/narrow-readers.md``); their stream
is all of the broad topic's matches, and one the narrower topic's labels do not cover counts
as not wanted.

Readers are split (``TUNE``): the settings (C, background weight, hold-back threshold) are
chosen on the tuning readers at K = 20 and reported on the others. Intervals: 95% percentile
bootstrap over the readers' digests (resp. alerts), 2,000 resamples.

    .venv/bin/python bench/bench_taste.py [--tune]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evaluation"))
sys.path.insert(0, str(ROOT / "src"))

from corpus import LISTINGS, MISSING, listings_store  # noqa: E402
from report import read_labels  # noqa: E402

from topicpulse.insight import taste  # noqa: E402
from topicpulse.insight.similarity import Vector  # noqa: E402
from topicpulse.models import StoredPaper, parse_iso  # noqa: E402

KS = (5, 10, 20, 40)
TOP = 5
BOOTSTRAP = 2000
# (name, followed topic, the narrower topic whose labels say what the reader wants, kind)
NARROW = [
    ("reward models in RL-for-LMs", "rl-for-language-models", "reward-modeling", "sub-field"),
    ("agents in RL-for-LMs", "rl-for-language-models", "agentic-rl", "application area"),
    ("GRPO in RL-for-LMs", "rl-for-language-models", "grpo", "method family"),
    ("GRPO in LM reasoning", "rl-for-language-model-reasoning", "grpo", "method family"),
    ("reward models in alignment", "llm-alignment", "reward-modeling", "sub-field"),
]
TUNE = {  # readers the settings are chosen on; the figures are reported on the others
    "guide:agentic-rl",
    "guide:diffusion-models",
    "guide:grpo",
    "guide:knowledge-distillation",
    "guide:llm-alignment",
    "guide:medical-llms",
    "GRPO in LM reasoning",
    "reward models in alignment",
}
GRID = [(c, w, h) for c in (1.0, 3.0, 10.0) for w in (0.1, 0.3) for h in (0.3, 0.4, 0.5)]


@dataclass
class Reader:
    name: str
    narrow: bool
    stream: list[StoredPaper]  # shown, oldest first
    wanted: dict[str, bool]  # arXiv id → wanted, for every paper of the stream (and more)
    matched: set[str]  # the followed topic's matches (for /foryou: what lies outside)


@dataclass
class Outcome:
    digests: list[tuple[float, float]]  # (taste, newest first) precision@5 per later digest
    sent: list[bool]  # wanted? per alert sent with holding back
    held_wanted: int
    held_unwanted: int
    wanted_total: int
    unwanted_total: int
    foryou: float | None
    holds: bool


def readers(labels: dict, by_id: dict[str, StoredPaper]) -> list[Reader]:
    found = []
    for slug, rows in labels.items():
        matched = {lb.arxiv_id for lb in rows if lb.stratum == "match"}
        wanted = {lb.arxiv_id: lb.label for lb in rows}
        stream = sorted((by_id[a] for a in matched if a in by_id), key=lambda p: p.published)
        found.append(Reader(f"guide:{slug}", False, stream, wanted, matched))
    for name, follow, want, _ in NARROW:
        rows = labels[follow]
        matched = {lb.arxiv_id for lb in rows if lb.stratum == "match"}
        # wanted: labelled on the narrower topic (a match of the followed topic that its
        # labels do not cover is neither its match nor a near miss: taken as not wanted)
        wanted = {a: False for a in matched} | {lb.arxiv_id: lb.label for lb in labels[want]}
        stream = sorted((by_id[a] for a in matched if a in by_id), key=lambda p: p.published)
        found.append(Reader(name, True, stream, wanted, matched))
    return found


def precision(ids: Sequence[str], wanted: dict[str, bool]) -> float:
    return sum(wanted.get(i, False) for i in ids) / len(ids)


def replay(
    reader: Reader,
    k: int,
    vectors: dict[str, Vector],
    timeline: list[StoredPaper],
    settings: tuple[float, float, float],
) -> Outcome | None:
    c, weight, hold = settings
    # the reader follows the topic 4 weeks into the listings: the bot has those 4 weeks of the
    # topic's papers (the hold-back reference); it rates the first K it is shown after that
    joined = parse_iso(timeline[0].published) + timedelta(days=taste.REFERENCE_DAYS)
    split = next((i for i, p in enumerate(reader.stream) if parse_iso(p.published) >= joined), 0)
    reference, shown = reader.stream[:split], reader.stream[split:]
    if len(shown) < k + TOP or not reference:
        return None
    rated, later = shown[:k], shown[k:]
    liked = [vectors[p.arxiv_id] for p in rated if reader.wanted[p.arxiv_id]]
    disliked = [vectors[p.arxiv_id] for p in rated if not reader.wanted[p.arxiv_id]]
    cut = rated[-1].published
    before = [p for p in timeline if p.published <= cut][-taste.BACKGROUND - k :]
    seen = {p.arxiv_id for p in rated}
    background = [vectors[p.arxiv_id] for p in before if p.arxiv_id not in seen][
        -taste.BACKGROUND :
    ]
    model = taste.fit(liked, disliked, background, c=c, background_weight=weight)
    if model is None:
        return None
    model = model.with_floor([vectors[p.arxiv_id] for p in reference], hold=hold)
    score = {p.arxiv_id: model.score(vectors[p.arxiv_id]) for p in later}
    weeks: dict[tuple[int, int], list[StoredPaper]] = {}
    for p in later:
        weeks.setdefault(parse_iso(p.published).isocalendar()[:2], []).append(p)
    digests = []
    for papers in weeks.values():
        if len(papers) <= TOP:
            continue  # every order shows the same papers
        newest = [p.arxiv_id for p in sorted(papers, key=lambda p: p.published, reverse=True)]
        ours = sorted(newest, key=lambda a: -score[a])  # stable: newest first among equals
        digests.append(
            (precision(ours[:TOP], reader.wanted), precision(newest[:TOP], reader.wanted))
        )
    holds = model.holds_back
    held = {a for a in score if model.holds(score[a])}
    sent = [reader.wanted[p.arxiv_id] for p in later if p.arxiv_id not in held]
    wanted_total = sum(reader.wanted[p.arxiv_id] for p in later)
    held_wanted = sum(reader.wanted[a] for a in held)
    # /foryou: the last 7 days of the listings, outside the topic's matches
    end = parse_iso(timeline[-1].published)
    start = (end - timedelta(days=7)).isoformat()
    outside = [
        p
        for p in timeline
        if p.published >= start and p.arxiv_id not in reader.matched and p.arxiv_id not in seen
    ]
    best = sorted(outside, key=lambda p: -model.score(vectors[p.arxiv_id]))[:TOP]
    foryou = precision([p.arxiv_id for p in best], reader.wanted) if best else None
    return Outcome(
        digests,
        sent,
        held_wanted,
        len(held) - held_wanted,
        wanted_total,
        len(later) - wanted_total,
        foryou,
        holds,
    )


def interval(values: Sequence[float], rng: random.Random) -> tuple[float, float, float]:
    if not values:
        return float("nan"), float("nan"), float("nan")
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(BOOTSTRAP))
    return statistics.fmean(values), means[int(0.025 * BOOTSTRAP)], means[int(0.975 * BOOTSTRAP)]


def fmt(value: tuple[float, float, float]) -> str:
    m, lo, hi = value
    return f"{m:.2f} [{lo:.2f}–{hi:.2f}]"


@dataclass
class Summary:
    ours: tuple[float, float, float]
    newest: tuple[float, float, float]
    ratio: float
    sent_precision: tuple[float, float, float]
    baseline_precision: float
    wanted_held: float
    unwanted_held: float
    foryou: tuple[float, float, float]
    readers: int


def summarise(outcomes: Sequence[Outcome], rng: random.Random) -> Summary:
    ours = [o for out in outcomes for o, _ in out.digests]
    newest = [n for out in outcomes for _, n in out.digests]
    sent = [float(s) for out in outcomes for s in out.sent]
    wanted = sum(o.wanted_total for o in outcomes)
    unwanted = sum(o.unwanted_total for o in outcomes)
    ours_i, newest_i = interval(ours, rng), interval(newest, rng)
    return Summary(
        ours_i,
        newest_i,
        ours_i[0] / newest_i[0] if newest_i[0] else float("inf"),
        interval(sent, rng),
        (wanted / (wanted + unwanted)) if wanted + unwanted else float("nan"),
        sum(o.held_wanted for o in outcomes) / wanted if wanted else 0.0,
        sum(o.held_unwanted for o in outcomes) / unwanted if unwanted else 0.0,
        interval([o.foryou for o in outcomes if o.foryou is not None], rng),
        len(outcomes),
    )


def evaluate(
    group: Sequence[Reader],
    k: int,
    vectors: dict[str, Vector],
    timeline: list[StoredPaper],
    settings: tuple[float, float, float],
) -> list[Outcome]:
    return [o for r in group if (o := replay(r, k, vectors, timeline, settings)) is not None]


def tune(
    tuning: Sequence[Reader], vectors: dict[str, Vector], timeline: list[StoredPaper]
) -> tuple[float, float, float]:
    """The grid's best at K = 20 on the tuning readers: narrow readers' top-5 precision, with
    at most 10% of their wanted papers and 3% of the guide readers' held back."""
    rng = random.Random(5)
    best, chosen = -1.0, GRID[0]
    for settings in GRID:
        narrow = summarise(
            evaluate([r for r in tuning if r.narrow], 20, vectors, timeline, settings), rng
        )
        guide = summarise(
            evaluate([r for r in tuning if not r.narrow], 20, vectors, timeline, settings), rng
        )
        ok = narrow.wanted_held <= 0.10 and guide.wanted_held <= 0.03
        goal = narrow.ours[0] + guide.ours[0] + narrow.unwanted_held * 0.5
        print(
            f"  C={settings[0]:<4} bg={settings[1]:<4} hold={settings[2]:<4} narrow top-5 "
            f"{narrow.ours[0]:.2f} guide {guide.ours[0]:.2f} held: narrow wanted "
            f"{narrow.wanted_held:.0%} unwanted {narrow.unwanted_held:.0%}, guide wanted "
            f"{guide.wanted_held:.0%}{'' if ok else '  (over the limits)'}"
        )
        if ok and goal > best:
            best, chosen = goal, settings
    return chosen


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tune", action="store_true", help="search the grid on the tuning readers")
    args = parser.parse_args()
    if not LISTINGS.exists():
        print(MISSING)
        return 1
    labels = read_labels()
    async with listings_store() as store:
        papers = await store.recent_papers(100_000)
        vs = await taste.vectors(store, papers)
    vectors = {p.arxiv_id: v for p, v in zip(papers, vs, strict=True)}
    timeline = sorted(papers, key=lambda p: p.published)
    by_id = {p.arxiv_id: p for p in papers}
    everyone = readers(labels, by_id)
    tuning = [r for r in everyone if r.name in TUNE]
    reported = [r for r in everyone if r.name not in TUNE]
    settings = (taste.C, taste.BACKGROUND_WEIGHT, taste.HOLD)
    if args.tune:
        print(f"tuning on {len(tuning)} readers (K = 20):")
        settings = tune(tuning, vectors, timeline)
        print(f"chosen: C={settings[0]} background weight={settings[1]} hold {settings[2]}")
    print(
        f"\nsettings: C={settings[0]}, background weight {settings[1]}, hold back below the "
        f"{settings[2]} × (1 − share wanted) quantile of the topic's last 4 weeks (after "
        f"≥ {taste.MIN_UP} 👍 and ≥ {taste.MIN_DOWN} 👎, and for a share < {taste.MOST}); "
        f"reported on {len(reported)} readers not used for tuning"
    )
    rng = random.Random(7)
    for label, group in (
        ("narrower readers", [r for r in reported if r.narrow]),
        ("guide readers", [r for r in reported if not r.narrow]),
    ):
        print(f"\n{label}: {', '.join(r.name for r in group)}")
        for k in KS:
            s = summarise(evaluate(group, k, vectors, timeline, settings), rng)
            print(
                f"  K={k:<3} top-5 digest precision {fmt(s.ours)} vs newest first "
                f"{fmt(s.newest)} (×{s.ratio:.2f}) · alerts sent precision {fmt(s.sent_precision)}"
                f" vs {s.baseline_precision:.2f} · held back: wanted {s.wanted_held:.1%}, "
                f"unwanted {s.unwanted_held:.1%} · /foryou p@5 {fmt(s.foryou)}"
                f" ({s.readers} readers)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
