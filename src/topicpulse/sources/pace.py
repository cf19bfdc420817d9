"""How long a backfill takes at arXiv's pace: the plan a start announces, and the time left
as it goes (measured on the days done so far).

``backfill_plan`` is the one place that knows how many requests a backfill sends: one per
missing day at least (a day with more papers than a page holds takes more), at least
``TOPICPULSE_ARXIV_DELAY_SECONDS`` apart (arXiv asks for 3 s). When the backfill's requests
change (e.g. OAI-PMH pages instead of one search a day), this function changes with them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BackfillPlan:
    days: int  # days still to fetch
    requests: int  # at least this many arXiv requests
    seconds: float  # at least this long: the requests at the configured delay

    def describe(self, delay_seconds: float) -> str:
        pace = f"one request every {delay_seconds:g} s" if delay_seconds else "no delay"
        return (
            f"{self.days} day(s), at least {self.requests} arXiv request(s): "
            f"at least {duration(self.seconds)} at {pace}"
        )


def backfill_plan(days: int, delay_seconds: float) -> BackfillPlan:
    """The backfill of ``days`` missing days: one request a day at least, ``delay`` apart."""
    requests = days
    return BackfillPlan(days, requests, requests * delay_seconds)


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
    """The time left of a backfill, from the pace of the days it did since it was made (the
    days a resumed backfill found done already are not counted)."""

    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)
    before: int | None = field(init=False, default=None)  # days done before this run

    def __post_init__(self) -> None:
        self.started = self.clock()

    def left(self, done: int, total: int) -> str:
        """``about 4 min left`` (or ``done``) after ``done`` of ``total`` days."""
        if done >= total:
            return "done"
        if self.before is None:  # the first report: the first day of this run is done
            self.before = done - 1
        elapsed = self.clock() - self.started
        return f"about {duration(elapsed / (done - self.before) * (total - done))} left"
