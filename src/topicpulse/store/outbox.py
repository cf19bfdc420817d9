"""The outbox: what is waiting to be delivered to each chat, and what happened to it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import aiosqlite

from topicpulse.models import OutboxItem, Topic
from topicpulse.store import rows
from topicpulse.store.database import Database

PRUNE_SLICE = 10_000  # rows deleted per transaction by the daily upkeep


class OutboxQueries(Database):
    """Pending deliveries and their outcome (part of ``Store``)."""

    async def pending_for_chat(
        self, chat_id: int, limit: int = 500, *, kind: str | None = None
    ) -> list[OutboxItem]:
        """The chat's pending rows (of ``kind`` if given), oldest first."""
        return await self._trip(lambda conn: pending_rows(conn, chat_id, limit, kind))

    # ------------------------------------------------------------------ outcomes

    async def mark_sent(self, outbox_ids: Sequence[int]) -> None:
        async with self._write() as conn:
            await mark_rows_sent(conn, outbox_ids, self._now())

    async def queue_papers(self, chat_id: int, paper_ids: Sequence[int]) -> list[int]:
        """Pending rows for papers a message from the matches carries (it failed, or was
        refused or maybe sent: its papers are then recorded as rows, whose attempts and
        reasons count as any row's), in one transaction. Returns the rows' ids, pending ones
        only (a paper that already has a settled row for the chat is not queued again)."""
        if not paper_ids:
            return []
        now = self._now()
        ids = json.dumps(list(paper_ids))
        async with self._write() as conn:
            await conn.execute(
                "INSERT OR IGNORE INTO outbox (chat_id, kind, paper_id, created_at)"
                " SELECT ?, 'paper', value, ? FROM json_each(?)",
                (chat_id, now, ids),
            )
            async with conn.execute(
                "SELECT id FROM outbox WHERE chat_id = ? AND kind = 'paper' AND state = 'pending'"
                " AND paper_id IN (SELECT value FROM json_each(?)) ORDER BY id",
                (chat_id, ids),
            ) as cur:
                return [r["id"] for r in await cur.fetchall()]

    async def mark_maybe_sent(self, outbox_ids: Sequence[int], doubt: str) -> None:
        """Telegram took the message but its answer never came (a read timeout): it was most
        likely delivered. Settled as sent — never sent again, so never twice — with the doubt
        kept in ``last_error`` (``maybe sent: …``) for the record."""
        now = self._now()
        async with self._write() as conn:
            await conn.executemany(
                "UPDATE outbox SET state = 'sent', sent_at = ?, attempts = attempts + 1,"
                " last_error = ? WHERE id = ? AND state = 'pending'",
                [(now, f"maybe sent: {doubt}"[:500], i) for i in outbox_ids],
            )

    async def mark_failed_attempt(
        self, outbox_ids: Sequence[int], error: str, *, at: str | None = None
    ) -> str | None:
        """Count a temporary failure of these rows (at ``at``, default now). Returns when the
        first of them started failing (None if they are no longer pending)."""
        at = at or self._now()
        first: list[str] = []
        async with self._write() as conn:
            await conn.executemany(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?,"
                " first_failed_at = coalesce(first_failed_at, ?) WHERE id = ?",
                [(error[:500], at, i) for i in outbox_ids],
            )
            for chunk in rows.chunks(outbox_ids):
                async with conn.execute(
                    "SELECT min(first_failed_at) AS since FROM outbox"
                    f" WHERE state = 'pending' AND id IN ({rows.marks(chunk)})",
                    chunk,
                ) as cur:
                    row = await cur.fetchone()
                if row is not None and row["since"]:
                    first.append(row["since"])
        return min(first, default=None)

    async def forget_failures(self) -> int:
        """A general outage is over: no pending row counts its failures against it any more."""
        async with self._write() as conn:
            cur = await conn.execute(
                "UPDATE outbox SET first_failed_at = NULL"
                " WHERE state = 'pending' AND first_failed_at IS NOT NULL"
            )
            return max(cur.rowcount, 0)

    async def drop_outbox(self, outbox_ids: Sequence[int], reason: str) -> None:
        async with self._write() as conn:
            await conn.executemany(
                "UPDATE outbox SET state = 'dropped', last_error = ? WHERE id = ?",
                [(reason[:500], i) for i in outbox_ids],
            )

    async def chat_topics_for_papers(
        self, chat_id: int, paper_ids: Sequence[int], *, view: bool = True
    ) -> dict[int, list[Topic]]:
        """For each paper, the topics this chat follows that match it (the alert's tags): as
        the chat sees them (``view``: not a topic it left the paper out of), or all of them."""
        if not paper_ids:
            return {}
        return await self._trip(lambda conn: chat_topics(conn, chat_id, paper_ids, view=view))

    async def outbox_counts(self) -> dict[str, int]:
        found = await self._rows("SELECT state, count(*) AS n FROM outbox GROUP BY state")
        return {r["state"]: r["n"] for r in found}

    async def prune_outbox(self, before: str, *, delivered_before: str | None = None) -> int:
        """Delete settled rows created before ``before``, and — the outbox is a queue, not a
        history — papers delivered plainly (sent, no error kept) created before
        ``delivered_before``: no round can queue those again (the fan-out starts past the
        engine's watermark, a digest past the chat's), so they guard nothing. Kept until
        ``before``: dropped rows and doubtful sends (their reasons are the record), spike rows,
        and a chat's rows past its watermark (a digest or alert sent in several messages whose
        last has not gone yet, papers held back from it). Pending rows are never pruned."""
        removed = await self._prune_slices(
            "SELECT id FROM outbox WHERE state != 'pending' AND created_at < ? LIMIT ?", (before,)
        )
        if delivered_before is not None:
            removed += await self._prune_slices(
                "SELECT o.id FROM outbox o JOIN chats c ON c.chat_id = o.chat_id"
                " WHERE o.state = 'sent' AND o.kind = 'paper' AND o.created_at < ?"
                " AND (o.last_error IS NULL OR o.last_error = 'held back')"
                " AND o.paper_id <= c.digest_through LIMIT ?",
                (delivered_before,),
            )
        return removed

    async def _prune_slices(self, select: str, args: tuple[Any, ...]) -> int:
        removed = 0
        while True:  # in slices, each its own short transaction: other writes go between them
            async with self._write() as conn:
                cur = await conn.execute(
                    f"DELETE FROM outbox WHERE id IN ({select})", (*args, PRUNE_SLICE)
                )
                count = max(cur.rowcount, 0)
            removed += count
            if count < PRUNE_SLICE:
                return removed


def mark_sent(outbox_ids: Sequence[int], now: str) -> tuple[str, tuple[str, str]]:
    """The statement that settles pending rows as sent, and its arguments: one statement for
    any number of rows (a JSON list; a catch-up settles thousands, 7× faster than
    executemany)."""
    return (
        "UPDATE outbox SET state = 'sent', sent_at = ?, attempts = attempts + 1"
        " WHERE id IN (SELECT value FROM json_each(?)) AND state = 'pending'",
        (now, json.dumps(list(outbox_ids))),
    )


async def mark_rows_sent(conn: aiosqlite.Connection, outbox_ids: Sequence[int], now: str) -> None:
    """Settle pending rows as sent (inside the caller's transaction, ``mark_sent``)."""
    if outbox_ids:
        await conn.execute(*mark_sent(outbox_ids, now))


def pending_rows(
    conn: sqlite3.Connection, chat_id: int, limit: int, kind: str | None
) -> list[OutboxItem]:
    """``pending_for_chat`` on the reader's thread (``Database._trip``)."""
    kind_clause = " AND kind = ?" if kind else ""
    found = conn.execute(
        f"SELECT {rows.OUTBOX_COLUMNS} FROM outbox"
        f" WHERE chat_id = ? AND state = 'pending'{kind_clause} ORDER BY id LIMIT ?",
        (chat_id, *([kind] if kind else []), limit),
    )
    return [rows.outbox_item(r) for r in found]


def chat_topics(
    conn: sqlite3.Connection, chat_id: int, paper_ids: Sequence[int], *, view: bool = True
) -> dict[int, list[Topic]]:
    """``chat_topics_for_papers`` on the reader's thread (``Database._trip``)."""
    found: dict[int, list[Topic]] = {pid: [] for pid in paper_ids}
    seen = f" AND {rows.in_view('s.chat_id', 's.topic_id', 'tp.paper_id')}" if view else ""
    for chunk in rows.chunks(paper_ids):
        for row in conn.execute(
            f"SELECT tp.paper_id, {rows.CHAT_TOPIC_COLUMNS} FROM topic_papers tp"
            " JOIN subscriptions s ON s.topic_id = tp.topic_id AND s.chat_id = ?"
            f" JOIN topics t ON t.id = tp.topic_id WHERE tp.paper_id IN ({rows.marks(chunk)})"
            f"{seen} ORDER BY s.created_at",
            (chat_id, *chunk),
        ):
            found[row["paper_id"]].append(rows.topic(row))
    return found


def pending_chats_sql(modes: Sequence[str], kind: str | None, limit: int) -> tuple[str, list[Any]]:
    """The query for active, unpaused chats in one of ``modes`` with pending deliveries (of
    ``kind`` if given), oldest pending first, and its arguments (``DigestQueries.chats_due``).

    The chats are found by skipping along the pending index one chat at a time (a seek per
    chat, not a read of every pending row: after a round at 100,000 chats there are millions
    of rows, and a pass asks again for every few hundred chats it delivers); spike rows, few,
    from their own index."""
    if kind not in (None, "spike"):
        raise ValueError(f"pending chats by kind are read for spike rows only, not {kind!r}")
    if kind is not None:  # (spike rows are few: read them all, from their own index)
        sql = (
            "SELECT o.chat_id FROM outbox o INDEXED BY outbox_spike_once"
            " JOIN chats c ON c.chat_id = o.chat_id"
            " WHERE o.kind = 'spike' AND o.state = 'pending' AND c.active = 1"
            f" AND c.paused = 0 AND c.mode IN ({rows.marks(modes)})"
            " GROUP BY o.chat_id ORDER BY min(o.id) LIMIT ?"
        )
    else:
        sql = (
            "WITH RECURSIVE pending (chat_id) AS ("
            " SELECT (SELECT min(chat_id) FROM outbox WHERE state = 'pending')"
            " UNION ALL SELECT (SELECT min(chat_id) FROM outbox"
            " WHERE state = 'pending' AND chat_id > pending.chat_id)"
            " FROM pending WHERE pending.chat_id IS NOT NULL)"
            " SELECT c.chat_id FROM pending p JOIN chats c ON c.chat_id = p.chat_id"
            f" WHERE c.active = 1 AND c.paused = 0 AND c.mode IN ({rows.marks(modes)})"
            " ORDER BY (SELECT min(o.id) FROM outbox o WHERE o.chat_id = c.chat_id"
            " AND o.state = 'pending') LIMIT ?"
        )
    return sql, [*modes, limit]
