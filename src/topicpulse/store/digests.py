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

from collections.abc import Sequence

import aiosqlite

from topicpulse.models import Chat
from topicpulse.store import rows
from topicpulse.store.database import Database
from topicpulse.store.outbox import mark_rows_sent


class DigestQueries(Database):
    """Digest chats due, their matches since the watermark, settling (part of ``Store``)."""

    async def digest_chats_due(self, due_before: str, *, limit: int) -> list[int]:
        """Active, unpaused digest chats whose digest time is at or before ``due_before``,
        the longest due first (an index range, not a scan of every chat)."""
        found = await self._rows(
            "SELECT chat_id FROM chats WHERE mode IN ('daily', 'weekly') AND active = 1"
            " AND paused = 0 AND next_digest_at <= ? ORDER BY next_digest_at, chat_id LIMIT ?",
            (due_before, limit),
        )
        return [r["chat_id"] for r in found]

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
        found = await self._rows(
            "SELECT chat_id FROM chats INDEXED BY chats_alerts_due WHERE alerts_due IS NOT NULL"
            " AND mode = 'instant' AND active = 1 AND paused = 0"
            " ORDER BY alerts_due, chat_id LIMIT ?",
            (limit,),
        )
        return [r["chat_id"] for r in found]

    async def count_instant_due(self) -> int:
        """How many instant chats a round marked still wait for their alerts."""
        return int(
            await self._value(
                "SELECT count(*) FROM chats INDEXED BY chats_alerts_due"
                " WHERE alerts_due IS NOT NULL"
            )
        )

    async def digest_matches(
        self, chat_id: int, *, after: int, through: int, published_since: str
    ) -> dict[int, tuple[str, list[int]]]:
        """Paper id → (its ``published``, ids of the chat's topics that match it, in the order
        it followed them),
        for papers stored after ``after`` (and after the follow) up to ``through``, first
        announced at or after ``published_since``, that have no outbox row for the chat — each
        topic as the chat sees it (without the papers it left out of it, ``rows.in_view``)."""
        found = await self._rows(
            "SELECT tp.paper_id, p.published, s.topic_id FROM subscriptions s"
            " JOIN topic_papers tp ON tp.topic_id = s.topic_id"
            " AND tp.paper_id > max(s.after_paper_id, ?) AND tp.paper_id <= ?"
            " JOIN papers p ON p.id = tp.paper_id"
            " WHERE s.chat_id = ? AND p.announced >= ? AND NOT EXISTS (SELECT 1 FROM outbox o"
            " WHERE o.chat_id = s.chat_id AND o.kind = 'paper' AND o.paper_id = tp.paper_id)"
            f" AND {rows.in_view('s.chat_id', 's.topic_id', 'tp.paper_id')}"
            " ORDER BY tp.paper_id, s.created_at, s.topic_id",
            (after, through, chat_id, published_since),
        )
        matches: dict[int, tuple[str, list[int]]] = {}
        for row in found:
            matches.setdefault(row["paper_id"], (row["published"], []))[1].append(row["topic_id"])
        return matches

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
        async with self._write() as conn:
            await mark_rows_sent(conn, outbox_ids, now)
            if through is None:
                await conn.executemany(
                    "INSERT OR IGNORE INTO outbox (chat_id, kind, paper_id, created_at, state,"
                    " attempts, sent_at) VALUES (?, 'paper', ?, ?, 'sent', 1, ?)",
                    [(chat.chat_id, pid, now, now) for pid in paper_ids],
                )
                return
            await conn.execute(
                "UPDATE chats SET digest_through = max(digest_through, ?),"
                " alerts_since = CASE WHEN alerts_due <= ? THEN NULL ELSE alerts_since END,"
                " alerts_due = CASE WHEN alerts_due <= ? THEN NULL ELSE alerts_due END"
                " WHERE chat_id = ?",
                (through, through, through, chat.chat_id),
            )
            await conn.execute(
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
