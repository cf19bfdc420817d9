"""Taps on 👍 / 👎 that arrive together are written together: one transaction, each tap's
result as if written one after another, and a tap that cannot be written fails alone."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fake_arxiv import make_paper
from topicpulse.models import StoredPaper
from topicpulse.store import Store

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "ratings.db")
    await opened.upsert_papers([make_paper(f"2611.{n:05d}", NOW) for n in (1, 2)])
    for chat_id in (1, 2):
        await opened.ensure_chat(chat_id)
    try:
        yield opened
    finally:
        await opened.close()


def counting_writes(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The store's write transactions, counted (either kind: ``_write``, ``_write_trip``)."""
    count = [0]
    original, original_trip = store._write, store._write_trip

    @asynccontextmanager
    async def write() -> AsyncIterator[object]:
        count[0] += 1
        async with original() as conn:
            yield conn

    async def write_trip(work: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return await original_trip(work, **kwargs)

    monkeypatch.setattr(store, "_write", write)
    monkeypatch.setattr(store, "_write_trip", write_trip)
    return count


async def papers(store: Store) -> tuple[StoredPaper, StoredPaper]:
    p, q = sorted(await store.recent_papers(10), key=lambda x: x.arxiv_id)
    return p, q


async def test_taps_that_come_together_are_one_transaction_in_their_order(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    p, q = await papers(store)
    writes = counting_writes(store, monkeypatch)
    results = await asyncio.gather(
        store.toggle_rating(1, p, 1),
        store.toggle_rating(1, p, 1),  # the second tap on 👍 undoes it
        store.toggle_rating(1, p, -1),
        store.toggle_rating(2, p, -1, rated_by=7),
        store.toggle_rating(1, q, 1),
    )
    assert results == [1, 0, -1, -1, 1]
    assert writes[0] == 1
    assert await store.ratings_for(1, [p.id, q.id]) == {p.id: -1, q.id: 1}
    assert await store.ratings_for(2, [p.id]) == {p.id: -1}
    assert (await store.taste(1)).changed == 4  # type: ignore[union-attr]
    assert (await store.taste(2)).changed == 1  # type: ignore[union-attr]
    # alone, as before: the next tap is a batch of its own, and undoes
    assert await store.toggle_rating(2, p, -1) == 0
    assert writes[0] == 2 and await store.ratings_for(2, [p.id]) == {}


async def test_a_tap_that_cannot_be_written_fails_alone(store: Store) -> None:
    p, _ = await papers(store)
    results = await asyncio.gather(
        store.toggle_rating(1, p, 1),
        store.toggle_rating(999, p, 1),  # no such chat
        store.toggle_rating(2, p, 1),
        return_exceptions=True,
    )
    assert results[0] == 1 and results[2] == 1
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert await store.rating_counts(1) == (1, 0) and await store.rating_counts(2) == (1, 0)
