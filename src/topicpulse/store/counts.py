"""Counts and lists for momentum and search: papers per time window (of a topic, a query or
the whole store), a topic's or a query's papers, and the spike episodes of topics."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Sequence
from typing import Any

from topicpulse.models import SpikeEpisode, StoredPaper
from topicpulse.store import rows
from topicpulse.store.database import Database

_TOPICS_PER_STATEMENT = 40  # 40 topics × 13 windows × 3 parameters stays far under SQLite's limit
_TERM_DRIFT = 0.02  # document frequencies are read again once the store grew by 2%
_TERMS_KEPT = 200_000  # … or once this many terms are kept (≈ 20 MB)


class CountQueries(Database):
    """Momentum counts, topic and query papers, spike episodes (part of ``Store``)."""

    async def count_windows(
        self, edges: Sequence[str], *, topic_id: int | None = None, fts: str | None = None
    ) -> list[int]:
        """Papers first published in each window [edges[i], edges[i+1]) — of one topic, of an
        FTS query, or of the whole store — in one statement (``_windows``)."""
        if len(edges) < 2:
            return []
        return await self._trip(lambda conn: _windows(conn, edges, topic_id, fts))

    async def momentum_counts(
        self,
        edges: Sequence[str],
        whole: Sequence[str],
        *,
        topic_id: int | None = None,
        fts: str | None = None,
    ) -> tuple[list[int], int, int]:
        """What a topic's (or a query's) momentum counts, in one trip to a reader: its papers
        per window of ``edges``, the whole store's papers in the window ``whole``, and its
        papers in all. (Three trips were three waits for the event loop while a round runs.)"""

        def read(conn: sqlite3.Connection) -> tuple[list[int], int, int]:
            (store_wide,) = _windows(conn, whole, None, None)
            return _windows(conn, edges, topic_id, fts), store_wide, _matches(conn, topic_id, fts)

        return await self._trip(read)

    async def topics_windows(
        self, edges: Sequence[str], topic_ids: Sequence[int], whole: Sequence[str]
    ) -> tuple[dict[int, tuple[list[int], int]], int]:
        """For each topic: its papers in each window [edges[i], edges[i+1]) and its papers in
        all, as index range counts — a few statements for any number of topics (a reply to
        /list reads once, not twice per followed topic) — and the whole store's papers in the
        window ``whole``, in one trip to a reader."""

        def read(conn: sqlite3.Connection) -> tuple[dict[int, tuple[list[int], int]], int]:
            (store_wide,) = _windows(conn, whole, None, None)
            return _topics_windows(conn, edges, topic_ids), store_wide

        return await self._trip(read)

    async def count_matches(self, *, topic_id: int | None = None, fts: str | None = None) -> int:
        return await self._trip(lambda conn: _matches(conn, topic_id, fts))

    async def matching_papers(
        self,
        *,
        topic_id: int | None = None,
        fts: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        order: str = "newest",
    ) -> list[StoredPaper]:
        """Papers of a topic, of an FTS query, or of both (a query within a topic's papers),
        newest first (or ``order="relevance"``: BM25, title weighted ×10, when there is a
        query), optionally within [since, until)."""
        clauses: list[str] = []
        args: list[Any] = []
        if fts is not None:
            source = "papers_fts JOIN papers p ON p.id = papers_fts.rowid"
            clauses.append("papers_fts MATCH ?")
            args.append(fts)
            if topic_id is not None:
                source += " JOIN topic_papers tp ON tp.paper_id = p.id"
        # A topic's papers alone are read in its index's order (topic_id, published, paper_id):
        # a page of the newest ones costs a few rows, not a sort of all of them.
        by_topic = fts is None
        when, paper = ("tp.published", "tp.paper_id") if by_topic else ("p.published", "p.id")
        if by_topic:
            source = "topic_papers tp JOIN papers p ON p.id = tp.paper_id"
        if topic_id is not None:
            clauses.append("tp.topic_id = ?")
            args.append(topic_id)
        if since:
            clauses.append(f"{when} >= ?")
            args.append(since)
        if until:
            clauses.append(f"{when} < ?")
            args.append(until)
        if order == "relevance" and fts is not None:
            order_by = "bm25(papers_fts, 10.0, 1.0, 3.0, 1.0), p.published DESC"
        else:
            order_by = f"{when} DESC, {paper} DESC"
        sql = (
            f"SELECT {rows.prefixed(rows.PAPER_COLUMNS, 'p')} FROM {source}"
            f" WHERE {' AND '.join(clauses)} ORDER BY {order_by}"
        )
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            args += [limit, offset]
        return [rows.stored_paper(r) for r in await self._rows(sql, args)]

    async def term_documents(self, terms: Sequence[str]) -> dict[str, int]:
        """How many stored papers use each of these index terms (Porter stems, lower case);
        a term no paper uses is absent. Counts may lag the store by ``_TERM_DRIFT``."""
        papers = await self.count_papers()
        stale = papers > self._term_documents_papers * (1 + _TERM_DRIFT)
        if stale or len(self._term_documents) > _TERMS_KEPT:
            self._term_documents, self._term_documents_papers = {}, papers
        cache = self._term_documents
        missing = sorted({t for t in terms if t not in cache})
        for chunk in rows.chunks(missing):
            cache.update(dict.fromkeys(chunk, 0))  # absent unless the index has it
            for row in await self._rows(
                f"SELECT term, doc FROM papers_fts_terms WHERE term IN ({rows.marks(chunk)})",
                chunk,
            ):
                cache[row["term"]] = int(row["doc"])
        return {t: cache[t] for t in terms if cache.get(t)}

    # ------------------------------------------------------------------ spike episodes
    async def open_episodes(self, topic_ids: Sequence[int]) -> dict[int, SpikeEpisode]:
        """The open episode of each of these topics that has one."""
        found: dict[int, SpikeEpisode] = {}
        for chunk in rows.chunks(topic_ids):
            for row in await self._rows(
                f"SELECT {rows.EPISODE_COLUMNS} FROM spike_episodes"
                f" WHERE topic_id IN ({rows.marks(chunk)}) AND ended_at IS NULL",
                chunk,
            ):
                found[row["topic_id"]] = rows.episode(row)
        return found

    async def open_episode(self, topic_id: int) -> SpikeEpisode | None:
        return (await self.open_episodes([topic_id])).get(topic_id)

    async def start_episode(
        self,
        topic_id: int,
        *,
        at: str,
        reason: str,
        last_4w: int,
        prev_4w: int,
        change_pct: float | None,
    ) -> int | None:
        """Open an episode and queue one spike alert per following chat with spikes on.
        ``None`` if the topic already has an open episode (nothing is queued)."""
        async with self._write() as conn:
            cur = await conn.execute(
                "INSERT OR IGNORE INTO spike_episodes (topic_id, started_at, reason, last_4w,"
                " prev_4w, change_pct) VALUES (?,?,?,?,?,?)",
                (topic_id, at, reason, last_4w, prev_4w, change_pct),
            )
            if cur.rowcount < 1:
                return None
            episode_id = int(cur.lastrowid or 0)
            await conn.execute(
                "INSERT OR IGNORE INTO outbox (chat_id, kind, episode_id, created_at)"
                " SELECT s.chat_id, 'spike', ?, ? FROM subscriptions s"
                " JOIN chats c ON c.chat_id = s.chat_id"
                " WHERE s.topic_id = ? AND c.active = 1 AND c.paused = 0 AND c.spikes = 1",
                (episode_id, self._now(), topic_id),
            )
            return episode_id

    async def set_episode_quiet(self, episode_id: int, quiet_since: str | None) -> None:
        async with self._write() as conn:
            await conn.execute(
                "UPDATE spike_episodes SET quiet_since = ? WHERE id = ?", (quiet_since, episode_id)
            )

    async def end_episode(self, episode_id: int, at: str) -> None:
        async with self._write() as conn:
            await conn.execute(
                "UPDATE spike_episodes SET ended_at = ? WHERE id = ?", (at, episode_id)
            )

    async def episode(self, episode_id: int) -> SpikeEpisode | None:
        row = await self._row(
            f"SELECT {rows.EPISODE_COLUMNS} FROM spike_episodes WHERE id = ?", (episode_id,)
        )
        return rows.episode(row) if row else None


def _windows(
    conn: sqlite3.Connection, edges: Sequence[str], topic_id: int | None, fts: str | None
) -> list[int]:
    """``CountQueries.count_windows`` on the reader's thread: an index range count per window
    (a topic, the store), or one full-text match summed per window (a query)."""
    if len(edges) < 2:
        return []
    if fts is None:  # a range count per window: ~15× faster than a sum() per window per row
        table = "papers WHERE"
        if topic_id is not None:
            table = "topic_papers WHERE topic_id = ? AND"
        counts = ", ".join(
            f"(SELECT count(*) FROM {table} published >= ? AND published < ?)"
            for _ in range(len(edges) - 1)
        )
        window_args: list[Any] = []
        for lo, hi in itertools.pairwise(edges):
            window_args += [topic_id, lo, hi] if topic_id is not None else [lo, hi]
        row = conn.execute(f"SELECT {counts}", window_args).fetchone()
        return [int(v) for v in row] if row else []
    sums = ", ".join(
        f"coalesce(sum(published >= ?{2 * i + 1} AND published < ?{2 * i + 2}), 0)"
        for i in range(len(edges) - 1)
    )
    args: list[Any] = []
    for lo, hi in itertools.pairwise(edges):
        args += [lo, hi]
    lo_mark, hi_mark, fts_mark = len(args) + 1, len(args) + 2, len(args) + 3
    args += [min(edges), max(edges), fts]
    row = conn.execute(
        f"SELECT {sums} FROM papers WHERE id IN (SELECT rowid FROM papers_fts"
        f" WHERE papers_fts MATCH ?{fts_mark})"
        f" AND published >= ?{lo_mark} AND published < ?{hi_mark}",
        args,
    ).fetchone()
    return [int(v) for v in row] if row else []


def _topics_windows(
    conn: sqlite3.Connection, edges: Sequence[str], topic_ids: Sequence[int]
) -> dict[int, tuple[list[int], int]]:
    """``CountQueries.topics_windows``' per-topic counts on the reader's thread."""
    found: dict[int, tuple[list[int], int]] = {}
    windows = list(itertools.pairwise(edges))
    per_topic = [
        "(SELECT count(*) FROM topic_papers WHERE topic_id = ? AND published >= ?"
        " AND published < ?)"
    ] * len(windows) + ["(SELECT count(*) FROM topic_papers WHERE topic_id = ?)"]
    for start in range(0, len(topic_ids), _TOPICS_PER_STATEMENT):
        chunk = topic_ids[start : start + _TOPICS_PER_STATEMENT]
        args: list[Any] = []
        for topic_id in chunk:
            for lo, hi in windows:
                args += [topic_id, lo, hi]
            args.append(topic_id)
        row = conn.execute(f"SELECT {', '.join(per_topic * len(chunk))}", args).fetchone()
        values = [int(v) for v in row]
        width = len(per_topic)
        for n, topic_id in enumerate(chunk):
            counts = values[n * width : (n + 1) * width]
            found[topic_id] = (counts[:-1], counts[-1])
    return found


def _matches(conn: sqlite3.Connection, topic_id: int | None, fts: str | None) -> int:
    """A topic's (or a full-text query's) papers in all."""
    if topic_id is not None:
        sql, args = "SELECT count(*) FROM topic_papers WHERE topic_id = ?", (topic_id,)
    else:
        sql, args = "SELECT count(*) FROM papers_fts WHERE papers_fts MATCH ?", (fts,)
    return int(conn.execute(sql, args).fetchone()[0])
