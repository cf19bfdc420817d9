"""The scale simulation, scaled down for every run of the suite (issue 25 §5): 150 chats for a
simulated day through the real engine on a virtual clock, and the invariants of
the full run — nothing lost or twice, no 429, no digest later than its time allows, instant
alerts within the ceiling's time plus a minute, and an outbox that never holds a row per
chat and paper."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from topicpulse.store import lock

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_scale.py"


@pytest.mark.timeout(240)
def test_the_scaled_down_week_keeps_the_full_runs_invariants(tmp_path: Path) -> None:
    command = [
        sys.executable, str(BENCH), "--chats", "150", "--days", "1", "--history-days", "3",
        "--tick", "30", "--probe-idle", "600", "--out", str(tmp_path), "--json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=230)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["chats"], result["days"]) == (150, 1)
    assert result["owed_papers"] > 10_000  # the week really delivered something
    assert result["lost"] == 0 and result["duplicated"] == 0
    assert result["http_429"] == 0
    assert result["digests_sent"] > 0.8 * result["digests_due"]  # (some digests are empty)
    assert result["digests_late_15min"] == 0 and result["digests_late_ceiling_bound"] == 0
    assert result["instant_beyond_ceiling_plus_1min"] == 0
    # the outbox is a queue: digests are assembled from the matches, and the instant chats'
    # delivered papers leave it at the daily upkeep (a two-message digest's first message
    # leaves a few rows until its last goes)
    few_rows = result["owed_papers_instant"] * 0.01 + 50
    assert result["outbox_rows_end"] <= few_rows
    # and never holds a row per chat and paper: a round marks the instant chats it owes
    hours = json.loads((tmp_path / "scale-150.json").read_text())["hours"]
    assert max(h["outbox_rows"] for h in hours) <= few_rows
    assert sum(h["instant"] for h in hours) > 0
    assert result["reply_probes_idle"] > 0 and result["reply_p95_idle_ms"] < 5_000
    # the store the week ran on, and the one prepared for the next run, are whole
    for db in (tmp_path / "scale-150.db", *tmp_path.glob("scale-prepared-*.db")):
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok", db


async def test_a_second_run_on_the_same_folder_leaves_the_running_ones_store_alone(
    tmp_path: Path,
) -> None:
    """A run removes the store it starts from: not while another run has it open."""
    db = tmp_path / "scale-150.db"
    db.write_bytes(b"a running week's store")
    held = await lock.hold_shared(db)  # (as a running store holds it)
    try:
        command = [sys.executable, str(BENCH), "--chats", "150", "--out", str(tmp_path), "--json"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        lock.release(held)
    assert done.returncode != 0
    assert "in use by another run" in done.stderr
    assert db.read_bytes() == b"a running week's store"
