"""Papers: upserts (one row per arXiv id, newer versions update it), lookups, ingestion runs
and the days a backfill has completed."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import aiosqlite

from topicpulse.models import Paper, RunStats, StoredPaper, UpsertResult
from topicpulse.store import rows
from topicpulse.store.database import Database, read_only_uri
from topicpulse.store.intake import IntakeUpdate, write_intake


def _newest_per_id(papers: Iterable[Paper]) -> dict[str, Paper]:
    """One paper per arXiv id: the highest version (then the latest ``updated``) wins."""
    best: dict[str, Paper] = {}
    for paper in papers:
        seen = best.get(paper.arxiv_id)
        if seen is None or (paper.version, paper.updated) > (seen.version, seen.updated):
            best[paper.arxiv_id] = paper
    return best


class PaperQueries(Database):
    """Papers, ingestion runs and backfill progress (part of ``Store``)."""

    async def upsert_papers(
        self,
        papers: Iterable[Paper],
        *,
        announced: Mapping[str, str] | None = None,
        intake: IntakeUpdate | None = None,
    ) -> UpsertResult:
        """Store new papers and newer versions of known ones, in one transaction.

        A paper already stored is updated only when the incoming copy is a newer version (or the
        same version with changed metadata, e.g. a cross-list or DOI added later); it keeps its
        row id, ``stored_at`` and ``announced``, and does not count as new. A new paper's
        ``announced`` is ``announced[arxiv_id]``, else its ``published``. With ``intake``, the
        harvest's progress is recorded in the same transaction (a page and the progress past
        it are stored together).
        """
        announced = announced or {}
        incoming = _newest_per_id(papers)
        result = UpsertResult()
        now = self._now()
        async with self._write() as conn:
            existing = await self._existing_versions(conn, list(incoming))
            inserts: list[tuple[Any, ...]] = []
            updates: list[tuple[Any, ...]] = []
            for n, (arxiv_id, paper) in enumerate(incoming.items(), start=1):
                if n % 250 == 0:  # thousands of rows: let replies run between slices
                    await asyncio.sleep(0)
                values = rows.paper_values(paper)
                known = existing.get(arxiv_id)
                if known is None:
                    inserts.append((*values, now, announced.get(arxiv_id, paper.published)))
                elif (paper.version, paper.updated) >= (known[0], known[1]) and values != known[2]:
                    updates.append((*values[1:], arxiv_id))
                else:
                    result.unchanged += 1
            if inserts:
                async with conn.execute("SELECT coalesce(max(id), 0) AS id FROM papers") as cur:
                    max_before = (await cur.fetchone())["id"]  # type: ignore[index]
                await conn.executemany(
                    f"INSERT INTO papers ({rows.PAPER_WRITE_COLUMNS}, stored_at, announced)"
                    f" VALUES ({rows.marks(inserts[0])})",
                    inserts,
                )
                async with conn.execute(
                    "SELECT id FROM papers WHERE id > ? ORDER BY id", (max_before,)
                ) as cur:
                    result.new_ids = [r["id"] for r in await cur.fetchall()]
            if updates:
                assignments = ", ".join(
                    f"{c.strip()}=?" for c in rows.PAPER_WRITE_COLUMNS.split(",")[1:]
                )
                await conn.executemany(f"UPDATE papers SET {assignments} WHERE arxiv_id=?", updates)
                result.updated = len(updates)
            if intake is not None:
                await write_intake(conn, intake, now)
        if inserts or updates:
            self._paper_cache.clear()
        return result

    @staticmethod
    async def _existing_versions(
        conn: aiosqlite.Connection, arxiv_ids: list[str]
    ) -> dict[str, tuple[int, str, tuple[Any, ...]]]:
        found: dict[str, tuple[int, str, tuple[Any, ...]]] = {}
        for chunk in rows.chunks(arxiv_ids):
            async with conn.execute(
                f"SELECT {rows.PAPER_WRITE_COLUMNS} FROM papers"
                f" WHERE arxiv_id IN ({rows.marks(chunk)})",
                chunk,
            ) as cur:
                async for row in cur:
                    found[row["arxiv_id"]] = (row["version"], row["updated"], tuple(row))
        return found

    async def get_paper(self, arxiv_id: str) -> StoredPaper | None:
        row = await self._row(
            f"SELECT {rows.PAPER_COLUMNS} FROM papers WHERE arxiv_id = ?", (arxiv_id,)
        )
        return rows.stored_paper(row) if row else None

    async def papers_by_ids(self, ids: Sequence[int], *, cached: bool = True) -> list[StoredPaper]:
        """Papers with these row ids, in the order given (unknown ids are skipped). Read
        through the store's cache: every chat of a round asks for the same papers (not
        ``cached``: read past it, for a one-off walk over many papers)."""
        if not cached:
            by_id, missing = {}, list(ids)
        else:
            by_id, missing = self._paper_cache.split(ids)
        read: dict[int, StoredPaper] = {}
        for chunk in rows.chunks(missing):
            for row in await self._rows(
                f"SELECT {rows.PAPER_COLUMNS} FROM papers WHERE id IN ({rows.marks(chunk)})",
                chunk,
            ):
                read[row["id"]] = rows.stored_paper(row)
        if cached:
            self._paper_cache.put(read)
        by_id.update(read)
        return [by_id[i] for i in ids if i in by_id]

    async def papers_after(self, paper_id: int, limit: int | None = None) -> list[StoredPaper]:
        sql = f"SELECT {rows.PAPER_COLUMNS} FROM papers WHERE id > ? ORDER BY id"
        args: tuple[Any, ...] = (paper_id,)
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        found: list[StoredPaper] = []
        for n, row in enumerate(await self._rows(sql, args), start=1):
            if n % 500 == 0:  # a round's thousands of papers: let replies run between slices
                await asyncio.sleep(0)
            found.append(rows.stored_paper(row))
        return found

    async def max_paper_id(self) -> int:
        return int(await self._value("SELECT coalesce(max(id), 0) FROM papers"))

    async def count_papers(self) -> int:
        return int(await self._value("SELECT count(*) FROM papers"))

    async def primary_category_counts(self) -> list[tuple[str, int]]:
        found = await self._rows(
            "SELECT primary_category AS category, count(*) AS n FROM papers"
            " GROUP BY 1 ORDER BY 2 DESC, 1"
        )
        return [(r["category"], r["n"]) for r in found]

    async def published_range(self) -> tuple[str | None, str | None]:
        row = await self._row("SELECT min(published) AS lo, max(published) AS hi FROM papers")
        return (row["lo"], row["hi"]) if row else (None, None)

    # ------------------------------------------------------------------ ingestion runs
    async def start_run(self, kind: str) -> int:
        async with self._write() as conn:
            cur = await conn.execute(
                "INSERT INTO ingest_runs (kind, started_at) VALUES (?, ?)", (kind, self._now())
            )
            return int(cur.lastrowid or 0)

    async def finish_run(self, run_id: int, stats: RunStats) -> None:
        async with self._write() as conn:
            await conn.execute(
                "UPDATE ingest_runs SET finished_at=?, requests=?, new=?, updated=?, errors=?,"
                " duration_s=?, ok=?, message=? WHERE id=?",
                (
                    self._now(),
                    stats.requests,
                    stats.new,
                    stats.updated,
                    stats.errors,
                    round(stats.duration_s, 3),
                    int(stats.ok),
                    stats.message or None,
                    run_id,
                ),
            )

    async def last_run(
        self, kind: str | None = None, *, ok: bool | None = None
    ) -> dict[str, Any] | None:
        clauses, args = [], []
        if kind:
            clauses.append("kind = ?")
            args.append(kind)
        if ok is not None:
            clauses.append("ok = ?")
            args.append(int(ok))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        row = await self._row(
            "SELECT id, kind, started_at, finished_at, requests, new, updated, errors,"
            f" duration_s, ok, message FROM ingest_runs {where} ORDER BY id DESC LIMIT 1",
            args,
        )
        return dict(row) if row else None

    async def recent_run_errors(self, since: str) -> int:
        return int(
            await self._value(
                "SELECT coalesce(sum(errors), 0) FROM ingest_runs WHERE started_at >= ?", (since,)
            )
        )

    async def prune_runs(self, before: str) -> int:
        """Delete ingestion runs started before ``before``, keeping the latest of each kind
        (and the latest successful one) so the operator's view never goes blank."""
        async with self._write() as conn:
            cur = await conn.execute(
                "DELETE FROM ingest_runs WHERE started_at < ? AND id NOT IN ("
                " SELECT max(id) FROM ingest_runs GROUP BY kind"
                " UNION SELECT max(id) FROM ingest_runs WHERE ok = 1 GROUP BY kind)",
                (before,),
            )
            return max(cur.rowcount, 0)


# A batch's searchable text as the FTS index holds it: (id, title, abstract, authors, categories).
BatchRow = tuple[int, str, str, str, str]


def read_batch(path: str, after: int, limit: int) -> list[BatchRow]:
    """The searchable columns of up to ``limit`` papers stored after row ``after``, read straight
    from the database file — synchronous, for a worker process or thread (matching reads its
    batch itself rather than receive thousands of pickled papers from the bot's event loop)."""
    with contextlib.closing(sqlite3.connect(read_only_uri(path), uri=True)) as db:
        db.execute("PRAGMA busy_timeout=10000")
        return db.execute(
            "SELECT id, title, abstract, authors, categories FROM papers WHERE id > ?"
            " ORDER BY id LIMIT ?",
            (after, limit),
        ).fetchall()
