"""What a start tells the operator (``bot/starting.py``, ``sources/pace.py``): the backfill's
plan at the configured pace, progress lines with the time left measured on an injected clock,
and the daily snapshot of TOPICPULSE_BACKUP_DIR."""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path

import pytest

from topicpulse.bot.starting import ProgressLog, backfill_announcement, daily_snapshot
from topicpulse.config import ConfigError, load_settings
from topicpulse.models import RunStats
from topicpulse.sources.pace import backfill_plan, duration
from topicpulse.store import Store


def test_the_plan_counts_oai_pages_at_the_configured_delay() -> None:
    plan = backfill_plan(12, 3, 3.0)  # 12 weeks × 7,500 records, pages of 2,000, 3 sets
    assert (plan.requests, plan.seconds) == (47, 138)
    assert backfill_plan(0.5, 2, 3.0).requests == 3
    assert [duration(s) for s in (40, 252, 5400, 9000)] == [
        "40 s",
        "4 min",
        "1 h 30 min",
        "2 h 30 min",
    ]
    first = backfill_announcement(12, 3, 3.0)
    assert first.startswith(
        "first start: fetching the last 12 weeks of papers from arXiv in the background, "
        "about 47 OAI-PMH page(s) of 2,000 records: at least 2 min at one request every 3 s;"
    )
    later = backfill_announcement(12, 3, 3.0, first=False)
    assert later.startswith("resuming the history of the last 12 weeks from arXiv")


def test_progress_lines_say_the_time_left_at_the_pace_so_far(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    progress = ProgressLog(clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger="topicpulse.bot.starting")
    for done in range(11, 21):  # a resumed harvest: 10 of 20 pages were read before
        now[0] += 30  # 30 s a page
        progress(done, 20, "cs")
    assert [r.getMessage() for r in caplog.records] == [
        "backfill: 15 of about 20 page(s) (set cs), about 2 min left",  # 5 pages at 30 s
        "backfill: 20 of about 20 page(s) (set cs), done",
    ]
    ok = RunStats(kind="backfill", new=300)
    assert progress.finished(ok, 4) == (
        "backfill finished: 300 new papers in 5 min; every paper of the last 4 weeks is in the "
        "store"
    )
    failed = RunStats(kind="backfill", ok=False, message="arXiv unavailable")
    assert progress.finished(failed, 4).startswith("backfill stopped after 5 min (arXiv unavail")


async def test_the_daily_snapshot_writes_once_a_day_and_rotates(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "live.db"
    async with await Store.open(db):
        pass
    settings = load_settings(
        TOPICPULSE_DB=str(db),
        TOPICPULSE_BACKUP_DIR=str(tmp_path / "snapshots"),
        TOPICPULSE_BACKUP_KEEP="2",
    )
    caplog.set_level(logging.INFO, logger="topicpulse.bot.starting")
    for day in (1, 2, 3, 3):
        await daily_snapshot(settings, date(2026, 5, day))
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == [
        "topicpulse-2026-05-02.db",
        "topicpulse-2026-05-03.db",
    ]
    assert sum("daily backup written" in r.getMessage() for r in caplog.records) == 3

    (tmp_path / "a-file").write_text("")
    broken = load_settings(TOPICPULSE_DB=str(db), TOPICPULSE_BACKUP_DIR=str(tmp_path / "a-file"))
    await daily_snapshot(broken, date(2026, 5, 4))  # logged, not raised: the bot goes on
    assert "daily backup into" in caplog.records[-1].getMessage()
    assert load_settings(TOPICPULSE_BACKUP_DIR="").backup_dir is None
    with pytest.raises(ConfigError, match="TOPICPULSE_BACKUP_KEEP"):
        load_settings(TOPICPULSE_BACKUP_KEEP="0")
