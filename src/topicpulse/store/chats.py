"""Chats and their subscriptions: chat rows and settings, follow and unfollow."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from topicpulse.models import Chat, Subscription, Topic
from topicpulse.store import rows
from topicpulse.store.database import Database
from topicpulse.store.digests import materialise, owed_alerts_as_rows
from topicpulse.store.refinements import Refinement, left_out

CHAT_SETTINGS = frozenset(
    {"paused", "mode", "digest_time", "digest_weekday", "timezone", "spikes", "next_digest_at"}
)


SEEN_FOR = 60.0  # seconds a chat seen active is taken as active still (``chat_wrote``)
SEEN_MAX = 50_000  # chats remembered so at most (then forgotten all at once)


class SubscriptionsFull(Exception):
    """The chat already follows as many topics as it may."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"already following {cap} topics")
        self.cap = cap


class ChatQueries(Database):
    """Chats and subscriptions (part of ``Store``)."""

    async def ensure_chat(
        self,
        chat_id: int,
        *,
        type: str = "private",
        title: str | None = None,
        reactivate: bool = False,
    ) -> Chat:
        """The chat's row, created with default settings on first contact. Writes only when
        the chat is new or its type, title or (with ``reactivate``) active flag changed: most
        commands only read."""
        known = await self.chat(chat_id)
        if (
            known is not None
            and known.type == type
            and (title is None or known.title == title)
            and (known.active or not reactivate)
        ):
            return known
        now = self._now()
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO chats (chat_id, type, title, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (chat_id) DO UPDATE SET"
                " type = excluded.type, title = coalesce(excluded.title, title),"
                " active = CASE WHEN ? THEN 1 ELSE active END,"
                f" digest_through = CASE WHEN ? AND active = 0 THEN max(digest_through,"
                f" {rows.FANNED_OUT}) ELSE digest_through END,"
                " updated_at = excluded.updated_at",
                (chat_id, type, title, now, now, int(reactivate), int(reactivate)),
            )
            async with conn.execute(
                f"SELECT {rows.CHAT_COLUMNS} FROM chats WHERE chat_id = ?", (chat_id,)
            ) as cur:
                row = await cur.fetchone()
        assert row is not None
        return rows.chat(row)

    async def chat_wrote(self, chat_id: int, *, type: str, title: str | None) -> None:
        """``ensure_chat(reactivate=True)`` for a chat that wrote to the bot: every command and
        button comes through here, so a chat seen active with this type and title in the last
        ``SEEN_FOR`` seconds is not read again (a tap on 👍 is then one read fewer). What
        deactivates or moves a chat here forgets it; ``SEEN_FOR`` bounds what another process
        could have changed."""
        now = time.monotonic()
        seen = self._chats_seen.get(chat_id)
        if seen is not None and seen[:2] == (type, title) and now - seen[2] < SEEN_FOR:
            return
        forgotten = self._chats_forgotten
        await self.ensure_chat(chat_id, type=type, title=title, reactivate=True)
        if self._chats_forgotten != forgotten:  # a chat was deactivated or moved meanwhile
            return
        if len(self._chats_seen) >= SEEN_MAX:
            self._chats_seen.clear()
        self._chats_seen[chat_id] = (type, title, now)

    def _forget_chats(self, *chat_ids: int) -> None:
        for chat_id in chat_ids:
            self._chats_seen.pop(chat_id, None)
        self._chats_forgotten += 1

    async def chat(self, chat_id: int) -> Chat | None:
        row = await self._row(
            f"SELECT {rows.CHAT_COLUMNS} FROM chats WHERE chat_id = ?", (chat_id,)
        )
        return rows.chat(row) if row else None

    async def update_chat(self, chat_id: int, **settings: Any) -> None:
        unknown = set(settings) - CHAT_SETTINGS
        if unknown:
            raise ValueError(f"not chat settings: {sorted(unknown)}")
        assignments = ", ".join(f"{name} = ?" for name in settings)
        # An unpaused chat's digests and alerts start where the engine stands (SET reads the
        # row as it was): what was matched while it was paused is not owed.
        watermark = (
            ", digest_through = CASE WHEN paused = 1 AND NOT ? THEN max(digest_through,"
            f" {rows.FANNED_OUT}) ELSE digest_through END"
            if "paused" in settings
            else ""
        )
        marks = [int(bool(settings["paused"]))] if "paused" in settings else []
        async with self._write() as conn:
            if settings.get("mode", "instant") != "instant":
                await owed_alerts_as_rows(conn, chat_id, self._now())
            await conn.execute(
                f"UPDATE chats SET {assignments}, updated_at = ?{watermark} WHERE chat_id = ?",
                (*settings.values(), self._now(), *marks, chat_id),
            )

    async def update_schedule(
        self,
        chat_id: int,
        settings: dict[str, Any],
        next_due: Callable[[Chat], str | None],
        *,
        alerts_since: Callable[[str], str] | None = None,
    ) -> Chat:
        """Change the chat's digest settings and set its next digest time, ``next_due`` of the
        chat as changed, in one transaction: concurrent /digest and /timezone each see the
        other's change, and neither writes a due time computed from a stale copy. In the same
        transaction, a chat turning from digests to instant gets what its next digest would
        have held as pending alerts (papers announced since ``alerts_since(its old mode)``),
        and one turning to digests the alerts it is owed as pending rows (they go out in its
        first digest, as they would have gone out at once)."""
        unknown = set(settings) - CHAT_SETTINGS
        if unknown:
            raise ValueError(f"not chat settings: {sorted(unknown)}")
        async with self._write() as conn:
            async with conn.execute(
                f"SELECT {rows.CHAT_COLUMNS} FROM chats WHERE chat_id = ?", (chat_id,)
            ) as cur:
                row = await cur.fetchone()
            if row is None:
                raise LookupError(f"no chat {chat_id}")
            before = rows.chat(row)
            changed = dataclasses.replace(before, **settings)
            changed = dataclasses.replace(changed, next_digest_at=next_due(changed))
            if before.mode != "instant" and changed.mode == "instant" and alerts_since:
                await materialise(conn, chat_id, alerts_since(before.mode), self._now())
            elif before.mode == "instant" and changed.mode != "instant":
                await owed_alerts_as_rows(conn, chat_id, self._now())
            values = {**settings, "next_digest_at": changed.next_digest_at}
            assignments = ", ".join(f"{name} = ?" for name in values)
            await conn.execute(
                f"UPDATE chats SET {assignments}, updated_at = ? WHERE chat_id = ?",
                (*values.values(), self._now(), chat_id),
            )
        return changed

    async def deactivate_chat(self, chat_id: int, reason: str) -> int:
        """Mark a chat inactive (blocked us, deleted) and drop its pending deliveries."""
        self._forget_chats(chat_id)
        async with self._write() as conn:
            await conn.execute(
                "UPDATE chats SET active = 0, updated_at = ? WHERE chat_id = ?",
                (self._now(), chat_id),
            )
            cur = await conn.execute(
                "UPDATE outbox SET state = 'dropped', last_error = ?"
                " WHERE chat_id = ? AND state = 'pending'",
                (reason[:500], chat_id),
            )
        self._forget_chats(chat_id)  # (and a read that saw it active meanwhile is not kept)
        return cur.rowcount

    async def migrate_chat(self, old_chat_id: int, new_chat_id: int) -> bool:
        """A group became a supergroup: move the chat (settings, subscriptions, outbox) to its
        new id, in one transaction. False, and nothing changed, when the old id has no row:
        the chat already moved (Telegram announces a migration twice, once in each chat, and a
        send to the old id learns of it too; whichever comes second finds nothing to move)."""
        if old_chat_id == new_chat_id:
            return False
        self._forget_chats(old_chat_id, new_chat_id)
        async with self._write() as conn:
            async with conn.execute("SELECT 1 FROM chats WHERE chat_id = ?", (old_chat_id,)) as cur:
                if await cur.fetchone() is None:
                    return False
            async with conn.execute("SELECT 1 FROM chats WHERE chat_id = ?", (new_chat_id,)) as cur:
                exists = await cur.fetchone()
            if exists:  # the new id already talked to us: the group's settings and follows move
                await conn.execute(
                    "UPDATE chats SET (active, paused, mode, digest_time, digest_weekday,"
                    " timezone, spikes, next_digest_at, digest_through, alerts_due,"
                    " alerts_since) = (SELECT active, paused, mode, digest_time,"
                    " digest_weekday, timezone, spikes, next_digest_at, digest_through,"
                    " alerts_due, alerts_since FROM chats"
                    " WHERE chat_id = ?), type = 'supergroup', updated_at = ? WHERE chat_id = ?",
                    (old_chat_id, self._now(), new_chat_id),
                )
                await conn.execute(
                    "INSERT OR IGNORE INTO subscriptions (chat_id, topic_id, after_paper_id,"
                    " created_at, label) SELECT ?, topic_id, after_paper_id, created_at, label"
                    " FROM subscriptions WHERE chat_id = ?",
                    (new_chat_id, old_chat_id),
                )
                await conn.execute(
                    "UPDATE OR IGNORE outbox SET chat_id = ? WHERE chat_id = ?",
                    (new_chat_id, old_chat_id),
                )
                for table in ("ratings", "tastes", "held_back", "refinements"):  # (and views)
                    await conn.execute(
                        f"UPDATE OR IGNORE {table} SET chat_id = ? WHERE chat_id = ?",
                        (new_chat_id, old_chat_id),
                    )
                await conn.execute("DELETE FROM chats WHERE chat_id = ?", (old_chat_id,))
            else:  # ON UPDATE CASCADE carries subscriptions and outbox along
                await conn.execute(
                    "UPDATE chats SET chat_id = ?, type = 'supergroup', updated_at = ?"
                    " WHERE chat_id = ?",
                    (new_chat_id, self._now(), old_chat_id),
                )
        self._forget_chats(old_chat_id, new_chat_id)
        return True

    async def chat_counts(self) -> dict[str, int]:
        row = await self._row(
            "SELECT sum(active) AS active, sum(1 - active) AS inactive,"
            " (SELECT count(*) FROM subscriptions) AS subscriptions FROM chats"
        )
        assert row is not None
        return {name: row[name] or 0 for name in ("active", "inactive", "subscriptions")}

    # ------------------------------------------------------------------ subscriptions
    async def subscribe(
        self,
        chat_id: int,
        topic_id: int,
        *,
        cap: int | None = None,
        label: str | None = None,
        thread_id: int | None = None,
    ) -> bool:
        """Follow a topic; alerts start with papers stored after now. False if already followed.

        With ``cap``, the chat's follow count is checked and the follow added in one
        transaction (``SubscriptionsFull`` if it already has ``cap``), so concurrent follows
        cannot overshoot it. ``label``: how this chat spelled a shared custom topic, shown to
        this chat only. ``thread_id``: the forum topic the follow came from (None: General, or
        no topics), where its alerts go; following again from elsewhere moves them there."""
        async with self._write() as conn:
            async with conn.execute(
                "SELECT count(*) AS n, coalesce(sum(topic_id = ?), 0) AS has"
                " FROM subscriptions WHERE chat_id = ?",
                (topic_id, chat_id),
            ) as cur:
                row = await cur.fetchone()
            assert row is not None
            if row["has"]:
                await conn.execute(
                    "UPDATE subscriptions SET thread_id = ? WHERE chat_id = ? AND topic_id = ?"
                    " AND thread_id IS NOT ?",
                    (thread_id, chat_id, topic_id, thread_id),
                )
                return False
            if cap is not None and row["n"] >= cap:
                raise SubscriptionsFull(cap)
            await conn.execute(
                "INSERT INTO subscriptions (chat_id, topic_id, after_paper_id, created_at, label,"
                " thread_id) VALUES (?, ?, (SELECT coalesce(max(id), 0) FROM papers), ?, ?, ?)",
                (chat_id, topic_id, self._now(), label, thread_id),
            )
            await conn.execute("UPDATE topics SET unfollowed_at = NULL WHERE id = ?", (topic_id,))
            return True

    async def unsubscribe(self, chat_id: int, topic_id: int) -> bool:
        async with self._write() as conn:
            cur = await conn.execute(
                "DELETE FROM subscriptions WHERE chat_id = ? AND topic_id = ?", (chat_id, topic_id)
            )
            if cur.rowcount > 0:  # the last follower left: the maintenance job's clock starts
                await conn.execute(
                    "UPDATE topics SET unfollowed_at = ? WHERE id = ? AND NOT EXISTS"
                    " (SELECT 1 FROM subscriptions WHERE topic_id = ?)",
                    (self._now(), topic_id, topic_id),
                )
            return cur.rowcount > 0

    async def subscriptions(self, chat_id: int) -> list[Subscription]:
        found = await self._rows(rows.FOLLOWED, (chat_id,))
        return [Subscription(r["chat_id"], rows.topic(r), r["followed_at"]) for r in found]

    async def following(
        self, chat_id: int
    ) -> tuple[Chat | None, list[Subscription], list[Refinement]]:
        """The chat's row, its subscriptions and the words it leaves out of them, in one trip to
        a reader (what /list shows besides the counts)."""

        def read(
            conn: sqlite3.Connection,
        ) -> tuple[Chat | None, list[Subscription], list[Refinement]]:
            row = conn.execute(
                f"SELECT {rows.CHAT_COLUMNS} FROM chats WHERE chat_id = ?", (chat_id,)
            ).fetchone()
            subscriptions = [
                Subscription(r["chat_id"], rows.topic(r), r["followed_at"])
                for r in conn.execute(rows.FOLLOWED, (chat_id,))
            ]
            return (rows.chat(row) if row else None), subscriptions, left_out(conn, chat_id)

        return await self._trip(read)

    async def subscribed_topic(self, chat_id: int, topic_id: int) -> Topic | None:
        """The topic if this chat follows it, as this chat sees it (its own spelling)."""
        row = await self._row(
            f"SELECT {rows.CHAT_TOPIC_COLUMNS} FROM subscriptions s"
            " JOIN topics t ON t.id = s.topic_id WHERE s.chat_id = ? AND s.topic_id = ?",
            (chat_id, topic_id),
        )
        return rows.topic(row) if row else None

    async def count_subscriptions(self, chat_id: int) -> int:
        return int(
            await self._value("SELECT count(*) FROM subscriptions WHERE chat_id = ?", (chat_id,))
        )

    # ------------------------------------------------------------------ forum topics
    async def subscription_threads(self, chat_id: int) -> dict[int, int | None]:
        """topic id → the forum topic (message_thread_id) its alerts go to in this chat (None:
        General, or a chat without topics)."""
        found = await self._rows(
            "SELECT topic_id, thread_id FROM subscriptions WHERE chat_id = ?", (chat_id,)
        )
        return {r["topic_id"]: r["thread_id"] for r in found}

    async def spike_thread(self, chat_id: int, episode_id: int) -> int | None:
        """The forum topic a spike episode's alert goes to in this chat: its topic's."""
        row = await self._row(
            "SELECT s.thread_id FROM spike_episodes e JOIN subscriptions s"
            " ON s.topic_id = e.topic_id AND s.chat_id = ? WHERE e.id = ?",
            (chat_id, episode_id),
        )
        return row["thread_id"] if row else None

    async def forget_thread(self, chat_id: int, thread_id: int) -> int:
        """The forum topic was deleted: its subscriptions' alerts go to General from now on."""
        async with self._write() as conn:
            cur = await conn.execute(
                "UPDATE subscriptions SET thread_id = NULL WHERE chat_id = ? AND thread_id = ?",
                (chat_id, thread_id),
            )
            return max(cur.rowcount, 0)

    async def mark_topic_closed(self, chat_id: int) -> bool:
        """A send found the chat's forum topic closed. True if it was not known closed (its
        admins are to be told, once)."""
        now = self._now()
        async with self._write() as conn:
            cur = await conn.execute(
                "UPDATE chats SET topic_closed_at = ?, updated_at = ?"
                " WHERE chat_id = ? AND topic_closed_at IS NULL",
                (now, now, chat_id),
            )
            return cur.rowcount > 0

    async def clear_topic_closed(self, chat_id: int) -> None:
        """A send to the chat went through again: its topics are open (a later closing is told
        again)."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE chats SET topic_closed_at = NULL, updated_at = ?"
                " WHERE chat_id = ? AND topic_closed_at IS NOT NULL",
                (self._now(), chat_id),
            )
