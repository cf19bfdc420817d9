"""Matching: after each ingestion round, which topics match the papers stored since the last one.

Only the new papers are indexed (``BatchIndex``, an in-memory FTS5 table) and every live
topic's query runs over that small index (each distinct term once, see ``match_batch``), so a
round's cost grows with new papers and topics — never with more users. The work runs off the
event loop, in a worker process (or thread) that reads the batch from the database file itself.
The matches and the alerts they cause are recorded in one transaction (see
``Store.record_matches``) — in the bot, by that same worker process, so thousands of match and
outbox rows never cross to the bot's process; papers announced more than ``ALERT_MAX_AGE``
ago are matched but never alerted.

A topic keeps the expression its query compiled to when it was followed, even once a stricter
parser rejects the query (``sync_catalogue``): a round matches such a topic from that compiled
form, or skips it if FTS5 rejects that too, and logs it; the other topics never notice. How
many there were in the last round is kept for /stats (``Store.unparsed_topics``).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from topicpulse import offload
from topicpulse.models import StoredPaper, Topic, iso, utcnow
from topicpulse.store import BatchRow, Store, read_batch, rows
from topicpulse.topics import query as ql

log = logging.getLogger(__name__)

BATCH_PAPERS = 20_000  # papers indexed at once; a larger backlog is matched in several batches
# A paper arXiv announced longer ago than this is history, not news: it is stored and matched
# but never alerted. Counted from the announcement (``papers.announced``), not the submission, so
# a paper held in moderation for weeks is still news on the day it appears.
ALERT_MAX_AGE = timedelta(days=14)


class BatchIndex:
    """An in-memory FTS5 index of a batch of papers, to run many topic queries over just them.
    The papers come as stored papers or as the store's own rows (``store.BatchRow``).

    It uses the store's tokenizer, so a query finds here exactly what it finds in the store.
    Synchronous on purpose: it runs in a worker thread (``asyncio.to_thread``).
    """

    def __init__(self, papers: Iterable[StoredPaper | BatchRow]) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE batch USING fts5(title, abstract, authors, categories,"
            " tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        self._db.executemany(
            "INSERT INTO batch (rowid, title, abstract, authors, categories) VALUES (?,?,?,?,?)",
            (_row(p) if isinstance(p, StoredPaper) else p for p in papers),
        )
        # one b-tree segment instead of many: prefix and phrase queries read far fewer pages
        self._db.execute("INSERT INTO batch (batch) VALUES ('optimize')")

    def match(self, fts: str) -> list[int]:
        return [
            r[0] for r in self._db.execute("SELECT rowid FROM batch WHERE batch MATCH ?", (fts,))
        ]

    def close(self) -> None:
        self._db.close()


def _row(paper: StoredPaper) -> BatchRow:
    """The paper's searchable columns exactly as the store holds them."""
    return (paper.id, *rows.searchable(paper))


@dataclass(slots=True)
class MatchRound:
    papers: int = 0
    topics: int = 0
    matches: int = 0
    chats_marked: int = 0  # instant chats marked as owed alerts (per batch of the round)
    from_compiled: int = 0  # topics whose query no longer parses, matched from their ``fts``
    skipped: int = 0  # topics that could not be matched at all (their ``fts`` fails too)
    seconds: float = 0.0


def match_batch(
    papers: Sequence[StoredPaper | BatchRow], topics: list[Topic]
) -> dict[int, list[int]]:
    """Topic id → ids of the papers in ``papers`` it matches (papers already matched skipped).

    Thousands of topics share their terms ("llm", ``ti:agent*``, "reward model" …), so each
    distinct term of the topics' parsed queries runs once on the batch index, and each topic's
    AND/OR/NOT is evaluated over those id sets — the boolean algebra FTS5 applies, at a
    fraction of the cost of one FTS query per topic. A topic whose stored query no longer
    parses runs its compiled expression (``topic.fts``) as one FTS query instead; one that
    FTS5 rejects too is left out of the result (see ``_matches_of``).
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

    def found(topic: Topic) -> frozenset[int] | None:
        node = _parsed(topic.query)
        if not isinstance(node, ql.QueryError):
            return ids(node)
        try:
            return frozenset(index.match(topic.fts))
        except sqlite3.Error:
            return None

    try:
        result = {}
        for topic in topics:
            hits = found(topic)
            if hits is not None:
                result[topic.id] = sorted(pid for pid in hits if pid > topic.matched_through)
        return result
    finally:
        index.close()


def _matches_of(
    papers: Sequence[StoredPaper | BatchRow], topics: list[Topic]
) -> tuple[dict[int, list[int]], dict[int, bool]]:
    """``match_batch``, and the topics whose stored query no longer parses: topic id → whether
    it was skipped (else matched from its compiled form). A skipped topic is recorded as
    matching nothing, so its watermark moves on with the others'."""
    matches = match_batch(papers, topics)
    unparsed = {t.id: t.id not in matches for t in topics if _unparsable(t.query)}
    for topic_id, skipped in unparsed.items():
        if skipped:
            matches[topic_id] = []
    return matches, unparsed


def match_stored(
    path: str, after: int, limit: int, topics: list[Topic]
) -> tuple[int, int, dict[int, list[int]], dict[int, bool]]:
    """``match_batch`` over the next ``limit`` papers stored after row ``after``, read from the
    database file here (a worker process or thread) rather than sent by the event loop: (papers
    read, the last one's row id, topic id → matched paper ids, the topics whose query no longer
    parses → skipped, see ``_matches_of``)."""
    rows = read_batch(path, after, limit)
    if not rows:
        return 0, after, {}, {}
    through = rows[-1][0]
    pending = [t for t in topics if t.matched_through < through]
    return len(rows), through, *_matches_of(rows, pending)


def match_and_record(
    path: str,
    after: int,
    limit: int,
    topics: list[Topic],
    alert_published_since: str | None,
    now: datetime,
) -> tuple[int, int, int, int, dict[int, bool]]:
    """In a worker process: ``match_stored``, then record the matches and queue their alerts
    through a connection of its own (``now``: the store's time for the rows). Returns (papers
    read, the last one's row id, matches, alerts queued, the unparsable topics → skipped)."""
    count, through, matches, unparsed = match_stored(path, after, limit, topics)
    if not count:
        return 0, after, 0, 0, {}

    queued = Store.run_apart(
        path,
        now,
        lambda store: store.record_matches(
            matches,
            batch_after=after,
            batch_through=through,
            alert_published_since=alert_published_since,
        ),
    )
    return count, through, sum(map(len, matches.values())), queued, unparsed


_PARSED: dict[str, ql.Node | ql.QueryError] = {}  # stored query → AST (or why not), kept
_MAX_PARSED = 200_000


def _parsed(query: str) -> ql.Node | ql.QueryError:
    """A stored query's AST, or the error of a query the parser now rejects."""
    node = _PARSED.get(query)
    if node is None:
        if len(_PARSED) >= _MAX_PARSED:
            _PARSED.clear()
        try:
            node = ql.parse(query, max_length=None)
        except ql.QueryError as exc:  # kept without its traceback (and the frames it holds)
            node = exc.with_traceback(None)
        _PARSED[query] = node
    return node


def _unparsable(query: str) -> bool:
    return isinstance(_parsed(query), ql.QueryError)


def _fts_accepted(fts: str) -> bool:
    """Whether FTS5 accepts a compiled expression (tried on an empty index)."""
    index = BatchIndex(())
    try:
        index.match(fts)
        return True
    except sqlite3.Error:
        return False
    finally:
        index.close()


async def _match_next(
    store: Store, after: int, limit: int, topics: list[Topic]
) -> tuple[int, int, dict[int, list[int]], dict[int, bool]]:
    """Match the next batch in a thread: read there when the store is a file (nothing but
    topics and ids crosses to it), else read here."""
    if store.file_backed():
        return await asyncio.to_thread(match_stored, store.path, after, limit, topics)
    papers = await store.papers_after(after, limit=limit)
    if not papers:
        return 0, after, {}, {}
    through = papers[-1].id
    pending = [t for t in topics if t.matched_through < through]
    return len(papers), through, *await asyncio.to_thread(_matches_of, papers, pending)


async def match_new_papers(
    store: Store,
    *,
    batch_papers: int = BATCH_PAPERS,
    clock: Callable[[], datetime] = utcnow,
    alerts: bool = True,
    in_process: bool = False,
) -> MatchRound:
    """Match every live topic against the papers it has not seen yet; queue the alerts (for
    papers announced within ``ALERT_MAX_AGE`` of ``clock()``, unless ``alerts`` is off).

    The matching itself runs in a worker thread, or with ``in_process`` (and a store in a file)
    in the worker process (``offload``), which also records the matches: the bot does that, so
    its event loop never competes with that work for the GIL."""
    started = time.monotonic()
    result = MatchRound()
    topics = await store.live_topics()
    if not topics:
        return result
    result.topics = len(topics)
    through = await store.max_paper_id()
    # A topic that fell behind the rounds (its only chat came back) catches up without alerts:
    # a round queues alerts only for papers newer than what earlier rounds fanned out.
    fanned_out = min(await store.fanned_out_through(), through)
    lagging = [t for t in topics if t.matched_through < fanned_out]
    for topic in lagging:
        try:
            await store.catch_up(topic, fanned_out)
        except sqlite3.OperationalError:
            if _fts_accepted(topic.fts):
                raise  # not the topic's fault
            # FTS5 rejects its compiled form: the batches below match it from its query, or
            # skip it (and move it on) when that no longer parses either
    if lagging:
        topics = await store.live_topics()
    after = min(t.matched_through for t in topics)
    since = iso(clock() - ALERT_MAX_AGE) if alerts else None
    unparsed: dict[int, bool] = {}  # over the whole round: topic id → skipped
    while after < through:
        if in_process and store.file_backed():  # matched and recorded by the worker
            count, batch_through, matched, queued, found = await offload.run(
                match_and_record, store.path, after, batch_papers, topics, since, store.clock()
            )
        else:
            count, batch_through, matches, found = await _match_next(
                store, after, batch_papers, topics
            )
            matched = sum(len(ids) for ids in matches.values())
            queued = await store.record_matches(
                matches,
                batch_after=after,
                batch_through=batch_through,
                alert_published_since=since,
            ) if count else 0  # fmt: skip
        if not count:
            break
        for topic_id, skipped in found.items():
            unparsed[topic_id] = unparsed.get(topic_id, False) or skipped
        result.chats_marked += queued
        result.papers += count
        result.matches += matched
        after = batch_through
    result.seconds = time.monotonic() - started
    if result.papers:
        _report_unparsed(result, topics, unparsed)
        await store.record_unparsed_topics(result.from_compiled, result.skipped)
        log.info(
            "matched %d papers against %d topics: %d matches, %d instant chats marked (%.2fs)",
            result.papers,
            result.topics,
            result.matches,
            result.chats_marked,
            result.seconds,
        )
    return result


def _report_unparsed(result: MatchRound, topics: list[Topic], unparsed: dict[int, bool]) -> None:
    """One log line for each topic whose stored query no longer parses, and their counts."""
    for topic in topics:
        if topic.id not in unparsed:
            continue
        skipped = unparsed[topic.id]
        result.skipped += skipped
        result.from_compiled += not skipped
        log.warning(
            "topic %d %r: its stored query no longer parses (%s); %s",
            topic.id,
            topic.query,
            _parsed(topic.query),
            "skipped: FTS5 rejects its compiled expression too"
            if skipped
            else "matched from its compiled expression",
        )
