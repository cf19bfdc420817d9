"""arXiv request budget of the intake: requests per announcement evening, per evening without
one, and for a 12-week history, counted from the fake arXiv's request log (not from the code's
own counters), against the search-API polling this intake replaced.

The bot's real ``Ingestor`` and calendar ``Schedule`` run on a simulated clock over three weeks
(Sunday to Saturday, three times; one evening arXiv loads its update 70 minutes late, one a
holiday the configuration does not list). Each announcement is about 1,500 records of the
default categories — 1,000 new papers, 300 later cross-lists into them, 200 replacements —
which the fake's OAI-PMH endpoint holds from the evening's expected update time on, in pages
of 2,000 as arXiv's server sends them.

    .venv/bin/python bench/bench_intake.py           # ~1 minute
    .venv/bin/python bench/bench_intake.py --weeks 4 # a shorter history
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import tempfile
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from _support import fresh_db  # noqa: F401  (sets up sys.path for tests/ and src/)
from fake_arxiv import FakeArxiv, make_paper
from fake_oai import in_set
from topicpulse.config import DEFAULT_CATEGORIES
from topicpulse.models import Paper
from topicpulse.sources.arxiv import ArxivClient
from topicpulse.sources.calendar import Calendar, Schedule
from topicpulse.sources.ingest import Ingestor, harvest_sets
from topicpulse.store import Store

NEW, CROSS, REPLACED = 1_000, 300, 200
OLD_POLLS_A_DAY, OLD_PAGE, OLD_WINDOW_DAYS = 48, 1_000, 7  # the search-API poll replaced
START = date(2026, 11, 1)  # a Sunday
LATE = date(2026, 11, 10)  # Tuesday evening: the update loads 70 minutes late
UNLISTED_HOLIDAY = date(2026, 11, 19)  # Thursday evening: no announcement, not configured


class Timeline:
    """What the fake's OAI-PMH endpoint holds at each moment of the simulated three weeks."""

    def __init__(self, calendar: Calendar, seed: int = 7) -> None:
        self.calendar = calendar
        self.rng = random.Random(seed)
        self.versions: list[tuple[datetime, Paper, str]] = []  # (visible from, paper, stamp)
        self.serial = 0

    def _id(self, evening: date) -> str:
        self.serial += 1
        return f"{evening:%y%m}.{self.serial:05d}"

    def announce(self, evening: date, load_delay: timedelta = timedelta()) -> None:
        visible = self.calendar.update(evening) + load_delay
        stamp = (evening + timedelta(days=1)).isoformat()
        cats = DEFAULT_CATEGORIES
        stored = [p for _, p, _ in self.versions]
        for _ in range(NEW):
            pair = self.rng.sample(cats, 2)
            submitted = datetime.combine(evening, datetime.min.time(), UTC)
            paper = make_paper(
                self._id(evening),
                submitted - timedelta(hours=self.rng.randint(0, 40)),
                categories=pair,
            )
            self.versions.append((visible, paper, stamp))
        for _ in range(CROSS):  # first listed elsewhere, cross-listed into ours today
            first = datetime.combine(evening, datetime.min.time(), UTC) - timedelta(
                days=self.rng.randint(2, 20)
            )
            paper = make_paper(
                self._id(evening), first, categories=("math.OC", self.rng.choice(cats))
            )
            self.versions.append((visible, paper, stamp))
        for old in self.rng.sample(stored, min(REPLACED, len(stored))):
            newer = make_paper(
                old.arxiv_id,
                old.published,
                categories=old.categories,
                version=old.version + 1,
                updated=f"{stamp}T00:00:00Z",
            )
            self.versions.append((visible, newer, stamp))

    def at(self, moment: datetime) -> tuple[list[Paper], dict[str, str]]:
        latest: dict[str, tuple[Paper, str]] = {}
        for visible, paper, stamp in self.versions:
            if visible <= moment:
                latest[paper.arxiv_id] = (paper, stamp)
        return [p for p, _ in latest.values()], {i: s for i, (_, s) in latest.items()}


async def simulate_intake(weeks: int) -> None:
    calendar = Calendar.of([date(2026, 11, 26)])  # a configured holiday (Thanksgiving)
    timeline = Timeline(calendar)
    evenings = [START + timedelta(days=n) for n in range(7 * 3 + 6)]
    for evening in evenings:
        if calendar.announces_on(evening) and evening != UNLISTED_HOLIDAY:
            timeline.announce(evening, timedelta(minutes=70) if evening == LATE else timedelta())
    now = calendar.update(START) + timedelta(minutes=10)
    end = calendar.update(evenings[-1])
    per_evening: Counter[date] = Counter()
    looks: Counter[date] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeArxiv() as fake, ArxivClient(fake.url, delay=0, retries=0) as client:
            store = await Store.open(Path(tmp) / "intake.db")
            clock = [now]
            ingestor = Ingestor(
                store, client, DEFAULT_CATEGORIES, oai_url=fake.oai_url, clock=lambda: clock[0]
            )
            schedule = Schedule(calendar)
            while now < end:
                clock[0] = now
                papers, stamps = timeline.at(now)
                fake.replace(papers)
                fake.oai.datestamps = stamps
                fake.oai.page_size = 2000
                before = len(fake.requests)
                stats, _ = await ingestor.poll()
                assert stats.ok, stats.message
                evening = calendar.last_update(now) or START
                per_evening[evening] += len(fake.requests) - before
                looks[evening] += 1
                now = schedule.next_look(now, await ingestor.newest_stamp())
            stored = await store.count_papers()
            await store.close()
    print(
        f"intake over {len(evenings)} evenings ({START} … {evenings[-1]}), default categories "
        f"({len(DEFAULT_CATEGORIES)}), {NEW} new + {CROSS} cross-lists + {REPLACED} "
        f"replacements an evening; {stored} papers stored"
    )
    print(f"{'evening':<16} {'looks':>5} {'requests':>8}")
    normal, quiet = [], []
    for evening in evenings:
        kind = (
            "announcement"
            if calendar.announces_on(evening) and evening != UNLISTED_HOLIDAY
            else "holiday (unlisted)"
            if evening == UNLISTED_HOLIDAY
            else "holiday (listed)"
            if evening in calendar.holidays
            else "no announcement"
        )
        if evening == LATE:
            kind += ", 70 min late"
        spent = per_evening.get(evening, 0)
        print(f"{evening:%a %Y-%m-%d} {looks.get(evening, 0):>5} {spent:>8}   {kind}")
        (normal if kind == "announcement" else quiet if "no announcement" in kind else []).append(
            spent
        )
    old = OLD_POLLS_A_DAY * math.ceil((NEW + CROSS) * 5 / 7 * OLD_WINDOW_DAYS / OLD_PAGE)
    print(
        f"normal announcement evening: max {max(normal)}, mean {sum(normal) / len(normal):.1f} "
        f"requests (budget ≤ 6)"
    )
    print(
        f"evening without an announcement (Fri, Sat, listed holiday): max {max(quiet)} (budget ≤ 1)"
    )
    print(
        f"old search-API poll, computed from its paging: {OLD_POLLS_A_DAY} polls × "
        f"{old // OLD_POLLS_A_DAY} pages of {OLD_PAGE} = {old} requests a day"
    )


async def simulate_history(weeks: int) -> None:
    rng = random.Random(11)
    today = date(2026, 12, 1)
    papers, stamps = [], {}
    for n in range(weeks * 7 + 14):  # every record changed in the period, and some older ones
        day = today - timedelta(days=n)
        if day.weekday() >= 5:
            continue
        for i in range(NEW + CROSS + REPLACED):
            pid = f"{day:%y%m}.{n:02d}{i:04d}"
            first = datetime.combine(day, datetime.min.time(), UTC) - timedelta(
                days=rng.randint(0, 3 if i < NEW else 200)
            )
            papers.append(make_paper(pid, first, categories=(rng.choice(DEFAULT_CATEGORIES),)))
            stamps[pid] = day.isoformat()
    since = (today - timedelta(days=weeks * 7)).isoformat()
    listed = sum(1 for s in stamps.values() if s >= since)
    changed = [p for p in papers if stamps[p.arxiv_id] >= since]
    pages = sum(  # what OAI-PMH needs: each set's records in pages of 2,000
        math.ceil(sum(in_set(p, spec) for p in changed) / 2000)
        for spec in harvest_sets(DEFAULT_CATEGORIES)
    )
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeArxiv(papers) as fake, ArxivClient(fake.url, delay=0, retries=0) as client:
            fake.oai.datestamps = stamps
            store = await Store.open(Path(tmp) / "history.db")
            ingestor = Ingestor(
                store,
                client,
                DEFAULT_CATEGORIES,
                oai_url=fake.oai_url,
                clock=lambda: datetime.combine(today, datetime.min.time(), UTC),
            )
            started = time.perf_counter()
            stats, _ = await ingestor.backfill(weeks)
            seconds = time.perf_counter() - started
            assert stats.ok, stats.message
            stored = await store.count_papers()
            await store.close()
        requests = len(fake.requests)
    print(
        f"{weeks}-week history: {listed} records changed since {since} → {pages} pages of 2,000 "
        f"needed over the sets {', '.join(harvest_sets(DEFAULT_CATEGORIES))};"
    )
    print(
        f"  the harvest sent {requests} requests and stored {stored} papers ({seconds:.1f} s "
        f"here; at arXiv's 3 s apart ≥ {(requests - 1) * 3 / 60:.0f} min)"
    )
    old_requests = weeks * 7 + 1
    print(
        f"old backfill: one search request per day ({old_requests}, at least; more on days over "
        f"1,000 papers)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=12, help="history weeks (default 12)")
    args = parser.parse_args()
    await simulate_intake(args.weeks)
    print()
    await simulate_history(args.weeks)


if __name__ == "__main__":
    asyncio.run(main())
