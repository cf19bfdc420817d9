"""The outbox: what is waiting to be delivered to each chat, and what happened to it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from topicpulse.models import Chat, OutboxItem, Topic
from topicpulse.store import rows
from topicpulse.store.database import Database


class OutboxQueries(Database):
    """Pending deliveries and their outcome (part of ``Store``)."""

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
        kind_clause = " AND o.kind = ?" if kind else ""
        args: list[Any] = [*([kind] if kind else []), *modes]
        sql = (
            "SELECT o.chat_id FROM outbox o JOIN chats c ON c.chat_id = o.chat_id"
            f" WHERE o.state = 'pending'{kind_clause} AND c.active = 1 AND c.paused = 0"
            f" AND c.mode IN ({rows.marks(modes)})"
        )
        if due_before is not None:
            sql += " AND c.next_digest_at IS NOT NULL AND c.next_digest_at <= ?"
            args.append(due_before)
        sql += " GROUP BY o.chat_id ORDER BY min(o.id) LIMIT ?"
        args.append(limit)
        return [r["chat_id"] for r in await self._rows(sql, args)]

    async def idle_digest_chats_due(self, now: str) -> list[Chat]:
        """Digest chats whose digest time has come with no paper pending (nothing to send)."""
        found = await self._rows(
            f"SELECT {rows.CHAT_COLUMNS} FROM chats c WHERE mode IN ('daily', 'weekly')"
            " AND next_digest_at IS NOT NULL AND next_digest_at <= ? AND NOT EXISTS (SELECT 1"
            " FROM outbox o WHERE o.chat_id = c.chat_id AND o.state = 'pending'"
            " AND o.kind = 'paper')",
            (now,),
        )
        return [rows.chat(r) for r in found]

    async def pending_for_chat(self, chat_id: int, limit: int = 500) -> list[OutboxItem]:
        found = await self._rows(
            f"SELECT {rows.OUTBOX_COLUMNS} FROM outbox"
            " WHERE chat_id = ? AND state = 'pending' ORDER BY id LIMIT ?",
            (chat_id, limit),
        )
        return [rows.outbox_item(r) for r in found]

    async def mark_sent(self, outbox_ids: Sequence[int]) -> None:
        now = self._now()
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
        for start in range(0, len(paper_ids), rows.CHUNK):
            chunk = list(paper_ids[start : start + rows.CHUNK])
            for row in await self._rows(
                f"SELECT tp.paper_id, {rows.prefixed(rows.TOPIC_COLUMNS, 't')}"
                " FROM topic_papers tp"
                " JOIN subscriptions s ON s.topic_id = tp.topic_id AND s.chat_id = ?"
                f" JOIN topics t ON t.id = tp.topic_id WHERE tp.paper_id IN ({rows.marks(chunk)})"
                " ORDER BY s.created_at",
                (chat_id, *chunk),
            ):
                found[row["paper_id"]].append(rows.topic(row))
        return found

    async def outbox_counts(self) -> dict[str, int]:
        found = await self._rows("SELECT state, count(*) AS n FROM outbox GROUP BY state")
        return {r["state"]: r["n"] for r in found}

    async def prune_outbox(self, before: str) -> int:
        """Delete sent and dropped rows created before ``before`` (past the dedup horizon: no
        round can queue those papers again). Pending rows are never pruned."""
        async with self._write() as conn:
            cur = await conn.execute(
                "DELETE FROM outbox WHERE state != 'pending' AND created_at < ?", (before,)
            )
            return max(cur.rowcount, 0)
