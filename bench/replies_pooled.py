"""Pool several runs of bench_replies.py: the reply-latency goal with an interval.

One run's busy p95 rests on its ~6 slowest of ~120 replies, and runs on this 2-core machine
differ by ±0.3 in the ratio busy p95 / idle p95. So the goal (≤ 1.5) is judged on runs
pooled: each run appends its latencies by state (``bench_replies.py --samples FILE``); this
prints each run's ratio, the pooled one, and a 90% interval for it from resampling whole
runs (the machine's state varies by run, so runs, not replies, are the units drawn).

    for i in 1 2 3 4 5 6; do
        python bench/bench_replies.py --raters 1000 --samples bench/out/replies-samples.jsonl
    done
    python bench/replies_pooled.py bench/out/replies-samples.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from _support import percentile

GOAL = 1.5
DRAWS = 2000


def ratio(runs: list[dict[str, list[float]]]) -> float:
    busy = [x for run in runs for x in run["busy"]]
    idle = [x for run in runs for x in run["idle"]]
    return percentile(busy, 95) / percentile(idle, 95)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", type=Path, help="the JSON-lines file runs appended to")
    parser.add_argument("--raters", type=int, help="only runs with this many raters")
    args = parser.parse_args()
    lines = [json.loads(line) for line in args.samples.read_text("utf-8").splitlines() if line]
    if args.raters is not None:
        lines = [line for line in lines if line["raters"] == args.raters]
    lines = [line for line in lines if line["latency"]["busy"] and line["latency"]["idle"]]
    runs = [line["latency"] for line in lines]
    if not runs:
        print("no runs with both idle and busy replies")
        return 1
    for line, run in zip(lines, runs, strict=True):
        print(
            f"  {line['at']}  raters {line['raters']:>5}  idle p95 "
            f"{percentile(run['idle'], 95) * 1000:5.1f} ms  busy p95 "
            f"{percentile(run['busy'], 95) * 1000:5.1f} ms  ratio {ratio([run]):.2f}"
        )
    rng = random.Random(8)
    draws = sorted(ratio(rng.choices(runs, k=len(runs))) for _ in range(DRAWS))
    low, high = draws[int(0.05 * DRAWS)], draws[int(0.95 * DRAWS) - 1]
    within = sum(ratio([run]) <= GOAL for run in runs)
    pooled = ratio(runs)
    counts = {state: sum(len(run[state]) for run in runs) for state in ("idle", "busy")}
    print(
        f"RESULT: {len(runs)} runs ({counts['idle']} idle and {counts['busy']} busy replies); "
        f"pooled busy p95 / idle p95 = {pooled:.2f} (90% interval over runs {low:.2f}–"
        f"{high:.2f}); {within} of {len(runs)} runs within {GOAL}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
