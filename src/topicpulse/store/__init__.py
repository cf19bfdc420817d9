"""The SQLite store: every query topicpulse runs, laid out by what it stores.

- ``database``: the connections (one writer, read-only readers) and the migrations;
- ``papers``: papers and ingestion runs;
- ``intake``: where the OAI-PMH harvests stand;
- ``topics``: topics and their matches;
- ``counts``: momentum counts, topic and query papers, spike episodes;
- ``chats``: chats and subscriptions;
- ``outbox``: pending deliveries;
- ``ratings``: each chat's 👍 / 👎, its taste, the papers its alerts held back, its weekly
  /foryou;
- ``refinements``: the words a chat was offered to leave out of a topic, and its views.
- ``digests``: digests assembled from the matches since each chat's watermark.

All SQL outside ``migrations/`` lives here; rows are read by column name (``rows``). Rules
(which papers are too old to alert, how long to keep delivered rows) belong to the modules that
own them and reach the store as parameters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

from topicpulse.store.chats import CHAT_SETTINGS, ChatQueries, SubscriptionsFull
from topicpulse.store.counts import CountQueries
from topicpulse.store.database import (
    Migration,
    MigrationError,
    interactive,
    load_migrations,
    migrations_dir,
)
from topicpulse.store.digests import DigestQueries
from topicpulse.store.intake import IntakeQueries, IntakeState, IntakeUpdate
from topicpulse.store.outbox import OutboxQueries
from topicpulse.store.papers import BatchRow, PaperQueries, read_batch
from topicpulse.store.ratings import Imported, PaperText, Rating, RatingQueries, TasteRow
from topicpulse.store.refinements import Move, Refinement, RefinementQueries
from topicpulse.store.topics import TopicQueries

__all__ = [
    "CHAT_SETTINGS",
    "BatchRow",
    "Imported",
    "IntakeState",
    "IntakeUpdate",
    "Migration",
    "MigrationError",
    "Move",
    "PaperText",
    "Rating",
    "Refinement",
    "Store",
    "SubscriptionsFull",
    "TasteRow",
    "interactive",
    "load_migrations",
    "migrations_dir",
    "read_batch",
]


T = TypeVar("T")

# Per database file, in this (worker) process: the document counts ``term_documents`` read,
# kept between ``run_apart`` calls (each opens a store of its own).
_term_documents: dict[str, tuple[dict[str, int], int]] = {}


class Store(
    PaperQueries,
    IntakeQueries,
    TopicQueries,
    CountQueries,
    ChatQueries,
    OutboxQueries,
    RatingQueries,
    RefinementQueries,
    DigestQueries,
):
    """Async access to the topicpulse database. Create with ``await Store.open(path)``."""

    @classmethod
    def run_apart(cls, path: str, now: datetime, work: Callable[[Store], Awaitable[T]]) -> T:
        """``work`` on a store of its own at ``path``, through a connection opened here — in a
        worker process (``offload``) or thread, never on the bot's event loop — with ``now`` as
        the store's time for the rows it writes. The bot has migrated the database already."""

        async def run() -> T:
            async with await cls.open(path, migrate=False, readers=0, clock=lambda: now) as store:
                # the index's document counts carry over from this process's last call
                documents, papers = _term_documents.get(path, ({}, 0))
                store._term_documents, store._term_documents_papers = documents, papers
                try:
                    return await work(store)
                finally:
                    _term_documents[path] = (store._term_documents, store._term_documents_papers)

        return asyncio.run(run())
