"""Topics and their matches: catalogue and custom topic rows, the papers each topic matches
(``topic_papers``), a round's matches recorded together with the alerts they cause, and the
topic tags of papers."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import timedelta

import aiosqlite

from topicpulse.models import Topic, iso
from topicpulse.store import rows
from topicpulse.store.database import Database

SHARED_QUERY_TOUCH = timedelta(days=1)  # how often a shared query's ``used_at`` is refreshed

_ACTIVE_FOLLOWER = (
    "SELECT 1 FROM subscriptions s JOIN chats c ON c.chat_id = s.chat_id"
    " WHERE s.topic_id = t.id AND c.active = 1"
)


_LIVE = (
    "(t.kind = 'catalogue' AND t.active = 1)"
    f" OR (t.kind = 'custom' AND EXISTS ({_ACTIVE_FOLLOWER}))"
)


class TopicQueries(Database):
    """Topic rows and matches (part of ``Store``)."""

    async def upsert_catalogue_topic(
        self, *, slug: str, name: str, description: str, query: str, normalised: str, fts: str
    ) -> int:
        """Insert or update a catalogue topic; a changed query re-matches all stored papers."""
        self._tag_cache.clear()  # (the catalogue's tags change)
        async with self._write() as conn:
            async with conn.execute("SELECT id, fts FROM topics WHERE slug = ?", (slug,)) as cur:
                row = await cur.fetchone()
            if row is None:
                cur = await conn.execute(
                    "INSERT INTO topics (kind, slug, name, description, query, normalised, fts,"
                    " created_at) VALUES ('catalogue', ?, ?, ?, ?, ?, ?, ?)",
                    (slug, name, description, query, normalised, fts, self._now()),
                )
                topic_id, changed = int(cur.lastrowid or 0), True
            else:
                topic_id, changed = int(row["id"]), row["fts"] != fts
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
        in_keep = rows.marks(keep) or "''"
        self._tag_cache.clear()  # (the catalogue's tags change)
        async with self._write() as conn:
            cur = await conn.execute(
                "UPDATE topics SET active = 0 WHERE kind = 'catalogue' AND active = 1"
                f" AND slug NOT IN ({in_keep})",
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
                return int(row["id"])
            cur = await conn.execute(
                "INSERT INTO topics (kind, name, query, normalised, fts, created_at)"
                " VALUES ('custom', ?, ?, ?, ?, ?)",
                (name, query, normalised, fts, self._now()),
            )
            topic_id = int(cur.lastrowid or 0)
            await self._rematch(conn, topic_id, fts)
            return topic_id

    async def share_query(self, query: str, code: str) -> str | None:
        """The code a page's follow link carries for ``query``: the one it already has, or
        ``code`` (None when another query holds ``code``: try a longer one). Marks it used."""
        row = await self._row("SELECT code, used_at FROM shared_queries WHERE query = ?", (query,))
        if row is not None and not self._stale(row["used_at"]):
            return str(row["code"])  # a page shown again today: no write
        now = self._now()
        async with self._write() as conn:
            await conn.execute(
                "INSERT OR IGNORE INTO shared_queries (code, query, created_at, used_at)"
                " VALUES (?, ?, ?, ?)",
                (code, query, now, now),
            )
            await conn.execute(
                "UPDATE shared_queries SET used_at = ? WHERE query = ?", (now, query)
            )
            async with conn.execute(
                "SELECT code FROM shared_queries WHERE query = ?", (query,)
            ) as cur:
                row = await cur.fetchone()
        return None if row is None else str(row["code"])

    async def shared_query(self, code: str) -> str | None:
        """The query a follow link's code stands for. Marks it used."""
        row = await self._row("SELECT query, used_at FROM shared_queries WHERE code = ?", (code,))
        if row is None:
            return None
        if self._stale(row["used_at"]):
            async with self._write() as conn:
                await conn.execute(
                    "UPDATE shared_queries SET used_at = ? WHERE code = ?", (self._now(), code)
                )
        return str(row["query"])

    def _stale(self, used_at: str | None) -> bool:
        """Whether a shared query's ``used_at`` is older than a day (worth writing again)."""
        return used_at is None or used_at < iso(self.clock() - SHARED_QUERY_TOUCH)

    async def refresh_topic_matches(self, topic: Topic) -> None:
        """Bring the matches of a topic that is not matched every round (a custom topic no
        active chat follows) up to date. A live topic is left to the rounds: a round queues
        alerts for what it matches, a refresh would not."""
        row = await self._row(
            "SELECT (SELECT coalesce(max(id), 0) FROM papers) AS newest,"
            f" EXISTS (SELECT 1 FROM topics t WHERE t.id = ? AND ({_LIVE})) AS live",
            (topic.id,),
        )
        if row is None or row["live"] or topic.matched_through >= row["newest"]:
            return
        self._tag_cache.clear()  # (the catalogue's tags change)
        async with self._write() as conn:
            await self._rematch(conn, topic.id, topic.fts)

    async def recompile_topic(self, topic_id: int, fts: str) -> None:
        """A topic's query compiles differently now (the compiler improved): store the new
        expression and re-match the stored papers with it (no alerts for them) — now for a
        live topic, and for one nobody follows when it is next read (``refresh_topic_matches``),
        so a start does not re-match every abandoned query."""
        self._tag_cache.clear()  # (the catalogue's tags change)
        async with self._write() as conn:
            await conn.execute("UPDATE topics SET fts = ? WHERE id = ?", (fts, topic_id))
            async with conn.execute(
                f"SELECT EXISTS (SELECT 1 FROM topics t WHERE t.id = ? AND ({_LIVE})) AS live",
                (topic_id,),
            ) as cur:
                row = await cur.fetchone()
            if row is not None and row["live"]:
                await self._rematch(conn, topic_id, fts)
            else:
                await conn.execute(
                    "UPDATE topics SET matched_through = 0 WHERE id = ?", (topic_id,)
                )

    async def fanned_out_through(self) -> int:
        """The newest paper whose alerts a round has queued (see ``record_matches``)."""
        value = await self._value("SELECT value FROM engine_state WHERE key = 'fanned_out_through'")
        return int(value or 0)

    async def record_unparsed_topics(self, from_compiled: int, skipped: int) -> None:
        """What the last round that matched papers did with the topics whose stored query no
        longer parses: matched from their compiled expression, or skipped (for /stats)."""
        figures = {"unparsed_from_compiled": from_compiled, "unparsed_skipped": skipped}
        if await self._unparsed_figures() == figures:
            return  # the usual round: nothing changed, no write
        async with self._write() as conn:
            await conn.executemany(
                "INSERT INTO engine_state (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                list(figures.items()),
            )

    async def unparsed_topics(self) -> tuple[int, int]:
        """(matched from their compiled expression, skipped) in the last round that matched
        papers: the topics whose stored query the parser now rejects."""
        figures = await self._unparsed_figures()
        return figures["unparsed_from_compiled"], figures["unparsed_skipped"]

    async def _unparsed_figures(self) -> dict[str, int]:
        found = await self._rows(
            "SELECT key, value FROM engine_state"
            " WHERE key IN ('unparsed_from_compiled', 'unparsed_skipped')"
        )
        return {
            "unparsed_from_compiled": 0,
            "unparsed_skipped": 0,
            **{r["key"]: int(r["value"]) for r in found},
        }

    async def catch_up(self, topic: Topic, through: int) -> None:
        """Match a lagging live topic (e.g. its only chat came back) against the papers up to
        ``through`` without queueing alerts, so the next round starts where the others are."""
        self._tag_cache.clear()  # (the catalogue's tags change)
        async with self._write() as conn:
            await self._rematch(conn, topic.id, topic.fts, through=through)

    @staticmethod
    async def _rematch(
        conn: aiosqlite.Connection, topic_id: int, fts: str, *, through: int | None = None
    ) -> None:
        """A topic's matches anew, over every stored paper (or those up to ``through``)."""
        if through is None:
            async with conn.execute("SELECT coalesce(max(id), 0) AS id FROM papers") as cur:
                through = int((await cur.fetchone())["id"])  # type: ignore[index]
        await conn.execute("DELETE FROM topic_papers WHERE topic_id = ?", (topic_id,))
        await conn.execute(
            "INSERT INTO topic_papers (topic_id, paper_id, published)"
            " SELECT ?, p.id, p.published FROM papers_fts JOIN papers p ON p.id = papers_fts.rowid"
            " WHERE papers_fts MATCH ? AND p.id <= ?",
            (topic_id, fts, through),
        )
        await conn.execute(
            "UPDATE topics SET matched_through = ? WHERE id = ?", (through, topic_id)
        )

    # ------------------------------------------------------------------ reading topics
    async def topics(self, *, kind: str | None = None, active_only: bool = True) -> list[Topic]:
        clauses, args = [], []
        if kind:
            clauses.append("kind = ?")
            args.append(kind)
        if active_only:
            clauses.append("active = 1")
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        found = await self._rows(
            f"SELECT {rows.TOPIC_COLUMNS} FROM topics {where} ORDER BY kind, name COLLATE NOCASE",
            args,
        )
        return [rows.topic(r) for r in found]

    async def topic(self, topic_id: int) -> Topic | None:
        row = await self._row(f"SELECT {rows.TOPIC_COLUMNS} FROM topics WHERE id = ?", (topic_id,))
        return rows.topic(row) if row else None

    async def followed_topics(self) -> list[Topic]:
        """Topics at least one active chat follows (spike detection runs on these)."""
        found = await self._rows(
            f"SELECT {rows.TOPIC_COLUMNS} FROM topics t WHERE EXISTS ({_ACTIVE_FOLLOWER})"
            " ORDER BY id"
        )
        return [rows.topic(r) for r in found]

    async def live_topics(self) -> list[Topic]:
        """Topics matched every round: the active catalogue, and custom topics that an active
        chat follows (a chat that blocked the bot keeps its subscriptions, but its topics stop
        growing until it comes back; matching then catches up)."""
        found = await self._rows(
            f"SELECT {rows.TOPIC_COLUMNS} FROM topics t WHERE {_LIVE} ORDER BY id"
        )
        return [rows.topic(r) for r in found]

    # ------------------------------------------------------------------ a round's matches
    async def record_matches(
        self,
        matches: dict[int, list[int]],
        *,
        batch_after: int,
        batch_through: int,
        alert_published_since: str | None,
    ) -> int:
        """Record one round's matches and mark the instant chats they owe alerts, in one
        transaction.

        ``matches`` maps topic id → matching paper ids among papers ``batch_after < id <=
        batch_through``. Every topic in ``matches`` moves its ``matched_through`` to
        ``batch_through``. Each active, unpaused instant chat owed an alert is marked
        (``chats.alerts_due``, at least ``batch_through``; ``alerts_since``, the earliest
        marking round's age rule): it follows a topic that matched a
        paper stored after it followed, newer than what earlier rounds fanned out
        (``engine_state``; moved to ``batch_through`` here), and announced at or after
        ``alert_published_since`` (the caller's age rule; ``None``: record the matches, mark no
        chats). No chat gets a row per paper: its alerts, like a digest chat's digest, are
        assembled from the matches since its watermark (``store.digests``), which also leaves
        out what a chat left out of its view of a topic (``rows.in_view``; so marking reads the
        views only to mark fewer chats). Returns the chats marked.
        """
        self._tag_cache.clear()  # (the catalogue's tags change)
        async with self._write() as conn:
            async with conn.execute(
                "SELECT coalesce(max(value), 0) AS v FROM engine_state"
                " WHERE key = 'fanned_out_through'"
            ) as cur:
                fanned_out = int((await cur.fetchone())["v"])  # type: ignore[index]
            await conn.execute(
                "INSERT INTO engine_state (key, value) VALUES ('fanned_out_through', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)",
                (batch_through,),
            )
            found = {topic_id: ids for topic_id, ids in matches.items() if ids}
            if found:  # one statement for all topics (JSON {topic: [paper ids]}): 2× executemany
                await conn.execute(
                    "INSERT OR IGNORE INTO topic_papers (topic_id, paper_id, published)"
                    " SELECT CAST(t.key AS INTEGER), p.id, p.published"
                    " FROM json_each(?) t, json_each(t.value) i JOIN papers p ON p.id = i.value",
                    (json.dumps(found),),
                )
            if matches:  # any number of topics: one JSON list, not one variable each
                await conn.execute(
                    "UPDATE topics SET matched_through = ?"
                    " WHERE id IN (SELECT value FROM json_each(?)) AND matched_through < ?",
                    (batch_through, json.dumps(list(matches)), batch_through),
                )
            if alert_published_since is None:
                return 0
            async with conn.execute(rows.ANY_LEFT_OUT) as cur:  # (none: the usual round)
                views = bool((await cur.fetchone())[0])  # type: ignore[index]
            view = f" AND {rows.in_view('s.chat_id', 's.topic_id', 'tp.paper_id')}" if views else ""
            cur = await conn.execute(
                # no row per chat and paper (at 100,000 chats, millions a round): the chats
                # are marked, their alerts assembled from the matches (``delivery.alerts``);
                # one paper per subscription is enough to mark its chat
                "UPDATE chats SET alerts_due = max(coalesce(alerts_due, 0), ?),"
                " alerts_since = min(coalesce(alerts_since, ?), ?)"
                " WHERE mode = 'instant' AND active = 1 AND paused = 0 AND chat_id IN ("
                " SELECT s.chat_id FROM subscriptions s"
                " WHERE s.topic_id IN (SELECT CAST(value AS INTEGER) FROM json_each(?))"
                " AND EXISTS (SELECT 1 FROM topic_papers tp JOIN papers p ON p.id = tp.paper_id"
                " WHERE tp.topic_id = s.topic_id AND tp.paper_id > max(?, s.after_paper_id)"
                f" AND tp.paper_id <= ? AND p.announced >= ?{view}))",
                (
                    batch_through,
                    alert_published_since,
                    alert_published_since,
                    json.dumps(list(found)),
                    max(batch_after, fanned_out),
                    batch_through,
                    alert_published_since,
                ),
            )
            return max(cur.rowcount, 0)

    async def paper_topics(
        self, paper_ids: Sequence[int], kind: str | None = None
    ) -> dict[int, list[Topic]]:
        """Topics matching each paper (e.g. the catalogue tags shown under a paper; those are
        read through the store's cache: every chat of a round asks for the same papers')."""
        if kind == "catalogue":
            cached, missing = self._tag_cache.split(paper_ids)
            found = {pid: list(topics) for pid, topics in cached.items()}
            found |= await self._paper_topics(missing, kind)
            self._tag_cache.put({pid: tuple(found[pid]) for pid in missing})
            return {pid: found[pid] for pid in paper_ids}
        return await self._paper_topics(paper_ids, kind)

    async def _paper_topics(
        self, paper_ids: Sequence[int], kind: str | None
    ) -> dict[int, list[Topic]]:
        found: dict[int, list[Topic]] = {pid: [] for pid in paper_ids}
        kind_clause = "AND t.kind = ?" if kind else ""
        for chunk in rows.chunks(paper_ids):
            for row in await self._rows(
                f"SELECT tp.paper_id, {rows.prefixed(rows.TOPIC_COLUMNS, 't')}"
                " FROM topic_papers tp JOIN topics t ON t.id = tp.topic_id"
                f" WHERE tp.paper_id IN ({rows.marks(chunk)}) AND t.active = 1 {kind_clause}"
                " ORDER BY t.name COLLATE NOCASE",
                (*chunk, *([kind] if kind else [])),
            ):
                found[row["paper_id"]].append(rows.topic(row))
        return found

    # ------------------------------------------------------------------ upkeep
    async def prune_unfollowed_topics(self, before: str) -> tuple[int, int]:
        """Delete custom topics nobody has followed since ``before`` (or ever, if created
        before it), with their matches. Returns (topics, matches) removed."""
        async with self._write() as conn:
            async with conn.execute(
                "SELECT id FROM topics t WHERE kind = 'custom'"
                " AND coalesce(unfollowed_at, created_at) < ?"
                " AND NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.topic_id = t.id)",
                (before,),
            ) as cur:
                ids = [r["id"] for r in await cur.fetchall()]
            if not ids:
                return 0, 0
            matches = 0
            for chunk in rows.chunks(ids):
                cur = await conn.execute(
                    f"DELETE FROM topic_papers WHERE topic_id IN ({rows.marks(chunk)})", chunk
                )
                matches += max(cur.rowcount, 0)
                await conn.execute(f"DELETE FROM topics WHERE id IN ({rows.marks(chunk)})", chunk)
            return len(ids), matches

    async def prune_shared_queries(self, before: str) -> int:
        """Forget the shared queries (web page follow links) nobody has used since ``before``;
        their links then answer that they are no longer valid."""
        async with self._write() as conn:
            cur = await conn.execute("DELETE FROM shared_queries WHERE used_at < ?", (before,))
            return max(cur.rowcount, 0)
