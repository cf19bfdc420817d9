"""arXiv's calendar: announcement evenings, each interface's update time, daylight saving."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from topicpulse.sources.calendar import (
    FEED_LAG,
    Calendar,
    keep_waiting,
    retry_delay,
)

OAI = Calendar()


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_announcements_are_sunday_to_thursday_evenings() -> None:
    week = [date(2026, 3, 1) + timedelta(days=n) for n in range(7)]  # Sunday … Saturday
    assert [OAI.announces_on(d) for d in week] == [True, True, True, True, True, False, False]


def test_the_eastern_hour_holds_across_daylight_saving() -> None:
    # Thursday 5 March 2026 is still standard time (UTC-5): 20:00 EST is 01:00 UTC Friday.
    assert OAI.announcement(date(2026, 3, 5)) == utc("2026-03-06T01:00")
    # Daylight saving starts on Sunday 8 March at 02:00: that evening is UTC-4.
    assert OAI.announcement(date(2026, 3, 8)) == utc("2026-03-09T00:00")
    # It ends on Sunday 1 November: that evening is UTC-5 again.
    assert OAI.announcement(date(2026, 10, 29)) == utc("2026-10-30T00:00")
    assert OAI.announcement(date(2026, 11, 1)) == utc("2026-11-02T01:00")
    # OAI-PMH has it about two and a half hours later, the feeds around midnight Eastern.
    assert OAI.update(date(2026, 3, 8)) == utc("2026-03-09T02:30")
    feeds = Calendar.of(lag=FEED_LAG)
    assert feeds.update(date(2026, 3, 8)) == utc("2026-03-09T04:15")


def test_after_thursdays_update_the_next_is_sundays() -> None:
    thursday = OAI.update(date(2026, 3, 5))
    assert OAI.next_update(thursday - timedelta(seconds=1)) == (date(2026, 3, 5), thursday)
    # strictly after: at the update itself, the next one is Sunday's (Friday and Saturday skip)
    assert OAI.next_update(thursday) == (date(2026, 3, 8), utc("2026-03-09T02:30"))
    assert OAI.next_update(utc("2026-03-07T12:00")) == (date(2026, 3, 8), utc("2026-03-09T02:30"))


def test_a_moment_just_after_midnight_utc_belongs_to_the_right_evening() -> None:
    # 2026-03-10T01:00Z is Monday 21:00 EDT: Monday's announcement happened, its update has not.
    assert OAI.next_update(utc("2026-03-10T01:00")) == (date(2026, 3, 9), utc("2026-03-10T02:30"))
    assert OAI.last_update(utc("2026-03-10T01:00")) == date(2026, 3, 8)
    assert OAI.last_update(utc("2026-03-10T02:30")) == date(2026, 3, 9)


def test_holidays_are_skipped() -> None:
    christmas = Calendar.of([date(2026, 12, 24), date(2026, 12, 27)])
    assert not christmas.announces_on(date(2026, 12, 24))
    evening, _ = christmas.next_update(utc("2026-12-24T12:00"))
    assert evening == date(2026, 12, 28)  # Thursday 24th and Sunday 27th are off
    assert christmas.last_update(utc("2026-12-28T12:00")) == date(2026, 12, 23)


def test_three_days_down_miss_exactly_the_evenings_in_between() -> None:
    since = utc("2026-03-09T12:00")  # Monday, after Sunday's update
    until = utc("2026-03-12T12:00")  # Thursday, after Wednesday's update
    assert OAI.updates_between(since, until) == [
        date(2026, 3, 9),
        date(2026, 3, 10),
        date(2026, 3, 11),
    ]
    # a weekend costs nothing: Thursday's update, then none until Sunday's
    assert OAI.updates_between(utc("2026-03-12T12:00"), utc("2026-03-09T00:00")) == []
    weekend = OAI.updates_between(utc("2026-03-13T12:00"), utc("2026-03-15T23:00"))
    assert weekend == []
    assert OAI.updates_between(since, since) == []


@pytest.mark.parametrize(
    ("attempt", "minutes"), [(0, 15), (1, 30), (2, 60), (3, 120), (4, 120), (50, 120)]
)
def test_not_yet_is_retried_with_backoff(attempt: int, minutes: int) -> None:
    assert retry_delay(attempt) == timedelta(minutes=minutes)


def test_an_update_missing_all_night_is_taken_as_no_announcement() -> None:
    expected = OAI.update(date(2026, 3, 9))
    assert keep_waiting(expected, expected + timedelta(hours=3))
    assert not keep_waiting(expected, expected + timedelta(hours=10))


# ------------------------------------------------------------------------- the schedule
def test_the_schedule_sleeps_until_shortly_after_the_next_update() -> None:
    from topicpulse.sources.calendar import AFTER_UPDATE, Calendar, Schedule

    schedule = Schedule(Calendar())
    thursday_noon = datetime(2026, 5, 21, 16, 0, tzinfo=UTC)  # Wednesday's update was seen
    at = schedule.next_look(thursday_noon, "2026-05-21")
    assert at == Calendar().update(date(2026, 5, 21)) + AFTER_UPDATE  # Thursday evening's


def test_friday_and_saturday_evenings_cost_no_request() -> None:
    from topicpulse.sources.calendar import Calendar, Schedule

    schedule = Schedule(Calendar())
    after_thursday = datetime(2026, 5, 22, 4, 0, tzinfo=UTC)  # Thursday's update arrived
    at = schedule.next_look(after_thursday, "2026-05-22")
    assert at.astimezone(Calendar().announcement(date(2026, 5, 24)).tzinfo) > Calendar().update(
        date(2026, 5, 24)
    )
    assert at - Calendar().update(date(2026, 5, 24)) == timedelta(minutes=10)  # Sunday next
    assert schedule.attempts == 0


def test_an_update_not_there_yet_is_asked_again_with_backoff_then_given_up() -> None:
    from topicpulse.sources.calendar import Calendar, Schedule

    calendar = Calendar()
    expected = calendar.update(date(2026, 5, 20))  # Wednesday evening's
    schedule = Schedule(calendar)
    now, waits = expected + timedelta(minutes=10), []
    while True:
        at = schedule.next_look(now, "2026-05-20")  # still Wednesday morning's records
        waits.append(at - now)
        if schedule.attempts == 0:
            break
        now = at
    assert waits[:4] == [timedelta(minutes=m) for m in (15, 30, 60, 120)]
    assert all(w <= timedelta(hours=2) for w in waits[:-1]) and len(waits) <= 9
    assert now - expected >= timedelta(hours=9)  # kept asking for most of the night
    at = Schedule(calendar).next_look(expected + timedelta(minutes=20), "2026-05-21")
    assert at == calendar.update(date(2026, 5, 21)) + timedelta(minutes=10)  # appeared
