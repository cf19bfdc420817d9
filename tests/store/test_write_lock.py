"""Waiting for the write lock: a writer tries again every few milliseconds while another
connection writes (``store.database.begin_immediate``), and a page is stored in slices
(``sources.storing``), so a write that arrives while a page is being stored (a reader's 👍)
gets in between two slices, not after the whole page."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from fake_arxiv import make_paper
from topicpulse.models import utcnow
from topicpulse.sources import storing
from topicpulse.sources.oai import OaiPage, OaiRecord
from topicpulse.store import IntakeUpdate, Store
from topicpulse.store.database import BUSY_TIMEOUT_MS, begin_immediate
from waiting import wait_for


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


async def _trace(store: Store, callback: Callable[[str], None]) -> None:
    """Every statement the store's writer runs, to ``callback`` (on the writer's thread)."""
    await store._conn._execute(store._conn._conn.set_trace_callback, callback)


async def test_a_writer_begins_once_the_other_writer_commits(store: Store) -> None:
    other, mine = _connect(Path(store.path)), _connect(Path(store.path))
    other.execute("BEGIN IMMEDIATE")
    began = threading.Event()

    def begin() -> None:
        begin_immediate(mine)
        began.set()

    tries: list[str] = []
    mine.set_trace_callback(lambda sql: tries.append(sql) if sql == "BEGIN IMMEDIATE" else None)
    waiting = asyncio.create_task(asyncio.to_thread(begin))
    # It tries again and again (SQLite's own busy handler would try once, then sleep longer
    # and longer between its silent retries, up to 100 ms, and miss a short gap).
    await wait_for(lambda: len(tries) >= 3, timeout=5, what="three tries for the lock")
    assert not began.is_set()  # (the lock is still held: it cannot have begun)
    other.execute("COMMIT")
    await asyncio.wait_for(waiting, 10)
    assert mine.in_transaction
    mine.execute("INSERT INTO engine_state (key, value) VALUES ('mine', '1')")
    mine.execute("COMMIT")
    # its statements wait for locks as before (SQLite's busy timeout is given back)
    assert mine.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS
    other.close()
    mine.close()


async def test_a_writer_gives_up_after_its_wait_with_sqlites_error(store: Store) -> None:
    other, mine = _connect(Path(store.path)), _connect(Path(store.path))
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        await asyncio.to_thread(begin_immediate, mine, 0.05)
    assert not mine.in_transaction
    assert mine.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS
    other.execute("ROLLBACK")
    begin_immediate(mine)  # free again: at once
    mine.execute("ROLLBACK")
    other.close()
    mine.close()


async def test_a_write_cancelled_while_it_waits_for_the_lock_leaves_no_transaction(
    store: Store,
) -> None:
    """(Shutting down cancels a write that waits.) The writer's thread still takes the lock
    once it is free; the write is rolled back there, and the next one begins as usual."""
    other = _connect(Path(store.path))
    other.execute("BEGIN IMMEDIATE")
    tries: list[str] = []
    await _trace(store, lambda sql: tries.append(sql) if sql == "BEGIN IMMEDIATE" else None)
    waiting = asyncio.create_task(store.save_intake(IntakeUpdate("cancelled", {"watermark": "1"})))
    await wait_for(lambda: len(tries) >= 2, timeout=5, what="the write waiting for the lock")
    waiting.cancel()
    other.execute("COMMIT")
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await store.save_intake(IntakeUpdate("next", {"watermark": "2"}))
    assert (await store.intake_state("next")).watermark == "2"
    assert (await store.intake_state("cancelled")).watermark is None
    other.close()


async def test_a_write_gets_in_between_the_slices_of_a_page(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three slices of two papers; a second store (another connection, as a worker's is) wants
    to write while the first slice holds the lock: it commits before the page's last slice,
    and the page is stored whole, its harvest progress with the last slice."""
    monkeypatch.setattr(storing, "SLICE", 2)
    monkeypatch.setattr(storing, "PAUSE", 0.2)  # (a wide gap: a loaded machine still sees it)
    now = utcnow()
    papers = [make_paper(f"2605.{n:05d}", now) for n in range(6)]
    page = OaiPage(
        "2026-05-21",
        [OaiRecord(p.arxiv_id, "2026-05-21", sets=("cs",), paper=p) for p in papers],
    )
    order = itertools.count()
    page_statements: list[tuple[int, str]] = []
    other_statements: list[tuple[int, str]] = []
    first_slice_writing = threading.Event()

    def on_page(sql: str) -> None:
        page_statements.append((next(order), sql))
        if sql.startswith("INSERT INTO papers"):
            first_slice_writing.set()

    await _trace(store, on_page)
    async with await Store.open(store.path, migrate=False) as other:
        await _trace(other, lambda sql: other_statements.append((next(order), sql)))
        storing_page = asyncio.create_task(
            storing.store_page(store, page, ["cs.CL"], IntakeUpdate("cs.CL", {"watermark": "x"}))
        )
        await asyncio.to_thread(first_slice_writing.wait, 10)
        await other.save_intake(IntakeUpdate("other", {"watermark": "y"}))
        kept = await storing_page

    commits = [n for n, sql in page_statements if sql == "COMMIT"]
    [other_commit] = [n for n, sql in other_statements if sql == "COMMIT"]
    assert len(commits) == 3 and commits[0] < other_commit < commits[-1]
    assert len(kept.stored.new_ids) == 6
    assert len(await store.known_versions(p.arxiv_id for p in papers)) == 6
    progress = [n for n, sql in page_statements if "INTO intake" in sql]
    assert progress and progress[0] > commits[1]  # the harvest's progress: with the last slice
