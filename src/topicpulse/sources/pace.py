"""How long a backfill takes at arXiv's pace: the plan a start announces, and the time left
as it goes (measured on the pages done so far).

``backfill_plan`` is the one place that knows how many requests a history harvest sends:
OAI-PMH pages of 2,000 records, one harvest per set, at least ``TOPICPULSE_ARXIV_DELAY_SECONDS``
apart (arXiv asks for 3 s). How many records the weeks hold is not known before the first page,
so the plan assumes what ``bench/bench_intake.py`` simulates for the default categories: about
1,500 records an announcement evening, five evenings a week.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

RECORDS_PER_WEEK = 5 * 1_500  # changed records a week, default categories (an assumption)
PAGE_RECORDS = 2_000  # arXiv's OAI-PMH page


@dataclass(frozen=True, slots=True)
class BackfillPlan:
    weeks: float
    requests: int  # about this many arXiv requests
    seconds: float  # at least this long: the requests at the configured delay

    def describe(self, delay_seconds: float) -> str:
        pace = f"one request every {delay_seconds:g} s" if delay_seconds else "no delay"
        return (
            f"about {self.requests} OAI-PMH page(s) of {PAGE_RECORDS:,} records: "
            f"at least {duration(self.seconds)} at {pace}"
        )


def backfill_plan(weeks: float, sets: int, delay_seconds: float) -> BackfillPlan:
    """The history of ``weeks`` weeks over ``sets`` OAI-PMH sets, ``delay`` apart."""
    requests = max(sets, math.ceil(weeks * RECORDS_PER_WEEK / PAGE_RECORDS) + sets - 1)
    return BackfillPlan(weeks, requests, max(requests - 1, 0) * delay_seconds)


def weeks_text(weeks: float) -> str:
    return f"{weeks:g} week" + ("" if weeks == 1 else "s")


def duration(seconds: float) -> str:
    """``40 s``, ``4 min``, ``1 h 25 min``: a rough figure for a person."""
    if seconds < 90:
        return f"{round(seconds)} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


@dataclass(slots=True)
class Pace:
    """The time left of a backfill, from the pace of the pages it read since it was made (the
    pages a resumed harvest read before are not counted)."""

    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)
    before: int | None = field(init=False, default=None)  # pages done before this run

    def __post_init__(self) -> None:
        self.started = self.clock()

    def left(self, done: int, total: int) -> str:
        """``about 4 min left`` (or ``done``) after ``done`` of ``total`` pages."""
        if done >= total:
            return "done"
        if self.before is None:  # the first report: the first page of this run is done
            self.before = done - 1
        elapsed = self.clock() - self.started
        return f"about {duration(elapsed / (done - self.before) * (total - done))} left"
