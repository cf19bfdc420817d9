"""Ratings and tastes: each chat's 👍 / 👎 (one per chat and paper), the imported likes, the
model trained from them, and the papers an alert held back (schema: 0014_ratings.sql)."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from topicpulse.models import StoredPaper
from topicpulse.store import rows
from topicpulse.store.database import Database


@dataclass(frozen=True, slots=True)
class Rating:
    """One of a chat's ratings with the text it is learned from (the stored paper's, else the
    imported entry's own)."""

    item: str  # arXiv id, or "text:…" for an imported entry that is not an arXiv paper
    paper_id: int | None
    value: int  # +1 or -1
    source: str  # "button" or "import"
    title: str
    abstract: str
    rated_at: str


@dataclass(frozen=True, slots=True)
class Imported:
    """A liked example from an import: a stored paper (``paper_id``), or text only."""

    item: str
    paper_id: int | None
    title: str = ""
    abstract: str = ""


@dataclass(frozen=True, slots=True)
class PaperText:
    """A stored paper's text alone: what a taste scores (read without the rest of the row)."""

    id: int
    arxiv_id: str
    title: str
    abstract: str


@dataclass(frozen=True, slots=True)
class TasteRow:
    chat_id: int
    hold_back: bool
    changed: int
    trained: int
    model: str | None
    trained_at: str | None
    weekly: bool = False  # the weekly /foryou is on
    weekly_next_at: str | None = None  # … and due then (UTC)


WEEKLY_DUE = (
    "SELECT t.chat_id FROM tastes t JOIN chats c ON c.chat_id = t.chat_id"
    " WHERE t.weekly = 1 AND t.weekly_next_at <= ? AND c.active = 1 AND c.paused = 0"
    " ORDER BY t.weekly_next_at, t.chat_id LIMIT ?"
)
_BUMP = (
    "INSERT INTO tastes (chat_id, changed) VALUES (?, 1)"
    " ON CONFLICT (chat_id) DO UPDATE SET changed = changed + 1"
)
_BUMP_BY = (
    "INSERT INTO tastes (chat_id, changed) VALUES (?, ?)"
    " ON CONFLICT (chat_id) DO UPDATE SET changed = changed + excluded.changed"
)


@dataclass(frozen=True, slots=True)
class Tap:
    """A tap on 👍 (``value`` 1) or 👎 (-1) under a paper, and the papers shown beside it."""

    chat_id: int
    paper_id: int
    value: int
    rated_by: int | None = None
    shown: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Tapped:
    value: int  # the chat's rating of the paper now (0: none)
    shown: dict[int, int]  # the chat's ratings of the papers shown beside it (paper id → ±1)


# queries of the pairs ``v (a, b)`` (``_select``): the taps' papers, their ratings, and the
# ratings of the papers shown beside them
_ITEMS = "SELECT v.a AS paper_id, p.arxiv_id FROM v JOIN papers p ON p.id = v.a"
_CURRENT = (
    "SELECT r.chat_id, r.item, r.value FROM v JOIN ratings r ON r.chat_id = v.a AND r.item = v.b"
)
_SHOWN = (
    "SELECT v.a AS chat_id, v.b AS paper_id, r.value FROM v JOIN papers p ON p.id = v.b"
    " JOIN ratings r ON r.chat_id = v.a AND r.item = p.arxiv_id"
)


def _toggle(conn: sqlite3.Connection, taps: Sequence[Tap], now: str) -> list[Tapped | None]:
    """``RatingQueries.tap`` for each tap, in order, inside the caller's transaction, on the
    writer's own thread (``Database._write_trip``: one hand-off for the batch, not one per
    statement): what they touch read with one statement, the new ratings worked out here,
    written with one statement each, and the ratings of the papers shown beside each read back
    with one more."""
    found = _select(conn, _ITEMS, [(t.paper_id, 0) for t in taps])
    item = {r["paper_id"]: r["arxiv_id"] for r in found}
    known = [t for t in taps if t.paper_id in item]
    found = _select(conn, _CURRENT, [(t.chat_id, item[t.paper_id]) for t in known])
    state = {(r["chat_id"], r["item"]): r["value"] for r in found}
    values: list[int | None] = []
    last: dict[tuple[int, str], Tap] = {}
    bumps: dict[int, int] = {}
    for tap in taps:
        if tap.paper_id not in item:  # a paper no longer stored
            values.append(None)
            continue
        key = (tap.chat_id, item[tap.paper_id])
        state[key] = 0 if state.get(key, 0) == tap.value else tap.value
        values.append(state[key])
        last[key] = tap
        bumps[tap.chat_id] = bumps.get(tap.chat_id, 0) + 1
    conn.executemany(
        "DELETE FROM ratings WHERE chat_id = ? AND item = ?", [k for k in last if not state[k]]
    )
    conn.executemany(
        "INSERT INTO ratings (chat_id, item, paper_id, value, source, rated_by, rated_at)"
        " VALUES (?, ?, ?, ?, 'button', ?, ?) ON CONFLICT (chat_id, item) DO UPDATE SET"
        " value = excluded.value, paper_id = excluded.paper_id, source = 'button',"
        " rated_by = excluded.rated_by, rated_at = excluded.rated_at",
        [(k[0], k[1], t.paper_id, state[k], t.rated_by, now) for k, t in last.items() if state[k]],
    )
    conn.executemany(_BUMP_BY, list(bumps.items()))
    found = _select(conn, _SHOWN, [(t.chat_id, s) for t in known for s in t.shown])
    shown = {(r["chat_id"], r["paper_id"]): r["value"] for r in found}
    return [
        None
        if value is None
        else Tapped(value, {s: shown[(t.chat_id, s)] for s in t.shown if (t.chat_id, s) in shown})
        for t, value in zip(taps, values, strict=True)
    ]


def _select(
    conn: sqlite3.Connection, sql: str, pairs: Sequence[tuple[object, object]]
) -> list[sqlite3.Row]:
    """``sql`` (a query of the table ``v (a, b)``) over these pairs, ``rows.CHUNK`` at a time."""
    found: list[sqlite3.Row] = []
    for chunk in rows.chunks(list(dict.fromkeys(pairs))):
        values = ", ".join("(?, ?)" for _ in chunk)
        found += conn.execute(
            f"WITH v (a, b) AS (VALUES {values}) {sql}", [x for pair in chunk for x in pair]
        ).fetchall()
    return found


PendingTap = tuple[Tap, "asyncio.Future[Tapped | None]"]


class RatingQueries(Database):
    """Ratings, tastes and held-back papers (part of ``Store``)."""

    async def tap(
        self,
        chat_id: int,
        paper_id: int,
        value: int,
        *,
        rated_by: int | None = None,
        shown: Sequence[int] = (),
    ) -> Tapped | None:
        """A tap on 👍 (``value`` 1) or 👎 (-1): sets that rating, or removes it when it is the
        chat's rating already (a second tap undoes). Returns the chat's rating now, and its
        ratings of the papers ``shown`` beside it (None: the paper is no longer stored).

        Taps are written together: those that arrive while the write lock is busy (a thousand
        readers rating during a round) wait for it as one batch, written in one transaction,
        in the order they came (``_write_taps``); each returns once its batch is committed."""
        assert value in (1, -1)
        done: asyncio.Future[Tapped | None] = asyncio.get_running_loop().create_future()
        self._taps.append((Tap(chat_id, paper_id, value, rated_by, tuple(shown)), done))
        if self._tap_writer is None:
            self._tap_writer = asyncio.create_task(self._write_taps())
        return await asyncio.shield(done)  # (a cancelled caller's tap is written all the same)

    async def toggle_rating(
        self, chat_id: int, paper: StoredPaper, value: int, *, rated_by: int | None = None
    ) -> int:
        """``tap`` on a stored paper: the chat's rating of it now (0: none)."""
        tapped = await self.tap(chat_id, paper.id, value, rated_by=rated_by)
        if tapped is None:
            raise LookupError(f"no paper {paper.id}")
        return tapped.value

    async def _write_taps(self) -> None:
        taps: list[PendingTap] = []
        try:
            async with self._write_lock:  # (taps pile up while it waits for the lock)
                taps, self._taps, self._tap_writer = self._taps, [], None  # later: the next
                batch, now = [tap for tap, _ in taps], self._now()
                toggle = functools.partial(_toggle, taps=batch, now=now)
                results = await self._write_trip(toggle, locked=True)
        except Exception:
            if not taps:  # failed before taking its batch: no tap may wait for ever
                taps, self._taps, self._tap_writer = self._taps, [], None
            await self._write_one_by_one(taps)  # one bad tap must not fail the others
            return
        except BaseException:  # cancelled (shutting down): the writer's thread finishes its trip
            if not taps:
                taps, self._taps, self._tap_writer = self._taps, [], None
            for _, done in taps:
                done.cancel()
            raise
        for (_, done), result in zip(taps, results, strict=True):
            if not done.done():
                done.set_result(result)

    async def _write_one_by_one(self, taps: Sequence[PendingTap]) -> None:
        for tap, done in taps:
            try:
                now = self._now()
                [result] = await self._write_trip(functools.partial(_toggle, taps=[tap], now=now))
            except Exception as exc:
                if not done.done():
                    done.set_exception(exc)
            else:
                if not done.done():
                    done.set_result(result)

    async def import_likes(self, chat_id: int, entries: Sequence[Imported]) -> tuple[int, int]:
        """Imported entries become likes, all in one transaction; a paper the chat rated
        already keeps its rating. Returns (added, already rated)."""
        now = self._now()
        added = 0
        async with self._write() as conn:
            for entry in entries:
                cur = await conn.execute(
                    "INSERT INTO ratings (chat_id, item, paper_id, value, source, title,"
                    " abstract, rated_at) VALUES (?, ?, ?, 1, 'import', ?, ?, ?)"
                    " ON CONFLICT (chat_id, item) DO NOTHING",
                    (
                        chat_id,
                        entry.item,
                        entry.paper_id,
                        None if entry.paper_id else entry.title,
                        None if entry.paper_id else entry.abstract,
                        now,
                    ),
                )
                added += max(cur.rowcount, 0)
            if added:
                await conn.execute(_BUMP, (chat_id,))
        return added, len(entries) - added

    async def ratings_for(self, chat_id: int, paper_ids: Sequence[int]) -> dict[int, int]:
        """The chat's rating of each of these papers that it rated."""
        found: dict[int, int] = {}
        for chunk in rows.chunks(paper_ids):
            for row in await self._rows(
                "SELECT p.id, r.value FROM papers p JOIN ratings r ON r.chat_id = ?"
                f" AND r.item = p.arxiv_id WHERE p.id IN ({rows.marks(chunk)})",
                (chat_id, *chunk),
            ):
                found[row["id"]] = row["value"]
        return found

    async def chat_ratings(self, chat_id: int) -> list[Rating]:
        """Every rating of the chat, oldest first, with the text to learn from."""
        found = await self._rows(
            "SELECT r.item, p.id AS paper_id, r.value, r.source, r.rated_at,"
            " coalesce(p.title, r.title, '') AS title,"
            " coalesce(p.abstract, r.abstract, '') AS abstract"
            " FROM ratings r LEFT JOIN papers p ON p.arxiv_id = r.item"
            " WHERE r.chat_id = ? ORDER BY r.rated_at, r.item",
            (chat_id,),
        )
        return [rows.model(Rating, r) for r in found]

    async def rating_counts(self, chat_id: int) -> tuple[int, int]:
        """(👍, 👎) of the chat."""
        row = await self._row(
            "SELECT coalesce(sum(value > 0), 0) AS up, coalesce(sum(value < 0), 0) AS down"
            " FROM ratings WHERE chat_id = ?",
            (chat_id,),
        )
        return (row["up"], row["down"]) if row else (0, 0)

    async def recent_papers(self, limit: int, *, before_id: int | None = None) -> list[StoredPaper]:
        """The ``limit`` newest stored papers (below ``before_id``): a taste's background."""
        found = await self._rows(
            f"SELECT {rows.PAPER_COLUMNS} FROM papers WHERE id < ? ORDER BY id DESC LIMIT ?",
            (before_id if before_id is not None else 2**63 - 1, limit),
        )
        return [rows.stored_paper(r) for r in found]

    async def topic_texts(self, topic_id: int, *, since: str, limit: int) -> list[PaperText]:
        """The texts of a topic's ``limit`` newest papers published since ``since`` (newest
        first): the papers a taste's hold-back floor is set from."""
        found = await self._rows(
            "SELECT p.id, p.arxiv_id, p.title, p.abstract FROM topic_papers tp"
            " JOIN papers p ON p.id = tp.paper_id WHERE tp.topic_id = ? AND tp.published >= ?"
            " ORDER BY tp.published DESC, tp.paper_id DESC LIMIT ?",
            (topic_id, since, limit),
        )
        return [rows.model(PaperText, r) for r in found]

    async def paper_ids_published(self, since: str, until: str, *, limit: int = 5_000) -> list[int]:
        """The ids of the stored papers published in [since, until), newest first (/foryou's
        pool, read a page at a time with ``papers_by_ids``)."""
        found = await self._rows(
            "SELECT id FROM papers WHERE published >= ? AND published < ?"
            " ORDER BY published DESC, id DESC LIMIT ?",
            (since, until, limit),
        )
        return [r["id"] for r in found]

    # ------------------------------------------------------------------ tastes
    async def taste(self, chat_id: int) -> TasteRow | None:
        return await self._trip(lambda conn: taste_row(conn, chat_id))

    async def tastes_due(self, limit: int = 1000) -> list[int]:
        """Chats whose ratings changed since their model was trained."""
        found = await self._rows(
            "SELECT chat_id FROM tastes WHERE changed > trained ORDER BY chat_id LIMIT ?", (limit,)
        )
        return [r["chat_id"] for r in found]

    async def save_taste_model(self, chat_id: int, trained: int, model: str | None) -> None:
        """The model trained from the ratings as of change number ``trained``."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE tastes SET model = ?, trained = max(trained, ?), trained_at = ?"
                " WHERE chat_id = ?",
                (model, trained, self._now(), chat_id),
            )

    async def set_hold_back(self, chat_id: int, on: bool) -> None:
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO tastes (chat_id, hold_back) VALUES (?, ?)"
                " ON CONFLICT (chat_id) DO UPDATE SET hold_back = excluded.hold_back",
                (chat_id, int(on)),
            )

    # ------------------------------------------------------------------ the weekly /foryou
    async def set_weekly(self, chat_id: int, next_at: str | None) -> None:
        """The weekly /foryou on, next due at ``next_at`` (None: off)."""
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO tastes (chat_id, weekly, weekly_next_at) VALUES (?, ?, ?)"
                " ON CONFLICT (chat_id) DO UPDATE SET weekly = excluded.weekly,"
                " weekly_next_at = excluded.weekly_next_at",
                (chat_id, int(next_at is not None), next_at),
            )

    async def settle_weekly(self, chat_id: int, *, due: str, next_at: str) -> bool:
        """The weekly /foryou due at ``due`` was sent (or had nothing to send): the next is
        due at ``next_at`` — unless it was turned off or rescheduled meanwhile."""
        async with self._write() as conn:
            cur = await conn.execute(
                "UPDATE tastes SET weekly_next_at = ? WHERE chat_id = ? AND weekly = 1"
                " AND weekly_next_at = ?",
                (next_at, chat_id, due),
            )
            return cur.rowcount > 0

    # ------------------------------------------------------------------ held back
    async def hold_back_papers(
        self, chat_id: int, held: Sequence[tuple[int | None, int, float]]
    ) -> None:
        """(outbox row or None, paper, score): each paper moves to the chat's quiet list, and its
        outbox row is settled (a paper from the matches gets a settled row, so the alert
        assembled again before its watermark moves leaves it out), in one transaction —
        nothing lost, nothing twice."""
        now = self._now()
        async with self._write() as conn:
            await conn.executemany(
                "INSERT OR IGNORE INTO held_back (chat_id, paper_id, score, held_at)"
                " VALUES (?, ?, ?, ?)",
                [(chat_id, paper_id, score, now) for _, paper_id, score in held],
            )
            await conn.executemany(
                "UPDATE outbox SET state = 'sent', sent_at = ?, last_error = 'held back'"
                " WHERE id = ? AND state = 'pending'",
                [(now, outbox_id) for outbox_id, _, _ in held if outbox_id is not None],
            )
            await conn.executemany(
                "INSERT OR IGNORE INTO outbox (chat_id, kind, paper_id, created_at, state,"
                " attempts, sent_at, last_error) VALUES (?, 'paper', ?, ?, 'sent', 0, ?,"
                " 'held back')",
                [(chat_id, paper_id, now, now) for row, paper_id, _ in held if row is None],
            )

    async def waiting_held_back(self, chat_id: int) -> list[int]:
        """The quiet list: held-back papers not shown yet, best score first."""
        found = await self._rows(
            "SELECT paper_id FROM held_back WHERE chat_id = ? AND shown_at IS NULL"
            " ORDER BY score DESC, paper_id",
            (chat_id,),
        )
        return [r["paper_id"] for r in found]

    async def mark_held_shown(self, chat_id: int, paper_ids: Sequence[int]) -> None:
        async with self._write() as conn:
            await conn.executemany(
                "UPDATE held_back SET shown_at = ? WHERE chat_id = ? AND paper_id = ?",
                [(self._now(), chat_id, p) for p in paper_ids],
            )


def taste_row(conn: sqlite3.Connection, chat_id: int) -> TasteRow | None:
    """``taste`` on the reader's thread (``Database._trip``)."""
    found = conn.execute(
        f"SELECT {rows.columns(TasteRow)} FROM tastes WHERE chat_id = ?", (chat_id,)
    ).fetchone()
    return rows.model(TasteRow, found, flags=("hold_back", "weekly")) if found else None
