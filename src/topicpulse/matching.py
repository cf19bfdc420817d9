"""Matching: after each ingestion round, which topics match the papers stored since the last one.

Only the new papers are indexed (in memory) and every live topic's query runs over that small
index (each distinct term once, see ``match_batch``), so a round's cost grows with new papers
and topics — never with more users. The matches and the alerts they cause are recorded in one
transaction (see ``Store.record_matches``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from topicpulse import query as ql
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
    """Topic id → ids of the papers in ``papers`` it matches (papers already matched skipped).

    Thousands of topics share their terms ("llm", ``ti:agent*``, "reward model" …), so each
    distinct term of the topics' parsed queries runs once on the batch index, and each topic's
    AND/OR/NOT is evaluated over those id sets — the boolean algebra FTS5 applies, at a
    fraction of the cost of one FTS query per topic.
    """
    index = BatchIndex(papers)
    terms: dict[ql.Term, frozenset[int]] = {}

    def ids(node: ql.Node) -> frozenset[int]:
        if isinstance(node, ql.Term):
            found = terms.get(node)
            if found is None:
                found = terms[node] = frozenset(index.match(ql.to_fts(node)))
            return found
        if isinstance(node, ql.And):
            result = ids(node.items[0])
            for item in node.items[1:]:
                if not result:
                    break
                result = result & ids(item)
            return result
        if isinstance(node, ql.Or):
            return frozenset().union(*(ids(item) for item in node.items))
        positive = ids(node.positive)
        return positive - ids(node.negative) if positive else positive

    try:
        return {
            topic.id: sorted(
                pid for pid in ids(_parsed(topic.query)) if pid > topic.matched_through
            )
            for topic in topics
        }
    finally:
        index.close()


_PARSED: dict[str, ql.Node] = {}  # stored query → AST, kept across rounds
_MAX_PARSED = 200_000


def _parsed(query: str) -> ql.Node:
    node = _PARSED.get(query)
    if node is None:
        if len(_PARSED) >= _MAX_PARSED:
            _PARSED.clear()
        node = _PARSED[query] = ql.parse(query, max_length=None)
    return node


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
            result.papers,
            result.topics,
            result.matches,
            result.alerts_queued,
            result.seconds,
        )
    return result
