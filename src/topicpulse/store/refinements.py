"""Refining a topic from 👎: the offers made to each chat (once per chat, topic and word,
whatever became of them), the chat's views of catalogue topics (the words it left out), moving
a subscription to a refined custom query, and what the offers are decided from (schema:
0016_refinements_weekly.sql; the views are applied through ``rows.in_view``)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from topicpulse.store import rows
from topicpulse.store.database import Database
from topicpulse.store.ratings import Rating


@dataclass(frozen=True, slots=True)
class Refinement:
    id: int
    chat_id: int
    topic_id: int
    term: str
    fts: str
    disliked: int  # the chat's 👎 in the topic when it was offered
    state: str  # offered, declined, left_out, restored
    in_query: bool  # left out by the (custom) topic's own query, not by the chat's view
    offered_at: str
    decided_at: str | None


@dataclass(frozen=True, slots=True)
class Move:
    """A subscription moving from one custom topic to another (a query refined or restored):
    it keeps its place, thread and start; ``label`` is how the chat sees the new one."""

    old_topic_id: int
    new_topic_id: int
    label: str | None


class RefinementQueries(Database):
    """Offers, views and refined subscriptions (part of ``Store``)."""

    async def topic_ratings(self, chat_id: int, topic_id: int) -> list[Rating]:
        """The chat's ratings of stored papers the topic matches, oldest first."""
        found = await self._rows(
            "SELECT r.item, p.id AS paper_id, r.value, r.source, r.rated_at, p.title, p.abstract"
            " FROM ratings r JOIN papers p ON p.arxiv_id = r.item"
            " JOIN topic_papers tp ON tp.paper_id = p.id AND tp.topic_id = ?"
            " WHERE r.chat_id = ? ORDER BY r.rated_at, r.item",
            (topic_id, chat_id),
        )
        return [rows.model(Rating, r) for r in found]

    async def topic_papers_matching(self, topic_id: int, fts: str) -> int:
        """How many of the topic's papers also match ``fts``."""
        return int(
            await self._value(
                "SELECT count(*) FROM papers_fts JOIN topic_papers tp"
                " ON tp.paper_id = papers_fts.rowid AND tp.topic_id = ?"
                " WHERE papers_fts MATCH ?",
                (topic_id, fts),
            )
        )

    async def offer_refinement(
        self, chat_id: int, topic_id: int, term: str, fts: str, disliked: int
    ) -> Refinement | None:
        """Record an offer to leave ``term`` out of the topic; None if this chat was offered
        that word for that topic before (an offer is made once, ever)."""
        async with self._write() as conn:
            cur = await conn.execute(
                "INSERT OR IGNORE INTO refinements (chat_id, topic_id, term, fts, disliked,"
                " offered_at) VALUES (?, ?, ?, ?, ?, ?)",
                (chat_id, topic_id, term, fts, disliked, self._now()),
            )
            new = cur.rowcount > 0 and cur.lastrowid
        return await self.refinement(int(new)) if new else None

    async def refinement(self, refinement_id: int) -> Refinement | None:
        row = await self._row(
            f"SELECT {rows.columns(Refinement)} FROM refinements WHERE id = ?", (refinement_id,)
        )
        return rows.model(Refinement, row, flags=("in_query",)) if row else None

    async def refinements(self, chat_id: int, topic_id: int | None = None) -> list[Refinement]:
        """The chat's offers (of one topic), in the order they were made."""
        where, args = "chat_id = ?", [chat_id]
        if topic_id is not None:
            where, args = where + " AND topic_id = ?", [*args, topic_id]
        found = await self._rows(
            f"SELECT {rows.columns(Refinement)} FROM refinements WHERE {where} ORDER BY id", args
        )
        return [rows.model(Refinement, r, flags=("in_query",)) for r in found]

    async def left_out(self, chat_id: int) -> list[Refinement]:
        """The words the chat leaves out of topics it follows now (its views, and the words
        refinements put into its custom queries), oldest first."""
        return await self._trip(lambda conn: left_out(conn, chat_id))

    async def decide_refinement(
        self,
        refinement_id: int,
        *,
        was: str,
        now: str,
        in_query: bool = False,
        move: Move | None = None,
    ) -> bool:
        """Move an offer from state ``was`` to ``now`` — and, with ``move``, the chat's
        subscription to the refined (or restored) query, carrying its offers along — in one
        transaction. False, and nothing changed, when the offer is no longer in state ``was``
        or the chat no longer follows the topic it is about."""
        stamp = self._now()
        async with self._write() as conn:
            async with conn.execute(
                "SELECT x.chat_id, x.topic_id, s.after_paper_id, s.created_at, s.thread_id"
                " FROM refinements x JOIN subscriptions s ON s.chat_id = x.chat_id"
                " AND s.topic_id = x.topic_id WHERE x.id = ? AND x.state = ?",
                (refinement_id, was),
            ) as cur:
                found = await cur.fetchone()
            if found is None or (move is not None and move.old_topic_id != found["topic_id"]):
                return False
            chat_id = found["chat_id"]
            if move is not None and move.new_topic_id != move.old_topic_id:
                await conn.execute(
                    "INSERT OR IGNORE INTO subscriptions (chat_id, topic_id, after_paper_id,"
                    " created_at, label, thread_id) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        chat_id,
                        move.new_topic_id,
                        found["after_paper_id"],
                        found["created_at"],
                        move.label,
                        found["thread_id"],
                    ),
                )
                await conn.execute(
                    "DELETE FROM subscriptions WHERE chat_id = ? AND topic_id = ?",
                    (chat_id, move.old_topic_id),
                )
                await conn.execute(
                    "UPDATE topics SET unfollowed_at = NULL WHERE id = ?", (move.new_topic_id,)
                )
                await conn.execute(
                    "UPDATE topics SET unfollowed_at = ? WHERE id = ? AND NOT EXISTS"
                    " (SELECT 1 FROM subscriptions WHERE topic_id = ?)",
                    (stamp, move.old_topic_id, move.old_topic_id),
                )
                await conn.execute(  # the chat's offers follow its subscription
                    "UPDATE OR IGNORE refinements SET topic_id = ? WHERE chat_id = ?"
                    " AND topic_id = ?",
                    (move.new_topic_id, chat_id, move.old_topic_id),
                )
            await conn.execute(
                "UPDATE refinements SET state = ?, in_query = ?, decided_at = ? WHERE id = ?",
                (now, int(in_query), stamp, refinement_id),
            )
        return True


def left_out(conn: sqlite3.Connection, chat_id: int) -> list[Refinement]:
    """``RefinementQueries.left_out`` on the reader's thread (``Database._trip``)."""
    found = conn.execute(
        f"SELECT {rows.prefixed(rows.columns(Refinement), 'x')} FROM refinements x"
        " JOIN subscriptions s ON s.chat_id = x.chat_id AND s.topic_id = x.topic_id"
        " WHERE x.chat_id = ? AND x.state = 'left_out' ORDER BY x.decided_at, x.id",
        (chat_id,),
    )
    return [rows.model(Refinement, r, flags=("in_query",)) for r in found]
