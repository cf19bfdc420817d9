"""What a start tells the operator: the backfill it begins (about how many pages, how long at
arXiv's pace), its progress with the time left, how it ended, and when the bot answers commands; and
the daily snapshot of the database, when ``TOPICPULSE_BACKUP_DIR`` asks for one."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import date

from topicpulse.config import Settings
from topicpulse.models import RunStats
from topicpulse.sources.pace import Pace, backfill_plan, duration, weeks_text
from topicpulse.store.backup import BackupError, snapshot

log = logging.getLogger(__name__)

PROGRESS_EVERY = 5  # pages between two progress lines (and the last page)


def backfill_announcement(
    weeks: float, sets: int, delay_seconds: float, *, first: bool = True
) -> str:
    """The line a start logs before its history harvest of ``weeks`` weeks over ``sets`` sets
    (``first``: none was begun before; else one that stopped is resumed)."""
    plan = backfill_plan(weeks, sets, delay_seconds)
    if first:
        head = f"first start: fetching the last {weeks_text(weeks)} of papers from arXiv"
    else:
        head = f"resuming the history of the last {weeks_text(weeks)} from arXiv"
    return (
        f"{head} in the background, {plan.describe(delay_seconds)}; the bot answers meanwhile, "
        "and momentum, trending and alerts fill in as the pages arrive"
    )


def ready_line(username: str, backfilling: bool) -> str:
    tail = " (the backfill goes on in the background)" if backfilling else ""
    return f"topicpulse is running as @{username}: ready to answer commands{tail}"


class ProgressLog:
    """A backfill's progress callback: a line every ``PROGRESS_EVERY`` pages and at the end,
    with the time left at the pace so far."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.pace = Pace(clock)

    def __call__(self, done: int, total: int, label: str) -> None:
        left = self.pace.left(done, total)
        if done == total or done % PROGRESS_EVERY == 0:
            log.info("backfill: %d of about %d page(s) (set %s), %s", done, total, label, left)

    def finished(self, stats: RunStats, weeks: float) -> str:
        took = duration(self.clock() - self.started)
        if stats.ok:
            return (
                f"backfill finished: {stats.new} new papers in {took}; every paper of the last "
                f"{weeks_text(weeks)} is in the store"
            )
        return (
            f"backfill stopped after {took} ({stats.message}); it goes on from its next page "
            "at the next look at arXiv"
        )


async def daily_snapshot(settings: Settings, today: date) -> None:
    """Today's copy into ``TOPICPULSE_BACKUP_DIR`` unless it is there, the oldest beyond
    ``TOPICPULSE_BACKUP_KEEP`` removed; a failure is logged and tried again within the hour."""
    if settings.backup_dir is None:
        return
    try:
        made = await asyncio.to_thread(
            snapshot, settings.db, settings.backup_dir, settings.backup_keep, today
        )
    except (BackupError, OSError) as exc:
        log.error("daily backup into %s failed: %s", settings.backup_dir, exc)
        return
    if made is not None:
        log.info("daily backup written: %s (keeping the last %d)", made, settings.backup_keep)
