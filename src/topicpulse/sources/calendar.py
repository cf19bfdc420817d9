"""arXiv's calendar: when its daily announcement happens and when each interface has it.

arXiv announces new papers once a day, Sunday to Thursday evenings at 20:00 US Eastern time,
and not on Friday or Saturday evenings, nor on its holidays (arXiv publishes them each year;
they are configuration here, and a missed one costs only the retries of one evening). Its
interfaces follow the announcement: OAI-PMH holds the new metadata about two hours later, the
RSS/Atom listing feeds are rebuilt around midnight Eastern. So a polite client asks once,
shortly after the update it expects, and otherwise sleeps.

Times are computed in ``America/New_York`` with ``zoneinfo`` (so daylight-saving changes move
the UTC hour, not the Eastern one) and returned in UTC. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

EASTERN = ZoneInfo("America/New_York")
ANNOUNCE_AT = time(20, 0)  # Eastern
ANNOUNCE_WEEKDAYS = frozenset({6, 0, 1, 2, 3})  # Sunday … Thursday evenings (Monday is 0)
OAI_LAG = timedelta(hours=2, minutes=30)  # OAI-PMH: "around 10:30pm" Eastern
FEED_LAG = timedelta(hours=4, minutes=15)  # the feeds: rebuilt around midnight Eastern
FIRST_RETRY = timedelta(minutes=15)
MAX_RETRY = timedelta(hours=2)
GIVE_UP_AFTER = timedelta(hours=10)  # an update this late is taken as no announcement


@dataclass(frozen=True, slots=True)
class Calendar:
    """The announcement evenings (Eastern dates) and when an interface has each update."""

    holidays: frozenset[date] = frozenset()  # Eastern evenings without an announcement
    lag: timedelta = OAI_LAG  # after the announcement, until the interface has it

    @classmethod
    def of(cls, holidays: Iterable[date] = (), *, lag: timedelta = OAI_LAG) -> Calendar:
        return cls(frozenset(holidays), lag)

    def announces_on(self, evening: date) -> bool:
        """Whether arXiv announces on the evening of this Eastern date."""
        return evening.weekday() in ANNOUNCE_WEEKDAYS and evening not in self.holidays

    def announcement(self, evening: date) -> datetime:
        """The moment (UTC) of that evening's announcement, whether or not there is one."""
        return datetime.combine(evening, ANNOUNCE_AT, EASTERN).astimezone(UTC)

    def update(self, evening: date) -> datetime:
        """When the interface is expected to hold that evening's announcement (UTC)."""
        return self.announcement(evening) + self.lag

    def evenings(self, start: date) -> Iterator[date]:
        """The announcement evenings from ``start`` on, in order."""
        day = start
        while True:
            if self.announces_on(day):
                yield day
            day += timedelta(days=1)

    def next_update(self, after: datetime) -> tuple[date, datetime]:
        """The first expected update strictly after ``after``: its evening and moment (UTC)."""
        start = after.astimezone(EASTERN).date() - timedelta(days=1)
        for evening in self.evenings(start):
            at = self.update(evening)
            if at > after:
                return evening, at
        raise AssertionError("unreachable: evenings() never ends")

    def last_update(self, at: datetime) -> date | None:
        """The evening of the latest update expected at or before ``at`` (within two weeks)."""
        day = at.astimezone(EASTERN).date()
        for _ in range(15):
            if self.announces_on(day) and self.update(day) <= at:
                return day
            day -= timedelta(days=1)
        return None

    def updates_between(self, since: datetime, until: datetime) -> list[date]:
        """The evenings whose update is expected in ``(since, until]``: what a bot down over
        that stretch has missed, oldest first."""
        found = []
        for evening in self.evenings(since.astimezone(EASTERN).date() - timedelta(days=1)):
            at = self.update(evening)
            if at > until:
                return found
            if at > since:
                found.append(evening)
        raise AssertionError("unreachable: evenings() never ends")


def retry_delay(attempt: int) -> timedelta:
    """How long to wait before asking again for an update that has not appeared yet:
    15 minutes, doubling, at most 2 hours (``attempt`` counts from 0)."""
    return min(FIRST_RETRY * (2 ** min(attempt, 10)), MAX_RETRY)


def keep_waiting(expected: datetime, now: datetime) -> bool:
    """Whether an update still missing at ``now`` may yet come (a late announcement), or the
    evening is taken as one without an announcement (an unlisted holiday)."""
    return now - expected < GIVE_UP_AFTER


AFTER_UPDATE = timedelta(minutes=10)  # wake this long after an update is expected


def appeared(evening: date, newest_stamp: str | None) -> bool:
    """Whether an evening's update has been harvested: its records carry the next day's
    datestamp (arXiv dates the announcement of Sunday 20:00 Eastern on Monday)."""
    return (
        bool(newest_stamp) and str(newest_stamp)[:10] >= (evening + timedelta(days=1)).isoformat()
    )


@dataclass(slots=True)
class Schedule:
    """When the intake looks next: shortly after each expected update; while an expected update
    has not appeared, again with backoff (``retry_delay``) until ``keep_waiting`` gives up on
    it; otherwise not until the next one. Friday and Saturday evenings and holidays cost
    nothing."""

    calendar: Calendar = Calendar()
    attempts: int = 0  # looks in a row that did not find the awaited update

    def next_look(self, now: datetime, newest_stamp: str | None) -> datetime:
        evening = self.calendar.last_update(now)
        if evening is not None and not appeared(evening, newest_stamp):
            expected = self.calendar.update(evening)
            if keep_waiting(expected, now):
                delay = retry_delay(self.attempts)
                self.attempts += 1
                _, following = self.calendar.next_update(now)
                return min(now + delay, following + AFTER_UPDATE)
        self.attempts = 0
        _, at = self.calendar.next_update(now)
        return at + AFTER_UPDATE
