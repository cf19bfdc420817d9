"""Scale simulation (issue 25): 100,000 chats for a simulated week, on a virtual clock, through
the real engine — store, matching, delivery, the rate limiter, python-telegram-bot and the fake
Bot API at Telegram's limits — with nothing waited for in real time (``_warp.WarpLoop``: real
time with the idle gaps cut out, so CPU that cannot keep up shows as delay).

What runs, as in the bot (``bot.app``): each day at 00:00 UTC arXiv's announcement (``--papers``
generated papers, ``synthetic.generate_papers``) is stored and matched (``match_new_papers``,
in the worker process, as the bot does), and the delivery worker (``Delivery.run_once``
passes, woken by the round, every 5 s, or when a deferred chat falls due) sends instant
alerts and digests through
``TelegramSender`` → PTB's ``ExtBot`` → ``TelegramRateLimiter`` → the fake (``FakeWire``: PTB's
requests answered by ``FakeTelegram.call``, no socket; limits enforced on the loop's clock);
``run_maintenance`` at 03:00 UTC. Users type ``/list`` and ``/momentum <topic>`` all along (the
real handlers, ``Application.process_update``; every 15 s while bulk sends are queued, every
5 min otherwise); a reply's latency is from the update to the fake accepting the reply.

The population (``Population``; one seeded rng): 80% private chats, 20% groups (supergroups);
1–8 topics each (mean 3.4), 80% catalogue topics by a Zipf law, 20% custom queries from a
shared pool (Zipf too: some shared by many chats); 40% instant, 50% daily, 10% weekly digests;
time zones and digest times from ``ZONES`` and ``DIGEST_TIMES`` (see there for their source).

Checked from the fake's log, per chat and paper: every paper a chat's topics matched (after its
follow, within the age rule) reaches it once — listed (instant alerts, small digests) or counted
in a catch-up's total (a folded message lists its best few and counts the rest): lost = owed −
delivered, duplicated = a paper listed twice or more counted than owed.

    .venv/bin/python bench/bench_scale.py                         # 100,000 chats, 7 days
    .venv/bin/python bench/bench_scale.py --chats 2000 --days 2   # a quick look (~1 min)
    .venv/bin/python bench/bench_scale.py --chats 1000 --days 1 --json
    .venv/bin/python bench/bench_scale.py --curve 1000,10000,100000 --days 1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from telegram import Update
from telegram.ext import ApplicationBuilder

from _support import OUT, percentile
from _warp import FakeWire, SimClock, WarpLoop, count_aiosqlite_work
from bench_growth import QueryMaker
from fake_telegram import FakeTelegram
from topicpulse import heap, offload
from topicpulse.bot import handlers
from topicpulse.bot.app import DELIVERY_TICK  # (the worker's pace when nothing wakes it)
from topicpulse.bot.common import BotContext
from topicpulse.bot.ratelimit import Limits, TelegramRateLimiter
from topicpulse.bot.sender import TelegramSender
from topicpulse.config import Settings
from topicpulse.delivery import Delivery, chats
from topicpulse.delivery.upkeep import run_maintenance
from topicpulse.models import Paper, iso
from topicpulse.store import Store, lock
from topicpulse.store.backup import backup
from topicpulse.synthetic import generate_papers
from topicpulse.topics import catalogue
from topicpulse.topics.matching import match_new_papers

START = datetime(2026, 1, 12, tzinfo=UTC)  # a Monday, in winter time (CET = UTC+1)
SETUP_NOW = START - timedelta(minutes=30)  # the chats' schedules are set as of this
CEILING = 30.0  # Telegram's messages a second per bot
LIMITER_RATE = Limits().global_rate  # what the rate limiter sends at most (59/60 of it)
MAINTENANCE_HOUR = 3

# Where researchers are, as shares of chats. Rounded from arXiv's submitter shares by country
# (arXiv's annual reports: the US about a quarter, then China, Germany, the UK, Japan, France,
# India, Italy, Canada; Europe together about a third) and folded into the zones those
# countries mostly use; Telegram's reach tilts it a little towards Europe, India and Brazil.
ZONES = {
    "America/Los_Angeles": 8, "America/Chicago": 4, "America/New_York": 14,
    "America/Sao_Paulo": 3, "Europe/London": 8, "Europe/Berlin": 26, "Europe/Moscow": 3,
    "Asia/Kolkata": 8, "Asia/Shanghai": 15, "Asia/Tokyo": 5, "Asia/Seoul": 3,
    "Australia/Sydney": 3,
}  # fmt: skip
# Digest times (local): the bot's default, 08:00, kept by most (defaults stick); a few pick a
# nearby quarter hour or the evening. This makes the bursts as sharp as they will be.
DIGEST_TIMES = {
    "08:00": 60,
    "07:30": 6,
    "08:30": 6,
    "09:00": 12,
    "07:00": 6,
    "18:00": 5,
    "21:00": 5,
}
MODES = {"instant": 40, "daily": 50, "weekly": 10}
TOPIC_COUNTS = {1: 20, 2: 22, 3: 18, 4: 13, 5: 10, 6: 7, 7: 5, 8: 5}  # mean 3.4
ARXIV_ID = re.compile(r"arxiv\.org/abs/([\w./-]+?)[\"<\s)]")
TOTAL = re.compile(r"(\d[\d,]*) new papers?")


@dataclass(frozen=True, slots=True)
class Config:
    chats: int
    days: int
    seed: int
    papers: int
    history_days: int
    probe_peak: float
    probe_idle: float
    tick: float = DELIVERY_TICK
    out: Path = OUT  # where the stores go (the prepared one is kept there)


# ---------------------------------------------------------------------------------- people
def _pick(rng: random.Random, shares: dict[Any, int]) -> Any:
    return rng.choices(list(shares), list(shares.values()))[0]


class Population:
    """The chats: ids, types, schedules and follows (all from one seeded rng)."""

    def __init__(self, n: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = n
        self.ids = [-(10**12) - i if self.rng.random() < 0.2 else 10_000_000 + i for i in range(n)]

    async def create(self, store: Store, now: datetime, *, write: bool = True) -> dict[int, str]:
        """Chats with their schedule and follows, written through the store as the commands
        write them (``write`` off: the same choices, for a store prepared before). Returns
        chat → mode."""
        rng = self.rng
        names = [e.name for e in catalogue.load_catalogue()]
        names.sort(key=lambda _: rng.random())  # which topic is popular: seeded
        weights = [1 / (rank + 1) for rank in range(len(names))]  # Zipf
        cat_ids = [(await catalogue.topic_for(store, name)).id for name in names]
        maker = QueryMaker(rng)
        pool_texts = [maker.make() for _ in range(max(20, self.n // 40))]
        pool_ids = [(await catalogue.custom_topic(store, t)).id for t in pool_texts]
        pool_weights = [1 / (rank + 1) ** 0.8 for rank in range(len(pool_ids))]
        modes: dict[int, str] = {}
        self.follows: dict[int, set[int]] = {}
        for chat_id in self.ids:
            mode = _pick(rng, MODES)
            settings: dict[str, Any] = {"mode": mode, "timezone": _pick(rng, ZONES)}
            if mode != "instant":
                settings["digest_time"] = _pick(rng, DIGEST_TIMES)
                settings["digest_weekday"] = 0 if rng.random() < 0.6 else rng.randrange(7)
            follows: set[int] = set()
            for _ in range(_pick(rng, TOPIC_COUNTS)):
                if rng.random() < 0.8:
                    follows.add(rng.choices(cat_ids, weights)[0])
                else:
                    follows.add(rng.choices(pool_ids, pool_weights)[0])
            modes[chat_id] = mode
            self.follows[chat_id] = follows
            if not write:
                continue
            chat = await store.ensure_chat(chat_id, type="supergroup" if chat_id < 0 else "private")
            due = chats.next_digest_at(replace(chat, **settings), now)
            await store.update_chat(chat_id, **settings, next_digest_at=iso(due) if due else None)
            for topic_id in follows:
                await store.subscribe(chat_id, topic_id)
        for k in range(
            PROBE_CHATS if write else 0
        ):  # the users typing commands: paused, so only replies
            chat_id = PROBE_FIRST + k
            await store.ensure_chat(chat_id)
            await store.update_chat(chat_id, paused=1)
            for topic_id in set(rng.choices(cat_ids, weights, k=rng.randint(1, 8))):
                await store.subscribe(chat_id, topic_id)
        return modes


def announcements(cfg: Config) -> list[list[Paper]]:
    """``cfg.days`` announcements of ``cfg.papers`` papers, each published in the day before
    its announcement (00:00 UTC) — and the history before them."""
    total = cfg.papers * (cfg.days + cfg.history_days)
    first = (START - timedelta(days=cfg.history_days)).date()
    papers = generate_papers(total, start=first, days=cfg.days + cfg.history_days, seed=cfg.seed)
    days: list[list[Paper]] = []
    for d in range(cfg.days + cfg.history_days):
        stamp = iso(START + timedelta(days=d - cfg.history_days) - timedelta(hours=4))
        chunk = papers[d * cfg.papers : (d + 1) * cfg.papers]
        days.append([replace(p, version=1, published=stamp, updated=stamp) for p in chunk])
    return days


# ---------------------------------------------------------------------------------- the log
KIND_INSTANT, KIND_DIGEST = 0, 1


LISTED_BUCKETS = 64  # the listings' keys on disk, split by chat (one bucket read at a time)


@dataclass
class Ledger:
    """What the fake accepted, read minute by minute (then the fake forgets it): per chat, how
    many papers its messages delivered and which they listed; per bulk message its due time,
    its send time and kind. The listings go to disk each hour (``spill``) and the sends into
    arrays, so the harness's memory stays flat and the process's RSS is mostly the bot's."""

    chat_index: dict[int, int]
    spill_dir: Path
    paper_index: dict[str, int] = field(default_factory=dict)
    listed: list[np.ndarray] = field(default_factory=list)  # chat index << 24 | paper index
    covered: Counter[int] = field(default_factory=Counter)  # chat → papers delivered
    sends: list[tuple[float, float, int]] = field(default_factory=list)  # (due, sent, kind)
    sent_arrays: list[np.ndarray] = field(default_factory=list)  # the earlier hours' sends

    def keys(self, chat_id: int, arxiv_ids: list[str]) -> np.ndarray:
        base = self.chat_index[chat_id] << 24
        index = self.paper_index
        return np.fromiter(
            (base | index.setdefault(a, len(index)) for a in arxiv_ids), np.int64, len(arxiv_ids)
        )

    def spill(self) -> None:
        """The hour's listings appended to their buckets' files, its sends to an array."""
        if self.sends:
            self.sent_arrays.append(np.array(self.sends, dtype=np.float64))
            self.sends = []
        if not self.listed:
            return
        keys = np.concatenate(self.listed)
        self.listed = []
        bucket = (keys >> 24) % LISTED_BUCKETS
        order = np.argsort(bucket, kind="stable")
        keys, bucket = keys[order], bucket[order]
        bounds = np.searchsorted(bucket, np.arange(LISTED_BUCKETS + 1))
        for b in range(LISTED_BUCKETS):
            if bounds[b] < bounds[b + 1]:
                with (self.spill_dir / f"listed-{b}.bin").open("ab") as f:
                    keys[bounds[b] : bounds[b + 1]].tofile(f)

    @property
    def messages(self) -> int:
        return len(self.sends) + sum(len(a) for a in self.sent_arrays)

    def all_sends(self) -> np.ndarray:
        self.spill()
        return np.concatenate(self.sent_arrays or [np.zeros((1, 3))])

    def duplicated_listings(self) -> int:
        self.spill()
        duplicated = 0
        for path in sorted(self.spill_dir.glob("listed-*.bin")):
            keys = np.fromfile(path, dtype=np.int64)
            duplicated += int(len(keys) - len(np.unique(keys)))
        return duplicated


@dataclass
class Hour:
    """One simulated hour's figures."""

    hour: int
    messages: int = 0  # bulk messages accepted (alerts, digests)
    digests: int = 0
    instant: int = 0
    replies: int = 0
    http_429: int = 0
    ceiling_used: float = 0.0  # all sends / (30/s × 3600 s)
    burst_ceiling_used: float = 0.0  # the same over its minutes with work queued all along
    digests_late_15min: int = 0
    max_digest_delay_s: float = 0.0
    instant_max_delay_s: float = 0.0
    outbox_pending: int = 0
    outbox_rows: int = 0
    instant_marked: int = 0  # instant chats a round marked, their alerts not sent yet
    store_mb: float = 0.0
    cpu_s: float = 0.0  # the bot's CPU seconds in the hour (measuring excluded)
    rss_mb: float = 0.0


PROBE_CHATS = 200  # private chats that type the commands: paused (no bulk sends), own ids
PROBE_FIRST = 90_000_000


def is_reply(message: Any) -> bool:
    """Every message to a probe chat is a reply (they receive nothing else)."""
    return message.chat_id >= PROBE_FIRST


def release_freed_memory() -> None:
    """Collect and hand freed heap back to the system (glibc keeps it otherwise), so what the
    harness built in set-up does not count as the bot's."""
    gc.collect()
    heap.trim()


# ---------------------------------------------------------------------------------- the run
class Simulation:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.loop = asyncio.get_running_loop()
        self.clock = SimClock(SETUP_NOW).bind()
        self.process = psutil.Process()
        self.hours: list[Hour] = []
        self.round_times: list[float] = []
        self.round_done: list[float] = []  # when each round's matches were stored (loop time)
        self.day_ranges: list[tuple[int, int]] = []  # each announcement's paper ids (a, b]
        self.due: dict[int, list[float]] = {}  # digest chat → its due times (loop time)
        self.all_due: dict[int, list[float]] = {}  # … within the week (what is owed)
        self.probes: list[tuple[float, float, str, bool]] = []  # (began, latency, cmd, busy)
        self.match_seconds: list[float] = []
        self.round_cpu: list[float] = []
        self.measure_cpu = 0.0
        self.setup_seconds = 0.0
        self.last_bulk = -math.inf
        self.late_examples: list[Any] = []
        self.seen_429 = 0
        self.worker_rss_mb = 0.0
        self.peak_rss = 0  # bytes, sampled each simulated minute while the bot runs
        self.reply_log: dict[int, list[float]] = defaultdict(list)  # probe chat → reply times
        self.began = time.monotonic()  # (the run's start, once set up)

    # ------------------------------------------------------------------ set-up
    async def setup(self, db: Path) -> None:
        """The store as the week finds it: the catalogue, the history (stored and matched,
        never alerted), the chats and their follows. Prepared once per population and papers
        (``bench/out/scale-prepared-*.db``), copied for every run. The papers generated
        depend on the run's days as well as the history's (``announcements``), so the days are
        in its name: a store prepared for 1 day holds, under the same ids, papers that a 7-day
        run announces as new (they were stored as unchanged, and the week's first days carried
        a third of their papers)."""
        began = time.monotonic()
        cfg = self.cfg
        template = self.cfg.out / (
            f"scale-prepared-{cfg.chats}-{cfg.seed}-{cfg.papers}-{cfg.history_days}-{cfg.days}.db"
        )
        prepared = template.exists()
        if prepared:
            shutil.copyfile(template, db)
        self.store = store = await Store.open(db, clock=self.clock)
        self.days = announcements(self.cfg)
        if not prepared:
            await catalogue.sync_catalogue(store)
            for day in self.days[: self.cfg.history_days]:  # the history: never alerted
                await store.upsert_papers(day)
            await match_new_papers(store, clock=self.clock, alerts=False)
        self.population = Population(self.cfg.chats, self.cfg.seed)
        self.modes = await self.population.create(store, SETUP_NOW, write=not prepared)
        if not prepared:  # kept for the next run with the same population and papers
            # (through SQLite's online backup: copying the open file with ``shutil`` closed a
            # descriptor of it in this process, which drops every POSIX lock the process held
            # on it; a worker's connection closing next took itself for the last one and
            # removed the WAL under this one, and the run's store was corrupted)
            backup(db, template)
        spill = db.with_suffix(".listed")
        shutil.rmtree(spill, ignore_errors=True)
        spill.mkdir(parents=True)
        self.ledger = Ledger({c: n for n, c in enumerate(self.population.ids)}, spill)
        del self.days[: cfg.history_days]  # in the store now: the run needs only its own days
        release_freed_memory()
        self.fake = FakeTelegram(enforce_limits=True, clock=self.loop.time)
        limiter = TelegramRateLimiter(clock=self.loop.time, sleep=asyncio.sleep)
        self.app = (
            ApplicationBuilder()
            .token(self.fake.token)
            .request(FakeWire(self.fake))
            .get_updates_request(FakeWire(self.fake))
            .rate_limiter(limiter)
            .updater(None)
            .build()
        )
        handlers.register(self.app)
        settings = Settings(telegram_bot_token=self.fake.token, db=db)  # type: ignore[call-arg]
        self.app.bot_data["topicpulse"] = BotContext(
            store=store, settings=settings, clock=self.clock, monotonic=self.loop.time
        )
        await self.app.initialize()
        self.delivery = Delivery(
            store, TelegramSender(self.app.bot), clock=self.clock, monotonic=self.loop.time
        )
        self.wake = asyncio.Event()
        self.topic_names = [e.name for e in catalogue.load_catalogue()]
        self.bytes_start = await store.used_bytes()
        self.setup_seconds = time.monotonic() - began
        self.prepared = prepared
        self.clock.rebind(SETUP_NOW + timedelta(minutes=1))  # the week starts 29 min later
        await self._read_schedules()  # (on the clock as rebound)
        heap.freeze_startup()  # as the bot does once started (and the harness's own objects)

    async def _read_schedules(self) -> None:
        """Each digest chat's due times in the week, from its row (as the commands set it)."""
        end = START + timedelta(days=self.cfg.days)
        for chat_id, mode in self.modes.items():
            if mode == "instant":
                continue
            chat = await self.store.chat(chat_id)
            assert chat is not None and chat.next_digest_at
            times, when = [], datetime.fromisoformat(chat.next_digest_at.replace("Z", "+00:00"))
            while when < end:
                times.append(self.clock.at(when))
                when = chats.next_digest_at(chat, when) or end
            self.all_due[chat_id] = times
            # (and the first due time past the week: a digest due at its very end may still go
            # out as the run closes, and answers that time, not the one a day before)
            self.due[chat_id] = [*times, self.clock.at(when)]

    # ------------------------------------------------------------------ the bot's loops
    async def delivery_worker(self) -> None:
        """``Pipeline.delivery_worker``: a pass when woken, every tick, or when a deferred chat
        or the next digest falls due (``Delivery.next_wake``)."""
        while not self.delivery.closed:
            timeout = await self.delivery.next_wake(self.cfg.tick)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=timeout)
            self.wake.clear()
            await self.delivery.run_once()

    async def announcer(self) -> None:
        for day in range(self.cfg.days):
            await self._sleep_until(START + timedelta(days=day))
            self.round_times.append(self.loop.time())
            began, cpu = time.monotonic(), time.process_time() + self._worker_cpu()
            first = await self.store.max_paper_id()
            await self.store.upsert_papers(self.days[day])
            self.days[day] = []  # (stored: the harness need not hold them)
            self.day_ranges.append((first, await self.store.max_paper_id()))
            # in the worker process, as the bot does (its loop never competes for the GIL)
            await match_new_papers(self.store, clock=self.clock, in_process=True)
            self.match_seconds.append(time.monotonic() - began)
            self.round_done.append(self.loop.time())
            self.round_cpu.append(time.process_time() + self._worker_cpu() - cpu)
            self.wake.set()

    async def maintainer(self) -> None:
        for day in range(self.cfg.days):
            await self._sleep_until(START + timedelta(days=day, hours=MAINTENANCE_HOUR))
            await run_maintenance(self.store, now=self.clock())

    async def prober(self, end: float) -> None:
        """Users' commands: often while bulk sends are going out (the peak), rarely else."""
        rng = random.Random(self.cfg.seed + 1)
        private = list(range(PROBE_FIRST, PROBE_FIRST + PROBE_CHATS))
        # a cohort of digests falls due at a minute: a burst of seconds that an idle probe
        # every 5 minutes would miss; the prober also wakes 6 s (a delivery tick) after each
        # due minute
        cohorts = sorted({t + 6.0 for times in self.all_due.values() for t in times})
        n = 0
        while self.loop.time() < end:
            self._note_bulk()
            busy = self.loop.time() - self.last_bulk < 2.0
            command = "/list" if n % 2 == 0 else f"/momentum {rng.choice(self.topic_names[:20])}"
            n += 1
            self.loop.create_task(self._probe(rng.choice(private), command, busy))
            now = self.loop.time()
            wake = now + (self.cfg.probe_peak if busy else self.cfg.probe_idle)
            while cohorts and cohorts[0] <= now:
                cohorts.pop(0)
            if cohorts and cohorts[0] < wake:
                wake = cohorts.pop(0)
            await asyncio.sleep(wake - now)

    async def _probe(self, chat_id: int, command: str, busy: bool) -> None:
        self.fake.user_sends(chat_id, command)
        raw = self.fake._updates.pop()  # the update a poll would have fetched
        update = Update.de_json(raw, self.app.bot)
        began = self.loop.time()
        await self.app.process_update(update)
        times = [m.time for m in self.fake.messages_to(chat_id)] + self.reply_log[chat_id]
        replies = [t for t in times if t >= began]
        if replies:
            self.probes.append((began, min(replies) - began, command.split()[0], busy))

    async def _sleep_until(self, when: datetime) -> None:
        await asyncio.sleep(max(0.0, self.clock.at(when) - self.loop.time()))

    # ------------------------------------------------------------------ measuring
    async def meter(self, end: float) -> None:
        """Every simulated hour: read the fake's log, the outbox, the store, CPU and memory."""
        hour, cpu = 0, time.process_time()
        while self.loop.time() < end:
            boundary = self.clock.at(START + timedelta(hours=hour + 1))
            record = Hour(hour)
            while self.loop.time() < boundary:  # the log read every minute stays short
                await asyncio.sleep(min(60.0, boundary - self.loop.time()))
                measuring = time.process_time()
                self._note_bulk()
                self._read_log(record)
                self.peak_rss = max(self.peak_rss, self.process.memory_info().rss)
                self.measure_cpu += time.process_time() - measuring
            measuring = time.process_time()
            record.ceiling_used = (record.messages + record.replies) / (CEILING * 3600)
            counts = await self.store.outbox_counts()
            record.outbox_pending = counts.get("pending", 0)
            record.outbox_rows = sum(counts.values())
            record.instant_marked = len(await self.store.instant_chats_due(limit=10**7))
            record.store_mb = await self.store.used_bytes() / 2**20
            record.rss_mb = self.process.memory_info().rss / 2**20
            self.ledger.spill()
            self.worker_rss_mb = max(self.worker_rss_mb, self._worker_rss_mb())
            done = time.process_time()
            self.measure_cpu += done - measuring
            record.cpu_s = measuring - cpu
            cpu = done
            self.hours.append(record)
            hour += 1
            if hour % 24 == 0:  # (a long run says where it is)
                day = self.hours[-24:]
                print(
                    f"day {hour // 24}: {time.monotonic() - self.began:.0f} s of the run,"
                    f" {sum(h.messages for h in day):,} messages,"
                    f" bot CPU {sum(h.cpu_s for h in day):.0f} s",
                    file=sys.stderr,
                    flush=True,
                )

    def _worker_cpu(self) -> float:
        """CPU seconds of the bot's worker processes (matching runs there, as in the bot)."""
        ended = resource.getrusage(resource.RUSAGE_CHILDREN)  # (worker processes that stopped)
        running = sum(sum(c.cpu_times()[:2]) for c in self.process.children(recursive=True))
        return running + ended.ru_utime + ended.ru_stime

    def _worker_rss_mb(self) -> float:
        return sum(c.memory_info().rss for c in self.process.children(recursive=True)) / 2**20

    def _note_bulk(self) -> None:
        for message in reversed(self.fake.sent[-50:]):
            if not is_reply(message):
                self.last_bulk = max(self.last_bulk, message.time)
                break

    def _read_log(self, record: Hour) -> None:
        ledger, fake = self.ledger, self.fake
        floods = fake.stats["by_error_code"].get(429, 0)
        record.http_429 += floods - self.seen_429
        self.seen_429 = floods
        for message in fake.sent:
            if is_reply(message):
                record.replies += 1
                log = self.reply_log[message.chat_id]
                self.reply_log[message.chat_id] = [*log[-4:], message.time]
                continue
            text = message.text or ""
            head = text.split("\n", 1)[0]
            record.messages += 1
            ids = ARXIV_ID.findall(text + " ")
            total = TOTAL.search(head)
            folded = "Catch-up" in head or "the best first" in head
            covered = int(total.group(1).replace(",", "")) if folded and total else len(ids)
            ledger.covered[message.chat_id] += covered
            if ids:
                ledger.listed.append(ledger.keys(message.chat_id, ids))
            if self.modes.get(message.chat_id, "instant") != "instant":
                record.digests += 1
                due = self._match_due(message.chat_id, message.time)
                ledger.sends.append((due, message.time, KIND_DIGEST))
                delay = message.time - due
                record.max_digest_delay_s = max(record.max_digest_delay_s, delay)
                record.digests_late_15min += delay > 900
                if delay > 900 and len(self.late_examples) < 5:
                    t0 = self.clock.at(START)
                    self.late_examples.append(
                        (
                            message.chat_id,
                            self.modes[message.chat_id],
                            round(due - t0),
                            round(message.time - t0),
                            [round(t - t0) for t in self.all_due[message.chat_id]],
                            head[:60],
                        )
                    )
            else:
                record.instant += 1
                due = max((t for t in self.round_times if t <= message.time), default=0.0)
                ledger.sends.append((due, message.time, KIND_INSTANT))
                record.instant_max_delay_s = max(record.instant_max_delay_s, message.time - due)
            self.last_bulk = max(self.last_bulk, message.time)
        fake.forget_history()

    def _match_due(self, chat_id: int, sent: float) -> float:
        """The due time a digest message answers: the latest one at or before it (the second
        message of a two-message digest answers the same one)."""
        times = self.due.get(chat_id, [])
        while len(times) > 1 and times[1] <= sent:
            times.pop(0)
        return times[0] if times and times[0] <= sent else sent

    # ------------------------------------------------------------------ the week
    async def run(self) -> dict[str, Any]:
        end = self.clock.at(START + timedelta(days=self.cfg.days))
        began, cpu0 = time.monotonic(), time.process_time() + self._worker_cpu()
        self.began = began
        worker = self.loop.create_task(self.delivery_worker())
        tasks = [
            self.loop.create_task(self.announcer()),
            self.loop.create_task(self.maintainer()),
            self.loop.create_task(self.prober(end)),
        ]
        await self.meter(end)
        self.delivery.close()
        self.wake.set()
        await asyncio.gather(worker, *tasks, return_exceptions=True)
        # what went out while the delivery closed (a digest due at the last instant, settled
        # after the last minute's read): in the ledger as in the watermarks
        self._read_log(self.hours[-1])
        cpu = time.process_time() + self._worker_cpu() - cpu0  # the bot's and its worker's
        wall = time.monotonic() - began
        bytes_end = await self.store.used_bytes()
        owed = await self._owed()
        await self.app.shutdown()
        await self.store.close()
        return self._summary(owed, wall, cpu - self.measure_cpu, bytes_end)

    async def _owed(self) -> dict[int, int]:
        """Chat → the papers it is owed by the end: what its topics matched in the week's
        announcements (read from the matches, the input, not from the outbox) — all of them
        for an instant chat; for a digest chat those of the rounds its digests have covered
        (its watermark) or should have: every round matched before a due time at least 15
        minutes before the end (a digest that never went counts its papers as lost)."""
        end = self.clock.at(START + timedelta(days=self.cfg.days)) - 900
        day_of = {
            pid: day for day, (a, b) in enumerate(self.day_ranges) for pid in range(a + 1, b + 1)
        }
        ids = list(day_of)
        by_topic: dict[int, list[set[int]]] = defaultdict(lambda: [set() for _ in self.round_times])
        for paper_id, topics in (await self.store.paper_topics(ids)).items():
            for topic in topics:
                by_topic[topic.id][day_of[paper_id]].add(paper_id)
        owed: dict[int, int] = {}
        for chat_id, follows in self.population.follows.items():
            rounds = len(self.day_ranges)
            if self.modes[chat_id] != "instant":  # the rounds its digests have covered
                chat = await self.store.chat(chat_id)
                assert chat is not None
                covered = sum(1 for _, last in self.day_ranges if last <= chat.digest_through)
                last_due = max((t for t in self.all_due.get(chat_id, []) if t <= end), default=0)
                rounds = max(covered, sum(1 for done in self.round_done if done <= last_due))
            papers: set[int] = set()
            for topic_id in follows:
                for day_set in by_topic.get(topic_id, [])[:rounds]:
                    papers |= day_set
            owed[chat_id] = len(papers)
        return owed

    # ------------------------------------------------------------------ the figures
    def _summary(self, owed: dict[int, int], wall: float, cpu: float, bytes_end: int) -> dict:
        cfg, ledger = self.cfg, self.ledger
        covered = ledger.covered
        lost = sum(max(0, n - covered.get(c, 0)) for c, n in owed.items())
        over = sum(max(0, covered.get(c, 0) - owed.get(c, 0)) for c in covered)
        duplicated = over + ledger.duplicated_listings()
        self.mismatches = {
            c: (self.modes[c], n, covered.get(c, 0))
            for c, n in owed.items()
            if n != covered.get(c, 0)
        }
        sends = ledger.all_sends()
        shutil.rmtree(ledger.spill_dir, ignore_errors=True)
        due, sent, kind = sends[:, 0], sends[:, 1], sends[:, 2]
        # what the ceiling makes necessary: the bulk messages due and not yet sent at a
        # message's due time, at 30 a second
        due_sorted, sent_sorted = np.sort(due), np.sort(sent)
        backlog = np.searchsorted(due_sorted, due, "right") - np.searchsorted(sent_sorted, due)
        required = backlog / CEILING
        delay = sent - due
        digest = kind == KIND_DIGEST
        late = digest & (delay > 900)
        allowed = required <= 900 - 60
        bound_hours = sorted(
            {int((d - self.clock.at(START)) // 3600) for d in due[late & ~allowed]}
        )
        instant = kind == KIND_INSTANT
        beyond = instant & (delay > required + 60)
        minute_counts, burst_share = self._burst_minutes(due_sorted, sent_sorted)
        for record in self.hours:
            shares = burst_share.get(record.hour)
            record.burst_ceiling_used = float(np.mean(shares)) if shares else 0.0
        peak_hour = max(self.hours, key=lambda h: h.digests) if self.hours else Hour(0)
        idle = [lat for _, lat, _, busy in self.probes if not busy]
        busy = [lat for _, lat, _, during in self.probes if during]
        t_peak = self.clock.at(START) + 3600 * peak_hour.hour
        peak = [
            lat for began, lat, _, busy in self.probes if busy and t_peak <= began < t_peak + 3600
        ]
        digests_due = sum(len(t) for t in self.all_due.values())
        chat_days = cfg.chats * cfg.days
        burst_hours = [h for h in self.hours if h.burst_ceiling_used > 0 and h.messages > 3600]
        result = {
            "chats": cfg.chats,
            "days": cfg.days,
            "seed": cfg.seed,
            "papers_per_day": cfg.papers,
            "digests_due": digests_due,
            "digests_sent": int(np.count_nonzero(digest)),
            "digests_late_15min": int(np.count_nonzero(late & allowed)),
            "digests_late_ceiling_bound": int(np.count_nonzero(late & ~allowed)),
            "ceiling_bound_hours": bound_hours,
            "max_digest_delay_s": round(float(delay[digest].max(initial=0.0)), 1),
            "ceiling_used_peak": round(
                max((h.burst_ceiling_used for h in burst_hours), default=0.0), 3
            ),
            "ceiling_used_burst_min": round(
                min((h.burst_ceiling_used for h in burst_hours), default=0.0), 3
            ),
            "http_429": int(self.fake.stats["by_error_code"].get(429, 0)),
            "lost": lost,
            "duplicated": duplicated,
            "owed_papers": sum(owed.values()),
            "owed_papers_instant": sum(n for c, n in owed.items() if self.modes[c] == "instant"),
            "instant_max_delay_s": round(float(delay[instant].max(initial=0.0)), 1),
            "instant_required_s": round(float(required[instant].max(initial=0.0)), 1),
            "instant_beyond_ceiling_plus_1min": int(np.count_nonzero(beyond)),
            "messages": ledger.messages,
            "store_bytes_start": self.bytes_start,
            "store_bytes_end": bytes_end,
            "store_bytes_per_chat_day": round((bytes_end - self.bytes_start) / chat_days, 1),
            "outbox_rows_end": self.hours[-1].outbox_rows if self.hours else 0,
            # the bot's process while it runs (with the harness's fake and tallies, no more:
            # its set-up papers released, its ledger on disk), sampled each simulated minute;
            # and the process's high-water mark including set-up and the final checks
            "peak_rss_mb": round(self.peak_rss / 2**20, 1),
            "peak_rss_process_mb": round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
            ),
            "peak_rss_worker_mb": round(self.worker_rss_mb, 1),  # (sampled hourly)
            "reply_p95_idle_ms": round(percentile(idle, 95) * 1000, 1),
            "reply_p95_peak_ms": round(percentile(peak, 95) * 1000, 1),
            "reply_probes_idle": len(idle),
            "reply_probes_peak": len(peak),
            "reply_p95_busy_ms": round(percentile(busy, 95) * 1000, 1),  # any bulk burst
            "reply_probes_busy": len(busy),
            "peak_digest_hour": peak_hour.hour,
            "cpu_per_round_s": round(max(self.round_cpu, default=0.0), 2),
            "match_seconds_per_round": round(max(self.match_seconds, default=0.0), 2),
            "round_virtual_s": [
                round(done - began, 1)
                for began, done in zip(self.round_times, self.round_done, strict=True)
            ],  # a round's length on the simulated clock: its papers matched
            "bot_cpu_s": round(cpu, 1),
            "assembled_ahead": {  # chats whose messages the assembly process made (prefetch)
                "used": self.delivery.ahead.used,
                "stale": self.delivery.ahead.stale,
            },
            "wall_s": round(wall, 1),
            "setup_s": round(self.setup_seconds, 1),
            "setup_prepared_before": self.prepared,
            "tick_s": cfg.tick,
            "skipped_s": round(self.loop.warped, 1),  # type: ignore[attr-defined]
            "busiest_minute": int(minute_counts.max(initial=0)),
            "hours": [vars(h) for h in self.hours],
        }
        result["limits"] = limits(result)
        result["mismatch_sample"] = dict(list(self.mismatches.items())[:10])
        result["late_examples"] = self.late_examples
        return result

    def _burst_minutes(
        self, due_sorted: np.ndarray, sent_sorted: np.ndarray
    ) -> tuple[np.ndarray, dict[int, list[float]]]:
        """Messages per simulated minute, and for each hour the share of the ceiling used in
        its minutes that had bulk work queued from start to end (the burst)."""
        t0 = self.clock.at(START)
        minutes = int(self.cfg.days * 1440)
        counts = np.bincount(
            ((sent_sorted - t0) // 60).clip(0, minutes - 1).astype(int), minlength=minutes
        )
        starts = t0 + 60 * np.arange(minutes)
        queued_at = np.searchsorted(due_sorted, starts, "right") - np.searchsorted(
            sent_sorted, starts
        )
        queued_end = np.searchsorted(due_sorted, starts + 60, "right") - np.searchsorted(
            sent_sorted, starts + 60
        )
        share: dict[int, list[float]] = defaultdict(list)
        for m in np.nonzero((queued_at > 0) & (queued_end > 0))[0]:
            share[int(m // 60)].append(counts[m] / (CEILING * 60))
        return counts, share


def limits(r: dict[str, Any]) -> dict[str, Any]:
    """The measured edge of one machine, from this run's figures (see docs/performance.md):
    which promise broke first, and what ran out."""
    days = max(1, r["days"])
    per_day = r["messages"] / days
    ceiling_day = CEILING * 86_400
    cpu_day = r["bot_cpu_s"] / days
    behind = r["instant_beyond_ceiling_plus_1min"] + r["digests_late_15min"]
    # the limiter sends at most LIMITER_RATE a second: over a burst that needs T s at 30/s its
    # margin alone takes T × (30 / LIMITER_RATE − 1); instant alerts late by no more than that
    # (and 15 s) are late by the margin kept under Telegram's ceiling, not for want of CPU
    margin = r["instant_required_s"] * (CEILING / LIMITER_RATE - 1)
    excess = r["instant_max_delay_s"] - r["instant_required_s"]
    by_margin = (
        r["instant_beyond_ceiling_plus_1min"] > 0
        and r["digests_late_15min"] == 0
        and excess <= margin + 15
    )
    over = excess - 60
    if by_margin:
        binding = (
            f"Telegram's ceiling binds first: {r['instant_beyond_ceiling_plus_1min']:,} instant "
            f"alerts went out up to {over:.0f} s past the ceiling's time plus a minute, the "
            f"limiter's own margin ({LIMITER_RATE:.0f}/s: {margin:.0f} s over a "
            f"{r['instant_required_s']:.0f} s burst), not CPU (a round took "
            f"{r['match_seconds_per_round']:.0f} s)"
        )
    elif behind:
        binding = (
            f"CPU binds first: {r['instant_beyond_ceiling_plus_1min']:,} instant alerts went "
            "out later than the ceiling's time plus a minute and "
            f"{r['digests_late_15min']:,} digests later than 15 minutes where the ceiling "
            f"allowed (a round took {r['match_seconds_per_round']:.0f} s, "
            f"{r['cpu_per_round_s']:.0f} s of CPU)"
        )
    elif r["ceiling_bound_hours"]:
        binding = (
            f"Telegram's ceiling binds first: hours {r['ceiling_bound_hours']} needed more than "
            "15 minutes at 30/s"
        )
    else:
        binding = (
            "Every promise held; the nearest limit is the ceiling in the bursts (the busiest at "
            f"{r['ceiling_used_peak']:.2f} of it)"
        )
    memory = (
        f"; memory over 500 MB ({r['peak_rss_mb']:.0f} MB, the bot's process at its peak)"
        if r["peak_rss_mb"] > 500
        else ""
    )
    return {
        "messages_per_day": round(per_day),
        "ceiling_messages_per_day": int(ceiling_day),
        "share_of_ceiling_per_day": round(per_day / ceiling_day, 3),
        "bot_cpu_share_of_one_core": round(cpu_day / 86_400, 3),
        "store_mb_per_day": round(r["store_bytes_per_chat_day"] * r["chats"] / 2**20, 1),
        "cpu_bound": bool(behind) and not by_margin,
        "words": (
            f"{r['chats']:,} chats send {per_day:,.0f} messages a day, "
            f"{per_day / ceiling_day:.0%} of Telegram's 30/s ceiling over the day; the bot "
            f"used {cpu_day / 86_400:.1%} of one core and its store grew "
            f"{r['store_bytes_per_chat_day']:.0f} bytes per chat-day. {binding}{memory}."
        ),
    }


# ---------------------------------------------------------------------------------- output
def table(result: dict[str, Any]) -> None:
    print(
        f"{'hour':>4} {'msgs':>6} {'dig':>6} {'inst':>6} {'repl':>4} {'429':>3} {'ceil':>5}"
        f" {'burst':>5} {'late':>5} {'dmax s':>7} {'imax s':>7} {'pending':>8} {'marked':>7}"
        f" {'outbox':>9}"
        f" {'store MB':>8} {'cpu s':>6} {'rss MB':>6}"
    )
    for h in result["hours"]:
        if not (h["messages"] or h["replies"] or h["hour"] % 6 == 0):
            continue
        print(
            f"{h['hour']:>4} {h['messages']:>6} {h['digests']:>6} {h['instant']:>6}"
            f" {h['replies']:>4} {h['http_429']:>3} {h['ceiling_used']:>5.2f}"
            f" {h['burst_ceiling_used']:>5.2f} {h['digests_late_15min']:>5}"
            f" {h['max_digest_delay_s']:>7.0f} {h['instant_max_delay_s']:>7.0f}"
            f" {h['outbox_pending']:>8} {h['instant_marked']:>7} {h['outbox_rows']:>9}"
            f" {h['store_mb']:>8.1f}"
            f" {h['cpu_s']:>6.1f} {h['rss_mb']:>6.0f}"
        )


def report(result: dict[str, Any]) -> None:
    table(result)
    print("\n=== bench_scale ===")
    for key, value in result.items():
        if key not in ("hours", "limits"):
            print(f"{key:<34} {value}")
    print("limits:", result["limits"]["words"])


def curve(sizes: list[int], args: argparse.Namespace) -> dict[str, Any]:
    """The cost curve: one run per size (each its own process: its memory is its own)."""
    points = []
    for n in sizes:
        command = [
            sys.executable, __file__, "--chats", str(n), "--days", str(args.days),
            "--seed", str(args.seed), "--papers", str(args.papers), "--json",
        ]  # fmt: skip
        found = json.loads(subprocess.run(command, check=True, capture_output=True).stdout)
        points.append(
            {
                "chats": n,
                "cpu_per_round_s": found["cpu_per_round_s"],
                "bot_cpu_s_per_day": round(found["bot_cpu_s"] / found["days"], 1),
                "store_bytes_per_chat_day": found["store_bytes_per_chat_day"],
                "peak_rss_mb": found["peak_rss_mb"],
                "messages_per_day": found["limits"]["messages_per_day"],
                "wall_s": found["wall_s"],
                "setup_s": found["setup_s"],
            }
        )
        print(json.dumps(points[-1]), file=sys.stderr)
    return {"curve": points}


async def simulate(cfg: Config) -> dict[str, Any]:
    count_aiosqlite_work()
    cfg.out.mkdir(parents=True, exist_ok=True)
    db = cfg.out / f"scale-{cfg.chats}.db"
    try:
        with lock.exclusive(db):  # (a run still going on this --out: leave its store alone)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
    except lock.DatabaseInUse:
        raise SystemExit(
            f"{db} is in use by another run: give this one its own --out, or wait for it"
        ) from None
    sim = Simulation(cfg)
    await sim.setup(db)
    return await sim.run()


def main() -> int:
    heap.limit_arenas()  # as the bot does at start (topicpulse.heap)
    heap.favour_replies()  # … and hands the GIL over as soon
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--papers", type=int, default=1_500, help="papers an announcement")
    parser.add_argument("--history-days", type=int, default=28, help="stored before, for /momentum")
    parser.add_argument("--probe-peak", type=float, default=15.0, help="s between commands, busy")
    parser.add_argument("--probe-idle", type=float, default=300.0, help="… otherwise")
    parser.add_argument(
        "--tick", type=float, default=DELIVERY_TICK, help="s between idle delivery passes"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the stores")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--curve", help="comma-separated chat counts: the cost curve")
    args = parser.parse_args()
    if args.curve:
        print(json.dumps(curve([int(n) for n in args.curve.split(",")], args), indent=1))
        return 0
    cfg = Config(
        args.chats, args.days, args.seed, args.papers, args.history_days,
        args.probe_peak, args.probe_idle, args.tick, args.out,
    )  # fmt: skip
    loop = WarpLoop()
    try:
        result = loop.run_until_complete(simulate(cfg))
    finally:
        loop.close()
        offload.shutdown()  # (the worker processes: none outlives the run)
    if os.environ.get("SCALE_DEBUG"):
        print(result.get("mismatch_sample"), result.get("late_examples"), file=sys.stderr)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "hours"}))
        (cfg.out / f"scale-{cfg.chats}.json").write_text(json.dumps(result, indent=1))
    else:
        report(result)
    return 0 if result["lost"] == 0 and result["duplicated"] == 0 else 1


if __name__ == "__main__":
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    raise SystemExit(main())
