"""The SQLite store: schema migrations and every query topicpulse runs.

All SQL outside ``migrations/`` lives here. The store owns one aiosqlite connection in
autocommit mode; writes go through ``_write()``, which serialises them with an asyncio lock and
wraps them in ``BEGIN IMMEDIATE … COMMIT`` so a failed write leaves nothing half-done.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import aiosqlite

from topicpulse.models import (
    Chat,
    OutboxItem,
    Paper,
    RunStats,
    SpikeEpisode,
    StoredPaper,
    Subscription,
    Topic,
    UpsertResult,
    iso,
    utcnow,
)

log = logging.getLogger(__name__)

_MIGRATION_NAME = re.compile(r"^(\d{4})_[\w-]+\.sql$")
_CHUNK = 500
# A paper older than this (first version) is history, not news: backfilled papers are stored
# and matched but never alerted. Generous enough for papers held in moderation for days.
ALERT_MAX_AGE = timedelta(days=14)  # SQLite's default limit on bound variables is far above this


class MigrationError(RuntimeError):
    """A migration failed; the database was left as it was before it."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations_dir() -> Path:
    """The folder of numbered ``.sql`` files: shipped in the wheel, or the repository's own."""
    packaged = resources.files("topicpulse") / "migrations"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "migrations"


def load_migrations(folder: Path | None = None) -> list[Migration]:
    folder = folder or migrations_dir()
    found: list[Migration] = []
    for path in sorted(folder.glob("*.sql")):
        match = _MIGRATION_NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path.name}: migration files are named NNNN_description.sql")
        found.append(Migration(int(match.group(1)), path.name, path.read_text("utf-8")))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migrations share a number in {folder}")
    return found


@dataclass(frozen=True, slots=True)
class BackfillWindow:
    categories: str
    start: str  # YYYY-MM-DD inclusive
    end: str  # YYYY-MM-DD inclusive


_PAPER_COLUMNS = (
    "id, arxiv_id, version, title, abstract, authors, primary_category, categories, "
    "published, updated, stored_at, comment, journal_ref, doi"
)


def _prefixed(columns: str, alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


def _stored_paper(row: Sequence[Any]) -> StoredPaper:
    return StoredPaper(
        id=row[0],
        arxiv_id=row[1],
        version=row[2],
        title=row[3],
        abstract=row[4],
        authors=tuple(json.loads(row[5])),
        primary_category=row[6],
        categories=tuple(row[7].split()),
        published=row[8],
        updated=row[9],
        stored_at=row[10],
        comment=row[11],
        journal_ref=row[12],
        doi=row[13],
    )


def _paper_row(paper: Paper) -> tuple[Any, ...]:
    return (
        paper.arxiv_id,
        paper.version,
        paper.title,
        paper.abstract,
        json.dumps(list(paper.authors), ensure_ascii=False),
        paper.primary_category,
        " ".join(paper.categories),
        paper.published,
        paper.updated,
        paper.comment,
        paper.journal_ref,
        paper.doi,
    )


def _newest_per_id(papers: Iterable[Paper]) -> dict[str, Paper]:
    """One paper per arXiv id: the highest version (then the latest ``updated``) wins."""
    best: dict[str, Paper] = {}
    for paper in papers:
        seen = best.get(paper.arxiv_id)
        if seen is None or (paper.version, paper.updated) > (seen.version, seen.updated):
            best[paper.arxiv_id] = paper
    return best


# ====================================================================================== topics
_TOPIC_COLUMNS = "id, kind, slug, name, description, query, fts, active, matched_through"


def _topic(row: Sequence[Any]) -> Topic:
    return Topic(
        id=row[0],
        kind=row[1],
        slug=row[2],
        name=row[3],
        description=row[4],
        query=row[5],
        fts=row[6],
        active=bool(row[7]),
        matched_through=row[8],
    )


def _episode(row: Sequence[Any]) -> SpikeEpisode:
    return SpikeEpisode(*row)


_EPISODE_COLUMNS = (
    "id, topic_id, started_at, reason, last_4w, prev_4w, change_pct, quiet_since, ended_at"
)


class BatchIndex:
    """An in-memory FTS5 index of a batch of papers, to run many topic queries over just them.

    Matching a round's new papers against thousands of topics this way touches only the batch's
    postings, so its cost grows with new papers and topics, not with the size of the store.
    Synchronous on purpose: it runs in a worker thread (``asyncio.to_thread``).
    """

    def __init__(self, papers: Iterable[StoredPaper]) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE batch USING fts5(title, abstract, authors, categories,"
            " tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        self._db.executemany(
            "INSERT INTO batch (rowid, title, abstract, authors, categories) VALUES (?,?,?,?,?)",
            (
                (
                    p.id,
                    p.title,
                    p.abstract,
                    json.dumps(list(p.authors), ensure_ascii=False),
                    " ".join(p.categories),
                )
                for p in papers
            ),
        )
        # one b-tree segment instead of many: prefix and phrase queries read far fewer pages
        self._db.execute("INSERT INTO batch (batch) VALUES ('optimize')")

    def match(self, fts: str) -> list[int]:
        return [
            r[0] for r in self._db.execute("SELECT rowid FROM batch WHERE batch MATCH ?", (fts,))
        ]

    def close(self) -> None:
        self._db.close()


class TopicQueries:
    """Mixin of topic, matching, momentum and search queries (part of ``Store``)."""

    _conn: aiosqlite.Connection
    _write: Any

    async def max_paper_id(self) -> int:
        async with self._conn.execute("SELECT coalesce(max(id), 0) FROM papers") as cur:
            (value,) = await cur.fetchone()  # type: ignore[misc]
        return int(value)

    async def papers_after(self, paper_id: int, limit: int | None = None) -> list[StoredPaper]:
        sql = f"SELECT {_PAPER_COLUMNS} FROM papers WHERE id > ? ORDER BY id"
        args: tuple[Any, ...] = (paper_id,)
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        async with self._conn.execute(sql, args) as cur:
            return [_stored_paper(r) for r in await cur.fetchall()]

    # ------------------------------------------------------------------ topic rows
    async def upsert_catalogue_topic(
        self, *, slug: str, name: str, description: str, query: str, normalised: str, fts: str
    ) -> int:
        """Insert or update a catalogue topic; a changed query re-matches all stored papers."""
        async with self._write() as conn:
            async with conn.execute("SELECT id, fts FROM topics WHERE slug = ?", (slug,)) as cur:
                row = await cur.fetchone()
            if row is None:
                cur = await conn.execute(
                    "INSERT INTO topics (kind, slug, name, description, query, normalised, fts,"
                    " created_at) VALUES ('catalogue', ?, ?, ?, ?, ?, ?, ?)",
                    (slug, name, description, query, normalised, fts, iso(utcnow())),
                )
                topic_id, changed = int(cur.lastrowid or 0), True
            else:
                topic_id, changed = int(row[0]), row[1] != fts
                await conn.execute(
                    "UPDATE topics SET name=?, description=?, query=?, normalised=?, fts=?,"
                    " active=1 WHERE id=?",
                    (name, description, query, normalised, fts, topic_id),
                )
            if changed:
                await self._rematch(conn, topic_id, fts)
        return topic_id

    async def deactivate_catalogue_topics(self, keep_slugs: Iterable[str]) -> int:
        keep = list(keep_slugs)
        marks = ",".join("?" * len(keep)) or "''"
        async with self._write() as conn:
            cur = await conn.execute(
                f"UPDATE topics SET active = 0 WHERE kind = 'catalogue' AND active = 1"
                f" AND slug NOT IN ({marks})",
                keep,
            )
            return cur.rowcount

    async def custom_topic(self, *, name: str, query: str, normalised: str, fts: str) -> int:
        """The custom topic for this normalised query, created (and matched) if new."""
        async with self._write() as conn:
            async with conn.execute(
                "SELECT id FROM topics WHERE kind = 'custom' AND normalised = ?", (normalised,)
            ) as cur:
                row = await cur.fetchone()
            if row is not None:
                return int(row[0])
            cur = await conn.execute(
                "INSERT INTO topics (kind, name, query, normalised, fts, created_at)"
                " VALUES ('custom', ?, ?, ?, ?, ?)",
                (name, query, normalised, fts, iso(utcnow())),
            )
            topic_id = int(cur.lastrowid or 0)
            await self._rematch(conn, topic_id, fts)
            return topic_id

    async def refresh_topic_matches(self, topic: Topic) -> None:
        """Bring a topic's matches up to date if they fell behind (e.g. unfollowed for a while)."""
        if topic.matched_through >= await self.max_paper_id():
            return
        async with self._write() as conn:
            await self._rematch(conn, topic.id, topic.fts)

    @staticmethod
    async def _rematch(conn: aiosqlite.Connection, topic_id: int, fts: str) -> None:
        await conn.execute("DELETE FROM topic_papers WHERE topic_id = ?", (topic_id,))
        await conn.execute(
            "INSERT INTO topic_papers (topic_id, paper_id, published)"
            " SELECT ?, p.id, p.published FROM papers_fts JOIN papers p ON p.id = papers_fts.rowid"
            " WHERE papers_fts MATCH ?",
            (topic_id, fts),
        )
        await conn.execute(
            "UPDATE topics SET matched_through = (SELECT coalesce(max(id), 0) FROM papers)"
            " WHERE id = ?",
            (topic_id,),
        )

    async def topics(self, *, kind: str | None = None, active_only: bool = True) -> list[Topic]:
        clauses, args = [], []
        if kind:
            clauses.append("kind = ?")
            args.append(kind)
        if active_only:
            clauses.append("active = 1")
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        async with self._conn.execute(
            f"SELECT {_TOPIC_COLUMNS} FROM topics {where} ORDER BY kind, name COLLATE NOCASE", args
        ) as cur:
            return [_topic(r) for r in await cur.fetchall()]

    async def topic(self, topic_id: int) -> Topic | None:
        async with self._conn.execute(
            f"SELECT {_TOPIC_COLUMNS} FROM topics WHERE id = ?", (topic_id,)
        ) as cur:
            row = await cur.fetchone()
        return _topic(row) if row else None

    async def followed_topics(self) -> list[Topic]:
        """Topics at least one chat follows (spike detection runs on these)."""
        async with self._conn.execute(
            f"SELECT {_TOPIC_COLUMNS} FROM topics t WHERE EXISTS (SELECT 1 FROM subscriptions s"
            " WHERE s.topic_id = t.id) ORDER BY id"
        ) as cur:
            return [_topic(r) for r in await cur.fetchall()]

    async def live_topics(self) -> list[Topic]:
        """Topics matched every round: the active catalogue and custom topics with followers."""
        async with self._conn.execute(
            f"SELECT {_TOPIC_COLUMNS} FROM topics t WHERE (kind = 'catalogue' AND active = 1)"
            " OR (kind = 'custom' AND EXISTS (SELECT 1 FROM subscriptions s"
            " WHERE s.topic_id = t.id)) ORDER BY id"
        ) as cur:
            return [_topic(r) for r in await cur.fetchall()]

    async def record_matches(
        self, matches: dict[int, list[int]], *, batch_after: int, batch_through: int
    ) -> int:
        """Record one round's matches and queue the alerts they cause, in one transaction.

        ``matches`` maps topic id → matching paper ids among papers ``batch_after < id <=
        batch_through``. Every live topic's ``matched_through`` moves to ``batch_through``. Each
        (active, unpaused) chat following a matching topic gets one outbox row per paper it has
        not had yet, for papers stored after it followed. Returns the outbox rows added.
        """
        now = iso(utcnow())
        async with self._write() as conn:
            found = {topic_id: ids for topic_id, ids in matches.items() if ids}
            if found:  # one statement for all topics (JSON {topic: [paper ids]}): 2× executemany
                await conn.execute(
                    "INSERT OR IGNORE INTO topic_papers (topic_id, paper_id, published)"
                    " SELECT CAST(t.key AS INTEGER), p.id, p.published"
                    " FROM json_each(?) t, json_each(t.value) i JOIN papers p ON p.id = i.value",
                    (json.dumps(found),),
                )
            if matches:
                marks = ",".join("?" * len(matches))
                await conn.execute(
                    f"UPDATE topics SET matched_through = ? WHERE id IN ({marks})"
                    " AND matched_through < ?",
                    (batch_through, *matches, batch_through),
                )
            cur = await conn.execute(
                # no DISTINCT: outbox_paper_once makes OR IGNORE skip a paper a chat already
                # has (from another of its topics); `published` read from papers by rowid so
                # topic_papers is read from its covering index — together 2× faster
                "INSERT OR IGNORE INTO outbox (chat_id, kind, paper_id, created_at)"
                " SELECT s.chat_id, 'paper', tp.paper_id, ? FROM topic_papers tp"
                " JOIN papers p ON p.id = tp.paper_id"
                " JOIN subscriptions s ON s.topic_id = tp.topic_id"
                " JOIN chats c ON c.chat_id = s.chat_id"
                " WHERE tp.paper_id > ? AND tp.paper_id <= ? AND tp.paper_id > s.after_paper_id"
                " AND p.published >= ? AND c.active = 1 AND c.paused = 0"
                " ORDER BY tp.paper_id",
                (now, batch_after, batch_through, iso(utcnow() - ALERT_MAX_AGE)),
            )
            return max(cur.rowcount, 0)

    async def paper_topics(
        self, paper_ids: Sequence[int], kind: str | None = None
    ) -> dict[int, list[Topic]]:
        """Topics matching each paper (e.g. the catalogue tags shown under a paper)."""
        found: dict[int, list[Topic]] = {pid: [] for pid in paper_ids}
        kind_clause = "AND t.kind = ?" if kind else ""
        for start in range(0, len(paper_ids), _CHUNK):
            chunk = list(paper_ids[start : start + _CHUNK])
            marks = ",".join("?" * len(chunk))
            async with self._conn.execute(
                f"SELECT tp.paper_id, {_prefixed(_TOPIC_COLUMNS, 't')}"
                f" FROM topic_papers tp JOIN topics t ON t.id = tp.topic_id"
                f" WHERE tp.paper_id IN ({marks}) AND t.active = 1 {kind_clause}"
                " ORDER BY t.name COLLATE NOCASE",
                (*chunk, *([kind] if kind else [])),
            ) as cur:
                async for row in cur:
                    found[row[0]].append(_topic(row[1:]))
        return found

    # ------------------------------------------------------------------ momentum and search
    async def count_windows(
        self, edges: Sequence[str], *, topic_id: int | None = None, fts: str | None = None
    ) -> list[int]:
        """Papers first published in each window [edges[i], edges[i+1]) — of one topic, of an
        FTS query, or of the whole store — in one statement: an index range count per window
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
            async with self._conn.execute(f"SELECT {counts}", window_args) as cur:
                row = await cur.fetchone()
            return [int(v) for v in row] if row else []
        # A query: one full-text match, its papers summed per window.
        sums = ", ".join(
            f"coalesce(sum(published >= ?{2 * i + 1} AND published < ?{2 * i + 2}), 0)"
            for i in range(len(edges) - 1)
        )
        args: list[Any] = []
        for lo, hi in itertools.pairwise(edges):
            args += [lo, hi]
        lo_mark, hi_mark, fts_mark = len(args) + 1, len(args) + 2, len(args) + 3
        args += [min(edges), max(edges), fts]
        source = (
            f"papers WHERE id IN (SELECT rowid FROM papers_fts WHERE papers_fts MATCH ?{fts_mark})"
            " AND"
        )
        sql = f"SELECT {sums} FROM {source} published >= ?{lo_mark} AND published < ?{hi_mark}"
        async with self._conn.execute(sql, args) as cur:
            row = await cur.fetchone()
        return [int(v) for v in row] if row else []

    async def count_matches(self, *, topic_id: int | None = None, fts: str | None = None) -> int:
        if topic_id is not None:
            sql, args = "SELECT count(*) FROM topic_papers WHERE topic_id = ?", (topic_id,)
        else:
            sql, args = "SELECT count(*) FROM papers_fts WHERE papers_fts MATCH ?", (fts,)
        async with self._conn.execute(sql, args) as cur:
            (value,) = await cur.fetchone()  # type: ignore[misc]
        return int(value)

    async def matching_papers(
        self,
        *,
        topic_id: int | None = None,
        fts: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
        order: str = "newest",
    ) -> list[StoredPaper]:
        """Papers of a topic or an FTS query, newest first (or ``order="relevance"``: BM25,
        title weighted ×10, for queries only), optionally within [since, until)."""
        cols = _prefixed(_PAPER_COLUMNS, "p")
        clauses: list[str] = []
        args: list[Any] = []
        if topic_id is not None:
            source = "topic_papers tp JOIN papers p ON p.id = tp.paper_id"
            clauses.append("tp.topic_id = ?")
            args.append(topic_id)
        else:
            source = "papers_fts JOIN papers p ON p.id = papers_fts.rowid"
            clauses.append("papers_fts MATCH ?")
            args.append(fts)
        if since:
            clauses.append("p.published >= ?")
            args.append(since)
        if until:
            clauses.append("p.published < ?")
            args.append(until)
        if order == "relevance" and topic_id is None:
            order_by = "bm25(papers_fts, 10.0, 1.0, 3.0, 1.0), p.published DESC"
        else:
            order_by = "p.published DESC, p.id DESC"
        sql = f"SELECT {cols} FROM {source} WHERE {' AND '.join(clauses)} ORDER BY {order_by}"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        async with self._conn.execute(sql, args) as cur:
            return [_stored_paper(r) for r in await cur.fetchall()]

    # ------------------------------------------------------------------ spike episodes
    async def open_episode(self, topic_id: int) -> SpikeEpisode | None:
        async with self._conn.execute(
            f"SELECT {_EPISODE_COLUMNS} FROM spike_episodes"
            " WHERE topic_id = ? AND ended_at IS NULL",
            (topic_id,),
        ) as cur:
            row = await cur.fetchone()
        return _episode(row) if row else None

    async def start_episode(
        self,
        topic_id: int,
        *,
        at: str,
        reason: str,
        last_4w: int,
        prev_4w: int,
        change_pct: float | None,
    ) -> int:
        """Open an episode and queue one spike alert per following chat with spikes on."""
        async with self._write() as conn:
            cur = await conn.execute(
                "INSERT INTO spike_episodes (topic_id, started_at, reason, last_4w, prev_4w,"
                " change_pct) VALUES (?,?,?,?,?,?)",
                (topic_id, at, reason, last_4w, prev_4w, change_pct),
            )
            episode_id = int(cur.lastrowid or 0)
            await conn.execute(
                "INSERT OR IGNORE INTO outbox (chat_id, kind, episode_id, created_at)"
                " SELECT s.chat_id, 'spike', ?, ? FROM subscriptions s"
                " JOIN chats c ON c.chat_id = s.chat_id"
                " WHERE s.topic_id = ? AND c.active = 1 AND c.paused = 0 AND c.spikes = 1",
                (episode_id, iso(utcnow()), topic_id),
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
        async with self._conn.execute(
            f"SELECT {_EPISODE_COLUMNS} FROM spike_episodes WHERE id = ?", (episode_id,)
        ) as cur:
            row = await cur.fetchone()
        return _episode(row) if row else None


# ======================================================================================= chats
_CHAT_COLUMNS = (
    "chat_id, type, title, active, paused, mode, digest_time, digest_weekday, timezone, spikes,"
    " next_digest_at"
)
CHAT_SETTINGS = frozenset(
    {"paused", "mode", "digest_time", "digest_weekday", "timezone", "spikes", "next_digest_at"}
)


def _chat(row: Sequence[Any]) -> Chat:
    return Chat(
        chat_id=row[0],
        type=row[1],
        title=row[2],
        active=bool(row[3]),
        paused=bool(row[4]),
        mode=row[5],
        digest_time=row[6],
        digest_weekday=row[7],
        timezone=row[8],
        spikes=bool(row[9]),
        next_digest_at=row[10],
    )


class ChatQueries:
    """Mixin of chat, subscription and outbox queries (part of ``Store``)."""

    _conn: aiosqlite.Connection
    _write: Any

    async def ensure_chat(
        self,
        chat_id: int,
        *,
        type: str = "private",
        title: str | None = None,
        reactivate: bool = False,
    ) -> Chat:
        """The chat's row, created with default settings on first contact."""
        now = iso(utcnow())
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO chats (chat_id, type, title, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (chat_id) DO UPDATE SET"
                " type = excluded.type, title = coalesce(excluded.title, title),"
                " active = CASE WHEN ? THEN 1 ELSE active END,"
                " updated_at = excluded.updated_at",
                (chat_id, type, title, now, now, int(reactivate)),
            )
        chat = await self.chat(chat_id)
        assert chat is not None
        return chat

    async def chat(self, chat_id: int) -> Chat | None:
        async with self._conn.execute(
            f"SELECT {_CHAT_COLUMNS} FROM chats WHERE chat_id = ?", (chat_id,)
        ) as cur:
            row = await cur.fetchone()
        return _chat(row) if row else None

    async def update_chat(self, chat_id: int, **settings: Any) -> None:
        unknown = set(settings) - CHAT_SETTINGS
        if unknown:
            raise ValueError(f"not chat settings: {sorted(unknown)}")
        assignments = ", ".join(f"{name} = ?" for name in settings)
        async with self._write() as conn:
            await conn.execute(
                f"UPDATE chats SET {assignments}, updated_at = ? WHERE chat_id = ?",
                (*settings.values(), iso(utcnow()), chat_id),
            )

    async def deactivate_chat(self, chat_id: int, reason: str) -> int:
        """Mark a chat inactive (blocked us, deleted) and drop its pending deliveries."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE chats SET active = 0, updated_at = ? WHERE chat_id = ?",
                (iso(utcnow()), chat_id),
            )
            cur = await conn.execute(
                "UPDATE outbox SET state = 'dropped', last_error = ?"
                " WHERE chat_id = ? AND state = 'pending'",
                (reason[:500], chat_id),
            )
            return cur.rowcount

    async def migrate_chat(self, old_chat_id: int, new_chat_id: int) -> None:
        """A group became a supergroup: move the chat (subscriptions, outbox) to its new id."""
        async with self._write() as conn:
            async with conn.execute("SELECT 1 FROM chats WHERE chat_id = ?", (new_chat_id,)) as cur:
                exists = await cur.fetchone()
            if exists:  # the new id already talked to us: keep its row, move what it lacks
                await conn.execute(
                    "INSERT OR IGNORE INTO subscriptions (chat_id, topic_id, after_paper_id,"
                    " created_at) SELECT ?, topic_id, after_paper_id, created_at"
                    " FROM subscriptions WHERE chat_id = ?",
                    (new_chat_id, old_chat_id),
                )
                await conn.execute(
                    "UPDATE OR IGNORE outbox SET chat_id = ? WHERE chat_id = ?",
                    (new_chat_id, old_chat_id),
                )
                await conn.execute("DELETE FROM chats WHERE chat_id = ?", (old_chat_id,))
            else:  # ON UPDATE CASCADE carries subscriptions and outbox along
                await conn.execute(
                    "UPDATE chats SET chat_id = ?, type = 'supergroup', updated_at = ?"
                    " WHERE chat_id = ?",
                    (new_chat_id, iso(utcnow()), old_chat_id),
                )

    # ------------------------------------------------------------------ subscriptions
    async def subscribe(self, chat_id: int, topic_id: int) -> bool:
        """Follow a topic; alerts start with papers stored after now. False if already followed."""
        async with self._write() as conn:
            cur = await conn.execute(
                "INSERT OR IGNORE INTO subscriptions (chat_id, topic_id, after_paper_id,"
                " created_at) VALUES (?, ?, (SELECT coalesce(max(id), 0) FROM papers), ?)",
                (chat_id, topic_id, iso(utcnow())),
            )
            return cur.rowcount > 0

    async def unsubscribe(self, chat_id: int, topic_id: int) -> bool:
        async with self._write() as conn:
            cur = await conn.execute(
                "DELETE FROM subscriptions WHERE chat_id = ? AND topic_id = ?", (chat_id, topic_id)
            )
            return cur.rowcount > 0

    async def subscriptions(self, chat_id: int) -> list[Subscription]:
        async with self._conn.execute(
            f"SELECT s.chat_id, s.created_at, {_prefixed(_TOPIC_COLUMNS, 't')}"
            " FROM subscriptions s JOIN topics t ON t.id = s.topic_id"
            " WHERE s.chat_id = ? ORDER BY s.created_at, t.name COLLATE NOCASE",
            (chat_id,),
        ) as cur:
            return [Subscription(r[0], _topic(r[2:]), r[1]) for r in await cur.fetchall()]

    async def count_subscriptions(self, chat_id: int) -> int:
        async with self._conn.execute(
            "SELECT count(*) FROM subscriptions WHERE chat_id = ?", (chat_id,)
        ) as cur:
            (value,) = await cur.fetchone()  # type: ignore[misc]
        return int(value)

    # ------------------------------------------------------------------ outbox
    async def chats_with_pending(
        self,
        *,
        modes: Sequence[str],
        kind: str | None = None,
        due_before: str | None = None,
        limit: int = 1000,
    ) -> list[int]:
        """Active, unpaused chats in one of ``modes`` with pending deliveries (of ``kind`` if
        given; digest chats only once their ``next_digest_at`` is at or before ``due_before``),
        oldest pending first."""
        marks = ",".join("?" * len(modes))
        kind_clause = " AND o.kind = ?" if kind else ""
        args: list[Any] = [*([kind] if kind else []), *modes]
        sql = (
            "SELECT o.chat_id FROM outbox o JOIN chats c ON c.chat_id = o.chat_id"
            f" WHERE o.state = 'pending'{kind_clause} AND c.active = 1 AND c.paused = 0"
            f" AND c.mode IN ({marks})"
        )
        if due_before is not None:
            sql += " AND c.next_digest_at IS NOT NULL AND c.next_digest_at <= ?"
            args.append(due_before)
        sql += " GROUP BY o.chat_id ORDER BY min(o.id) LIMIT ?"
        args.append(limit)
        async with self._conn.execute(sql, args) as cur:
            return [r[0] for r in await cur.fetchall()]

    async def idle_digest_chats_due(self, now: str) -> list[Chat]:
        """Digest chats whose digest time has come with no paper pending (nothing to send)."""
        async with self._conn.execute(
            f"SELECT {_CHAT_COLUMNS} FROM chats c WHERE mode IN ('daily', 'weekly')"
            " AND next_digest_at IS NOT NULL AND next_digest_at <= ? AND NOT EXISTS (SELECT 1"
            " FROM outbox o WHERE o.chat_id = c.chat_id AND o.state = 'pending'"
            " AND o.kind = 'paper')",
            (now,),
        ) as cur:
            return [_chat(r) for r in await cur.fetchall()]

    async def pending_for_chat(self, chat_id: int, limit: int = 500) -> list[OutboxItem]:
        async with self._conn.execute(
            "SELECT id, chat_id, kind, paper_id, episode_id, attempts FROM outbox"
            " WHERE chat_id = ? AND state = 'pending' ORDER BY id LIMIT ?",
            (chat_id, limit),
        ) as cur:
            return [OutboxItem(*r) for r in await cur.fetchall()]

    async def mark_sent(self, outbox_ids: Sequence[int]) -> None:
        now = iso(utcnow())
        async with self._write() as conn:
            await conn.executemany(
                "UPDATE outbox SET state = 'sent', sent_at = ?, attempts = attempts + 1"
                " WHERE id = ? AND state = 'pending'",
                [(now, i) for i in outbox_ids],
            )

    async def mark_failed_attempt(self, outbox_ids: Sequence[int], error: str) -> None:
        async with self._write() as conn:
            await conn.executemany(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?",
                [(error[:500], i) for i in outbox_ids],
            )

    async def drop_outbox(self, outbox_ids: Sequence[int], reason: str) -> None:
        async with self._write() as conn:
            await conn.executemany(
                "UPDATE outbox SET state = 'dropped', last_error = ? WHERE id = ?",
                [(reason[:500], i) for i in outbox_ids],
            )

    async def chat_topics_for_papers(
        self, chat_id: int, paper_ids: Sequence[int]
    ) -> dict[int, list[Topic]]:
        """For each paper, the topics this chat follows that match it (the alert's tags)."""
        found: dict[int, list[Topic]] = {pid: [] for pid in paper_ids}
        for start in range(0, len(paper_ids), _CHUNK):
            chunk = list(paper_ids[start : start + _CHUNK])
            marks = ",".join("?" * len(chunk))
            async with self._conn.execute(
                f"SELECT tp.paper_id, {_prefixed(_TOPIC_COLUMNS, 't')} FROM topic_papers tp"
                " JOIN subscriptions s ON s.topic_id = tp.topic_id AND s.chat_id = ?"
                f" JOIN topics t ON t.id = tp.topic_id WHERE tp.paper_id IN ({marks})"
                " ORDER BY s.created_at",
                (chat_id, *chunk),
            ) as cur:
                async for row in cur:
                    found[row[0]].append(_topic(row[1:]))
        return found

    async def outbox_counts(self) -> dict[str, int]:
        async with self._conn.execute("SELECT state, count(*) FROM outbox GROUP BY state") as cur:
            return {r[0]: r[1] for r in await cur.fetchall()}

    async def chat_counts(self) -> dict[str, int]:
        async with self._conn.execute(
            "SELECT sum(active), sum(1 - active), (SELECT count(*) FROM subscriptions) FROM chats"
        ) as cur:
            row = await cur.fetchone()
        return {"active": row[0] or 0, "inactive": row[1] or 0, "subscriptions": row[2] or 0}  # type: ignore[index]


class Store(TopicQueries, ChatQueries):
    """Async access to the topicpulse database. Create with ``await Store.open(path)``."""

    def __init__(self, conn: aiosqlite.Connection, path: str) -> None:
        self._conn = conn
        self.path = path
        self._write_lock = asyncio.Lock()

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    async def open(cls, path: str | Path, *, migrate: bool = True) -> Store:
        conn = await aiosqlite.connect(str(path), isolation_level=None)
        try:
            await conn.execute("PRAGMA journal_mode=WAL")
            await conn.execute("PRAGMA busy_timeout=10000")
            await conn.execute("PRAGMA foreign_keys=ON")
            await conn.execute("PRAGMA synchronous=NORMAL")
            # 32 MB of page cache (default 2 MB): a round's bulk inserts into the match and
            # outbox indexes stop thrashing it on a large store.
            await conn.execute("PRAGMA cache_size=-32000")
            store = cls(conn, str(path))
            if migrate:
                await store.migrate()
        except BaseException:
            # Not a database, or a failed migration: close, or aiosqlite's (non-daemon) worker
            # thread keeps the process alive after the error is reported.
            await conn.close()
            raise
        return store

    async def close(self) -> None:
        await self._conn.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction at a time; rolled back on any error."""
        async with self._write_lock:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            else:
                await self._conn.execute("COMMIT")

    # ------------------------------------------------------------------ migrations
    async def applied_migrations(self) -> list[int]:
        await self._conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        async with self._conn.execute("SELECT version FROM schema_migrations ORDER BY 1") as cur:
            return [row[0] for row in await cur.fetchall()]

    async def migrate(self, migrations: list[Migration] | None = None) -> list[str]:
        """Apply pending migrations in order, each in its own transaction. Returns their names."""
        migrations = load_migrations() if migrations is None else migrations
        done = set(await self.applied_migrations())
        applied: list[str] = []
        for migration in sorted(migrations, key=lambda m: m.version):
            if migration.version in done:
                continue
            # executescript() runs the whole file; the explicit BEGIN/COMMIT makes it atomic
            # (DDL is transactional in SQLite), and ROLLBACK undoes a partial failure.
            script = (
                "BEGIN IMMEDIATE;\n"
                f"{migration.sql}\n;"
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES "
                f"({migration.version}, '{migration.name}', '{iso(utcnow())}');\n"
                "COMMIT;"
            )
            try:
                await self._conn.executescript(script)
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    await self._conn.execute("ROLLBACK")
                raise MigrationError(f"migration {migration.name} failed: {exc}") from exc
            log.info("applied migration %s", migration.name)
            applied.append(migration.name)
        return applied

    # ------------------------------------------------------------------ papers
    async def upsert_papers(
        self, papers: Iterable[Paper], *, window: BackfillWindow | None = None
    ) -> UpsertResult:
        """Store new papers and newer versions of known ones, in one transaction.

        A paper already stored is updated only when the incoming copy is a newer version (or the
        same version with changed metadata, e.g. a cross-list or DOI added later); it keeps its
        row id and ``stored_at`` and does not count as new. With ``window``, the backfill window
        is recorded as complete in the same transaction.
        """
        incoming = _newest_per_id(papers)
        result = UpsertResult()
        now = iso(utcnow())
        async with self._write() as conn:
            existing = await self._existing_versions(conn, list(incoming))
            inserts: list[tuple[Any, ...]] = []
            updates: list[tuple[Any, ...]] = []
            for arxiv_id, paper in incoming.items():
                row = _paper_row(paper)
                known = existing.get(arxiv_id)
                if known is None:
                    inserts.append((*row, now))
                elif (paper.version, paper.updated) >= (known[0], known[1]) and row != known[2]:
                    updates.append((*row[1:], arxiv_id))
                else:
                    result.unchanged += 1
            if inserts:
                async with conn.execute("SELECT coalesce(max(id), 0) FROM papers") as cur:
                    (max_before,) = await cur.fetchone()  # type: ignore[misc]
                await conn.executemany(
                    "INSERT INTO papers (arxiv_id, version, title, abstract, authors,"
                    " primary_category, categories, published, updated, comment, journal_ref,"
                    " doi, stored_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    inserts,
                )
                async with conn.execute(
                    "SELECT id FROM papers WHERE id > ? ORDER BY id", (max_before,)
                ) as cur:
                    result.new_ids = [r[0] for r in await cur.fetchall()]
            if updates:
                await conn.executemany(
                    "UPDATE papers SET version=?, title=?, abstract=?, authors=?,"
                    " primary_category=?, categories=?, published=?, updated=?, comment=?,"
                    " journal_ref=?, doi=? WHERE arxiv_id=?",
                    updates,
                )
                result.updated = len(updates)
            if window is not None:
                await conn.execute(
                    "INSERT OR REPLACE INTO backfill_windows"
                    " (categories, window_start, window_end, papers, completed_at)"
                    " VALUES (?,?,?,?,?)",
                    (window.categories, window.start, window.end, len(incoming), now),
                )
        return result

    async def _existing_versions(
        self, conn: aiosqlite.Connection, arxiv_ids: list[str]
    ) -> dict[str, tuple[int, str, tuple[Any, ...]]]:
        found: dict[str, tuple[int, str, tuple[Any, ...]]] = {}
        for start in range(0, len(arxiv_ids), _CHUNK):
            chunk = arxiv_ids[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            async with conn.execute(
                "SELECT arxiv_id, version, title, abstract, authors, primary_category, categories,"
                " published, updated, comment, journal_ref, doi"
                f" FROM papers WHERE arxiv_id IN ({marks})",
                chunk,
            ) as cur:
                async for row in cur:
                    found[row[0]] = (row[1], row[8], tuple(row))
        return found

    async def get_paper(self, arxiv_id: str) -> StoredPaper | None:
        async with self._conn.execute(
            f"SELECT {_PAPER_COLUMNS} FROM papers WHERE arxiv_id = ?", (arxiv_id,)
        ) as cur:
            row = await cur.fetchone()
        return _stored_paper(row) if row else None

    async def papers_by_ids(self, ids: Sequence[int]) -> list[StoredPaper]:
        """Papers with these row ids, in the order given (unknown ids are skipped)."""
        by_id: dict[int, StoredPaper] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = list(ids[start : start + _CHUNK])
            marks = ",".join("?" * len(chunk))
            async with self._conn.execute(
                f"SELECT {_PAPER_COLUMNS} FROM papers WHERE id IN ({marks})", chunk
            ) as cur:
                async for row in cur:
                    by_id[row[0]] = _stored_paper(row)
        return [by_id[i] for i in ids if i in by_id]

    async def count_papers(self) -> int:
        async with self._conn.execute("SELECT count(*) FROM papers") as cur:
            (count,) = await cur.fetchone()  # type: ignore[misc]
        return int(count)

    async def primary_category_counts(self) -> list[tuple[str, int]]:
        async with self._conn.execute(
            "SELECT primary_category, count(*) FROM papers GROUP BY 1 ORDER BY 2 DESC, 1"
        ) as cur:
            return [(r[0], r[1]) for r in await cur.fetchall()]

    async def published_range(self) -> tuple[str | None, str | None]:
        async with self._conn.execute("SELECT min(published), max(published) FROM papers") as cur:
            row = await cur.fetchone()
        return (row[0], row[1]) if row else (None, None)

    async def database_bytes(self) -> int:
        async with self._conn.execute(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
        ) as cur:
            (size,) = await cur.fetchone()  # type: ignore[misc]
        return int(size)

    # ------------------------------------------------------------------ ingestion runs
    async def start_run(self, kind: str) -> int:
        async with self._write() as conn:
            cur = await conn.execute(
                "INSERT INTO ingest_runs (kind, started_at) VALUES (?, ?)", (kind, iso(utcnow()))
            )
            return int(cur.lastrowid or 0)

    async def finish_run(self, run_id: int, stats: RunStats) -> None:
        async with self._write() as conn:
            await conn.execute(
                "UPDATE ingest_runs SET finished_at=?, requests=?, new=?, updated=?, errors=?,"
                " duration_s=?, ok=?, message=? WHERE id=?",
                (
                    iso(utcnow()),
                    stats.requests,
                    stats.new,
                    stats.updated,
                    stats.errors,
                    round(stats.duration_s, 3),
                    int(stats.ok),
                    stats.message or None,
                    run_id,
                ),
            )

    async def last_run(self, kind: str | None = None) -> dict[str, Any] | None:
        where, args = ("WHERE kind = ?", (kind,)) if kind else ("", ())
        async with self._conn.execute(
            "SELECT id, kind, started_at, finished_at, requests, new, updated, errors,"
            f" duration_s, ok, message FROM ingest_runs {where} ORDER BY id DESC LIMIT 1",
            args,
        ) as cur:
            row = await cur.fetchone()
            names = [d[0] for d in cur.description]
        return dict(zip(names, row, strict=True)) if row else None

    async def recent_run_errors(self, since: str) -> int:
        async with self._conn.execute(
            "SELECT coalesce(sum(errors), 0) FROM ingest_runs WHERE started_at >= ?", (since,)
        ) as cur:
            (errors,) = await cur.fetchone()  # type: ignore[misc]
        return int(errors)

    # ------------------------------------------------------------------ backfill progress
    async def completed_backfill_windows(self, categories: str) -> set[str]:
        async with self._conn.execute(
            "SELECT window_start FROM backfill_windows WHERE categories = ?", (categories,)
        ) as cur:
            return {r[0] for r in await cur.fetchall()}
