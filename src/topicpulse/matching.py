"""Matching: after each ingestion round, which topics match the papers stored since the last one.

Only the new papers are indexed (in memory) and every live topic's FTS query runs over that
small index, so a round costs O(new papers × topics) — never more with more users. The matches
and the alerts they cause are recorded in one transaction (see ``Store.record_matches``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from topicpulse.models import StoredPaper, Topic
from topicpulse.store import BatchIndex, Store

log = logging.getLogger(__name__)

BATCH_PAPERS = 20_000  # papers indexed at once; a larger backlog is matched in several batches


@dataclass(slots=True)
class MatchRound:
    papers: int = 0
    topics: int = 0
    matches: int = 0
    alerts_queued: int = 0
    seconds: float = 0.0


def match_batch(papers: list[StoredPaper], topics: list[Topic]) -> dict[int, list[int]]:
    """Topic id → ids of the papers in ``papers`` it matches (papers already matched skipped)."""
    index = BatchIndex(papers)
    try:
        return {
            topic.id: [pid for pid in index.match(topic.fts) if pid > topic.matched_through]
            for topic in topics
        }
    finally:
        index.close()


async def match_new_papers(store: Store, *, batch_papers: int = BATCH_PAPERS) -> MatchRound:
    """Match every live topic against the papers it has not seen yet; queue the alerts."""
    started = time.monotonic()
    result = MatchRound()
    topics = await store.live_topics()
    if not topics:
        return result
    result.topics = len(topics)
    through = await store.max_paper_id()
    after = min(t.matched_through for t in topics)
    while after < through:
        papers = await store.papers_after(after, limit=batch_papers)
        if not papers:
            break
        batch_through = papers[-1].id
        pending = [t for t in topics if t.matched_through < batch_through]
        matches = await asyncio.to_thread(match_batch, papers, pending)
        result.alerts_queued += await store.record_matches(
            matches, batch_after=after, batch_through=batch_through
        )
        result.papers += len(papers)
        result.matches += sum(len(ids) for ids in matches.values())
        after = batch_through
    result.seconds = time.monotonic() - started
    if result.papers:
        log.info(
            "matched %d papers against %d topics: %d matches, %d alerts queued (%.2fs)",
            result.papers, result.topics, result.matches, result.alerts_queued, result.seconds,
        )  # fmt: skip
    return result
