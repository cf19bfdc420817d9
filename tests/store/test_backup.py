"""Backups (``store/backup.py``, ``topicpulse backup`` / ``restore``): a copy taken while
rounds write — even with a round's transaction half done at that instant — restores to a store
with every subscription and no part of an unfinished round; a restore checks its file and
refuses while a store has the database open, changing nothing; the daily snapshots rotate."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from fake_arxiv import make_paper
from topicpulse.store import Store
from topicpulse.store.backup import BackupError, backup, inspect, restore, snapshot
from topicpulse.topics.catalogue import sync_catalogue

ROOT = Path(__file__).resolve().parents[2]
CHATS = 30
ROUND = 120  # papers a round stores, in one transaction
START = datetime(2026, 5, 1, tzinfo=UTC)


async def followed_store(path: Path) -> tuple[Store, set[tuple[int, int]]]:
    """A store where CHATS chats follow three catalogue topics each: (chat, topic) pairs."""
    store = await Store.open(path)
    await sync_catalogue(store)
    topics = [t.id for t in await store.topics()][:6]
    follows: set[tuple[int, int]] = set()
    for chat in range(1, CHATS + 1):
        await store.ensure_chat(chat)
        for topic in topics[chat % 3 : chat % 3 + 3]:
            await store.subscribe(chat, topic)
            follows.add((chat, topic))
    return store, follows


def round_papers(number: int) -> list:  # type: ignore[type-arg]
    return [
        make_paper(f"{2605 + number // 90}.{number % 90:02d}{i:03d}", START + timedelta(minutes=i))
        for i in range(ROUND)
    ]


def restored_contents(path: Path) -> tuple[set[tuple[int, int]], dict[str, int]]:
    """(chat, topic) follows, and papers per round (the id's prefix before the last 3 digits)."""
    with sqlite3.connect(path) as db:
        follows = {(c, t) for c, t in db.execute("SELECT chat_id, topic_id FROM subscriptions")}
        rounds: dict[str, int] = {}
        for (arxiv_id,) in db.execute("SELECT arxiv_id FROM papers"):
            rounds[arxiv_id[:-3]] = rounds.get(arxiv_id[:-3], 0) + 1
    return follows, rounds


async def test_a_backup_during_rounds_restores_every_subscription_and_whole_rounds(
    tmp_path: Path,
) -> None:
    live = tmp_path / "live.db"
    store, follows = await followed_store(live)
    stop = asyncio.Event()
    stored: list[int] = []

    async def rounds() -> None:  # the bot's ingestion: round after round, each one transaction
        number = 0
        while not stop.is_set():
            await store.upsert_papers(round_papers(number))
            stored.append(number)
            number += 1

    writer = asyncio.create_task(rounds())
    copies = []
    try:
        for n in range(3):
            await asyncio.sleep(0)  # let the writer be inside a round
            copies.append(await asyncio.to_thread(backup, live, tmp_path / f"copy{n}.db"))
    finally:
        stop.set()
        await writer
    # One more, taken while another connection holds a round's transaction half written.
    half = sqlite3.connect(live, timeout=10, isolation_level=None)
    half.execute("BEGIN IMMEDIATE")
    half.execute("DELETE FROM subscriptions WHERE chat_id <= ?", (CHATS // 2,))
    half.execute("UPDATE papers SET title = 'half-written' WHERE id % 2 = 0")
    copies.append(await asyncio.to_thread(backup, live, tmp_path / "mid-round.db"))
    half.execute("COMMIT")
    half.close()
    await store.close()
    assert stored, "no round finished"

    for n, copy in enumerate(copies):
        target = tmp_path / f"restored{n}.db"
        restore(copy.path, target)
        follows_there, rounds_there = restored_contents(target)
        assert follows_there == follows, copy.path
        assert set(rounds_there.values()) <= {ROUND}, rounds_there  # whole rounds, or none
        async with await Store.open(target) as restored:  # the bot can open it and go on
            assert await restored.count_papers() == ROUND * len(rounds_there)
            assert await restored.count_subscriptions(CHATS) == 3
    with sqlite3.connect(tmp_path / "restored3.db") as db:
        assert (
            db.execute("SELECT count(*) FROM papers WHERE title = 'half-written'").fetchone()[0]
            == 0
        )
    assert copies[-1].subscriptions == len(follows)


async def test_restore_refuses_while_a_store_has_the_database_open(tmp_path: Path) -> None:
    live = tmp_path / "live.db"
    store, follows = await followed_store(live)
    copy = backup(live, tmp_path / "copy.db")
    await store.unsubscribe(1, next(t for c, t in follows if c == 1))
    with pytest.raises(BackupError, match="in use by a running topicpulse"):
        restore(copy.path, live)
    assert await store.count_subscriptions(1) == 2  # unchanged: nothing was replaced
    await store.close()

    restore(copy.path, live)
    assert restored_contents(live)[0] == follows
    assert (tmp_path / "live.db.before-restore").is_file()
    assert not Path(f"{live}-wal").exists()
    async with await Store.open(live) as again:
        assert await again.count_subscriptions(1) == 3


async def test_restore_checks_its_file_first_and_changes_nothing(tmp_path: Path) -> None:
    live = tmp_path / "live.db"
    store, _ = await followed_store(live)
    await store.close()
    before = live.read_bytes()

    text = tmp_path / "notes.db"
    text.write_text("not a database " * 100)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    newer = tmp_path / "newer.db"
    backup(live, newer)
    with sqlite3.connect(newer) as db:
        db.execute("INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'now')")
    damaged = tmp_path / "damaged.db"
    backup(live, damaged)
    raw = bytearray(damaged.read_bytes())
    page = 4096
    raw[page * 3 : page * 3 + 200] = b"\xff" * 200  # a b-tree page overwritten
    damaged.write_bytes(bytes(raw))

    for path, reason in [
        (tmp_path / "missing.db", "no such file"),
        (text, "file is not a database"),
        (other, "not a topicpulse database"),
        (newer, "made by a newer topicpulse"),
        (damaged, "damaged|malformed"),
    ]:
        with pytest.raises(BackupError, match=reason):
            restore(path, live)
    assert live.read_bytes() == before
    assert inspect(live).subscriptions == 3 * CHATS


def test_daily_snapshots_keep_the_newest(tmp_path: Path) -> None:
    live = tmp_path / "live.db"
    asyncio.run(_migrated(live))
    folder = tmp_path / "backups"
    days = [date(2026, 5, 1) + timedelta(days=n) for n in range(5)]
    for day in days:
        assert snapshot(live, folder, keep=3, today=day) == folder / f"topicpulse-{day}.db"
    assert snapshot(live, folder, keep=3, today=days[-1]) is None  # once a day
    (folder / "notes.txt").write_text("mine")
    snapshot(live, folder, keep=3, today=days[-1])
    assert (
        sorted(p.name for p in folder.iterdir())
        == [
            "notes.txt",  # only its own files are rotated
            *(f"topicpulse-{d}.db" for d in days[2:]),
        ]
    )


async def _migrated(path: Path) -> None:
    async with await Store.open(path):
        pass


def topicpulse(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src"),
           "TOPICPULSE_DB": str(tmp_path / "live.db")}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "topicpulse", *args],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


async def test_the_commands_back_up_a_running_store_and_restore_only_once_it_stopped(
    tmp_path: Path,
) -> None:
    store, follows = await followed_store(tmp_path / "live.db")
    await store.upsert_papers(round_papers(0))
    made = await asyncio.to_thread(topicpulse, tmp_path, "backup", "saved.db")
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith(
        f"backed up {tmp_path / 'live.db'} to saved.db: {ROUND} papers, {CHATS} chats, "
        f"{len(follows)} subscriptions, migration "
    )
    for chat in range(1, 6):
        await store.deactivate_chat(chat, "test")
    refused = await asyncio.to_thread(topicpulse, tmp_path, "restore", "saved.db")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("topicpulse: cannot restore: ")
    assert "stop it first" in refused.stderr and len(refused.stderr.splitlines()) == 1
    await store.close()

    done = await asyncio.to_thread(topicpulse, tmp_path, "restore", "saved.db")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith(f"restored saved.db to {tmp_path / 'live.db'}")
    async with await Store.open(tmp_path / "live.db") as back:
        assert (await back.chat_counts()).get("inactive", 0) == 0
        assert await back.count_papers() == ROUND

    nothing = await asyncio.to_thread(topicpulse, tmp_path, "backup", "no/such/folder/x.db")
    assert nothing.returncode == 1 and "folder" in nothing.stderr
