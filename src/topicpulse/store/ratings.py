"""Ratings and tastes: each chat's 👍 / 👎 (one per chat and paper), the imported likes, the
model trained from them, and the papers an alert held back (schema: 0014_ratings.sql)."""

from __future__ import annotations

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


_BUMP = (
    "INSERT INTO tastes (chat_id, changed) VALUES (?, 1)"
    " ON CONFLICT (chat_id) DO UPDATE SET changed = changed + 1"
)


class RatingQueries(Database):
    """Ratings, tastes and held-back papers (part of ``Store``)."""

    async def toggle_rating(
        self, chat_id: int, paper: StoredPaper, value: int, *, rated_by: int | None = None
    ) -> int:
        """A tap on 👍 (``value`` 1) or 👎 (-1): sets that rating, or removes it when it is the
        chat's rating already (a second tap undoes). Returns the chat's rating now (0: none)."""
        assert value in (1, -1)
        now = self._now()
        async with self._write() as conn:
            async with conn.execute(
                "SELECT value FROM ratings WHERE chat_id = ? AND item = ?",
                (chat_id, paper.arxiv_id),
            ) as cur:
                row = await cur.fetchone()
            if row is not None and row["value"] == value:
                await conn.execute(
                    "DELETE FROM ratings WHERE chat_id = ? AND item = ?", (chat_id, paper.arxiv_id)
                )
                value = 0
            else:
                await conn.execute(
                    "INSERT INTO ratings (chat_id, item, paper_id, value, source, rated_by,"
                    " rated_at) VALUES (?, ?, ?, ?, 'button', ?, ?) ON CONFLICT (chat_id, item)"
                    " DO UPDATE SET value = excluded.value, paper_id = excluded.paper_id,"
                    " source = 'button', rated_by = excluded.rated_by,"
                    " rated_at = excluded.rated_at",
                    (chat_id, paper.arxiv_id, paper.id, value, rated_by, now),
                )
            await conn.execute(_BUMP, (chat_id,))
        return value

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

    async def papers_published(
        self, since: str, until: str, *, limit: int = 5_000
    ) -> list[StoredPaper]:
        """Every stored paper published in [since, until), newest first (/foryou's pool)."""
        found = await self._rows(
            f"SELECT {rows.PAPER_COLUMNS} FROM papers WHERE published >= ? AND published < ?"
            " ORDER BY published DESC LIMIT ?",
            (since, until, limit),
        )
        return [rows.stored_paper(r) for r in found]

    # ------------------------------------------------------------------ tastes
    async def taste(self, chat_id: int) -> TasteRow | None:
        row = await self._row(
            f"SELECT {rows.columns(TasteRow)} FROM tastes WHERE chat_id = ?", (chat_id,)
        )
        return rows.model(TasteRow, row, flags=("hold_back",)) if row else None

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

    # ------------------------------------------------------------------ held back
    async def hold_back_papers(self, chat_id: int, held: Sequence[tuple[int, int, float]]) -> None:
        """(outbox row, paper, score): each paper moves to the chat's quiet list and its outbox
        row is settled, in one transaction — nothing lost, nothing twice."""
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
                [(now, outbox_id) for outbox_id, _, _ in held],
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
