"""Growth benchmark: 90 days of polls and deliveries for 1,000 chats, with and without the daily
maintenance. The claim under test (issue 8 §3): the database grows with papers, not with
deliveries.

What is simulated, hour by hour on one injected clock (``SimClock``, passed to ``Store.open``,
``match_new_papers``, ``momentum.detect_spikes``, ``Delivery``, ``chats.follow``/``set_digest``
and ``run_maintenance``):

* day 0: the catalogue (``sync_catalogue``) and the first start's backfill of
  ``--history-weeks`` weeks (stored and matched, never alerted; spike detection needs the
  history), then the chats subscribe;
* papers: ``synthetic.generate_papers`` (``--per-weekday`` papers on a Monday, 0.3× that on
  weekends; revised versions show up once their ``updated`` time has passed). Each poll
  (``--polls`` a day, evenly spaced) re-reads the last ``--overlap-days`` days of submissions
  as the real poll does and stores them with ``store.upsert_papers`` inside an ingest run
  (``start_run``/``finish_run``): new papers, newer versions, and many unchanged ones;
* after each poll, as the bot's ``after_ingest``: ``match_new_papers``, then
  ``momentum.detect_spikes`` over the followed topics (spike alerts go through the outbox too);
* delivery: ``Delivery.run_once`` until it settles nothing more, after each poll and at every
  hour a digest falls due (``next_digest_at``: the chat's local HH:MM, set through
  ``chats.set_timezone``/``set_digest``), with an in-process sender that accepts every message
  at once. Instant chats get each poll's papers, digest chats theirs once a day or week;
* 1,000 chats, each following 2–5 topics (about 70% catalogue topics, popular ones more often,
  30% custom queries from a shared pool built from the generator's vocabulary), 55% instant,
  35% daily, 10% weekly digests, in a dozen time zones. Every day 1.5% of the chats unfollow a
  topic (40% of them follow it again 2–12 days later), 1% follow a new one, 0.3% switch
  delivery mode, and 0.5% try a one-off custom query and drop it within 0–3 days (abandoned
  custom topics: what the maintenance prunes after its 7-day grace);
* ``run_maintenance`` once a day at 03:00 UTC (the ``on`` run only).

Both runs use the same seed, so they see the same papers, chats and behaviour; the ``off`` run
only skips the maintenance. By default they run side by side in two processes (2 cores), in a
temporary folder. Recorded every day: papers, outbox rows by state, ``topic_papers``, custom
topics, subscriptions, ``ingest_runs``, the database's pages (``store.database_bytes()``) and
free pages, and the file size with the WAL; every ``--every`` days a table row; at days 30 and
90 a per-table breakdown (``dbstat``); then the summary: growth, bytes per new paper and per
chat-day (over the whole run, and past the 30-day outbox horizon), and the outbox bounded at
about 30 days of alerts (on) or holding every alert ever queued (off).

Time: delivery dominates (about a dozen aiosqlite round trips per chat and delivery, ~0.3 ms
each on this 2-core machine), so the defaults are one poll a day, ``--per-weekday 100`` (~80 new
papers a day, ~12 alerts per chat a day) and one delivery worker (the sender has no latency to
hide): both 90-day runs in under 5 minutes (288 s with other jobs on the machine). The figures
are deterministic for a seed. ``--per-weekday 300`` (~35 alerts per chat a day) shows the same
picture at three times the volume, in about twice the time.

    .venv/bin/python bench/bench_growth.py                           # both runs, 90 days
    .venv/bin/python bench/bench_growth.py --per-weekday 300         # 3x the volume, ~10 min
    .venv/bin/python bench/bench_growth.py --days 20 --only on       # a quick look
    .venv/bin/python bench/bench_growth.py --no-maintenance          # the "off" run alone
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import dataclasses
import math
import multiprocessing
import os
import random
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from topicpulse.delivery import Delivery, chats
from topicpulse.delivery.upkeep import OUTBOX_HORIZON, run_maintenance
from topicpulse.insight import momentum
from topicpulse.models import Paper, RunStats, iso
from topicpulse.store import Store
from topicpulse.synthetic import generate_papers
from topicpulse.synthetic import vocabulary as vocab
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import load_catalogue, sync_catalogue, topic_for
from topicpulse.topics.matching import match_new_papers

START = date(2026, 1, 5)  # a Monday
ZONES = (
    "UTC", "Europe/London", "Europe/Berlin", "Europe/Moscow", "Asia/Kolkata", "Asia/Shanghai",
    "Asia/Tokyo", "Australia/Sydney", "America/Sao_Paulo", "America/New_York",
    "America/Chicago", "America/Los_Angeles",
)  # fmt: skip
MAINTENANCE_HOUR = 3


# ---------------------------------------------------------------------------------- pieces
class SimClock:
    """The simulation's time: ``clock()`` is ``clock.now``; the loop moves it."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class InstantSender:
    """A ``delivery.Sender`` that accepts every message at once and only counts them."""

    def __init__(self) -> None:
        self.texts = 0
        self.photos = 0
        self.chars = 0

    async def send_text(
        self,
        chat_id: int,
        html: str,
        *,
        preview: bool = False,
        buttons: list[tuple[str, str]] | None = None,
    ) -> None:
        self.texts += 1
        self.chars += len(html)

    async def send_plain(self, chat_id: int, text: str) -> None:
        self.texts += 1
        self.chars += len(text)

    async def send_photo(self, chat_id: int, png: bytes, caption_html: str) -> None:
        self.photos += 1


@dataclass(frozen=True, slots=True)
class Config:
    days: int
    chats: int
    per_weekday: int
    polls: int
    overlap_days: float
    maintenance: bool
    seed: int
    spikes: bool
    history_weeks: int
    concurrency: int


@dataclass(slots=True)
class DayRecord:
    day: int  # 0: after the setup, before the first simulated day
    papers: int
    outbox: dict[str, int]
    topic_papers: int
    custom_topics: int
    subscriptions: int
    ingest_runs: int
    page_bytes: int  # store.database_bytes(): page_count × page_size (free pages included)
    free_bytes: int  # of which on the freelist (reused before the file grows)
    file_bytes: int  # database file + WAL on disk
    wal_bytes: int
    new: int = 0
    updated: int = 0
    queued: int = 0  # paper alerts queued in the outbox today
    messages: int = 0  # messages sent today
    pruned_outbox: int = 0
    pruned_topics: int = 0
    pruned_matches: int = 0
    pruned_runs: int = 0
    maintenance_log: str = ""  # Pruned.summary(), as the bot logs it
    freed_bytes: int = 0  # pages the maintenance put on the freelist (measured here)
    seconds: float = 0.0

    @property
    def used_bytes(self) -> int:
        return self.page_bytes - self.free_bytes

    @property
    def outbox_rows(self) -> int:
        return sum(self.outbox.values())


@dataclass(slots=True)
class RunResult:
    config: Config
    records: list[DayRecord] = field(default_factory=list)
    tables: dict[str, int] = field(default_factory=dict)  # bytes per table (its indexes in)
    tables_at_horizon: dict[str, int] = field(default_factory=dict)
    total_queued: int = 0
    total_messages: int = 0
    people: tuple[int, int, int] = (0, 0, 0)  # follows, unfollows, abandoned one-off queries
    spike_episodes: int = 0
    seconds: float = 0.0
    setup_seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds per step

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.phases[phase] = self.phases.get(phase, 0.0) + time.monotonic() - began


# ---------------------------------------------------------------------------------- topics
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_ARTICLE = re.compile(r"^(a|an|the)\s+", re.IGNORECASE)


def _phrase(text: str) -> str | None:
    """A vocabulary entry as a 1–3 word phrase of plain words ("a process reward model" →
    "process reward model"), or None if it has no usable words."""
    text = _ARTICLE.sub("", re.sub(r"\([^)]*\)", "", text))
    words = _WORD.findall(text)[:3]
    return " ".join(words) if words else None


def _vocabulary() -> tuple[list[str], list[str], list[str]]:
    """Phrases, single keywords and categories of the generator's research themes."""
    phrases: set[str] = set()
    words: set[str] = set()
    cats: set[str] = set()
    for theme in vocab.THEMES:
        for entry in (*theme.tasks, *theme.parts, *theme.topics, *theme.heads, *theme.benches):
            phrase = _phrase(entry)
            if phrase:
                phrases.add(phrase)
                words.update(w for w in phrase.split() if len(w) > 4)
        cats.update(theme.primary)
    return sorted(phrases), sorted(words), sorted(cats)


class QueryMaker:
    """Custom queries people would write, from the generator's vocabulary: a shared pool of
    popular ones, and one-offs nobody else writes (distinct once normalised)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.phrases, self.words, self.cats = _vocabulary()
        self.seen: set[str] = set()

    def make(self) -> str:
        rng = self.rng
        while True:
            a, b = rng.sample(self.phrases, 2)
            w, v = rng.sample(self.words, 2)
            shape = rng.randrange(7)
            text = (
                f'"{a}"',
                f'"{a}" OR "{b}"',
                f"ti:({w} OR {v})",
                f'"{a}" cat:{rng.choice(self.cats)}',
                f'{w} "{a}"',
                f'"{a}" NOT {w}',
                f"ti:{w}* {v}",
            )[shape]
            try:
                normalised = ql.normalise(text)
            except ql.QueryError:
                continue
            if normalised not in self.seen:
                self.seen.add(normalised)
                return text


# ---------------------------------------------------------------------------------- chats
@dataclass(slots=True)
class SimChat:
    chat_id: int
    follows: dict[int, str] = field(default_factory=dict)  # topic id → text followed


class Population:
    """The chats and what they do each day (all decisions from one seeded ``rng``)."""

    def __init__(self, store: Store, clock: SimClock, rng: random.Random, n: int) -> None:
        self.store = store
        self.clock = clock
        self.rng = rng
        self.queries = QueryMaker(rng)
        catalogue = [e.name for e in load_catalogue()]
        # popularity: a few catalogue topics are followed by many chats (Zipf-like)
        self.catalogue = catalogue
        self.catalogue_weights = [1 / (rank + 1) ** 0.8 for rank in range(len(catalogue))]
        self.pool = [self.queries.make() for _ in range(max(20, n // 8))]
        self.pool_weights = [1 / (rank + 1) ** 0.6 for rank in range(len(self.pool))]
        self.chats = [SimChat(1000 + i) for i in range(n)]
        self.unfollowed: list[tuple[int, SimChat, str]] = []  # (day, chat, text) to refollow
        self.tryouts: list[tuple[int, SimChat, int]] = []  # (drop on day, chat, topic id)
        self.follows = self.unfollows = self.abandoned = 0

    def pick_topic(self) -> str:
        if self.rng.random() < 0.7:
            return self.rng.choices(self.catalogue, self.catalogue_weights)[0]
        return self.rng.choices(self.pool, self.pool_weights)[0]

    async def follow(self, chat: SimChat, text: str, *, preview: bool = True) -> int:
        """``/follow text``: ``chats.follow``; without ``preview`` the same writes
        (``topic_for``, ``refresh_topic_matches``, ``subscribe``) minus the four-week preview
        it reads for the reply (the initial 3,500 follows: a third of the setup time)."""
        if preview:
            result = await chats.follow(self.store, chat.chat_id, text, now=self.clock())
            topic, added = result.topic, result.added
        else:
            topic = await topic_for(self.store, text)
            await self.store.refresh_topic_matches(topic)
            added = await self.store.subscribe(chat.chat_id, topic.id)
        self.follows += added
        chat.follows[topic.id] = text
        return topic.id

    async def unfollow(self, chat: SimChat, topic_id: int) -> str:
        text = chat.follows.pop(topic_id)
        await self.store.unsubscribe(chat.chat_id, topic_id)
        self.unfollows += 1
        return text

    async def set_mode(self, chat: SimChat, mode: str) -> None:
        now = self.clock()
        if mode == "instant":
            await chats.set_digest(self.store, chat.chat_id, ["instant"], now=now)
            return
        hhmm = f"{self.rng.randrange(6, 11):02d}:{self.rng.choice((0, 15, 30, 45)):02d}"
        args = [mode, hhmm] + ([chats.WEEKDAYS[self.rng.randrange(7)]] if mode == "weekly" else [])
        await chats.set_digest(self.store, chat.chat_id, args, now=now)

    def random_mode(self) -> str:
        return self.rng.choices(("instant", "daily", "weekly"), (55, 35, 10))[0]

    async def start(self) -> None:
        for chat in self.chats:
            await self.store.ensure_chat(chat.chat_id)
            zone = self.rng.choice(ZONES)
            await chats.set_timezone(self.store, chat.chat_id, zone, now=self.clock())
            await self.set_mode(chat, self.random_mode())
            for _ in range(self.rng.randint(2, 5)):
                await self.follow(chat, self.pick_topic(), preview=False)

    async def day(self, day: int) -> None:
        """One day's changes of mind, at the clock's current time."""
        rng, n = self.rng, len(self.chats)
        for _ in range(max(1, n * 15 // 1000)):  # 1.5% unfollow one of their topics
            chat = rng.choice(self.chats)
            if len(chat.follows) > 1:
                text = await self.unfollow(chat, rng.choice(list(chat.follows)))
                if rng.random() < 0.4:  # some come back to it
                    self.unfollowed.append((day + rng.randint(2, 12), chat, text))
        for _ in range(max(1, n // 100)):  # 1% follow something new
            chat = rng.choice(self.chats)
            if len(chat.follows) < 6:
                await self.follow(chat, self.pick_topic())
        due = [entry for entry in self.unfollowed if entry[0] <= day]
        self.unfollowed = [entry for entry in self.unfollowed if entry[0] > day]
        for _, chat, text in due:  # refollow (a pruned custom topic is created again)
            await self.follow(chat, text)
        for _ in range(max(1, n * 5 // 1000)):  # 0.5% try a one-off query ...
            chat = rng.choice(self.chats)
            topic_id = await self.follow(chat, self.queries.make())
            self.tryouts.append((day + rng.randint(0, 3), chat, topic_id))
        drops = [entry for entry in self.tryouts if entry[0] <= day]
        self.tryouts = [entry for entry in self.tryouts if entry[0] > day]
        for _, chat, topic_id in drops:  # ... and drop it (Undo, or a few days later)
            if topic_id in chat.follows:
                await self.unfollow(chat, topic_id)
                self.abandoned += 1
        for _ in range(max(1, n * 3 // 1000)):  # 0.3% change delivery mode
            await self.set_mode(rng.choice(self.chats), self.random_mode())


# ---------------------------------------------------------------------------------- polling
class Arxiv:
    """What a poll at time T reads: papers first published in [T - overlap, T], each as its
    latest version already out by T (the final one once ``updated`` has passed, v1 before)."""

    def __init__(self, papers: list[Paper], overlap: timedelta) -> None:
        self.papers = sorted(papers, key=lambda p: p.published)
        self.published = [p.published for p in self.papers]
        self.overlap = overlap

    def poll(self, now: datetime, since: datetime | None = None) -> list[Paper]:
        since = now - self.overlap if since is None else since
        lo = bisect.bisect_left(self.published, iso(since))
        hi = bisect.bisect_right(self.published, iso(now))
        stamp = iso(now)
        return [
            p if p.version == 1 or p.updated <= stamp
            else dataclasses.replace(p, version=1, updated=p.published)
            for p in self.papers[lo:hi]
        ]  # fmt: skip


# ---------------------------------------------------------------------------------- measuring


class Meter:
    """Reads row counts and sizes through its own read-only connection (WAL: no blocking)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def close(self) -> None:
        self.conn.close()

    def value(self, sql: str) -> int:
        return int(self.conn.execute(sql).fetchone()[0] or 0)

    def counts(self) -> dict[str, Any]:
        """The row counts and free pages of a ``DayRecord``, by field name."""
        outbox = dict(self.conn.execute("SELECT state, count(*) FROM outbox GROUP BY state"))
        return dict(
            papers=self.value("SELECT count(*) FROM papers"),
            outbox={s: outbox.get(s, 0) for s in ("pending", "sent", "dropped")},
            topic_papers=self.value("SELECT count(*) FROM topic_papers"),
            custom_topics=self.value("SELECT count(*) FROM topics WHERE kind = 'custom'"),
            subscriptions=self.value("SELECT count(*) FROM subscriptions"),
            ingest_runs=self.value("SELECT count(*) FROM ingest_runs"),
            free_bytes=self.free_bytes(),
        )

    def free_bytes(self) -> int:
        return self.value("PRAGMA freelist_count") * self.value("PRAGMA page_size")

    def digest_due(self, now: datetime) -> bool:
        """Has a digest chat's ``next_digest_at`` come (a digest to send or to reschedule)?"""
        found = self.conn.execute(
            "SELECT 1 FROM chats WHERE mode != 'instant' AND next_digest_at <= ? LIMIT 1",
            (iso(now),),
        ).fetchone()
        return found is not None

    def deliverable(self, now: datetime) -> bool:
        """Is anything pending that a delivery pass would send now (the engine's choice of
        chats: instant ones, spike alerts, digests that are due)?"""
        found = self.conn.execute(
            "SELECT 1 FROM outbox o JOIN chats c ON c.chat_id = o.chat_id"
            " WHERE o.state = 'pending' AND c.active = 1 AND c.paused = 0 AND (c.mode ="
            " 'instant' OR o.kind = 'spike' OR c.next_digest_at <= ?) LIMIT 1",
            (iso(now),),
        ).fetchone()
        return found is not None

    def files(self) -> tuple[int, int]:
        wal = Path(f"{self.path}-wal")
        wal_bytes = wal.stat().st_size if wal.exists() else 0
        return self.path.stat().st_size + wal_bytes, wal_bytes

    def tables(self) -> dict[str, int]:
        """Bytes of pages per table, its indexes included; FTS5 shadow tables under
        ``papers_fts``."""
        owner = dict(self.conn.execute("SELECT name, tbl_name FROM sqlite_master"))
        sizes: dict[str, int] = {}
        for name, size in self.conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            if table.startswith("papers_fts"):
                table = "papers_fts"
            sizes[table] = sizes.get(table, 0) + int(size)
        sizes["(free pages)"] = self.free_bytes()
        return dict(sorted(sizes.items(), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------------------------- the run
async def drain(delivery: Delivery, meter: Meter, now: datetime) -> None:
    """Delivery passes until nothing deliverable is left (one pass, normally). The sender
    never fails, so any error the engine caught (and would retry) is a broken benchmark."""
    while await delivery.run_once() and meter.deliverable(now):
        pass
    stats = delivery.stats
    if stats.errors or stats.failures or stats.chats_gone or meter.deliverable(now):
        raise RuntimeError(f"delivery failed or left alerts behind: {stats}")


async def measure(store: Store, meter: Meter, day: int) -> DayRecord:
    file_bytes, wal_bytes = meter.files()
    return DayRecord(
        day=day,
        page_bytes=await store.database_bytes(),
        file_bytes=file_bytes,
        wal_bytes=wal_bytes,
        **meter.counts(),
    )


async def simulate(config: Config, folder: Path) -> RunResult:
    result = RunResult(config)
    began = time.monotonic()
    label = "on " if config.maintenance else "off"
    rng = random.Random(config.seed)
    t0 = datetime(START.year, START.month, START.day, tzinfo=UTC)
    clock = SimClock(t0)
    history_days = 7 * config.history_weeks
    papers = generate_papers(
        start=START - timedelta(days=history_days),
        days=history_days + config.days,
        per_weekday=config.per_weekday,
        seed=config.seed,
    )
    arxiv = Arxiv(papers, timedelta(days=config.overlap_days))
    path = folder / f"growth-{label.strip()}.db"
    store: Store = await Store.open(path, clock=clock)
    meter = Meter(path)
    sender = InstantSender()
    delivery = Delivery(store, sender, clock=clock, concurrency=config.concurrency)
    try:
        # Day 0: the catalogue, the first start's backfill of history (stored and matched,
        # never alerted), and the chats with their topics and settings.
        await sync_catalogue(store)
        if history_days:
            run_id = await store.start_run("backfill")
            upserted = await store.upsert_papers(arxiv.poll(t0, since=t0 - timedelta(history_days)))
            await store.finish_run(run_id, RunStats(kind="backfill", new=upserted.new))
            await match_new_papers(store, clock=clock, alerts=False)
        people = Population(store, clock, rng, config.chats)
        await people.start()
        result.records.append(await measure(store, meter, 0))
        result.setup_seconds = time.monotonic() - began
        poll_hours = {int(24 * (i + 0.5) / config.polls) for i in range(config.polls)}
        for day in range(1, config.days + 1):
            day_began = time.monotonic()
            new = updated = queued = 0
            messages_before = sender.texts + sender.photos
            pruned, freed = None, 0
            for hour in range(24):
                clock.now = t0 + timedelta(days=day - 1, hours=hour)
                if hour == MAINTENANCE_HOUR and config.maintenance:
                    with result.timed("maintenance"):
                        free_before = meter.free_bytes()
                        pruned = await run_maintenance(store, now=clock())
                        freed = meter.free_bytes() - free_before
                if hour == 12:  # chats change their minds around midday
                    with result.timed("follows"):
                        await people.day(day)
                if hour in poll_hours:
                    with result.timed("poll"):
                        run_id = await store.start_run("poll")
                        upserted = await store.upsert_papers(arxiv.poll(clock()))
                        stats = RunStats(kind="poll", requests=1, new=upserted.new)
                        stats.updated = upserted.updated
                        await store.finish_run(run_id, stats)
                    new += upserted.new
                    updated += upserted.updated
                    with result.timed("match"):
                        matched = await match_new_papers(store, clock=clock)
                    queued += matched.chats_marked
                    if config.spikes:
                        with result.timed("spikes"):
                            opened = await momentum.detect_spikes(
                                store, await store.followed_topics(), now=clock()
                            )
                        result.spike_episodes += len(opened)
                # The delivery worker wakes after a poll and when a digest falls due (the bot
                # also ticks every minute, which finds nothing else to do here).
                if hour in poll_hours or meter.digest_due(clock()):
                    with result.timed("delivery"):
                        await drain(delivery, meter, clock())
            with result.timed("measure"):
                record = await measure(store, meter, day)
            record.new, record.updated, record.queued = new, updated, queued
            record.messages = sender.texts + sender.photos - messages_before
            if pruned is not None:
                record.pruned_outbox, record.pruned_topics = pruned.outbox_rows, pruned.topics
                record.pruned_matches, record.pruned_runs = pruned.matches, pruned.runs
                record.maintenance_log, record.freed_bytes = pruned.summary(), freed
            record.seconds = time.monotonic() - day_began
            result.records.append(record)
            result.total_queued += queued
            if day == OUTBOX_HORIZON.days:
                result.tables_at_horizon = meter.tables()
            print(
                f"  [{label}] day {day:3d}: {record.papers:7,d} papers,"
                f" {record.outbox_rows:9,d} outbox rows, {record.used_bytes / 1e6:7.1f} MB used"
                f" ({record.seconds:.1f}s)",
                file=sys.stderr,
                flush=True,
            )
        result.total_messages = sender.texts + sender.photos
        result.tables = meter.tables()
        result.people = (people.follows, people.unfollows, people.abandoned)
    finally:
        meter.close()
        await store.close()
    result.seconds = time.monotonic() - began
    return result


def run(config: Config, folder: str) -> RunResult:
    """One simulation in this process (the entry point of the worker processes)."""
    return asyncio.run(simulate(config, Path(folder)))


# ---------------------------------------------------------------------------------- report
def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def print_table(result: RunResult, every: int) -> None:
    c = result.config
    print(f"\n=== maintenance {'ON' if c.maintenance else 'OFF'} (day 0: after the setup) ===")
    print(
        f"{'day':>4} {'papers':>7} {'+new':>5} {'upd':>4} {'queued':>7} {'msgs':>6}"
        f" {'pending':>7} {'sent':>9} {'outbox':>9} {'topic_pap':>9} {'custom':>6}"
        f" {'subs':>5} {'runs':>4} {'db pages':>9} {'free':>8} {'file+WAL':>9} {'WAL':>7}"
        f" {'pruned':>7} {'s/day':>5}"
    )
    last = result.records[-1].day
    for r in result.records:
        if r.day % every and r.day not in (1, last):
            continue
        print(
            f"{r.day:4d} {r.papers:7,d} {r.new:5,d} {r.updated:4,d} {r.queued:7,d}"
            f" {r.messages:6,d} {r.outbox['pending']:7,d} {r.outbox['sent']:9,d}"
            f" {r.outbox_rows:9,d} {r.topic_papers:9,d} {r.custom_topics:6,d}"
            f" {r.subscriptions:5,d} {r.ingest_runs:4,d} {mb(r.page_bytes):>9}"
            f" {mb(r.free_bytes):>8} {mb(r.file_bytes):>9} {mb(r.wal_bytes):>7}"
            f" {r.pruned_outbox:7,d} {r.seconds:5.1f}"
        )


def print_tables(runs: list[RunResult]) -> None:
    names: list[str] = []
    for r in runs:
        for name in (*r.tables, *r.tables_at_horizon):
            if name not in names:
                names.append(name)
    columns = [
        (f"day {OUTBOX_HORIZON.days} {'on' if r.config.maintenance else 'off'}", sizes)
        for r in runs
        for sizes in [r.tables_at_horizon]
        if sizes
    ] + [
        (f"day {r.records[-1].day} {'on' if r.config.maintenance else 'off'}", r.tables)
        for r in runs
    ]
    print("\nbytes per table (its indexes included; dbstat)")
    print(f"  {'':<20}" + "".join(f" {head:>13}" for head, _ in columns))
    for name in names:
        if all(sizes.get(name, 0) < 50_000 for _, sizes in columns):
            continue
        print(f"  {name:<20}" + "".join(f" {mb(sizes.get(name, 0)):>13}" for _, sizes in columns))


@dataclass(frozen=True, slots=True)
class Growth:
    bytes: int  # used bytes added
    papers: int  # papers added
    chat_days: int
    outbox_rows: int  # outbox rows added

    @property
    def per_paper(self) -> float:
        return self.bytes / self.papers if self.papers else math.nan

    @property
    def per_chat_day(self) -> float:
        return self.bytes / self.chat_days if self.chat_days else math.nan


def growth(result: RunResult, first: DayRecord, last: DayRecord) -> Growth:
    return Growth(
        bytes=last.used_bytes - first.used_bytes,
        papers=last.papers - first.papers,
        chat_days=result.config.chats * (last.day - first.day),
        outbox_rows=last.outbox_rows - first.outbox_rows,
    )


def print_summary(runs: list[RunResult]) -> None:
    if not runs:
        return
    c, recs = runs[0].config, runs[0].records
    base, last = recs[0], recs[-1]
    days = last.day
    horizon = OUTBOX_HORIZON.days
    follows, unfollows, abandoned = runs[0].people
    print(
        f"\nSummary: {days} days, {c.chats:,d} chats, {c.polls} polls/day re-reading"
        f" {c.overlap_days:g} days, per_weekday={c.per_weekday} ({last.papers - base.papers:,d}"
        f" new papers, {(last.papers - base.papers) / days:,.0f}/day, on top of"
        f" {base.papers:,d} from a {c.history_weeks}-week backfill);"
        f" {runs[0].total_queued:,d} paper alerts queued,"
        f" {runs[0].total_messages:,d} messages sent,"
        f" {runs[0].spike_episodes} spike episodes; {follows:,d} follows, {unfollows:,d}"
        f" unfollows, {abandoned} one-off queries abandoned"
    )
    for r in runs:
        recs = r.records
        total = growth(r, recs[0], recs[-1])
        settled = recs[min(horizon, days - 1)]  # the outbox horizon reached: steady state
        steady = growth(r, settled, recs[-1])
        per_stored = recs[-1].used_bytes / recs[-1].papers
        steady_label = (
            f"past the {horizon}-day outbox horizon" if days > horizon else "the last day only"
        )
        label = "maintenance ON " if r.config.maintenance else "maintenance OFF"
        phases = ", ".join(
            f"{k} {v:.0f}s" for k, v in sorted(r.phases.items(), key=lambda kv: -kv[1])
        )
        end = recs[-1]
        outbox_bytes = r.tables.get("outbox", 0)
        print(
            f"  {label}: {mb(recs[0].used_bytes)} at day 0 → {mb(end.used_bytes)} used at day"
            f" {days} (+{mb(total.bytes)}); {mb(end.page_bytes)} of pages"
            f" ({mb(end.free_bytes)} free), {mb(end.file_bytes)} on disk with the WAL\n"
            f"    whole run:   {total.per_paper:,.0f} B per new paper,"
            f" {total.per_chat_day:,.0f} B per chat-day; {per_stored:,.0f} B per stored paper\n"
            f"    days {settled.day + 1}–{days} ({steady_label}):"
            f" {steady.per_paper:,.0f} B per new paper, {steady.per_chat_day:,.0f} B per chat-day,"
            f" outbox {steady.outbox_rows / max(1, days - settled.day):+,.0f} rows/day\n"
            f"    outbox: {end.outbox_rows:,d} rows at the end (max"
            f" {max(x.outbox_rows for x in recs):,d}), {mb(outbox_bytes)},"
            f" {outbox_bytes / max(1, end.outbox_rows):,.0f} B/row; custom topics"
            f" {end.custom_topics} (max {max(x.custom_topics for x in recs)}), ingest runs"
            f" {end.ingest_runs}\n"
            f"    time: {r.seconds:.0f}s (setup {r.setup_seconds:.0f}s, {phases})"
        )
        if end.maintenance_log:
            print(
                f"    last maintenance logged: {end.maintenance_log!r}; it put"
                f" {mb(end.freed_bytes)} of pages on the freelist"
            )
    on = next((r for r in runs if r.config.maintenance), None)
    off = next((r for r in runs if not r.config.maintenance), None)
    if on and off:
        window = on.records[1:][-horizon:]
        per_day = sum(x.queued for x in window) / len(window)
        a, b = on.records[-1], off.records[-1]
        print(
            f"  outbox with maintenance: {a.outbox_rows:,d} rows ≈"
            f" {a.outbox_rows / per_day:.1f} days of alerts ({per_day:,.0f} queued/day over the"
            f" last {len(window)} days); without: {b.outbox_rows:,d} rows = every alert ever"
            f" queued ({off.total_queued:,d} paper alerts, {b.outbox_rows - off.total_queued:,d}"
            f" spike alerts)\n"
            f"  maintenance keeps {mb(b.used_bytes - a.used_bytes)} of {mb(b.used_bytes)} out"
            f" ({(b.used_bytes - a.used_bytes) / b.used_bytes:.0%})"
        )


# ---------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--per-weekday", type=int, default=100, help="papers on a Monday")
    parser.add_argument("--polls", type=int, default=1, help="polls a day")
    parser.add_argument("--overlap-days", type=float, default=7)
    parser.add_argument("--history-weeks", type=int, default=12, help="backfill before day 1")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="delivery workers (the sender is instant)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--every", type=int, default=10, help="a table row every N days")
    parser.add_argument("--no-spikes", action="store_true", help="skip spike detection")
    parser.add_argument("--only", choices=("on", "off"), help="one run: maintenance on or off")
    parser.add_argument(
        "--no-maintenance", action="store_const", const="off", dest="only", help="= --only off"
    )
    parser.add_argument("--serial", action="store_true", help="the two runs one after the other")
    args = parser.parse_args()
    configs = [
        Config(
            days=args.days,
            chats=args.chats,
            per_weekday=args.per_weekday,
            polls=args.polls,
            overlap_days=args.overlap_days,
            maintenance=maintenance,
            seed=args.seed,
            spikes=not args.no_spikes,
            history_weeks=args.history_weeks,
            concurrency=args.concurrency,
        )
        for maintenance in ([args.only == "on"] if args.only else [True, False])
    ]
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="topicpulse-growth-") as folder:
        if args.serial or len(configs) == 1:
            results = [run(c, folder) for c in configs]
        else:  # side by side, one process each (the machine has 2 cores)
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(len(configs), mp_context=context) as pool:
                results = list(pool.map(run, configs, [folder] * len(configs)))
    for r in results:
        print_table(r, args.every)
    print_tables(results)
    print_summary(results)
    print(f"\n(wall time {time.monotonic() - began:.0f}s, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
