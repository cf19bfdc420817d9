"""Daily upkeep: prune what has no further use, so the database grows with papers only.

- Papers delivered plainly, an hour after they were queued (``DELIVERED_HORIZON``): the
  outbox is a queue, so the store grows with papers and chats, not with chats × papers
  (issue 25). No round can queue such a paper again: the fan-out starts past the engine's
  watermark and a digest past the chat's, and a paper keeps its row across versions.
- Every other settled row (dropped, doubtful sends, spike alerts, a digest's rows past its
  chat's watermark) after ``OUTBOX_HORIZON``: their reasons are the record. Pending rows are
  never touched.
- Custom topics nobody has followed for ``UNFOLLOWED_GRACE`` (the Undo button and a change of
  mind keep working for that long), with their matches.
- Ingestion runs older than ``RUNS_HORIZON`` (the latest of each kind always stays).
- Shared queries (the follow links of web pages) nobody has used for ``SHARED_QUERY_HORIZON``:
  anyone can type a query into the web page, and each one gets a row.

Then SQLite folds the write-ahead log back into the file and refreshes its statistics.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from topicpulse import heap
from topicpulse.models import iso, utcnow
from topicpulse.store import Store

log = logging.getLogger(__name__)

OUTBOX_HORIZON = timedelta(days=30)
DELIVERED_HORIZON = timedelta(hours=1)
UNFOLLOWED_GRACE = timedelta(days=7)
RUNS_HORIZON = timedelta(days=30)
SHARED_QUERY_HORIZON = timedelta(days=90)


@dataclass(frozen=True, slots=True)
class Pruned:
    outbox_rows: int
    topics: int
    matches: int
    runs: int
    shared_queries: int
    bytes_before: int
    bytes_after: int

    def summary(self) -> str:
        return (
            f"maintenance: removed {self.outbox_rows} settled outbox rows, {self.topics}"
            f" unfollowed custom topics ({self.matches} matches), {self.runs} ingestion runs,"
            f" {self.shared_queries} unused shared queries;"
            f" data {self.bytes_before / 1e6:.1f} MB → {self.bytes_after / 1e6:.1f} MB (freed pages"
            " are reused)"
        )


async def run_maintenance(store: Store, *, now: datetime | None = None) -> Pruned:
    """Prune the store as of ``now`` and log what was removed."""
    now = now or utcnow()
    before = await store.used_bytes()
    outbox_rows = await store.prune_outbox(
        iso(now - OUTBOX_HORIZON), delivered_before=iso(now - DELIVERED_HORIZON)
    )
    topics, matches = await store.prune_unfollowed_topics(iso(now - UNFOLLOWED_GRACE))
    runs = await store.prune_runs(iso(now - RUNS_HORIZON))
    shared = await store.prune_shared_queries(iso(now - SHARED_QUERY_HORIZON))
    await store.checkpoint()
    heap.trim()  # (what the day freed, back to the system: see topicpulse.heap)
    after = await store.used_bytes()
    pruned = Pruned(outbox_rows, topics, matches, runs, shared, before, after)
    log.info(pruned.summary())
    return pruned
