"""Shared pieces of the benchmarks: the fakes from tests/, DB preparation through the store,
RSS sampling and percentiles. Everything runs on 127.0.0.1; generated files go to bench/out/."""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import random
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from fanout import (  # noqa: E402
    ARXIV_LINK,
    FanOut,
    delivered,
    fill_outbox,
    lost_and_duplicated,
    prepare_fanout,
    synthetic_paper,
)

__all__ = [
    "ARXIV_LINK",
    "FanOut",
    "delivered",
    "fill_outbox",
    "lost_and_duplicated",
    "prepare_fanout",
    "synthetic_paper",
]


def fresh_db(name: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def mean_interval(values: list[float], seed: int = 7) -> tuple[float, float]:
    """The 95% bootstrap interval of the mean (2,000 resamples, seeded)."""
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(2_000))
    return means[49], means[1949]


def percentile(values: Iterable[float], pct: float) -> float:
    data = sorted(values)
    if not data:
        return math.nan
    k = (len(data) - 1) * pct / 100
    lo, hi = math.floor(k), math.ceil(k)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


class RssSampler:
    """Peak resident memory of a process, sampled in the background."""

    def __init__(self, pid: int | None = None, every: float = 0.25) -> None:
        self.process = psutil.Process(pid)
        self.every = every
        self.peak = 0
        self.last = 0
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> int:
        try:
            rss = self.process.memory_info().rss
        except psutil.Error:
            return self.last
        self.last = rss
        self.peak = max(self.peak, rss)
        return rss

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.every)

    def start(self) -> RssSampler:
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.sample()


def mb(n: float) -> str:
    return f"{n / 2**20:.0f} MB"


async def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(step)
    return True


class BotProcess:
    """``python -m topicpulse run`` — the production entry point, the real Application — as a
    child process, so that its CPU and memory are its own (the fakes run in the caller's
    process, as Telegram and arXiv run elsewhere). Its log goes to ``log_path``."""

    def __init__(
        self,
        env: dict[str, str],
        log_path: Path,
        argv: tuple[str, ...] = ("-m", "topicpulse", "run"),
    ) -> None:
        self.env = env
        self.log_path = log_path
        self.argv = argv  # what follows the Python interpreter on the command line
        self.proc: asyncio.subprocess.Process | None = None
        self._log = None

    async def start(self) -> BotProcess:
        import os

        env = {k: v for k, v in os.environ.items() if not k.startswith("TOPICPULSE_")}
        env.update(self.env)
        env["PYTHONPATH"] = str(ROOT / "src")
        self._log = self.log_path.open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *self.argv,
            cwd=str(OUT),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM (a clean stop), SIGKILL if it does not exit in time."""
        if self.proc is None:
            return None
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._log:
            self._log.close()
        return self.proc.returncode


class ArxivProcess:
    """The fake arXiv (``tests/fake_arxiv.py``) served from a process of its own.

    arXiv's servers are not on the bot's machine, and selecting and rendering one 1,000-entry
    page takes the fake ~70 ms of pure Python. Served by the benchmark's own event loop, that
    would stall the fake Bot API beside it — whose clock times every reply — a few times a
    round: a benchmark artefact charged to the bot. ``replace`` swaps the papers served."""

    def __init__(self, papers: Iterable[object], *, nice: int = 0) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve_arxiv, args=(child, list(papers), nice), name="fake-arxiv", daemon=True
        )
        self.url = ""
        self.oai_url = ""

    async def start(self) -> ArxivProcess:
        self._process.start()
        self.url = await asyncio.to_thread(self._conn.recv)
        self.oai_url = self.url.replace("/api/query", "/oai")
        return self

    async def replace(self, papers: Iterable[object]) -> None:
        await asyncio.to_thread(self._conn.send, ("replace", list(papers)))
        await asyncio.to_thread(self._conn.recv)  # applied

    async def close(self) -> None:
        if self._process.is_alive():
            await asyncio.to_thread(self._conn.send, ("stop", None))
            await asyncio.to_thread(self._process.join, 10)
        if self._process.is_alive():
            self._process.kill()


def _serve_arxiv(conn: object, papers: list[object], nice: int) -> None:
    import os

    from fake_arxiv import FakeArxiv

    if nice:
        os.nice(nice)

    async def serve() -> None:
        arxiv = FakeArxiv(papers)  # type: ignore[arg-type]
        await arxiv.start()
        conn.send(arxiv.url)  # type: ignore[attr-defined]
        loop = asyncio.get_running_loop()
        while True:
            command, argument = await loop.run_in_executor(None, conn.recv)  # type: ignore[attr-defined]
            if command != "replace":
                break
            arxiv.replace(argument)
            conn.send("ok")  # type: ignore[attr-defined]
        await arxiv.close()

    asyncio.run(serve())


def bot_env(fake_tg: object, fake_arxiv: object, db: Path, **extra: str) -> dict[str, str]:
    env = {
        "TELEGRAM_BOT_TOKEN": fake_tg.token,  # type: ignore[attr-defined]
        "TOPICPULSE_TELEGRAM_API_URL": fake_tg.base_url,  # type: ignore[attr-defined]
        "TOPICPULSE_ARXIV_API_URL": fake_arxiv.url,  # type: ignore[attr-defined]
        "TOPICPULSE_ARXIV_OAI_URL": fake_arxiv.oai_url,  # type: ignore[attr-defined]
        "TOPICPULSE_DB": str(db),
        "TOPICPULSE_ARXIV_DELAY_SECONDS": "0",
        "TOPICPULSE_BACKFILL_WEEKS": "0",
        "TOPICPULSE_POLL_SECONDS": "3600",
    }
    env.update(extra)
    return env


def pending_rows(db: Path) -> int:
    """Pending outbox rows, read from the bot's database (WAL: readers do not block it)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        (count,) = conn.execute("SELECT count(*) FROM outbox WHERE state = 'pending'").fetchone()
        return int(count)
    finally:
        conn.close()


def outbox_counts(db: Path) -> dict[str, int]:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return dict(conn.execute("SELECT state, count(*) FROM outbox GROUP BY state").fetchall())
    finally:
        conn.close()
