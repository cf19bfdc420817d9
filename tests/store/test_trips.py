"""One trip to a connection's thread for several statements (``Database._trip`` and
``_write_trip``): a read sees what was committed, a write commits whole or not at all,
and a statement left unread before it (a checkpoint's row) does not stop its COMMIT."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from conftest import Trips
from topicpulse.store import Store


async def test_a_trip_reads_the_last_committed_state_not_an_open_write(
    store: Store,
) -> None:
    writing = asyncio.Event()
    release = asyncio.Event()

    async def writer() -> None:
        async with store._write() as conn:
            await conn.execute(
                "INSERT INTO engine_state (key, value) VALUES ('trip_test', '2')"
                " ON CONFLICT (key) DO UPDATE SET value = '2'"
            )
            writing.set()
            await release.wait()

    task = asyncio.create_task(writer())
    await writing.wait()

    seen: list[object] = []

    def read(conn: sqlite3.Connection) -> list[object]:
        seen.append(
            conn.execute("SELECT value FROM engine_state WHERE key = 'trip_test'").fetchone()
        )
        return seen

    assert await store._trip(read) == [None]  # the open write is not seen
    release.set()
    await task

    def twice(conn: sqlite3.Connection) -> tuple[int, int]:
        first = conn.execute("SELECT value FROM engine_state WHERE key = 'trip_test'").fetchone()
        second = conn.execute("SELECT value FROM engine_state WHERE key = 'trip_test'").fetchone()
        return first[0], second[0]

    assert await store._trip(twice) == (2, 2)


async def test_a_write_trip_that_fails_leaves_nothing(store: Store) -> None:
    def half(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO engine_state (key, value) VALUES ('half', '1')")
        raise RuntimeError("failed between two statements")

    with pytest.raises(RuntimeError):
        await store._write_trip(half)
    assert await store._value("SELECT value FROM engine_state WHERE key = 'half'") is None
    # the writer is usable afterwards: not left inside the failed transaction
    await store._write_trip(
        lambda conn: conn.execute("INSERT INTO engine_state (key, value) VALUES ('whole', '1')")
    )
    assert await store._value("SELECT value FROM engine_state WHERE key = 'whole'") == 1


async def test_settling_in_one_trip_after_a_checkpoint(store: Store) -> None:
    """A checkpoint's result row, unread, would stay a statement in progress on the writer and
    fail the next one-trip COMMIT ("SQL statements in progress"); the store reads it out."""
    chat_id = 42
    await store.ensure_chat(chat_id)
    await store.checkpoint()
    chat = await store.chat(chat_id)
    assert chat is not None
    await store.settle_digest(chat, outbox_ids=[], paper_ids=[], through=3)
    settled = await store.chat(chat_id)
    assert settled is not None and settled.digest_through == 3


async def test_what_list_shows_is_read_in_one_trip(store: Store) -> None:
    """/list's chat, subscriptions and left-out words (``Store.following``) agree with the
    separate reads and take one trip to a reader (each trip waits for the loop in a round)."""
    await store.ensure_chat(7)
    topics = [
        await store.custom_topic(name=w, query=w, normalised=w, fts=w) for w in ("grpo", "dpo")
    ]
    for topic_id in topics:
        await store.subscribe(7, topic_id)
    offer = await store.offer_refinement(7, topics[0], "math", "math", 3)
    assert offer is not None
    assert await store.decide_refinement(offer.id, was="offered", now="left_out")
    trips = Trips(store)
    chat, subscriptions, left_out = await store.following(7)
    assert trips.count == 1
    assert chat == await store.chat(7)
    assert subscriptions == await store.subscriptions(7)
    assert [r.term for r in left_out] == ["math"] and left_out == await store.left_out(7)
    assert await store.following(8) == (None, [], [])
