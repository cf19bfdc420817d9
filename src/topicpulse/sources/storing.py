"""Storing a harvested page: its records sorted (``announce``) and its papers upserted in a few
short transactions, in the bot's process or, for the intake, in the worker process that parsed the
page (``KeepPage``, a harvest's ``keep``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from topicpulse.models import UpsertResult
from topicpulse.sources.announce import sort_records
from topicpulse.sources.oai import OaiPage
from topicpulse.store import IntakeUpdate, Store

SLICE = 250  # papers per write transaction (~40 ms of the write lock on a big store)
PAUSE = 0.004  # s between slices: longer than a waiting writer's tries are apart (2 ms)


@dataclass(frozen=True, slots=True)
class Kept:
    """What storing a page did, and the newest datestamp on it."""

    stored: UpsertResult
    newest_stamp: str


async def store_page(
    store: Store,
    page: OaiPage,
    categories: Sequence[str],
    intake: IntakeUpdate | None = None,
    oldest: str | None = None,
) -> Kept:
    """Store one page's papers, ``SLICE`` at a time, ``intake`` with the last slice.
    ``oldest``: papers new to the store submitted before this day are left out.

    One transaction for a page of 1,000 held the write lock for 0.1-0.6 s, and a reader's 👍
    waited for all of it; between slices it gets in (``store.database.begin_immediate``).
    A page cut short (the process killed between slices) is stored whole the next time it is
    read: the harvest's progress past it is written only with its last slice, and matching
    follows the stored rows, not the page."""
    known = await store.known_versions(r.arxiv_id for r in page.records if r.paper)
    found = sort_records(page.records, categories, known, oldest=oldest)
    papers = list(found.papers)
    stored = UpsertResult()
    for start in range(0, max(len(papers), 1), SLICE):
        if start:
            await asyncio.sleep(PAUSE)
        last = start + SLICE >= len(papers)
        part = await store.upsert_papers(
            papers[start : start + SLICE],
            announced=found.announced,
            intake=intake if last else None,
        )
        stored.new_ids += part.new_ids
        stored.updated += part.updated
        stored.unchanged += part.unchanged
    return Kept(stored, found.newest_stamp)


@dataclass(frozen=True, slots=True)
class KeepPage:
    """A harvest's ``keep`` for the intake: store the page in the worker process that parsed
    it (``Store.run_apart``; ``now``: the store's time for the rows)."""

    path: str
    categories: tuple[str, ...]
    now: datetime

    def __call__(self, page: OaiPage) -> Kept:
        return Store.run_apart(
            self.path, self.now, lambda store: store_page(store, page, self.categories)
        )
