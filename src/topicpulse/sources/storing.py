"""Storing a harvested page: its records sorted (``announce``) and its papers upserted in one
transaction, in the bot's process or, for the intake, in the worker process that parsed the
page (``KeepPage``, a harvest's ``keep``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from topicpulse.models import UpsertResult
from topicpulse.sources.announce import sort_records
from topicpulse.sources.oai import OaiPage
from topicpulse.store import IntakeUpdate, Store


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
    """Store one page's papers (and ``intake``) in one transaction. ``oldest``: papers new to
    the store submitted before this day are left out."""
    known = await store.known_versions(r.arxiv_id for r in page.records if r.paper)
    found = sort_records(page.records, categories, known, oldest=oldest)
    stored = await store.upsert_papers(found.papers, announced=found.announced, intake=intake)
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
