"""Reply-latency benchmark: do replies stay fast while the bot ingests and matches a big batch?

Set-up (not measured; the store is built once per day and parameters, then copied): synthetic
papers (``topicpulse.synthetic.generate_papers``) over the last 10 weeks at 2,400 a weekday
(arXiv's volume in the default categories is ~1,000: ~130,000 papers here), so momentum has
history; the rounds' new papers — 2,000 a round, 5 rounds — are drawn from the last 6 days of
that same stream and left out of the store (late announcements look like that, and they stay
inside the poll's 7-day overlap; 2,400 a weekday is what 5 × 2,000 papers in 6 days need). A
thinner history (e.g. 250 a weekday: 14,500 papers) makes a 2,000-paper batch a burst on which
most topics spike; ``--per-weekday`` sets it. ``--real``: the real listing
(``shared/arxiv-listings/papers.jsonl``, ~125 a weekday: a burst). The catalogue is loaded; 300
chats each follow one DISTINCT custom query (generated from the catalogue's and the generator's
vocabulary — phrases, words narrowed by AND, OR-ed alternatives, NOT, fields, categories — and
kept only if it matches 0.05–2% of the stored papers, as a query kept after /follow's preview
would), half of them also a catalogue topic; 12 "user" chats follow 3 catalogue topics and 4
custom queries each. All through the store API before the bot starts.

The bot: the real Application (``build_application``: the production handlers, rate limiter,
delivery engine and store) runs in a CHILD PROCESS — this file with ``--bot-child`` — so that
the benchmark's own work (the fakes, the typing) does not compete for the bot's event loop or
GIL. It talks to the fake Bot API (``tests/fake_telegram.py``: Telegram's flood limits
enforced, NO added latency), served by this process, and to the fake arXiv
(``tests/fake_arxiv.py``: the last 10 days, and from each round on that round's papers),
served by a process of its own (``_support.ArxivProcess``: arXiv is not on the bot's machine,
and the ~70 ms a page takes the fake to render would otherwise stall the fake Bot API that
times the replies — until 2026-12-01 it did, and busy replies looked slower), at the lowest CPU
priority (``--arxiv-nice``, 19: it gets only the CPU the bot leaves idle; on a 2-core machine a
fake arXiv rendering pages at the bot's priority takes a core from it, which the real one,
being elsewhere, does not). The poll job is
pushed out of the way; SIGUSR1 starts a round, ``Pipeline.poll_round()`` — what the poll job
runs: re-read the overlap window (4–6 pages of 1,000), store, match against every live topic,
detect spikes, wake the delivery. The child only adds probes, stamped with ``time.monotonic()``
(one clock for both processes) into an events file: each step of a round, each update's
handling, each store read (and its wait for a reader connection), each reply's wait in the rate
limiter, every event-loop stall over 20 ms, and the stacks of all threads while the loop is
more than 100 ms late.

Measured: "the users" — 36 private chats taking turns, one command every 0.10–0.17 s in all
(each chat every ~5 s: under the bot's 20 commands/min per user and Telegram's ~1 message/s per
chat) — type ``/list`` and ``/momentum <topic>`` alternately (a topic not asked since the last
round, so the chart is drawn, not taken from the chart cache). A command's latency runs from the
moment the fake hands its update to the bot (its getUpdates answer) to the moment the first
message of the reply reaches the fake; /momentum's chart photo, which follows its text, is
reported apart. Phase 1: the idle bot (``--idle`` commands); with ``--raters``, then the idle
bot again while the raters tap (state "rating": what the taps alone add). Phase 2,
``--rounds`` times: typing
goes on, a round is started, and typing continues until the outbox has drained. Each command is
classed by the bot's state when its update was handed over: idle, busy (the round — ingest,
match, spikes — was running) or drain (the round's alerts being delivered). A round lasts
1–2 s, so each gives ~8–14 busy commands (35–50 in all); ``--budget`` (240 s) skips rounds that
would end the run later than that.

Also printed: the garbage collector's pauses in the bot (those of the oldest generation, and
any ≥ 5 ms) and how late this process's own event loop ran (the fake stamps the replies), by
state.

Target (issue 8 §2): busy p95 ≤ 1.5 × idle p95, and no reply over 2 s. The exit status is
non-zero only on errors (the bot does not start, a reply is missing, the outbox does not
drain), not on a missed target. The machine's load average is printed: other work on this
2-core machine moves every figure.

    .venv/bin/python bench/bench_replies.py                # ~3.5 minutes (4 the first time)
    .venv/bin/python bench/bench_replies.py --verbose      # + slowest commands, reads, stacks
    .venv/bin/python bench/bench_replies.py --profile      # + py-spy: who holds the GIL
    .venv/bin/python bench/bench_replies.py --switch-interval 0.005   # Python's default
    .venv/bin/python bench/bench_replies.py --arxiv-nice 0            # arXiv competing for CPU
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import dataclasses
import gc
import itertools
import json
import linecache
import math
import os
import random
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil

from _raters import KIND as RATERS_KIND
from _raters import Raters, collect_answers, post_messages, prepare_raters, tastes_due
from _support import (
    OUT,
    ArxivProcess,
    BotProcess,
    bot_env,
    fresh_db,
    outbox_counts,
    pending_rows,
    percentile,
)
from fake_arxiv import LISTINGS, load_listing
from fake_telegram import FakeTelegram
from topicpulse.models import Paper, iso
from topicpulse.store import Store
from topicpulse.synthetic import generate_papers
from topicpulse.synthetic import vocabulary as synthetic_vocab
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import custom_topic, load_catalogue, sync_catalogue

EVENTS_ENV = "BENCH_REPLIES_EVENTS"
SWITCH_ENV = "BENCH_REPLIES_SWITCH_INTERVAL"
LIGHT_ENV = "BENCH_REPLIES_LIGHT"
CPROFILE_ENV = "BENCH_REPLIES_CPROFILE"
BASE = OUT / "replies-base.db"  # the prepared store, cached per day and parameters
STALL = 0.020  # seconds: event-loop stalls longer than this are recorded by the child
WATCH_EVERY = 0.010
SAMPLE_AFTER = 0.100  # the child samples stacks while the loop is this late
SAMPLE_EVERY = 0.050
FLUSH_EVERY = 0.020  # seconds between flushes of the bot's events file
BATCH_DAYS = 6  # the rounds' new papers are from the last 6 days
USERS = 36  # the typing users: this many chats taking turns, each every ~4-5 s
USER_FIRST_ID = 900_001
WARMUP_CHAT = 899_999
FOLLOWER_FIRST_ID = 100_001
USER_CUSTOM = 4
USER_CATALOGUE = 3
TARGET_RATIO = 1.5
TARGET_MAX = 2.0
LIST_PREFIX = "<b>Following"
MOMENTUM_PREFIX = "📊"


# ================================================================================ the bot child
def child_main() -> int:
    """The bot, as ``topicpulse run`` runs it, plus timing probes (see the module docstring)."""
    import logging

    from telegram import Update
    from telegram.ext import Application

    from topicpulse import heap
    from topicpulse.bot import app as botapp
    from topicpulse.bot.ratelimit import TelegramRateLimiter
    from topicpulse.config import load_settings
    from topicpulse.insight import momentum
    from topicpulse.logs import setup_logging
    from topicpulse.sources.ingest import Ingestor
    from topicpulse.store.database import Database
    from topicpulse.topics import matching

    # Buffered, and flushed by a thread of its own every FLUSH_EVERY: a write per event would
    # be a system call per event on the probed threads (~500 a second while readers tap),
    # each letting go of the GIL, which the bot without probes does not make.
    events = open(os.environ[EVENTS_ENV], "a", buffering=1 << 20, encoding="utf-8")  # noqa: SIM115
    lock = threading.Lock()  # the event loop, worker threads and the sampler all emit

    def emit(event: str, **data: Any) -> None:
        data.setdefault("t", time.monotonic())
        line = json.dumps({"event": event, **data}) + "\n"
        with lock:
            if not events.closed:  # (the collector and the sampler may outlive the bot's end)
                events.write(line)

    def flush_events() -> None:
        while not events.closed:
            time.sleep(FLUSH_EVERY)
            with lock:
                if not events.closed:
                    events.flush()

    threading.Thread(target=flush_events, name="events", daemon=True).start()

    def patch(targets: list[tuple[Any, str]], wrap: Callable[[Any], Any]) -> None:
        """Wrap a function wherever it is reachable (its module, and modules that imported it
        by name); a probe whose target moved is skipped and reported, the bot runs anyway."""
        found = [(owner, name) for owner, name in targets if hasattr(owner, name)]
        if not found:
            emit("probe_missing", name=".".join(str(x) for x in targets[0][::-1]))
            return
        original = getattr(*found[0])
        wrapped = wrap(original)
        for owner, name in found:
            if getattr(owner, name) is original:
                setattr(owner, name, wrapped)

    def facts(describe: Callable[[Any], dict[str, Any]] | None, result: Any) -> dict[str, Any]:
        try:
            return describe(result) if describe and result is not None else {}
        except Exception:  # the result's shape changed: the timing is still good
            return {}

    def timed(name: str, describe: Callable[[Any], dict[str, Any]] | None = None) -> Any:
        def wrap(fn: Any) -> Any:
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                started = time.monotonic()
                emit(f"{name}_start", t=started)
                result = None
                try:
                    result = await fn(*args, **kwargs)
                    return result
                finally:
                    emit(f"{name}_end", seconds=time.monotonic() - started,
                         **facts(describe, result))  # fmt: skip

            return wrapper

        return wrap

    def timed_sync(name: str) -> Any:  # runs in a worker thread
        def wrap(fn: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                started = time.monotonic()
                try:
                    return fn(*args, **kwargs)
                finally:
                    emit(f"{name}_end", t_start=started, seconds=time.monotonic() - started)

            return wrapper

        return wrap

    from topicpulse.store import Store as ChildStore

    patch(
        [(Ingestor, "poll")],
        timed("ingest", lambda r: {"new": r[0].new, "requests": r[0].requests}),
    )
    # storing a round's papers: parsed and stored in a worker process (or here, by the store)
    patch([(Ingestor, "_store")], timed("upsert"))
    patch(
        [(botapp, "match_new_papers"), (matching, "match_new_papers")],
        timed(
            "match",
            lambda r: {
                "papers": r.papers,
                "topics": r.topics,
                "matches": r.matches,
                "alerts": r.chats_marked,
            },
        ),
    )
    # match_stored runs in the worker process (topicpulse.offload): time the call from here.
    from topicpulse import offload

    def timed_offload(run: Any) -> Any:
        async def wrapper(fn: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            facts: dict[str, Any] = {}
            name = getattr(fn, "__name__", "offload")
            try:
                result = await run(fn, *args, **kwargs)
                if name == "_detect_followed_apart":  # the round's spike step, run by the worker
                    name, facts = "spikes", {"opened": len(result)}
                return result
            finally:
                emit(f"{name}_end", t_start=started, seconds=time.monotonic() - started, **facts)

        return wrapper

    patch([(offload, "run")], timed_offload)
    patch([(ChildStore, "record_matches")], timed("record"))
    patch([(momentum, "detect_spikes"), (botapp, "detect_spikes")],
          timed("spikes", lambda r: {"opened": len(r)}))  # fmt: skip

    def task_id() -> int:
        return id(asyncio.current_task())

    def timed_update(process_update: Any) -> Any:
        async def wrapper(self: Application, update: object) -> None:  # type: ignore[type-arg]
            update_id = getattr(update, "update_id", None)
            emit("handle_start", update_id=update_id, task=task_id())
            try:
                await process_update(self, update)
            finally:
                emit("handle_end", update_id=update_id, task=task_id())

        return wrapper

    light = bool(os.environ.get(LIGHT_ENV))  # --light: the round's steps and the stalls only
    if not light:
        patch([(Application, "process_update")], timed_update)

    # every read: how long it took end to end, and how long it waited for a reader connection
    pool_wait: contextvars.ContextVar[float] = contextvars.ContextVar("pool_wait", default=0.0)

    def timed_borrow(borrow: Any) -> Any:
        @contextlib.asynccontextmanager
        async def wrapper(self: Database) -> Any:
            started = time.monotonic()
            async with borrow(self) as conn:
                pool_wait.set(time.monotonic() - started)
                yield conn

        return wrapper

    def timed_read(read: Any) -> Any:
        async def wrapper(self: Database, *args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            pool_wait.set(0.0)
            try:
                return await read(self, *args, **kwargs)
            finally:
                emit("read", t=started, seconds=time.monotonic() - started,
                     wait=pool_wait.get(), task=task_id(),
                     sql=" ".join(str(args[0] if args else "?").split())[:90])  # fmt: skip

        return wrapper

    def timed_write(write: Any) -> Any:
        """every write transaction: how long it waited to begin (the bot's write lock, then
        SQLite's), and how long it took in all"""

        @contextlib.asynccontextmanager
        async def wrapper(self: Database) -> Any:
            started = time.monotonic()
            began = started
            try:
                async with write(self) as conn:
                    began = time.monotonic()
                    yield conn
            finally:
                emit("write", t=started, waited=began - started,
                     seconds=time.monotonic() - started, task=task_id())  # fmt: skip

        return wrapper

    if not light:
        patch([(Database, "_write")], timed_write)
        patch([(Database, "_read")], timed_borrow)
        patch([(Database, "_row")], timed_read)
        patch([(Database, "_rows")], timed_read)

    # replies only: how long the rate limiter held them (their chat's and the global bucket)
    def timed_limit(limit: Any) -> Any:
        async def wrapper(self: Any, callback: Any, args: Any, kwargs: Any, endpoint: str,
                          data: dict[str, Any], rate_limit_args: Any) -> Any:  # fmt: skip
            if rate_limit_args:  # a bulk send (an alert)
                return await limit(self, callback, args, kwargs, endpoint, data, rate_limit_args)
            entered = time.monotonic()

            async def stamped(*a: Any, **k: Any) -> Any:
                sent = time.monotonic()
                try:
                    return await callback(*a, **k)
                finally:
                    emit("reply_send", t=entered, waited=sent - entered,
                         http=time.monotonic() - sent, task=task_id())  # fmt: skip

            return await limit(self, stamped, args, kwargs, endpoint, data, rate_limit_args)

        return wrapper

    if not light:
        patch([(TelegramRateLimiter, "process_request")], timed_limit)

    heap.favour_replies()  # (as run_bot does)
    collecting: dict[int, float] = {}

    def timed_gc(phase: str, info: dict[str, int]) -> None:  # the collector's pauses
        if phase == "start":
            collecting[info["generation"]] = time.monotonic()
        elif (began := collecting.pop(info["generation"], None)) is not None:
            took = time.monotonic() - began
            if info["generation"] == 2 or took > 0.005:
                emit("gc", t=began, seconds=took, generation=info["generation"])

    gc.callbacks.append(timed_gc)
    if os.environ.get(SWITCH_ENV):  # --switch-interval: an experiment, not the bot's setting
        sys.setswitchinterval(float(os.environ[SWITCH_ENV]))
    settings = load_settings()
    setup_logging(logging.INFO, secrets=[settings.telegram_bot_token or ""])
    app = botapp.build_application(settings, poll_first=10**7)
    post_init = app.post_init
    assert post_init is not None

    beat = [time.monotonic()]

    async def watch_loop() -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + WATCH_EVERY
            await asyncio.sleep(WATCH_EVERY)
            beat[0] = loop.time()
            lag = beat[0] - due
            if lag > STALL:
                emit("stall", t=due, seconds=lag)

    def sample_stalls(main_id: int) -> None:
        """A thread: while the event loop has not ticked for SAMPLE_AFTER, the stacks of the
        event loop's thread and of every busy thread, every SAMPLE_EVERY."""
        known: dict[int, str] = {}
        while True:
            time.sleep(SAMPLE_EVERY)
            current = {t.native_id or 0: t.name for t in threading.enumerate()}
            if current != known:  # (for the parent's CPU time by thread)
                known = current
                emit("threads", names={str(k): v for k, v in current.items()})
            late = time.monotonic() - beat[0]
            if late < SAMPLE_AFTER:
                continue
            names = {t.ident: t.name for t in threading.enumerate()}
            stacks = {
                "main" if ident == main_id else names.get(ident, str(ident)): _stack(
                    frame, keep_idle=ident == main_id
                )
                for ident, frame in sys._current_frames().items()
                if ident != threading.get_ident()
            }
            emit("stall_sample", late=late, stacks={k: v for k, v in stacks.items() if v})

    async def bench_round(pipeline: botapp.Pipeline) -> None:
        emit("round_start")
        try:
            await pipeline.poll_round()
        finally:
            emit("round_end")

    async def bench_post_init(application: Application) -> None:  # type: ignore[type-arg]
        await post_init(application)
        pipeline = botapp.pipeline_of(application)
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGUSR1, lambda: pipeline.spawn(bench_round(pipeline), "bench-round")
        )
        pipeline.spawn(watch_loop(), "bench-watch")
        if not light:
            threading.Thread(
                target=sample_stalls, args=(threading.get_ident(),), daemon=True,
                name="bench-sampler",
            ).start()  # fmt: skip
        emit("ready")

    app.post_init = bench_post_init
    if os.environ.get(CPROFILE_ENV):  # --cprofile: the event loop's thread, to a file
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        try:
            app.run_polling(allowed_updates=Update.ALL_TYPES)
        finally:
            profiler.disable()
            profiler.dump_stats(os.environ[CPROFILE_ENV])
    else:
        app.run_polling(allowed_updates=Update.ALL_TYPES)
    with lock:
        events.close()
    return 0


_WAITING = (".get(", ".wait(", "select(", "sleep(", ".acquire(")


def _stack(frame: Any, depth: int = 14, keep_idle: bool = False) -> list[str]:
    """Innermost first, ``folder/file.py:line function``; [] for a thread that only waits —
    its innermost line blocks in a queue, lock or select (unless ``keep_idle``)."""
    if frame is None:
        return []
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno or 0)
    if not keep_idle and any(w in line for w in _WAITING):
        return []
    out: list[str] = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        path = Path(code.co_filename)
        out.append(f"{path.parent.name}/{path.name}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return out


def bot_child(env: dict[str, str], log_path: Path) -> BotProcess:
    """This file with ``--bot-child`` as a child process (log to ``log_path``)."""
    return BotProcess(env, log_path, argv=(str(Path(__file__).resolve()), "--bot-child"))


class ThreadTimes:
    """The bot's CPU time by thread (user + system, from /proc), summed over the spans of each
    phase ("rounds": every round's, from its signal to its end)."""

    def __init__(self) -> None:
        self.spent: dict[str, dict[int, float]] = {}
        self.seconds: dict[str, float] = {}
        self._at: tuple[float, dict[int, float]] = (0.0, {})

    @staticmethod
    def _now(proc: psutil.Process) -> dict[int, float]:
        return {t.id: t.user_time + t.system_time for t in proc.threads()}

    def start(self, proc: psutil.Process) -> None:
        self._at = (time.monotonic(), self._now(proc))

    def stop(self, proc: psutil.Process, phase: str) -> None:
        began, before = self._at
        spent = self.spent.setdefault(phase, {})
        for tid, seconds in self._now(proc).items():
            spent[tid] = spent.get(tid, 0.0) + seconds - before.get(tid, 0.0)
        self.seconds[phase] = self.seconds.get(phase, 0.0) + time.monotonic() - began

    def report(self, events: Events) -> None:
        names: dict[int, str] = {}
        for item in events.named("threads"):
            names.update((int(k), v) for k, v in item["names"].items())
        for phase, spent in self.spent.items():
            wall = max(self.seconds[phase], 1e-9)
            top = sorted(spent.items(), key=lambda kv: -kv[1])[:5]
            shares = ", ".join(
                f"{names.get(tid, tid)} {100 * cpu / wall:.0f}%" for tid, cpu in top if cpu > 0
            )
            print(f"the bot's CPU by thread while {phase} (% of a core): {shares}")


class Events:
    """The child's events file, read incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[dict[str, Any]] = []
        self._by_name: dict[str, list[dict[str, Any]]] = {}  # (waits poll every 20 ms)
        self._offset = 0

    def poll(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return self.items
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            if line.strip():
                item = json.loads(line)
                self.items.append(item)
                self._by_name.setdefault(item["event"], []).append(item)
        return self.items

    def named(self, name: str) -> list[dict[str, Any]]:
        self.poll()
        return self._by_name.get(name, [])

    async def wait(self, name: str, count: int = 1, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while len(self.named(name)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {name!r} event from the bot within {timeout:.0f}s")
            await asyncio.sleep(0.02)
        return self.named(name)[count - 1]


# ================================================================================ the workload
@dataclass
class Plan:
    history: list[Paper]
    batches: list[list[Paper]]  # the new papers of each round
    source: str


def synthetic_plan(today: date, *, weeks: int, per_weekday: int, new: int, rounds: int) -> Plan:
    """``weeks`` weeks of papers up to yesterday at ``per_weekday`` (arXiv's own rhythm); the
    rounds' ``rounds × new`` papers are drawn from the last BATCH_DAYS days (late announcements
    and a backlog look like that: within the poll's 7-day overlap), the rest is the history.
    One stream, so the new papers are no burst and topics do not all spike at once."""
    papers = generate_papers(start=today - timedelta(weeks=weeks), days=weeks * 7,
                             per_weekday=per_weekday, seed=8)  # fmt: skip
    since = iso(datetime.combine(today - timedelta(days=BATCH_DAYS), datetime.min.time(), UTC))
    pool = [p for p in papers if p.published >= since]
    if len(pool) < rounds * new:
        raise SystemExit(
            f"the last {BATCH_DAYS} days hold {len(pool)} papers, fewer than {rounds} × {new}: "
            "raise --per-weekday"
        )
    fresh = sorted(random.Random(9).sample(pool, rounds * new), key=lambda p: p.published)
    taken = {p.arxiv_id for p in fresh}
    history = [p for p in papers if p.arxiv_id not in taken]
    batches = [fresh[k * new : (k + 1) * new] for k in range(rounds)]
    return Plan(history, batches, f"synthetic, {weeks} weeks at {per_weekday}/weekday")


def real_plan(today: date, *, new: int, rounds: int) -> Plan:
    """The real listing: its newest ``rounds × new`` papers become the rounds' batches (re-dated
    over the last BATCH_DAYS days), the rest the history before them. The listing holds ~125
    papers a weekday, so 2,000 new ones are a burst: most topics spike. As many rounds as
    leave at least 1,500 papers of history."""
    end = today - timedelta(days=BATCH_DAYS + 1)
    papers = sorted(load_listing(end=end), key=lambda p: p.published)
    fits = (len(papers) - 1_500) // new
    if fits < 1:
        raise SystemExit(f"--real: {len(papers)} papers cannot give {new} new ones and a history")
    if fits < rounds:
        print(f"--real: {len(papers)} papers give {fits} round(s) of {new}, not {rounds}")
        rounds = fits
    history, fresh = papers[: -rounds * new], papers[-rounds * new :]
    first = datetime.combine(today - timedelta(days=BATCH_DAYS), datetime.min.time(), UTC)
    step = BATCH_DAYS * 86_000 // len(fresh)
    redated = [
        dataclasses.replace(
            p, published=iso(first + timedelta(seconds=i * step)),
            updated=iso(first + timedelta(seconds=i * step)), version=1,
        )
        for i, p in enumerate(fresh)
    ]  # fmt: skip
    batches = [redated[k * new : (k + 1) * new] for k in range(rounds)]
    return Plan(history, batches, f"real listing ({LISTINGS.name}, re-dated)")


def vocabulary() -> tuple[list[str], list[str]]:
    """(phrases, words) in the query language: the catalogue's terms and two-word phrases from
    the synthetic generator's research themes (what the papers are written from)."""
    phrases: set[str] = set()
    words: set[str] = set()
    for entry in load_catalogue():
        for term in ql.terms(ql.parse(entry.query, max_length=None)):
            if term.field in (None, "ti", "abs"):
                (words if len(term.tokens) == 1 else phrases).add(ql.unparse(term).split(":")[-1])
    for theme in synthetic_vocab.THEMES:
        for text in (*theme.topics, *theme.tasks, *theme.parts, *theme.problems):
            tokens = [t for t in ql.tokenize(text) if len(t) > 3 and t.isalpha()]
            for a, b in itertools.pairwise(tokens):
                phrases.add(f'"{a} {b}"')
            words.update(t for t in tokens if len(t) > 5)
    return sorted(phrases), sorted(words)


def candidate_queries(seed: int = 8) -> Iterator[str]:
    """Valid custom queries, distinct once normalised, without end."""
    phrases, words = vocabulary()
    rng = random.Random(seed)
    categories = ["cs.CL", "cs.AI", "cs.LG", "cs.CV", "cs.IR", "cs.RO", "stat.ML", "eess.AS"]

    def p() -> str:
        return rng.choice(phrases)

    def w() -> str:
        return rng.choice(words)

    templates: list[Callable[[], str]] = [
        lambda: p(),
        lambda: f"{p()} OR {p()}",
        lambda: f"{w()} AND {p()}",
        lambda: f"{w()} {w()}",
        lambda: f"({p()} OR {p()}) {w()}",
        lambda: f"({w()} OR {w()}) AND ({p()} OR {p()})",
        lambda: f"{p()} NOT {w()}",
        lambda: f"cat:{rng.choice(categories)} AND ({p()} OR {w()})",
        lambda: f"ti:{w()} OR ti:{p()}",
        lambda: f"{w()[:5]}* AND {p()}",
    ]
    seen: set[str] = set()
    while True:
        text = rng.choice(templates)()
        try:
            normalised = ql.normalise(text)
        except ql.QueryError:
            continue
        if normalised not in seen and len(text) <= 120:
            seen.add(normalised)
            yield text


async def realistic_queries(store: Store, count: int, papers: int, seed: int = 8) -> list[str]:
    """``count`` queries that match between 0.05% and 2% of the stored papers: what a user
    keeps after /follow's preview (a query matching nothing, or everything, is retyped)."""
    low, high = max(3, papers // 2000), max(10, papers // 50)
    chosen: list[str] = []
    for text in candidate_queries(seed):
        found = await store.count_matches(fts=ql.to_fts(ql.parse(text)))
        if low <= found <= high:
            chosen.append(text)
            if len(chosen) == count:
                return chosen
    raise AssertionError("unreachable")


@dataclass
class Setup:
    users: dict[int, list[str]]  # user chat → the topics it may ask /momentum about
    catalogue: list[str]
    custom_matches: list[int]  # papers each follower's custom query matches in the history
    raters: dict[int, list[int]] = field(default_factory=dict)  # --raters: chat → its papers


async def prepare_store(
    db: Path, plan: Plan, *, followers: int, catalogue_share: float, raters: int, seed: int = 8
) -> Setup:
    rng = random.Random(seed)
    store = await Store.open(db)
    try:
        await store.upsert_papers(plan.history)
        await sync_catalogue(store)
        catalogue = await store.topics(kind="catalogue")
        queries = await realistic_queries(
            store, followers + USERS * USER_CUSTOM, len(plan.history), seed=seed
        )
        custom_matches: list[int] = []
        for index in range(followers):
            chat_id = FOLLOWER_FIRST_ID + index
            topic = await custom_topic(store, queries[index])
            custom_matches.append(await store.count_matches(topic_id=topic.id))
            await store.ensure_chat(chat_id)
            await store.subscribe(chat_id, topic.id)
            if rng.random() < catalogue_share:
                await store.subscribe(chat_id, rng.choice(catalogue).id)
        users: dict[int, list[str]] = {}
        mine = queries[followers:]
        for index in range(USERS):
            chat_id = USER_FIRST_ID + index
            await store.ensure_chat(chat_id)
            own = mine[index * USER_CUSTOM : (index + 1) * USER_CUSTOM]
            for text in own:
                await store.subscribe(chat_id, (await custom_topic(store, text)).id)
            for topic in rng.sample(catalogue, USER_CATALOGUE):
                await store.subscribe(chat_id, topic.id)
            users[chat_id] = own
        await store.ensure_chat(WARMUP_CHAT)
        for topic in catalogue[:5]:
            await store.subscribe(WARMUP_CHAT, topic.id)
        rating = await prepare_raters(store, raters, [t.id for t in catalogue], rng)
        return Setup(users, [t.name for t in catalogue], custom_matches, rating)
    finally:
        await store.close()


async def prepared_store(
    db: Path, plan: Plan, args: argparse.Namespace, today: date
) -> tuple[Setup, bool]:
    """The prepared store at ``db``: built once per day and parameters into BASE, then copied
    (True: from the cache)."""
    key = json.dumps(
        [str(today), plan.source, len(plan.history), args.new, args.rounds, args.followers,
         args.catalogue_share, USERS, args.raters, RATERS_KIND],
    )  # fmt: skip
    sidecar = BASE.with_suffix(".json")
    if not args.rebuild and BASE.exists() and sidecar.exists():
        saved = json.loads(sidecar.read_text("utf-8"))
        if saved.get("key") == key:
            shutil.copyfile(BASE, db)
            setup = saved["setup"]
            users = {int(chat): topics for chat, topics in setup.pop("users").items()}
            raters = {int(chat): ids for chat, ids in setup.pop("raters", {}).items()}
            return Setup(users=users, raters=raters, **setup), True
    sidecar.unlink(missing_ok=True)
    base = fresh_db(BASE.name)
    setup = await prepare_store(
        base,
        plan,
        followers=args.followers,
        catalogue_share=args.catalogue_share,
        raters=args.raters,
    )
    sidecar.write_text(json.dumps({"key": key, "setup": dataclasses.asdict(setup)}), "utf-8")
    shutil.copyfile(base, db)
    return setup, False


# ================================================================================ the typing
@dataclass
class Probe:
    chat_id: int
    command: str  # "/list" or "/momentum"
    text: str
    update_id: int
    message_id: int
    queued: float
    delivered: float | None = None
    first: float | None = None  # the first message of the reply
    chart: float | None = None  # /momentum: the chart photo
    reply: str = ""
    state: str = "?"
    handled: tuple[float, float] | None = None  # the child's process_update start/end
    task: int | None = None  # the child's handler task (its reads and sends carry it)

    @property
    def latency(self) -> float | None:
        if self.first is None or self.delivered is None:
            return None
        return self.first - self.delivered

    @property
    def chart_latency(self) -> float | None:
        if self.chart is None or self.delivered is None:
            return None
        return self.chart - self.delivered


def track_deliveries(fake: FakeTelegram) -> dict[int, float]:
    """update_id → when the fake first handed it to the bot (a getUpdates answer). The fake
    does not record that, so its getUpdates handler is wrapped (bench-only)."""
    handed: dict[int, float] = {}
    original = fake._get_updates

    async def get_updates(request: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        updates = await original(request, params)
        now = time.monotonic()
        for update in updates:
            handed.setdefault(int(update["update_id"]), now)
        return updates

    fake._get_updates = get_updates  # type: ignore[method-assign]
    return handed


class Typist:
    """The user: USERS chats take turns; /list and /momentum alternate for each chat."""

    def __init__(self, fake: FakeTelegram, setup: Setup, pace: tuple[float, float]) -> None:
        self.fake = fake
        self.setup = setup
        self.pace = pace
        self.rng = random.Random(11)
        self.probes: list[Probe] = []
        self.asked: set[str] = set()  # topics asked since the last reset (charts drawn)
        self.repeats = 0
        self._n = 0
        self._catalogue = list(setup.catalogue)
        self.rng.shuffle(self._catalogue)
        self.users = sorted(setup.users)

    def forget_charts(self) -> None:
        """After a round every topic's numbers changed: its chart is drawn anew."""
        self.asked.clear()

    def _topic(self, chat_id: int) -> str:
        own = [t for t in self.setup.users[chat_id] if t not in self.asked]
        others = [t for t in self._catalogue if t not in self.asked]
        pool = own if own and (not others or self.rng.random() < 0.3) else others
        if not pool:
            self.repeats += 1
            pool = self.setup.users[chat_id] + self._catalogue
        topic = pool[0] if pool is others else self.rng.choice(pool)
        self.asked.add(topic)
        return topic

    def send_one(self) -> Probe:
        n = self._n
        self._n += 1
        chat_id = self.users[n % len(self.users)]
        momentum = (n + n // len(self.users)) % 2 == 1
        text = f"/momentum {self._topic(chat_id)}" if momentum else "/list"
        update_id = self.fake.user_sends(chat_id, text, username=f"user{chat_id}")
        message_id = int(self.fake._updates[-1]["message"]["message_id"])  # the one just queued
        probe = Probe(chat_id, text.split()[0], text, update_id, message_id, time.monotonic())
        self.probes.append(probe)
        return probe

    async def type_until(self, done: Callable[[], bool], count: int | None = None) -> None:
        sent = 0
        while not done() and (count is None or sent < count):
            self.send_one()
            sent += 1
            await asyncio.sleep(self.rng.uniform(*self.pace))


def collect_replies(fake: FakeTelegram, probes: list[Probe], handed: dict[int, float]) -> None:
    """Pair every command with its reply. Replies in private chats do not quote the command,
    and the user chats get alerts too: a chat's commands are answered in order, so each takes
    the first unclaimed message after it with its command's prefix (and, for /momentum, the
    first chart photo after that — captioned "… — 12 weeks", unlike spike alerts)."""
    by_chat: dict[int, list[Probe]] = {}
    for probe in probes:
        probe.delivered = handed.get(probe.update_id)
        probe.first = probe.chart = None
        by_chat.setdefault(probe.chat_id, []).append(probe)
    for chat_id, chat_probes in by_chat.items():
        messages = fake.messages_to(chat_id)
        claimed: set[int] = set()
        for probe in chat_probes:
            if probe.delivered is None:
                continue
            prefix = LIST_PREFIX if probe.command == "/list" else MOMENTUM_PREFIX
            for index, sent in enumerate(messages):
                if index in claimed or sent.time < probe.delivered:
                    continue
                if sent.method == "sendMessage" and (sent.text or "").startswith(prefix):
                    claimed.add(index)
                    probe.first, probe.reply = sent.time, sent.text or ""
                    break
            if probe.command != "/momentum" or probe.first is None:
                continue
            for index, sent in enumerate(messages):
                if index in claimed or sent.time < probe.first or sent.method != "sendPhoto":
                    continue
                if (sent.text or "").endswith("— 12 weeks"):
                    claimed.add(index)
                    probe.chart = sent.time
                    break


def replies_missing(fake: FakeTelegram, probes: list[Probe], handed: dict[int, float]) -> int:
    collect_replies(fake, probes, handed)
    return sum(p.first is None or (p.command == "/momentum" and p.chart is None) for p in probes)


# ================================================================================ figures
@dataclass
class RoundInfo:
    index: int
    start: float
    end: float
    steps: dict[str, float] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    drained: float | None = None
    alert_messages: int = 0
    first_alert: float | None = None
    stalls: list[tuple[float, float]] = field(default_factory=list)
    spans: list[tuple[str, float, float]] = field(default_factory=list)  # step, start, end
    cpu: float = 0.0

    def step_at(self, t: float) -> str:
        """The most specific step running at ``t`` (spans are listed outermost first)."""
        found = "between steps"
        for name, start, end in self.spans:
            if start <= t <= end:
                found = name
        return found


def stats_line(label: str, values: list[float], note: str = "") -> tuple[float, float, float]:
    if not values:
        print(f"  {label:<30} n=   0")
        return float("nan"), float("nan"), float("nan")
    p50, p95, top = percentile(values, 50), percentile(values, 95), max(values)
    print(
        f"  {label:<30} n={len(values):>4}  p50={p50 * 1000:6.0f} ms  p95={p95 * 1000:6.0f} ms"
        f"  max={top * 1000:6.0f} ms{note}"
    )
    return p50, p95, top


STEP_NAMES = {
    "ingest": "fetch+parse",
    "upsert": "upsert",
    "match": "match",
    "match_stored": "match in memory",
    "match_and_record": "match+record in a worker",
    "record": "record matches",
    "spikes": "spikes",
}


def step_spans(events: list[dict[str, Any]]) -> list[tuple[str, float, float]]:
    """The steps of a round as (name, start, end), outermost first: ingest (whose time outside
    the upsert is the arXiv fetch and the feed parsing), match and spikes, then the steps
    inside them."""
    spans: list[tuple[str, float, float]] = []
    for e in events:
        step = e["event"].removesuffix("_end")
        if step in STEP_NAMES and e["event"].endswith("_end"):
            start = e.get("t_start", e["t"] - e["seconds"])
            spans.append((STEP_NAMES[step], start, start + e["seconds"]))
    depth = {"fetch+parse": 0, "match": 0, "spikes": 0}
    return sorted(spans, key=lambda s: depth.get(s[0], 1))


def stalls_within(stalls: list[dict[str, Any]], start: float, end: float) -> list[float]:
    return [s["seconds"] for s in stalls if start <= s["t"] < end]


def overlap(stalls: list[dict[str, Any]], start: float, end: float) -> float:
    return sum(max(0.0, min(end, s["t"] + s["seconds"]) - max(start, s["t"])) for s in stalls)


def print_breakdown(
    events: list[dict[str, Any]], probes: list[Probe], rounds: list[RoundInfo], tail: float
) -> None:
    """Where a reply's time goes (medians per state, from the child's events): the wait for a
    handler; the store reads the handler awaited (end to end through aiosqlite's thread, and
    how much of that was waiting for a free reader connection); the rate limiter's hold on the
    reply and its HTTP request; and every read in the bot (spikes and delivery included)."""
    reads = [e for e in events if e["event"] == "read"]
    sends = [e for e in events if e["event"] == "reply_send"]
    by_task: dict[int, list[dict[str, Any]]] = {}
    for e in reads:
        by_task.setdefault(e["task"], []).append(e)
    first_send: dict[int, list[dict[str, Any]]] = {}
    for e in sends:
        first_send.setdefault(e["task"], []).append(e)
    if not reads and not sends:
        return  # --light: not probed
    print("where the first reply's time goes (medians):")
    for state, command in itertools.product(STATES, ("/list", "/momentum")):
        rows = []
        for p in probes:
            if p.state != state or p.command != command:
                continue
            if p.handled is None or p.delivered is None or p.first is None:
                continue
            start, end = p.handled
            mine = [r for r in by_task.get(p.task or 0, []) if start <= r["t"] <= end]
            before = [r for r in mine if r["t"] <= p.first]
            send = [e for e in first_send.get(p.task or 0, []) if start <= e["t"] <= end]
            rows.append(
                (
                    start - p.delivered,
                    len(before),
                    sum(r["seconds"] for r in before),
                    sum(r.get("wait", 0.0) for r in before),
                    send[0]["waited"] if send else 0.0,
                    send[0]["http"] if send else 0.0,
                )
            )
        if not rows:
            continue
        med = [percentile([r[i] for r in rows], 50) * (1 if i == 1 else 1000) for i in range(6)]
        print(
            f"  {state:<5} {command:<9} n={len(rows):>3}: handler starts +{med[0]:.0f} ms; "
            f"{med[1]:.0f} reads awaited, {med[2]:.0f} ms in all ({med[3]:.0f} of them waiting "
            f"for a reader connection); rate limiter {med[4]:.0f} ms; HTTP {med[5]:.0f} ms"
        )
    for state in STATES:
        all_reads = [r["seconds"] for r in reads if state_at(r["t"], rounds, tail) == state]
        if all_reads:
            print(
                f"  every read in the bot while {state}: n={len(all_reads)}, p50 "
                f"{percentile(all_reads, 50) * 1000:.1f} ms, p95 "
                f"{percentile(all_reads, 95) * 1000:.1f} ms, max {max(all_reads) * 1000:.0f} ms"
            )


def profile_path(round_index: int) -> Path:
    return OUT / f"replies-gil-round{round_index}.txt"


# --raters: the idle phase again, the raters tapping ("rating"), before the rounds
RATING_PHASE: list[tuple[float, float]] = []
STATES = ("idle", "rating", "busy", "drain")


def save_samples(path: Path, probes: list[Probe], raters: int) -> None:
    """One line: this run's reply latencies (s) by the bot's state, for pooling runs."""
    latencies: dict[str, list[float]] = {state: [] for state in STATES}
    for probe in probes:
        if probe.latency is not None and probe.state in latencies:
            latencies[probe.state].append(round(probe.latency, 5))
    line = {"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "raters": raters, "latency": latencies}
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def state_at(t: float, rounds: list[RoundInfo], tail: float) -> str:
    if any(start <= t <= end for start, end in RATING_PHASE):
        return "rating"
    for info in rounds:
        if info.start <= t <= info.end:
            return "busy"
        if info.end < t <= (info.drained or info.end) + tail:
            return "drain"
    return "idle"


def _where(stack: list[str], frames: int = 3) -> str:
    """The innermost frames of a stack, dropping asyncio's and the selector's own."""
    useful = [f for f in stack if not f.startswith(("asyncio/", "selectors.py", "python3"))]
    return " < ".join((useful or stack)[:frames])


def print_stall_samples(
    events: list[dict[str, Any]], probes: list[Probe], rounds: list[RoundInfo], tail: float
) -> None:
    """Where the bot was while its event loop was late (the child's stack samples)."""
    samples = [e for e in events if e["event"] == "stall_sample"]
    print(
        f"stack samples while the event loop was > {SAMPLE_AFTER * 1000:.0f} ms late "
        f"(every {SAMPLE_EVERY * 1000:.0f} ms): {len(samples)}"
    )
    for state in STATES:
        chosen = [e for e in samples if state_at(e["t"], rounds, tail) == state]
        if not chosen:
            continue
        main: dict[str, int] = {}
        others: dict[str, int] = {}
        for e in chosen:
            stacks = e["stacks"]
            key = _where(stacks.get("main", []))
            main[key] = main.get(key, 0) + 1
            for name, stack in stacks.items():
                if name not in ("main", "bench-sampler"):
                    key = f"[{name.split('_')[0]}] {_where(stack, 2)}"
                    others[key] = others.get(key, 0) + 1
        print(f"  {state}: {len(chosen)} samples; the event loop's thread was in:")
        for key, n in sorted(main.items(), key=lambda kv: -kv[1])[:6]:
            print(f"    {n:4}  {key}")
        print("   busy other threads meanwhile:")
        for key, n in sorted(others.items(), key=lambda kv: -kv[1])[:6]:
            print(f"    {n:4}  {key}")


async def start_profiler(pid: int, out: Path) -> asyncio.subprocess.Process | None:
    """py-spy sampling which thread holds the GIL in the bot (--profile; investigation only)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("--profile: py-spy not found (pip install py-spy)")
        return None
    out.unlink(missing_ok=True)
    return await asyncio.create_subprocess_exec(
        spy, "record", "--pid", str(pid), "--gil", "--threads", "--nonblocking", "--rate", "250",
        "--format", "raw", "--output", str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


async def stop_profiler(spy: asyncio.subprocess.Process | None) -> None:
    if spy is not None and spy.returncode is None:
        spy.send_signal(signal.SIGINT)
        await asyncio.wait_for(spy.wait(), 20)


PROFILE_WORK = (  # the outermost frame of a job → what it is
    ("parse_feed ", "arXiv feed parsing"),
    ("render_chart ", "chart rendering"),
    ("match_stored ", "matching"),
    ("upsert_papers ", "store upsert"),
    ("store_feeds ", "store upsert"),
    ("record_matches ", "recording matches"),
    ("detect_spikes ", "spike detection"),
    ("_detect_followed_apart ", "spike detection"),
    ("run_once ", "delivery"),
)


def print_profile(path: Path, label: str) -> None:
    """Shares of the GIL by thread and by code, from py-spy's raw (collapsed) output."""
    if not path.exists():
        return
    by_thread: dict[str, int] = {}
    by_code: dict[str, int] = {}
    for line in path.read_text("utf-8", "replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        head, *frames = stack.split(";")
        name = head.split(": ", 1)[-1]
        if any("aiosqlite" in f for f in frames):
            kind = "aiosqlite thread"
        elif name == "MainThread":
            kind = "event loop"
        elif name.startswith("asyncio_"):
            kind = "to_thread worker"
        else:
            kind = name
        for marker, work in PROFILE_WORK:
            if any(f.startswith(marker) for f in frames):
                kind = f"{kind}: {work}"
                break
        by_thread[kind] = by_thread.get(kind, 0) + int(count)
        ours = [f for f in frames if "topicpulse" in f or "/bot/" in f or "/store/" in f]
        leaf = frames[-1].split(" (")[0] if frames else "?"
        where = (ours[-1].split(" (")[0] + " → " if ours else "") + leaf
        key = f"[{kind}] {where}"
        by_code[key] = by_code.get(key, 0) + int(count)
    total = sum(by_thread.values()) or 1
    print(f"  {label}: {total} samples of the GIL holder (py-spy --gil, {path.name})")
    print(
        "    "
        + ", ".join(
            f"{k} {v / total:.0%}" for k, v in sorted(by_thread.items(), key=lambda kv: -kv[1])
        )
    )
    for key, n in sorted(by_code.items(), key=lambda kv: -kv[1])[:10]:
        print(f"    {n / total:5.1%}  {key}")


# ================================================================================ main
async def wait_drained(db: Path, fake: FakeTelegram, timeout: float) -> float | None:
    """When the outbox had nothing pending (None: timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pending_rows(db) == 0:
            return time.monotonic()
        await asyncio.sleep(0.25)
    return None


async def main(args: argparse.Namespace) -> int:
    began = time.monotonic()
    load_before = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    today = datetime.now(UTC).date()
    if args.real:
        plan = real_plan(today, new=args.new, rounds=args.rounds)
    else:
        plan = synthetic_plan(
            today, weeks=args.weeks, per_weekday=args.per_weekday, new=args.new, rounds=args.rounds
        )
    db = fresh_db("replies.db")
    events_path = OUT / "replies-events.jsonl"
    log_path = OUT / "replies-bot.log"
    events_path.unlink(missing_ok=True)
    log_path.unlink(missing_ok=True)
    setup, cached = await prepared_store(db, plan, args, today)
    matches = sorted(setup.custom_matches)
    print(
        f"store: {len(plan.history):,} papers ({plan.source}), {len(setup.catalogue)} catalogue "
        f"topics, {args.followers} chats × 1 distinct custom query ({args.catalogue_share:.0%} of "
        f"them + 1 catalogue topic), "
        f"{USERS} user chats × {USER_CUSTOM + USER_CATALOGUE} topics; custom queries match "
        f"{matches[len(matches) // 2]} (median) / {matches[int(len(matches) * 0.9)]} (p90) "
        f"stored papers; prepared in {time.monotonic() - began:.1f}s"
        + (" (the store copied from the cache: --rebuild to build it anew)" if cached else "")
    )

    fake = FakeTelegram(enforce_limits=True, latency=args.latency)
    await fake.start()
    lags: list[tuple[float, float]] = []  # this process's own event loop: (when, how late)

    async def watch_lag() -> None:  # the fake's clock stamps the replies: is it on time?
        while True:
            due = time.monotonic() + 0.005
            await asyncio.sleep(0.005)
            lags.append((due, time.monotonic() - due))

    lag_watch = asyncio.create_task(watch_lag())
    handed = track_deliveries(fake)
    messages = post_messages(fake, setup.raters)
    raters = Raters(fake, setup.raters, messages, args.rate_every) if setup.raters else None
    # the fake arXiv serves the last 10 days (a poll reads 7) and, from each round on, its papers
    cutoff = iso(datetime.combine(today - timedelta(days=10), datetime.min.time(), UTC))
    served = [p for p in plan.history if p.published >= cutoff]
    arxiv = await ArxivProcess(served, nice=args.arxiv_nice).start()  # arXiv is elsewhere
    env = bot_env(fake, arxiv, db)
    env[EVENTS_ENV] = str(events_path)
    if args.switch_interval:
        env[SWITCH_ENV] = str(args.switch_interval)
    if args.light:
        env[LIGHT_ENV] = "1"
    if args.cprofile:
        env[CPROFILE_ENV] = str(OUT / "replies-bot.prof")
    bot = await bot_child(env, log_path).start()
    proc = psutil.Process(bot.pid)
    events = Events(events_path)
    typist = Typist(fake, setup, (args.pace_min, args.pace_max))
    rounds: list[RoundInfo] = []
    round_began = time.monotonic()
    phases: dict[str, tuple[float, float, float]] = {}  # label → (start, end, cpu seconds)
    by_thread = ThreadTimes()
    error = ""
    try:
        try:
            await events.wait("ready", timeout=60)
        except TimeoutError as exc:
            print(f"the bot did not start ({exc}); see {log_path}")
            return 1
        while not fake.long_poll_waiting:
            await asyncio.sleep(0.02)
        # warm-up, not measured: matplotlib's import and font cache, the first queries
        fake.user_sends(WARMUP_CHAT, "/list", username="warmup")
        fake.user_sends(WARMUP_CHAT, f"/momentum {setup.catalogue[-1]}", username="warmup")
        await fake.wait_for(lambda m: m.chat_id == WARMUP_CHAT and m.method == "sendPhoto", 30)
        await asyncio.sleep(1.0)

        # ---- phase 1: idle
        cpu0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
        by_thread.start(proc)
        await typist.type_until(lambda: False, count=args.idle)
        phases["idle"] = (t0, time.monotonic(), sum(proc.cpu_times()[:2]) - cpu0)
        by_thread.stop(proc, "idle")
        if raters:  # ---- phase 1b: idle again, the raters tapping (the same commands' count)
            cpu0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
            by_thread.start(proc)
            stop = asyncio.Event()
            tapping = asyncio.create_task(raters.tap_until(stop.is_set))
            await asyncio.sleep(args.lead)
            began_rating = time.monotonic()
            await typist.type_until(lambda: False, count=args.idle)
            RATING_PHASE.append((began_rating, time.monotonic()))
            stop.set()
            await tapping
            phases["rating"] = (t0, time.monotonic(), sum(proc.cpu_times()[:2]) - cpu0)
            by_thread.stop(proc, "rating")
            await asyncio.sleep(1.0)
        # ---- phase 2: rounds
        for k in range(len(plan.batches)):
            spent = time.monotonic() - began
            if rounds and spent + (time.monotonic() - round_began) > args.budget:
                skipped = len(plan.batches) - k
                print(f"note: {skipped} round(s) skipped to end within --budget {args.budget:.0f}s")
                break
            round_began = time.monotonic()
            await arxiv.replace([*served, *(p for b in plan.batches[: k + 1] for p in b)])
            stop = asyncio.Event()
            typing = asyncio.create_task(typist.type_until(stop.is_set))
            tapping = asyncio.create_task(raters.tap_until(stop.is_set)) if raters else None
            spy = await start_profiler(bot.pid, profile_path(k + 1)) if args.profile else None
            await asyncio.sleep(args.lead)
            cpu0 = sum(proc.cpu_times()[:2])
            by_thread.start(proc)
            bot.signal(signal.SIGUSR1)
            start = (await events.wait("round_start", k + 1, timeout=10))["t"]
            end = (await events.wait("round_end", k + 1, timeout=120))["t"]
            await stop_profiler(spy)
            cpu_round = sum(proc.cpu_times()[:2]) - cpu0
            by_thread.stop(proc, "rounds")
            typist.forget_charts()
            drained = await wait_drained(db, fake, timeout=args.timeout)
            await asyncio.sleep(args.tail)
            stop.set()
            await typing
            if tapping:
                await tapping
            info = RoundInfo(k + 1, start, end, drained=drained, cpu=cpu_round)
            alerts = [
                m.time
                for m in fake.sent
                if start <= m.time and m.chat_id < USER_FIRST_ID and m.chat_id != WARMUP_CHAT
            ]
            info.alert_messages = len(alerts)
            info.first_alert = min(alerts, default=None)
            rounds.append(info)
            if drained is None:
                error = f"round {k + 1}: the outbox did not drain in {args.timeout:.0f}s"
                print("ERROR:", error, outbox_counts(db))
                break
            await asyncio.sleep(1.0)  # the next round starts from a quiet bot
        for _ in range(100):  # the last replies
            if not replies_missing(fake, typist.probes, handed):
                break
            await asyncio.sleep(0.1)
        due_at_end = await tastes_due(db) if raters else 0
    finally:
        code = await bot.stop()
        await arxiv.close()
        await fake.stop()

    # ------------------------------------------------------------------ figures
    collect_replies(fake, typist.probes, handed)
    all_events = events.poll()
    stalls = [e for e in all_events if e["event"] == "stall"]
    for e in all_events:
        if e["event"] == "probe_missing":
            print(f"warning: the bot has no {e['name']} any more; that probe was skipped")
    handling = {e["update_id"]: e for e in all_events if e["event"] == "handle_start"}
    handled_end = {e["update_id"]: e["t"] for e in all_events if e["event"] == "handle_end"}
    for probe in typist.probes:
        if probe.update_id in handling and probe.update_id in handled_end:
            probe.handled = (handling[probe.update_id]["t"], handled_end[probe.update_id])
            probe.task = handling[probe.update_id]["task"]
    for info in rounds:
        window = [e for e in all_events if info.start <= e["t"] <= info.end + 1e-6]
        for e in window:
            name = e["event"]
            if name.endswith("_end") and "seconds" in e and name != "handle_end":
                step = name.removesuffix("_end")
                info.steps[step] = info.steps.get(step, 0.0) + e["seconds"]
                info.facts.update({k: v for k, v in e.items() if k not in ("event", "t", "seconds")
                                   and k != "t_start"})  # fmt: skip
        info.stalls = [(s["t"], s["seconds"]) for s in stalls if info.start <= s["t"] < info.end]
        info.spans = step_spans(window)
    for probe in typist.probes:
        if probe.delivered is not None:
            probe.state = state_at(probe.delivered, rounds, args.tail)

    if args.samples:
        save_samples(args.samples, typist.probes, args.raters)

    print("\n=== bench_replies: reply latency while a round ingests and matches ===")
    print(
        f"bot: child process (real Application), fake Bot API with Telegram's limits and "
        f"{args.latency * 1000:.0f} ms added latency; {USERS} user chats type one command every "
        f"{args.pace_min}–{args.pace_max} s in all"
    )
    for phase, label in (("idle", "idle phase"), ("rating", "idle phase, raters tapping")):
        if cpu := phases.get(phase):
            print(f"{label}: {cpu[1] - cpu[0]:.1f} s, bot CPU "
                  f"{cpu[2] / (cpu[1] - cpu[0]) * 100:.0f}%")  # fmt: skip
    by_thread.report(events)
    for info in rounds:
        steps = info.steps
        fetch = steps.get("ingest", 0) - steps.get("upsert", 0)
        match_mem = steps.get("match_stored", 0) + steps.get("match_and_record", 0)
        record = steps.get("record", 0)  # 0 when the worker records
        duration = info.end - info.start
        print(
            f"round {info.index}: {duration:.2f} s = ingest {steps.get('ingest', 0):.2f} s "
            f"(arXiv fetch+check {fetch:.2f}, parse+store {steps.get('upsert', 0):.2f}) + match "
            f"{steps.get('match', 0):.2f} s (in the worker {match_mem:.2f}; recorded here "
            f"{record:.2f}) + spikes {steps.get('spikes', 0):.2f} s; bot CPU "
            f"{info.cpu / duration * 100:.0f}% of a core"
        )
        facts = info.facts
        drain = (info.drained - info.end) if info.drained else float("nan")
        print(
            f"         {facts.get('new', '?')} new papers in {facts.get('requests', '?')} "
            f"requests; {facts.get('papers', '?')} papers × {facts.get('topics', '?')} topics → "
            f"{facts.get('matches', '?')} matches, {facts.get('alerts', '?')} alerts queued; "
            f"{facts.get('opened', '?')} spike episodes; delivery drained {drain:.1f} s after "
            f"the round ({info.alert_messages} messages, the first "
            f"{(info.first_alert or math.nan) - info.end:+.2f} s after the round's end)"
        )
        worst = sorted(info.stalls, key=lambda ts: -ts[1])
        by_step: dict[str, list[float]] = {}
        for t, seconds in info.stalls:
            by_step.setdefault(info.step_at(t), []).append(seconds)
        print(
            f"         event-loop stalls > {STALL * 1000:.0f} ms during the round: "
            f"{len(worst)}, {sum(s for _, s in worst) * 1000:.0f} ms in all; longest "
            + ", ".join(f"{s * 1000:.0f} ({info.step_at(t)})" for t, s in worst[:4])
            + " ms; by step: "
            + ", ".join(
                f"{step} {len(v)}× {sum(v) * 1000:.0f} ms"
                for step, v in sorted(by_step.items(), key=lambda kv: -sum(kv[1]))
            )
        )

    print("reply latency (update handed to the bot → first reply message at the fake):")
    figures: dict[str, tuple[float, float, float]] = {}
    for state in STATES:
        chosen = [p for p in typist.probes if p.state == state]
        values = [p.latency for p in chosen if p.latency is not None]
        figures[state] = stats_line(state, values)
        for command in ("/list", "/momentum"):
            stats_line(
                f"  {command}",
                [p.latency for p in chosen if p.command == command and p.latency is not None],
            )
    print_breakdown(all_events, typist.probes, rounds, args.tail)
    print("/momentum chart photo (handed → photo at the fake):")
    for state in STATES:
        stats_line(
            state,
            [
                p.chart_latency
                for p in typist.probes
                if p.state == state and p.chart_latency is not None
            ],
        )
    queued = [p.delivered - p.queued for p in typist.probes if p.delivered is not None]
    print(
        f"queueing in the fake (user_sends → handed to the bot): p95 "
        f"{percentile(queued, 95) * 1000:.0f} ms, max {max(queued, default=0) * 1000:.0f} ms"
    )
    lag_watch.cancel()
    for state in STATES:
        late = [lag for t, lag in lags if state_at(t, rounds, args.tail) == state]
        if late:
            print(
                f"the fake Bot API's own event loop while {state}: late p50 "
                f"{percentile(late, 50) * 1000:.1f} ms, p95 {percentile(late, 95) * 1000:.1f} ms,"
                f" max {max(late) * 1000:.0f} ms"
            )
    pauses = [e for e in all_events if e["event"] == "gc"]
    for state in STATES:
        mine = [e for e in pauses if state_at(e["t"], rounds, args.tail) == state]
        if mine:
            print(
                f"garbage collector while {state}: {len(mine)} pauses ≥ 5 ms or of the oldest "
                f"generation, {sum(e['seconds'] for e in mine) * 1000:.0f} ms in all, longest "
                + ", ".join(
                    f"{e['seconds'] * 1000:.0f} (gen {e['generation']})"
                    for e in sorted(mine, key=lambda e: -e["seconds"])[:4]
                )
                + " ms"
            )
    idle_stalls = stalls_within(stalls, *phases["idle"][:2]) if "idle" in phases else []
    print(
        f"event-loop stalls > {STALL * 1000:.0f} ms: idle phase {len(idle_stalls)} "
        f"(longest {max(idle_stalls, default=0) * 1000:.0f} ms); rounds "
        f"{sum(len(r.stalls) for r in rounds)}"
    )

    missing = [p for p in typist.probes if p.first is None]
    no_chart = [p for p in typist.probes if p.command == "/momentum" and p.chart is None]
    errors = dict(fake.stats["by_error_code"])
    print(
        f"commands {len(typist.probes)}; without the expected reply {len(missing)}; /momentum "
        f"without chart {len(no_chart)}; chart-cache repeats {typist.repeats}; Bot API errors "
        f"{errors or 'none'}; bot exit code {code}"
    )
    for p in missing[:5]:
        after = [m for m in fake.messages_to(p.chat_id) if m.time >= (p.delivered or p.queued)]
        got = (after[0].text or "")[:100] if after else "nothing"
        print(f"  no reply to {p.text!r}; the chat got next: {got!r}")

    unanswered = 0
    if raters:
        unanswered = await print_ratings(raters, fake, handed, all_events, rounds, args, db,
                                         due_at_end)  # fmt: skip
    ip95, bp95 = figures["idle"][1], figures["busy"][1]
    ratio = bp95 / ip95 if ip95 else float("nan")
    by_state = {
        state: max((p.latency for p in typist.probes if p.state == state and p.latency), default=0)
        for state in STATES
    }
    slowest = max(by_state.values())
    ok_ratio = ratio <= TARGET_RATIO
    ok_max = slowest <= TARGET_MAX
    durations = ", ".join(f"{r.end - r.start:.2f}" for r in rounds)
    if raters:  # what the round adds to the raters' load, and what the taps alone add
        rp95 = figures["rating"][1]
        print(
            f"with the raters tapping and no round, p95 {rp95 * 1000:.0f} ms: busy p95 / that = "
            f"{bp95 / rp95:.2f}; that / idle p95 = {rp95 / ip95:.2f}"
        )
    print(
        f"RESULT: round {durations} s; busy p95 / idle p95 = {bp95 * 1000:.0f} / "
        f"{ip95 * 1000:.0f} ms = {ratio:.2f} (target ≤ {TARGET_RATIO}) "
        f"{'PASS' if ok_ratio else 'FAIL'}; slowest reply {slowest * 1000:.0f} ms (idle "
        f"{by_state['idle'] * 1000:.0f}, busy {by_state['busy'] * 1000:.0f}, drain "
        f"{by_state['drain'] * 1000:.0f}; target ≤ {TARGET_MAX * 1000:.0f}) "
        f"{'PASS' if ok_max else 'FAIL'}"
    )

    if args.verbose:
        print(
            "slowest busy/drain commands (the step of the round, or the drain; event-loop "
            "stalls and store reads inside the wait):"
        )
        late = sorted(
            (p for p in typist.probes if p.state != "idle" and p.latency is not None),
            key=lambda p: -(p.latency or 0),
        )
        reads = [e for e in all_events if e["event"] == "read"]
        sends = [e for e in all_events if e["event"] == "reply_send"]
        for p in late[:12]:
            assert p.delivered is not None and p.first is not None
            start = p.handled[0] if p.handled else p.delivered
            mine = [r for r in reads if r["task"] == p.task and start <= r["t"] <= p.first]
            where = next(
                (r.step_at(p.delivered) for r in rounds if r.start <= p.delivered <= r.end),
                "drain",
            )
            print(
                f"  {p.latency * 1000:5.0f} ms {p.text[:34]!r:<36} {where:<15} handler "
                f"+{(start - p.delivered) * 1000:.0f} ms; stalls "
                f"{overlap(stalls, p.delivered, p.first) * 1000:.0f} ms; {len(mine)} reads "
                f"{sum(r['seconds'] for r in mine) * 1000:.0f} ms (reader wait "
                f"{sum(r.get('wait', 0) for r in mine) * 1000:.0f} ms)"
                + "".join(
                    f"; rate limiter {e['waited'] * 1000:.0f} ms, HTTP {e['http'] * 1000:.0f} ms"
                    for e in [e for e in sends if e["task"] == p.task and start <= e["t"]][:1]
                )
            )
        print_stall_samples(all_events, typist.probes, rounds, args.tail)
        slow_reads = sorted(
            (e for e in all_events if e["event"] == "read"), key=lambda e: -e["seconds"]
        )
        print("the slowest reads (end to end, as the awaiting coroutine saw them):")
        for e in slow_reads[:8]:
            stalled = overlap(stalls, e["t"], e["t"] + e["seconds"])
            print(
                f"  {e['seconds'] * 1000:5.0f} ms  {state_at(e['t'], rounds, args.tail):<5} "
                f"waited {e.get('wait', 0) * 1000:.0f} ms for a reader; loop stalls "
                f"{stalled * 1000:.0f} ms; {e['sql']}"
            )
    if args.profile:
        print("who held the GIL from the lead-in to the end of each round:")
        for info in rounds:
            print_profile(profile_path(info.index), f"round {info.index}")
    load = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"(total {time.monotonic() - began:.0f} s; load average now {load} on "
          f"{os.cpu_count()} CPUs, {load_before} at the start; bot log {log_path})")  # fmt: skip
    if error or missing or no_chart or unanswered:
        return 1
    return 0


async def print_ratings(
    raters: Raters,
    fake: FakeTelegram,
    handed: dict[int, float],
    events: list[dict[str, Any]],
    rounds: list[RoundInfo],
    args: argparse.Namespace,
    db: Path,
    due_at_end: int,
) -> int:
    """--raters: each tap's acknowledgement by the bot's state, and the Trainer's work."""
    collect_answers(fake, raters.taps, handed)
    for tap in raters.taps:
        if tap.delivered is not None:
            tap.state = state_at(tap.delivered, rounds, args.tail)
    spent = sum(r.end - r.start for r in rounds)
    print(
        f"ratings: {len(raters.chats)} rater chats, {len(raters.taps)} taps (one every "
        f"{raters.gap * 1000:.0f} ms on average, each chat every {args.rate_every:.0f} s); "
        f"acknowledged (handed → answerCallbackQuery at the fake):"
    )
    for state in STATES:
        stats_line(state, [t.latency for t in raters.taps if t.state == state and t.latency])
    unanswered = [t for t in raters.taps if t.answered is None]
    answers: dict[str, int] = {}
    for tap in raters.taps:
        key = tap.answer.split(" —")[0].split(".")[0] or "(none)"
        answers[key] = answers.get(key, 0) + 1
    trainings = [e for e in events if e["event"] == "learn_apart_end"]
    busy = sum(e["seconds"] for e in trainings)
    print(
        f"  unanswered {len(unanswered)}; answers {answers}; Trainer: {len(trainings)} worker "
        f"calls, {busy:.1f} s in all ({busy / max(len(trainings), 1) * 1000:.0f} ms a call); "
        f"tastes still due when typing stopped {due_at_end}, at exit {await tastes_due(db)}"
        f" (rounds {spent:.1f} s in all)"
    )
    return len(unanswered)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="poll rounds, each with --new papers")
    parser.add_argument("--new", type=int, default=2_000, help="new papers per round")
    parser.add_argument("--followers", type=int, default=300, help="chats with a custom query")
    parser.add_argument(
        "--catalogue-share", type=float, default=0.5, help="followers also on a catalogue topic"
    )
    parser.add_argument("--weeks", type=int, default=10, help="weeks of synthetic history")
    parser.add_argument("--per-weekday", type=int, default=2400, help="history papers a weekday")
    parser.add_argument("--real", action="store_true", help="the real listing's papers")
    parser.add_argument("--idle", type=int, default=150, help="commands on the idle bot")
    parser.add_argument("--pace-min", type=float, default=0.10)
    parser.add_argument("--pace-max", type=float, default=0.17)
    parser.add_argument("--lead", type=float, default=1.0, help="typing before a round starts")
    parser.add_argument("--tail", type=float, default=1.0, help="typing after the drain")
    parser.add_argument("--latency", type=float, default=0.0, help="fake Bot API latency, s")
    parser.add_argument("--timeout", type=float, default=90, help="drain timeout per round")
    parser.add_argument(
        "--budget", type=float, default=240, help="seconds: no new round that would end later"
    )
    parser.add_argument("--rebuild", action="store_true", help="build the cached store anew")
    parser.add_argument(
        "--profile", action="store_true", help="py-spy: who holds the bot's GIL during rounds"
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=0.0,
        help="experiment: sys.setswitchinterval in the bot (the bot's: heap.SWITCH_INTERVAL)",
    )
    parser.add_argument(
        "--arxiv-nice",
        type=int,
        default=19,
        help="the fake arXiv's CPU niceness: 19 (the default) gives it only CPU the bot leaves"
        " idle, as when arXiv is another machine; 0 makes it compete with the bot",
    )
    parser.add_argument(
        "--light",
        action="store_true",
        help="only the round's steps and loop stalls are probed (checks the probes' own cost)",
    )
    parser.add_argument(
        "--raters", type=int, default=0, help="chats tapping 👍/👎 while the rounds run (_raters)"
    )
    parser.add_argument(
        "--rate-every", type=float, default=20.0, help="--raters: seconds between a chat's taps"
    )
    parser.add_argument(
        "--cprofile",
        action="store_true",
        help="cProfile the bot's event-loop thread into bench/out/replies-bot.prof",
    )
    parser.add_argument("--verbose", action="store_true", help="the slowest commands")
    parser.add_argument(
        "--samples",
        type=Path,
        help="append this run's reply latencies by state to this JSON-lines file"
        " (bench/replies_pooled.py pools several runs: one run's p95 rests on ~6 replies)",
    )
    return parser.parse_args()


if __name__ == "__main__":
    if "--bot-child" in sys.argv:
        raise SystemExit(child_main())
    raise SystemExit(asyncio.run(main(parse_args())))
