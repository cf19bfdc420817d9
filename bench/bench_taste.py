"""A reader's taste, measured the way a reader feels it: simulated readers replayed in time
order over the real listings (``../shared``), against today's behaviour (newest first,
nothing held back).

Each simulated reader follows a topic, starts following ``join`` days into the listings (7,
14, 21, 28 or 35: five readers of each interest), rates the first K papers it is shown
truthfully (K = 5, 10, 20, 40), the bot learns its taste from those alone, and the reader is
scored on what comes after (``_taste_replay.py``: readers, replays, the bot's code):

- digests: the later papers by week of publication; precision of the first 5 of each weekly
  digest, in the taste's order vs newest first (a week of 5 papers or fewer is left out);
- instant alerts with holding back (``taste.hold_floor``; never before ≥ 5 👍 and ≥ 3 👎, never
  spike alerts): the share of the reader's unwanted later papers held back (the gain) and of
  its wanted ones (the price), over all readers and over those whose holding back is on, and
  the precision of what was sent;
- /foryou: the 5 papers of the listings' last 7 days the taste rates highest *outside* the
  topic's matches; precision@5 counts only papers labelled wanted (a lower bound).

Readers: the guide reader of each of the 12 labelled topics, and 8 narrower readers who follow
a broad topic but want a minority of it (``evaluation/guides/narrow-readers.md``, labels in
``evaluation/narrow/``). ``TUNE`` splits them, fixed before the narrower readers' labels were
read: the hold-back settings are chosen on the tuning readers at K = 20 (``--tune``), and the
figures are reported on the others. Intervals: 95% percentile bootstrap over simulated readers
(reader × join day; a reader's digests and alerts stay together), 2,000 resamples.

    .venv/bin/python bench/bench_taste.py [--tune] [--min-up N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from _taste_replay import (
    LISTINGS_MISSING,
    Replay,
    auc,
    digests,
    held,
    listings,
    readers,
    replay,
)
from topicpulse.insight import taste

KS = (5, 10, 20, 40)
JOINS = (7, 14, 21, 28, 35)
BOOTSTRAP = 2000
TUNE = {  # readers the settings are chosen on; the figures are reported on the others
    "guide:agentic-rl",
    "guide:diffusion-models",
    "guide:grpo",
    "guide:knowledge-distillation",
    "guide:llm-alignment",
    "guide:medical-llms",
    "narrow:rl-agents",
    "narrow:graph-rag",
    "narrow:clinical-records",
    "narrow:preference-optimisation",
}
HOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
MOSTS = (0.5, 0.6, 0.7)
MIN_UPS = (2, 3, 4, 5)  # 👍 before holding back (with ≥ taste.MIN_DOWN 👎)
WANTED_LIMIT = {True: 0.10, False: 0.03}  # narrower readers, guide readers (issue 24)

Interval = tuple[float, float, float]


def interval(runs: Sequence[Replay], stat: Callable[[Sequence[Replay]], float]) -> Interval:
    """``stat`` of the runs and its 95% bootstrap interval (runs resampled, seeded)."""
    if not runs:
        return float("nan"), float("nan"), float("nan")
    rng = random.Random(7)
    draws = sorted(stat(rng.choices(runs, k=len(runs))) for _ in range(BOOTSTRAP))
    return stat(runs), draws[int(0.025 * BOOTSTRAP)], draws[int(0.975 * BOOTSTRAP)]


def fmt(value: Interval, pct: bool = False) -> str:
    m, lo, hi = value
    if m != m:  # nan: no run to measure
        return "—"
    if pct:
        return f"{m:.0%} [{lo:.0%}–{hi:.0%}]"
    return f"{m:.2f} [{lo:.2f}–{hi:.2f}]"


_digests: dict[int, list[tuple[float, float]]] = {}


def digest_mean(runs: Sequence[Replay], which: int) -> float:
    """Mean top-5 precision of the runs' later digests, in the taste's order (0) or newest
    first (1)."""
    values = []
    for run in runs:
        if id(run) not in _digests:
            _digests[id(run)] = digests(run)
        values += [d[which] for d in _digests[id(run)]]
    return statistics.fmean(values) if values else float("nan")


class Holding:
    """What holding back does to each run under settings (hold, most), counted once per run:
    (wanted held, wanted, unwanted held, unwanted, wanted sent, sent)."""

    def __init__(self, hold: float, most: float) -> None:
        self.hold, self.most = hold, most
        self._counts: dict[int, tuple[int, int, int, int, int, int]] = {}

    def counts(self, run: Replay) -> tuple[int, int, int, int, int, int]:
        if id(run) not in self._counts:
            chosen = held(run, self.hold, self.most)
            wanted = [run.reader.wanted[p.arxiv_id] for p in run.later]
            hit = [p.arxiv_id in chosen for p in run.later]
            self._counts[id(run)] = (
                sum(w and h for w, h in zip(wanted, hit, strict=True)),
                sum(wanted),
                sum(h and not w for w, h in zip(wanted, hit, strict=True)),
                len(wanted) - sum(wanted),
                sum(w and not h for w, h in zip(wanted, hit, strict=True)),
                len(wanted) - sum(hit),
            )
        return self._counts[id(run)]

    def share(self, runs: Sequence[Replay], wanted: bool) -> float:
        """The share of the runs' wanted (resp. unwanted) later papers held back."""
        at = 0 if wanted else 2
        hit = sum(self.counts(r)[at] for r in runs)
        total = sum(self.counts(r)[at + 1] for r in runs)
        return hit / total if total else 0.0

    def sent_precision(self, runs: Sequence[Replay]) -> float:
        sent = sum(self.counts(r)[5] for r in runs)
        return sum(self.counts(r)[4] for r in runs) / sent if sent else float("nan")

    def on(self, runs: Sequence[Replay]) -> list[Replay]:
        """The runs whose holding back is on (enough ratings of both kinds, a share < most)."""
        return [
            r
            for r in runs
            if r.model and r.model.with_floor(r.reference, hold=self.hold, most=self.most).floor
        ]


def tune(runs: Sequence[Replay]) -> tuple[float, float, int]:
    """The grid's best at K = 20 on the tuning readers: the most of the narrower readers'
    unwanted papers held back (over all of them, holding on or not: what the reader feels),
    with at most 10% of their wanted ones and 3% of the guide readers' wanted ones held back.
    The grid includes how many 👍 holding back waits for (``taste.MIN_UP``)."""
    narrow = [r for r in runs if r.reader.narrow and r.k == 20]
    guide = [r for r in runs if not r.reader.narrow and r.k == 20]
    best, chosen = -1.0, (taste.HOLD, taste.MOST, taste.MIN_UP)
    kept = taste.MIN_UP
    try:
        for min_up in MIN_UPS:
            taste.MIN_UP = min_up
            for most in MOSTS:
                for hold in HOLDS:
                    h = Holding(hold, most)
                    on = h.on(narrow)
                    gain, price = h.share(narrow, False), h.share(narrow, True)
                    guide_price = h.share(guide, True)
                    ok = price <= WANTED_LIMIT[True] and guide_price <= WANTED_LIMIT[False]
                    print(
                        f"  from {min_up} 👍, hold {hold:<4} most {most:<4} narrower readers "
                        f"(holding on for {len(on)}/{len(narrow)}): unwanted held {gain:.0%}, "
                        f"wanted held {price:.1%} · guide readers: wanted held "
                        f"{guide_price:.1%}{'' if ok else '  (over the limits)'}"
                    )
                    if ok and gain > best:
                        best, chosen = gain, (hold, most, min_up)
    finally:
        taste.MIN_UP = kept
    return chosen


def report(label: str, runs: Sequence[Replay], h: Holding) -> None:
    names = sorted({r.reader.name for r in runs})
    print(f"\n{label} ({len(names)}): {', '.join(n.split(':', 1)[1] for n in names)}")
    for k in KS:
        group = [r for r in runs if r.k == k]
        ours, newest = (
            interval(group, lambda g: digest_mean(g, 0)),
            interval(group, lambda g: digest_mean(g, 1)),
        )
        on = h.on(group)
        foryou = [r for r in group if r.foryou is not None]
        print(
            f"  K={k:<3} {len(group)} readers · digest top-5 precision {fmt(ours)} vs newest "
            f"first {fmt(newest)} (×{ours[0] / newest[0]:.2f}) · /foryou p@5 "
            f"{fmt(interval(foryou, lambda g: statistics.fmean(r.foryou for r in g)))}"
        )
        everyone = (
            interval(group, lambda g: h.share(g, False)),
            interval(group, lambda g: h.share(g, True)),
        )
        once = (interval(on, lambda g: h.share(g, False)), interval(on, lambda g: h.share(g, True)))
        print(
            f"        held back, all readers: unwanted {fmt(everyone[0], True)}, wanted "
            f"{fmt(everyone[1], True)} · holding on for {len(on)}: unwanted "
            f"{fmt(once[0], True)}, wanted {fmt(once[1], True)} · alerts sent precision "
            f"{h.sent_precision(group):.2f} vs {Holding(0, 0).sent_precision(group):.2f}"
        )


def per_reader(runs: Sequence[Replay], h: Holding, k: int = 20) -> None:
    print(
        f"\nper narrower reader at K = {k}, join days {', '.join(map(str, JOINS))}: 👍 among the "
        f"{k}, how well the taste ranks the later papers (AUC), top-5 digest precision (taste vs "
        f"newest first), share of unwanted and wanted papers held back:"
    )
    for name in sorted({r.reader.name for r in runs if r.reader.narrow}):
        mine = [r for r in runs if r.reader.name == name and r.k == k]
        ups = " ".join(str(r.model.up if r.model else 0) for r in mine)
        aucs = " ".join(f"{a:.2f}" if (a := auc(r)) is not None else "  — " for r in mine)
        split = "tune" if name in TUNE else "test"
        print(
            f"  {name:31} {split}  👍 {ups:11}  AUC {aucs}  digest {digest_mean(mine, 0):.2f} "
            f"vs {digest_mean(mine, 1):.2f}  held {h.share(mine, False):3.0%} "
            f"{h.share(mine, True):3.0%}"
        )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--tune", action="store_true", help="choose HOLD, MOST, MIN_UP on the tuning readers"
    )
    parser.add_argument(
        "--min-up", type=int, help="what-if: 👍 needed before holding back (not the bot's)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    found = await listings()
    if found is None:
        print(LISTINGS_MISSING)
        return 1
    vectors, timeline = found
    if args.min_up is not None:
        taste.MIN_UP = args.min_up
        print(f"what-if: holding back from {args.min_up} 👍 and {taste.MIN_DOWN} 👎 on")
    by_id = {p.arxiv_id: p for p in timeline}
    settings = (taste.C, taste.BACKGROUND_WEIGHT)
    runs = [
        run
        for reader in readers(by_id)
        for join in JOINS
        for k in KS
        if (run := replay(reader, join, k, vectors, timeline, settings)) is not None
    ]
    tuning = [r for r in runs if r.reader.name in TUNE]
    reported = [r for r in runs if r.reader.name not in TUNE]
    hold, most = taste.HOLD, taste.MOST
    if args.tune:
        print(f"tuning on {len({r.reader.name for r in tuning})} readers (K = 20):")
        hold, most, taste.MIN_UP = tune(tuning)
        print(f"chosen: HOLD = {hold}, MOST = {most}, MIN_UP = {taste.MIN_UP}")
    print(
        f"\nsettings: C = {settings[0]}, background weight {settings[1]}; hold back below the "
        f"{hold} × (1 − s) quantile of the topic's last {taste.REFERENCE_DAYS} days, s = 👍 / "
        f"(👍 + 👎) < {most}, after ≥ {taste.MIN_UP} 👍 and ≥ {taste.MIN_DOWN} 👎; reported on "
        f"readers not used for tuning"
    )
    h = Holding(hold, most)
    report("narrower readers", [r for r in reported if r.reader.narrow], h)
    report("guide readers", [r for r in reported if not r.reader.narrow], h)
    per_reader(runs, h)
    print(f"\n{len(runs)} simulated readers in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
