"""Where the OAI-PMH intake stands, per configured category set: the daily harvest's
watermark, how far back the history is complete, and a history harvest in progress (so an
interrupted backfill resumes at its next page)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import aiosqlite

from topicpulse.store import rows
from topicpulse.store.database import Database


@dataclass(frozen=True, slots=True)
class IntakeState:
    categories: str
    watermark: str | None = None  # YYYY-MM-DD: the newest record read; the next `from`
    history_from: str | None = None  # papers created from this day on are all stored
    pending_from: str | None = None  # a history harvest in progress: its `from` day,
    pending_set: str | None = None  # the set it is reading,
    pending_token: str | None = None  # and the token of its next page (None: the first)


_FIELDS = tuple(f.name for f in fields(IntakeState) if f.name != "categories")


@dataclass(frozen=True, slots=True)
class IntakeUpdate:
    """Fields of one category set's intake row to set (only those named in ``values``)."""

    categories: str
    values: dict[str, str | None]

    def __post_init__(self) -> None:
        unknown = set(self.values) - set(_FIELDS)
        if unknown:
            raise ValueError(f"unknown intake fields: {sorted(unknown)}")


async def write_intake(conn: aiosqlite.Connection, update: IntakeUpdate, now: str) -> None:
    """Set the named fields (inside the caller's transaction), creating the row if needed."""
    names = list(update.values)
    params: list[Any] = [update.categories, now, *(update.values[n] for n in names)]
    columns = ", ".join(["categories", "updated_at", *names])
    assignments = ", ".join(
        ["updated_at = excluded.updated_at", *(f"{n} = excluded.{n}" for n in names)]
    )
    await conn.execute(
        f"INSERT INTO intake ({columns}) VALUES ({rows.marks(params)})"
        f" ON CONFLICT (categories) DO UPDATE SET {assignments}",
        params,
    )


class IntakeQueries(Database):
    """The intake's progress (part of ``Store``)."""

    async def intake_state(self, categories: str) -> IntakeState:
        row = await self._row(
            f"SELECT categories, {', '.join(_FIELDS)} FROM intake WHERE categories = ?",
            (categories,),
        )
        if row is None:
            return IntakeState(categories)
        return IntakeState(**{name: row[name] for name in ("categories", *_FIELDS)})

    async def save_intake(self, update: IntakeUpdate) -> None:
        async with self._write() as conn:
            await write_intake(conn, update, self._now())

    async def known_versions(self, arxiv_ids: Iterable[str]) -> dict[str, tuple[int, str]]:
        """(version, updated) of the papers among ``arxiv_ids`` already stored."""
        found: dict[str, tuple[int, str]] = {}
        for chunk in rows.chunks(list(arxiv_ids)):
            for row in await self._rows(
                "SELECT arxiv_id, version, updated FROM papers"
                f" WHERE arxiv_id IN ({rows.marks(chunk)})",
                chunk,
            ):
                found[row["arxiv_id"]] = (row["version"], row["updated"])
        return found
