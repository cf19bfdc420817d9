"""Memory: resident set size of the running bot with 150,000 papers, 10,000 chats and 30,000
subscriptions in its store, while it polls arXiv, matches, sends alerts and answers commands
(/momentum with its chart, /trending, /search, /latest, /list).

The store is built once from the real papers of shared/arxiv-listings (without ../shared:
generated ones, ``fake_arxiv.synthetic_listing``), recycled with new ids and dates spread over
30 weeks, and cached in bench/out/memory.db; each run works on a copy.
The bot is ``python -m topicpulse run`` in a child process (the fakes run here), so its RSS is
its own.

    .venv/bin/python bench/bench_memory.py             # ~2 min the first time, then ~1.5 min
    .venv/bin/python bench/bench_memory.py --fresh     # rebuild the store
    .venv/bin/python bench/bench_memory.py --ratings 50   # what 10,000 chats' tastes add

``--ratings N`` (issue 24: "10,000 chats with 50 ratings each add ≤ 50 MB"): every chat rates
N random papers of the store (stored as taps store them, each chat's taste due; cached in
bench/out/memory-rated-N.db, with every taste trained by the code the bot's Trainer runs), and
the bot runs twice: on the store with them, where ``--retrain`` chats (1,000) have rated once
more, so that the bot first retrains them as it does after a restart (its Trainer, in the
worker process) before the users type; then on the store without the ratings, left running
as long before the typing, so that both take in the same rounds; /taste and /foryou join the
commands in both runs. Reported: the bot's own RSS in both, the difference,
its worker processes' peak, and the store's bytes added.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil

from _raters import tastes_due
from _support import OUT, BotProcess, RssSampler, bot_env, mb, outbox_counts, wait_until
from fake_arxiv import FakeArxiv, listing_papers
from fake_telegram import FakeTelegram
from topicpulse import offload
from topicpulse.insight import taste
from topicpulse.models import Paper, iso
from topicpulse.store import Store
from topicpulse.topics import catalogue as topics
from topicpulse.topics.catalogue import load_catalogue

PAPERS, CHATS, FOLLOWS, CUSTOM_TOPICS = 150_000, 10_000, 3, 2_000
LINGER = offload.LINGER[offload.TRAINING]
CATEGORIES = "cs.CL,cs.LG,cs.AI,cs.CV,stat.ML"


def recycled(templates: list[Paper], n: int, *, first: int, newest: datetime, span: timedelta):
    """``n`` papers made from the templates, ids from ``first``, published over ``span``."""
    step = span / n
    for i in range(n):
        t = templates[i % len(templates)]
        stamp = iso(newest - step * (n - 1 - i))
        number = first + i
        yield dataclasses.replace(
            t,
            arxiv_id=f"3{number // 100_000:03d}.{number % 100_000:05d}",
            version=1,
            title=f"{t.title} ({number})",
            published=stamp,
            updated=stamp,
        )


def chat_ids() -> list[int]:
    """The store's chats: 5% of them groups."""
    return [c + 1 if c % 20 else -(1_000_000_000_000 + c) for c in range(CHATS)]


async def build(db: Path, templates: list[Paper]) -> None:
    started = time.monotonic()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    async with await Store.open(db) as store:
        newest = datetime.now(UTC) - timedelta(days=1)
        batch: list[Paper] = []
        for paper in recycled(templates, PAPERS, first=1, newest=newest, span=timedelta(weeks=30)):
            batch.append(paper)
            if len(batch) == 5_000:
                await store.upsert_papers(batch)
                batch = []
        if batch:
            await store.upsert_papers(batch)
        print(f"  {PAPERS} papers stored ({time.monotonic() - started:.0f}s)")
        await topics.sync_catalogue(store)
        rng = random.Random(1)
        words = sorted(
            {w.lower() for p in templates for w in p.title.split() if w.isalpha() and len(w) > 6}
        )
        firsts, seconds = rng.sample(words, CUSTOM_TOPICS), rng.sample(words, CUSTOM_TOPICS)
        queries = [f"{a} AND {b}" for a, b in zip(firsts, seconds, strict=True)]
        topic_ids = [t.id for t in await store.topics(kind="catalogue")]
        for q in queries:
            topic_ids.append((await topics.custom_topic(store, q)).id)
        print(f"  {len(topic_ids)} topics ({time.monotonic() - started:.0f}s)")
        for c, chat_id in enumerate(chat_ids()):
            await store.ensure_chat(chat_id, type="supergroup" if chat_id < 0 else "private")
            for k in range(FOLLOWS):
                await store.subscribe(chat_id, topic_ids[(c * FOLLOWS + k) % len(topic_ids)])
        counts = await store.chat_counts()
        print(
            f"  {counts['active']} chats, {counts['subscriptions']} subscriptions "
            f"({time.monotonic() - started:.0f}s)"
        )


async def users(
    fake: FakeTelegram, names: list[str], stop: asyncio.Event, *, tastes: bool = False
) -> int:
    """Users typing commands, one a second (``tastes``: /taste and /foryou among them)."""
    rng = random.Random(2)
    sent = 0
    while not stop.is_set():
        chat = rng.randrange(1, CHATS)
        if chat % 20 == 0:
            chat += 1
        command = rng.choice(
            [
                f"/momentum {rng.choice(names)}",
                "/trending",
                "/search language model",
                f"/latest {rng.choice(names)} 10",
                "/list",
                "/momentum",
                *(["/taste", "/foryou"] if tastes else []),
            ]
        )
        fake.user_sends(chat, command)
        sent += 1
        await asyncio.sleep(1.0)
    return sent


@dataclass
class Run:
    label: str
    started_rss: int = 0
    trained_rss: int = 0
    end_rss: int = 0
    peak: int = 0
    workers_peak: int = 0
    workers_end: int = 0  # the worker processes' RSS at the end, summed
    train_seconds: float = 0.0
    polls: int = 0
    alerts: int = 0
    commands: int = 0
    photos: int = 0
    size: int = 0


async def run_bot(
    source: Path,
    args: argparse.Namespace,
    templates: list[Paper],
    label: str,
    rated: bool,
    *,
    settle: float = 0.0,
) -> Run:
    """The bot on a copy of ``source``: started; (with ratings) left to train every due
    taste in its worker process, (without) left running ``settle`` seconds, as long as the
    other run trained, so both take in the same rounds; then users type commands for
    ``--seconds``."""
    db = OUT / "memory-run.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(source, db)
    result = Run(label, size=db.stat().st_size)
    if rated:
        await rate_again(db, args.retrain)
    now = datetime.now(UTC)
    fresh = list(recycled(templates, 400, first=PAPERS + 1, newest=now, span=timedelta(hours=20)))
    fresh = [dataclasses.replace(p, categories=("cs.CL", "cs.LG")) for p in fresh]
    fresh = [dataclasses.replace(p, primary_category="cs.CL") for p in fresh]
    arxiv = FakeArxiv(fresh)
    await arxiv.start()
    fake = FakeTelegram(enforce_limits=True, latency=0.1)
    await fake.start()
    env = bot_env(
        fake,
        arxiv,
        db,
        TOPICPULSE_CATEGORIES="cs.CL,cs.LG",
        TOPICPULSE_POLL_SECONDS=str(args.poll_every),
    )
    log_path = OUT / "memory-bot.log"
    log_path.unlink(missing_ok=True)
    names = [e.name for e in load_catalogue()]
    bot = await BotProcess(env, log_path).start()
    rss = RssSampler(bot.pid).start()
    workers = WorkersSampler(bot.pid).start()
    try:
        if not await wait_until(lambda: fake.stats["ok"] >= 2, timeout=60):
            raise SystemExit(f"the bot did not start; see {log_path}")
        await asyncio.sleep(1)
        result.started_rss = rss.sample()
        if rated:
            began = time.monotonic()
            while (due := await tastes_due(db)) > 0:
                print(f"  {due:,} tastes to train ({time.monotonic() - began:.0f}s)", end="\r")
                await asyncio.sleep(5)
            result.train_seconds = time.monotonic() - began
            print(f"  every taste trained by the bot in {result.train_seconds:.0f}s" + " " * 20)
            result.trained_rss = rss.sample()
        elif settle:
            await asyncio.sleep(settle)  # (the rounds the rated run took in while training)
            result.trained_rss = rss.sample()
        stop = asyncio.Event()
        typing = asyncio.create_task(users(fake, names, stop, tastes=args.ratings > 0))
        await asyncio.sleep(args.seconds)
        stop.set()
        result.commands = await typing
        # (the training process stops once idle for offload.LINGER: both runs are measured
        # as long after the typing, past that)
        await asyncio.sleep(LINGER + 5)
        result.end_rss = rss.sample()
        result.workers_end = workers.sample()
    finally:
        await bot.stop()
        await rss.stop()
        await workers.stop()
    result.peak, result.workers_peak = rss.peak, workers.peak
    result.alerts = outbox_counts(db).get("sent", 0)
    await arxiv.close()
    await fake.stop()
    result.polls = log_path.read_text("utf-8", "replace").count("poll round:")
    result.photos = sum(1 for m in fake.sent if m.method == "sendPhoto")
    return result


class WorkersSampler(RssSampler):
    """The peak of the bot's worker processes' resident memory, summed (its children)."""

    def sample(self) -> int:
        try:
            rss = sum(c.memory_info().rss for c in self.process.children(recursive=True))
        except psutil.Error:
            return self.last
        self.last = rss
        self.peak = max(self.peak, rss)
        return rss


async def add_ratings(source: Path, target: Path, per_chat: int) -> None:
    """``source`` with ``per_chat`` ratings by every chat (a third 👎) of random papers of the
    last 8 weeks, as taps store them, and every chat's taste trained by the code the bot's
    Trainer runs (``taste.learn_many``, here in this process: an hour's work for the bot's
    worker at its pace)."""
    started = time.monotonic()
    building = target.with_name(target.name + ".building")  # (renamed when complete)
    shutil.copyfile(source, building)
    rng = random.Random(4)
    async with await Store.open(building) as store:
        papers = await store.recent_papers(40_000)
        chats = chat_ids()
        for n, chat_id in enumerate(chats):
            await asyncio.gather(
                *(
                    store.toggle_rating(chat_id, paper, -1 if k % 3 == 0 else 1)
                    for k, paper in enumerate(rng.sample(papers, per_chat))
                )
            )  # (one transaction: taps that come together are written together)
            if n % 1000 == 999:
                print(f"  {n + 1} chats rated ({time.monotonic() - started:.0f}s)")
        for n in range(0, len(chats), taste.BATCH):
            await taste.learn_many(store, chats[n : n + taste.BATCH])
            if n % 1000 < taste.BATCH:
                print(f"  {n + taste.BATCH} tastes trained ({time.monotonic() - started:.0f}s)")
        assert not await store.tastes_due()
        await store.checkpoint()  # (the whole store in the one file, before it is renamed)
    building.replace(target)
    print(f"  {len(chats)} chats × {per_chat} ratings ({time.monotonic() - started:.0f}s)")


async def rate_again(db: Path, chats: int) -> None:
    """One more tap by each of the first ``chats`` chats: their tastes are due again, for the
    bot to train while it is measured."""
    async with await Store.open(db, migrate=False) as store:
        paper = (await store.recent_papers(1))[0]
        for chat_id in chat_ids()[:chats]:
            await store.toggle_rating(chat_id, paper, 1)


def report(run: Run, seconds: float) -> None:
    print(f"{run.label}:")
    print(f"  database               {run.size / 2**20:.0f} MB")
    print(f"  activity               {run.polls} polls, {run.alerts} alerts sent, "
          f"{run.commands} commands ({run.photos} charts) in {seconds:.0f}s")  # fmt: skip
    print(f"  RSS after start        {mb(run.started_rss)}")
    if run.train_seconds:
        print(f"  RSS after training     {mb(run.trained_rss)} (every taste trained in "
              f"{run.train_seconds:.0f}s, in the worker process)")  # fmt: skip
    elif run.trained_rss:
        print(f"  RSS before typing      {mb(run.trained_rss)} (as long after start as the "
              "rated run trained)")  # fmt: skip
    print(f"  RSS at the end         {mb(run.end_rss)}")
    print(f"  peak RSS               {mb(run.peak)} (goal ≤ 200 MB)")
    print(f"  worker processes, peak {mb(run.workers_peak)} (not the bot's own), at the end "
          f"{mb(run.workers_end)}")  # fmt: skip


async def main(args: argparse.Namespace) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    cached = OUT / "memory.db"
    templates = listing_papers()
    if args.fresh or not cached.exists():
        print("building the store (cached for the next runs):")
        building = cached.with_name(cached.name + ".building")  # (renamed when complete)
        await build(building, templates)
        building.replace(cached)
    if not args.ratings:
        run = await run_bot(cached, args, templates, "the bot", rated=False)
        print("\n=== bench_memory: the bot's resident memory ===")
        print(f"store                  {PAPERS} papers, {CHATS} chats, {CHATS * FOLLOWS} "
              "subscriptions")  # fmt: skip
        report(run, args.seconds)
        ok = run.peak <= 200 * 2**20
        print("RESULT:", "goal met" if ok else "goal missed")
        return 0 if ok else 1
    rated = OUT / f"memory-rated-{args.ratings}.db"
    if args.fresh or not rated.exists():
        print(f"adding {args.ratings} ratings to every chat (cached for the next runs):")
        await add_ratings(cached, rated, args.ratings)
    # (the rated run first: the plain one then runs as long before the typing, for the same
    # rounds and alerts; otherwise the difference would be partly the retraining's extra work)
    taught = await run_bot(rated, args, templates, f"{args.ratings} ratings a chat", rated=True)
    plain = await run_bot(
        cached, args, templates, "without ratings", rated=False, settle=taught.train_seconds
    )
    print("\n=== bench_memory --ratings: what the chats' tastes add ===")
    print(f"store                  {PAPERS} papers, {CHATS} chats, {CHATS * FOLLOWS} "
          f"subscriptions; the same commands in both runs (+ /taste, /foryou)")  # fmt: skip
    report(plain, args.seconds)
    report(taught, args.seconds)
    added_end = taught.end_rss - plain.end_rss
    added_peak = taught.peak - plain.peak
    print(
        f"added by {CHATS:,} chats × {args.ratings} ratings: RSS at the end "
        f"{added_end / 2**20:+.0f} MB, peak {added_peak / 2**20:+.0f} MB (goal ≤ 50 MB); the "
        f"store {(taught.size - plain.size) / 2**20:+.0f} MB before training, "
        f"{(run_size(OUT / 'memory-run.db') - plain.size) / 2**20:+.0f} MB with the tastes"
    )
    added_all = taught.end_rss + taught.workers_end - plain.end_rss - plain.workers_end
    print(
        f"with the worker processes: at the end {added_all / 2**20:+.0f} MB (the training "
        f"process stops after {LINGER:.0f}s idle); their peak "
        f"{(taught.workers_peak - plain.workers_peak) / 2**20:+.0f} MB, while it trains"
    )
    ok = max(added_end, added_peak) <= 50 * 2**20
    print("RESULT:", "goal met" if ok else "goal missed")
    return 0 if ok else 1


def run_size(db: Path) -> int:
    """The database's bytes, its write-ahead log included."""
    return sum(Path(f"{db}{s}").stat().st_size for s in ("", "-wal") if Path(f"{db}{s}").exists())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh", action="store_true", help="rebuild the cached store")
    parser.add_argument("--seconds", type=float, default=60, help="how long users type commands")
    parser.add_argument("--poll-every", type=float, default=20, help="TOPICPULSE_POLL_SECONDS")
    parser.add_argument(
        "--ratings",
        type=int,
        default=0,
        help="every chat rates this many papers: the bot with and without them (issue 24)",
    )
    parser.add_argument(
        "--retrain",
        type=int,
        default=1000,
        help="--ratings: chats whose taste the bot retrains (in its worker) while measured",
    )
    raise SystemExit(asyncio.run(main(parser.parse_args())))
