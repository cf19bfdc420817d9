"""Ingestion benchmark: one intake round and a full 8-week history against the fake arXiv's
OAI-PMH endpoint.

The fake (tests/fake_arxiv.py) serves the 5,861 real papers of
``shared/arxiv-listings/papers.jsonl`` (without ../shared: as many generated papers over the same
weeks, ``fake_arxiv.synthetic_listing``) re-dated so that the last listing day is yesterday (the 8
weeks of listings become the last 8 weeks), each day's papers spread over the day. Both runs use
the real ``Ingestor``/``ArxivClient`` with the production settings (default categories, OAI-PMH
pages of 2,000 as arXiv's server sends them, the first intake reaching back 7 days) except the
delay between requests, which is 0 here; the output also gives the wall time the same number of
requests needs at arXiv's 3 s.

    .venv/bin/python bench/bench_ingest.py           # in-process Ingestor
    .venv/bin/python bench/bench_ingest.py --cli     # also time `topicpulse backfill --weeks 8`

Figures include the fake's own work (filtering and writing the XML pages), which runs in the
same process as the ingestor unless --cli is given.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from fake_arxiv import LISTINGS, FakeArxiv, listing_papers  # noqa: E402
from topicpulse.config import DEFAULT_CATEGORIES  # noqa: E402
from topicpulse.sources.arxiv import ArxivClient  # noqa: E402
from topicpulse.sources.ingest import Ingestor  # noqa: E402
from topicpulse.store import Store  # noqa: E402

PAGE_SIZE = 2000  # arXiv's OAI-PMH server
OVERLAP_DAYS = 7
WEEKS = 8
ARXIV_DELAY = 3.0


async def timed_round(fake: FakeArxiv, db: Path, now: datetime, kind: str) -> dict[str, float]:
    fake.reset_requests()
    async with await Store.open(db) as store, ArxivClient(fake.url, delay=0) as client:
        ingestor = Ingestor(
            store, client, DEFAULT_CATEGORIES, oai_url=fake.oai_url, overlap_days=OVERLAP_DAYS,
            clock=lambda: now,
        )  # fmt: skip
        started = time.perf_counter()
        if kind == "poll":
            stats, _ = await ingestor.poll()
        else:
            stats, _ = await ingestor.backfill(WEEKS)
        seconds = time.perf_counter() - started
        stored = await store.count_papers()
    assert stats.ok, stats.message
    return {
        "requests": stats.requests,
        "new": stats.new,
        "stored": stored,
        "seconds": seconds,
    }


async def cli_backfill(fake: FakeArxiv, db: Path) -> tuple[float, str]:
    fake.reset_requests()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPICPULSE_")}
    env.update(
        TOPICPULSE_DB=str(db),
        TOPICPULSE_ARXIV_API_URL=fake.url,
        TOPICPULSE_ARXIV_OAI_URL=fake.oai_url,
        TOPICPULSE_ARXIV_DELAY_SECONDS="0",
    )
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "topicpulse", "backfill", "--weeks", str(WEEKS),
        env=env, cwd=db.parent, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"CLI backfill failed: {err.decode()[-500:]}")
    return seconds, out.decode().strip()


def at_arxiv_pace(requests: float) -> float:
    return (requests - 1) * ARXIV_DELAY if requests else 0.0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", action="store_true", help="also run the CLI backfill")
    args = parser.parse_args()

    now = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    papers = listing_papers(end=now.date() - timedelta(days=1))
    first, last = min(p.published for p in papers), max(p.published for p in papers)
    kind = "real" if LISTINGS.is_file() else "generated"
    print(f"fake arXiv: {len(papers)} {kind} papers, published {first[:10]} … {last[:10]}")
    print(f"clock: {now:%Y-%m-%d %H:%M} UTC; {len(DEFAULT_CATEGORIES)} categories, "
          f"page size {PAGE_SIZE}, overlap {OVERLAP_DAYS} days, delay 0 s")  # fmt: skip
    in_poll_window = sum(p.published >= f"{now - timedelta(days=OVERLAP_DAYS):%Y-%m-%dT%H:%M:%SZ}"
                         for p in papers)  # fmt: skip

    with tempfile.TemporaryDirectory() as tmp:
        async with FakeArxiv(papers) as fake:
            fake.oai.page_size = PAGE_SIZE
            poll = await timed_round(fake, Path(tmp) / "poll.db", now, "poll")
            backfill = await timed_round(fake, Path(tmp) / "backfill.db", now, "backfill")
            cli = await cli_backfill(fake, Path(tmp) / "cli.db") if args.cli else None
            cli_requests = len(fake.requests)

    print()
    print(f"poll (empty store): {poll['requests']} request(s), {poll['new']} new papers "
          f"({in_poll_window} published in the last {OVERLAP_DAYS} days), "
          f"{poll['seconds']:.2f} s; at arXiv's {ARXIV_DELAY:.0f} s delay: "
          f"≥ {at_arxiv_pace(poll['requests']):.0f} s of waiting")  # fmt: skip
    print(f"backfill --weeks {WEEKS}: {backfill['requests']} requests (OAI-PMH pages of "
          f"{PAGE_SIZE}), {backfill['new']} papers stored, {backfill['seconds']:.2f} s; "
          f"at arXiv's {ARXIV_DELAY:.0f} s delay: ≥ {at_arxiv_pace(backfill['requests']):.0f} s "
          f"of waiting")  # fmt: skip
    if cli is not None:
        seconds, line = cli
        print(f"CLI `topicpulse backfill --weeks {WEEKS}` (subprocess, incl. start-up): "
              f"{cli_requests} requests, {seconds:.2f} s — {line!r}")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
