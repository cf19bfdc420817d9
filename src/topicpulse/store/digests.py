"""Digests and instant alerts from the matches: which chats are due (digest chats at their
time, instant chats a round marked), what their topics matched since their watermark
(``chats.digest_through``), and settling a digest or an alert once Telegram accepted it.

No chat has an outbox row per paper: at 100,000 chats that would be millions of rows a round,
and tens of millions for digest chats that get one message a day. A digest is assembled at its
time from ``topic_papers``, an instant alert after the round that marked the chat
(``chats.alerts_due``; an alert is a digest due at once, packed as alerts); exactly once,
across restarts and versions:

* a paper row keeps its id across versions, and ``digest_through`` only moves forward, in the
  same transaction that records the last message of the digest as sent;
* a digest in two messages records the papers of the first as sent outbox rows when it is
  accepted, so a restart between the two re-sends neither (assembly skips papers that have a
  row for the chat, in any state);
* rows still pending for the chat (queued when it turned instant, or before this schema) go
  out in its digest or alert like the rest, and are marked sent with it;
* a round's mark is cleared only by an accepted message through the round's papers (a later
  round's mark stays).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

from topicpulse.models import Chat, OutboxItem, Topic
from topicpulse.store import rows
from topicpulse.store.database import Database
from topicpulse.store.outbox import chat_topics, mark_sent, pending_chats_sql, pending_rows
from topicpulse.store.ratings import WEEKLY_DUE, TasteRow, taste_row

DIGESTS_DUE = (
    "SELECT chat_id FROM chats WHERE mode IN ('daily', 'weekly') AND active = 1"
    " AND paused = 0 AND next_digest_at <= ? ORDER BY next_digest_at, chat_id LIMIT ?"
)
INSTANT_DUE = (
    "SELECT chat_id FROM chats INDEXED BY chats_alerts_due WHERE alerts_due IS NOT NULL"
    " AND mode = 'instant' AND active = 1 AND paused = 0"
    " ORDER BY alerts_due, chat_id LIMIT ?"
)


@dataclass(frozen=True, slots=True)
class ChatsDue:
    """The chats a delivery pass finds due (``DigestQueries.chats_due``), each list in the
    order its kind is served."""

    instant_pending: list[int]  # instant chats with pending rows
    instant_marked: list[int]  # instant chats a round marked as owed alerts
    spikes: list[int]  # digest chats with a spike alert pending (spikes never wait)
    digests: list[int]  # digest chats at or past their digest time
    weekly: list[int]  # chats whose weekly /foryou is due


@dataclass(frozen=True, slots=True)
class ChatMatches:
    """What a chat's digest or alert is assembled from (``DigestQueries.chat_matches``)."""

    through: int  # what the rounds have fanned out: the watermark after this digest
    topics: dict[int, Topic]  # the chat's followed topics as it sees them, in follow order
    threads: dict[int, int | None]  # topic id → the forum topic its alerts go to
    matches: list[tuple[int, str, int]]  # (paper id, published, a chat's topic id matching it)
    pending: list[OutboxItem]  # paper rows still pending for the chat
    pending_tags: dict[int, list[Topic]]  # their papers' tags among the chat's topics
    taste: TasteRow | None


class DigestQueries(Database):
    """Digest chats due, their matches since the watermark, settling (part of ``Store``)."""

    async def digest_chats_due(self, due_before: str, *, limit: int) -> list[int]:
        """Active, unpaused digest chats whose digest time is at or before ``due_before``,
        the longest due first (an index range, not a scan of every chat)."""
        return [r["chat_id"] for r in await self._rows(DIGESTS_DUE, (due_before, limit))]

    async def next_digest_time(self, after: str) -> str | None:
        """The earliest digest time after ``after`` of any active, unpaused digest chat (one
        step into the index), None when there is none."""
        return await self._value(
            "SELECT min(next_digest_at) FROM chats WHERE mode IN ('daily', 'weekly')"
            " AND active = 1 AND paused = 0 AND next_digest_at > ?",
            (after,),
        )

    async def instant_chats_due(self, *, limit: int) -> list[int]:
        """Active, unpaused instant chats a round marked as owed alerts (``alerts_due``), the
        longest marked first (the partial index's few entries, not every chat)."""
        return [r["chat_id"] for r in await self._rows(INSTANT_DUE, (limit,))]

    async def chats_due(self, due_before: str, *, limit: int) -> ChatsDue:
        """Every kind of chat a delivery pass looks for, in one trip to a reader (a pass with
        nothing to do, every few seconds, costs one)."""

        def read(conn: sqlite3.Connection) -> ChatsDue:
            def ids(sql: str, args: Sequence[Any]) -> list[int]:
                return [r["chat_id"] for r in conn.execute(sql, args)]

            return ChatsDue(
                instant_pending=ids(*pending_chats_sql(("instant",), None, limit)),
                instant_marked=ids(INSTANT_DUE, (limit,)),
                spikes=ids(*pending_chats_sql(("daily", "weekly"), "spike", limit)),
                digests=ids(DIGESTS_DUE, (due_before, limit)),
                weekly=ids(WEEKLY_DUE, (due_before, limit)),
            )

        return await self._trip(read)

    async def chat_to_deliver(
        self, chat_id: int, *, spikes: int
    ) -> tuple[Chat | None, list[OutboxItem]]:
        """The chat's row and its pending spike alerts (at most ``spikes``), in one trip."""

        def read(conn: sqlite3.Connection) -> tuple[Chat | None, list[OutboxItem]]:
            found = conn.execute(
                f"SELECT {rows.CHAT_COLUMNS} FROM chats WHERE chat_id = ?", (chat_id,)
            ).fetchone()
            if found is None:
                return None, []
            return rows.chat(found), pending_rows(conn, chat_id, spikes, "spike")

        return await self._trip(read)

    async def count_instant_due(self) -> int:
        """How many instant chats a round marked still wait for their alerts."""
        return int(
            await self._value(
                "SELECT count(*) FROM chats INDEXED BY chats_alerts_due"
                " WHERE alerts_due IS NOT NULL"
            )
        )

    async def chat_matches(self, chat_id: int, *, after: int, published_since: str) -> ChatMatches:
        """What a chat's digest or alert is assembled from, in one trip to a reader (one state
        of the store): its topics and their forum threads, its matches since ``after`` up to
        what the rounds have fanned out (``matches_since``), its pending paper rows and their
        tags, and its taste."""

        def read(conn: sqlite3.Connection) -> ChatMatches:
            through = int(conn.execute(f"SELECT {rows.FANNED_OUT}").fetchone()[0])
            topics: dict[int, Topic] = {}
            threads: dict[int, int | None] = {}
            for row in conn.execute(rows.FOLLOWED, (chat_id,)):
                topic = rows.topic(row)
                topics[topic.id] = topic
                threads[topic.id] = row["thread_id"]
            pending = pending_rows(conn, chat_id, 1_000_000, "paper")
            ids = [p.paper_id for p in pending if p.paper_id is not None]
            return ChatMatches(
                through=through,
                topics=topics,
                threads=threads,
                matches=matches_since(conn, chat_id, after, through, published_since),
                pending=pending,
                pending_tags=chat_topics(conn, chat_id, ids) if ids else {},
                taste=taste_row(conn, chat_id),
            )

        return await self._trip(read)

    async def settle_digest(
        self,
        chat: Chat,
        *,
        outbox_ids: Sequence[int],
        paper_ids: Sequence[int],
        through: int | None,
        next_digest_at: str | None = None,
    ) -> None:
        """One digest or alert message was accepted: its pending rows are sent, and either
        (``through`` None: more messages follow) its papers are recorded as sent rows, or (the
        last one) the watermark moves to ``through``, the rounds' mark through it is cleared and
        the next digest time is set — unless the schedule changed since ``chat`` was read (then
        the command that changed it set its own)."""
        now = self._now()

        def settle(conn: sqlite3.Connection) -> None:
            if outbox_ids:
                conn.execute(*mark_sent(outbox_ids, now))
            if through is None:
                conn.executemany(
                    "INSERT OR IGNORE INTO outbox (chat_id, kind, paper_id, created_at, state,"
                    " attempts, sent_at) VALUES (?, 'paper', ?, ?, 'sent', 1, ?)",
                    [(chat.chat_id, pid, now, now) for pid in paper_ids],
                )
                return
            conn.execute(
                "UPDATE chats SET digest_through = max(digest_through, ?),"
                " alerts_since = CASE WHEN alerts_due <= ? THEN NULL ELSE alerts_since END,"
                " alerts_due = CASE WHEN alerts_due <= ? THEN NULL ELSE alerts_due END"
                " WHERE chat_id = ?",
                (through, through, through, chat.chat_id),
            )
            conn.execute(
                "UPDATE chats SET next_digest_at = ?, updated_at = ? WHERE chat_id = ?"
                " AND mode = ? AND digest_time = ? AND digest_weekday = ? AND timezone = ?"
                " AND next_digest_at IS ?",
                (
                    next_digest_at,
                    now,
                    chat.chat_id,
                    chat.mode,
                    chat.digest_time,
                    chat.digest_weekday,
                    chat.timezone,
                    chat.next_digest_at,
                ),
            )

        await self._write_trip(settle)  # (one trip to the writer: a message settles per send)

    async def materialise_digest(self, chat_id: int, *, published_since: str) -> int:
        """A digest chat turns instant: what its next digest would have held becomes pending
        outbox rows (sent as alerts), and its watermark moves past them. Returns the rows."""
        async with self._write() as conn:
            return await materialise(conn, chat_id, published_since, self._now())

    async def start_digest_watermark(self, chat_id: int) -> None:
        """Digests start from where the engine stands (a chat turning to digests, coming back
        or unpaused: what was matched before was queued for it, or not owed)."""
        async with self._write() as conn:
            await conn.execute(
                f"UPDATE chats SET digest_through = max(digest_through, {rows.FANNED_OUT})"
                " WHERE chat_id = ?",
                (chat_id,),
            )


async def materialise(
    conn: aiosqlite.Connection, chat_id: int, published_since: str, now: str
) -> int:
    """``materialise_digest`` inside the caller's transaction."""
    cur = await conn.execute(
        "INSERT OR IGNORE INTO outbox (chat_id, kind, paper_id, created_at)"
        " SELECT s.chat_id, 'paper', tp.paper_id, ? FROM chats c"
        " JOIN subscriptions s ON s.chat_id = c.chat_id"
        " JOIN topic_papers tp ON tp.topic_id = s.topic_id"
        " AND tp.paper_id > max(s.after_paper_id, c.digest_through)"
        f" AND tp.paper_id <= {rows.FANNED_OUT}"
        " JOIN papers p ON p.id = tp.paper_id"
        f" WHERE c.chat_id = ? AND p.announced >= ?"
        f" AND {rows.in_view('s.chat_id', 's.topic_id', 'tp.paper_id')} ORDER BY tp.paper_id",
        (now, chat_id, published_since),
    )
    await conn.execute(
        f"UPDATE chats SET digest_through = max(digest_through, {rows.FANNED_OUT})"
        " WHERE chat_id = ?",
        (chat_id,),
    )
    return max(cur.rowcount, 0)


async def owed_alerts_as_rows(conn: aiosqlite.Connection, chat_id: int, now: str) -> None:
    """An instant chat a round marked turns to digests (inside the caller's transaction): the
    alerts it is owed become pending rows, as the rounds queued them before — so its first
    digest holds them whatever their age by then — and the mark is cleared."""
    async with conn.execute(
        "SELECT mode, alerts_since FROM chats WHERE chat_id = ?", (chat_id,)
    ) as cur:
        row = await cur.fetchone()
    if row is None or row["mode"] != "instant" or row["alerts_since"] is None:
        return
    await materialise(conn, chat_id, row["alerts_since"], now)
    await conn.execute(
        "UPDATE chats SET alerts_due = NULL, alerts_since = NULL WHERE chat_id = ?", (chat_id,)
    )


def matches_since(
    conn: sqlite3.Connection, chat_id: int, after: int, through: int, published_since: str
) -> list[tuple[int, str, int]]:
    """(paper id, its ``published``, the id of a chat's topic that matches it) in paper order,
    each paper's topics in the order the chat followed them, for papers stored after ``after``
    (and after the follow) up to ``through``, first announced at or after ``published_since``,
    that have no outbox row for the chat — each topic as the chat sees it (without the papers
    it left out of it, ``rows.in_view``).

    A digest reads a few hundred rows here, for every chat: the outbox and the left-out words
    are looked up per row only for a chat that has any (most have neither: two probes instead
    of two per row), and the rows come as plain tuples, fetched at once (a ``sqlite3.Row``
    each cost a fifth of the read; grouping them by paper here, a third of what remained:
    ``digests.digest_papers`` groups them as it reads them)."""
    checks = ""
    if _exists(conn, "SELECT 1 FROM outbox WHERE chat_id = ? AND kind = 'paper'", chat_id):
        checks += (
            " AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.chat_id = s.chat_id"
            " AND o.kind = 'paper' AND o.paper_id = tp.paper_id)"
        )
    if _exists(conn, f"SELECT 1 FROM refinements WHERE chat_id = ? AND {rows.LEFT_OUT}", chat_id):
        checks += f" AND {rows.in_view('s.chat_id', 's.topic_id', 'tp.paper_id')}"
    found = conn.cursor()
    found.row_factory = None  # (tuples, in the order selected)
    found.execute(
        "SELECT tp.paper_id, p.published, s.topic_id FROM subscriptions s"
        " JOIN topic_papers tp ON tp.topic_id = s.topic_id"
        " AND tp.paper_id > max(s.after_paper_id, ?) AND tp.paper_id <= ?"
        " JOIN papers p ON p.id = tp.paper_id"
        f" WHERE s.chat_id = ? AND p.announced >= ?{checks}"
        " ORDER BY tp.paper_id, s.created_at, s.topic_id",
        (after, through, chat_id, published_since),
    )
    return found.fetchall()


def _exists(conn: sqlite3.Connection, sql: str, *args: Any) -> bool:
    return conn.execute(f"SELECT EXISTS ({sql})", args).fetchone()[0] == 1
