"""The SQLite store: schema migrations and every query topicpulse runs.

All SQL outside ``migrations/`` lives here. The store owns one aiosqlite connection in
autocommit mode; writes go through ``_write()``, which serialises them with an asyncio lock and
wraps them in ``BEGIN IMMEDIATE … COMMIT`` so a failed write leaves nothing half-done.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import aiosqlite

from topicpulse.models import Paper, RunStats, StoredPaper, UpsertResult, iso, utcnow

log = logging.getLogger(__name__)

_MIGRATION_NAME = re.compile(r"^(\d{4})_[\w-]+\.sql$")
_CHUNK = 500  # SQLite's default limit on bound variables is far above this


class MigrationError(RuntimeError):
    """A migration failed; the database was left as it was before it."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations_dir() -> Path:
    """The folder of numbered ``.sql`` files: shipped in the wheel, or the repository's own."""
    packaged = resources.files("topicpulse") / "migrations"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "migrations"


def load_migrations(folder: Path | None = None) -> list[Migration]:
    folder = folder or migrations_dir()
    found: list[Migration] = []
    for path in sorted(folder.glob("*.sql")):
        match = _MIGRATION_NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path.name}: migration files are named NNNN_description.sql")
        found.append(Migration(int(match.group(1)), path.name, path.read_text("utf-8")))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migrations share a number in {folder}")
    return found


@dataclass(frozen=True, slots=True)
class BackfillWindow:
    categories: str
    start: str  # YYYY-MM-DD inclusive
    end: str  # YYYY-MM-DD inclusive


_PAPER_COLUMNS = (
    "id, arxiv_id, version, title, abstract, authors, primary_category, categories, "
    "published, updated, stored_at, comment, journal_ref, doi"
)


def _stored_paper(row: Sequence[Any]) -> StoredPaper:
    return StoredPaper(
        id=row[0],
        arxiv_id=row[1],
        version=row[2],
        title=row[3],
        abstract=row[4],
        authors=tuple(json.loads(row[5])),
        primary_category=row[6],
        categories=tuple(row[7].split()),
        published=row[8],
        updated=row[9],
        stored_at=row[10],
        comment=row[11],
        journal_ref=row[12],
        doi=row[13],
    )


def _paper_row(paper: Paper) -> tuple[Any, ...]:
    return (
        paper.arxiv_id,
        paper.version,
        paper.title,
        paper.abstract,
        json.dumps(list(paper.authors), ensure_ascii=False),
        paper.primary_category,
        " ".join(paper.categories),
        paper.published,
        paper.updated,
        paper.comment,
        paper.journal_ref,
        paper.doi,
    )


def _newest_per_id(papers: Iterable[Paper]) -> dict[str, Paper]:
    """One paper per arXiv id: the highest version (then the latest ``updated``) wins."""
    best: dict[str, Paper] = {}
    for paper in papers:
        seen = best.get(paper.arxiv_id)
        if seen is None or (paper.version, paper.updated) > (seen.version, seen.updated):
            best[paper.arxiv_id] = paper
    return best


class Store:
    """Async access to the topicpulse database. Create with ``await Store.open(path)``."""

    def __init__(self, conn: aiosqlite.Connection, path: str) -> None:
        self._conn = conn
        self.path = path
        self._write_lock: Any = None  # created lazily inside the running loop

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    async def open(cls, path: str | Path, *, migrate: bool = True) -> Store:
        conn = await aiosqlite.connect(str(path), isolation_level=None)
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA busy_timeout=10000")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA synchronous=NORMAL")
        store = cls(conn, str(path))
        if migrate:
            await store.migrate()
        return store

    async def close(self) -> None:
        await self._conn.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction at a time; rolled back on any error."""
        import asyncio

        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        async with self._write_lock:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            else:
                await self._conn.execute("COMMIT")

    # ------------------------------------------------------------------ migrations
    async def applied_migrations(self) -> list[int]:
        await self._conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        async with self._conn.execute("SELECT version FROM schema_migrations ORDER BY 1") as cur:
            return [row[0] for row in await cur.fetchall()]

    async def migrate(self, migrations: list[Migration] | None = None) -> list[str]:
        """Apply pending migrations in order, each in its own transaction. Returns their names."""
        migrations = load_migrations() if migrations is None else migrations
        done = set(await self.applied_migrations())
        applied: list[str] = []
        for migration in sorted(migrations, key=lambda m: m.version):
            if migration.version in done:
                continue
            # executescript() runs the whole file; the explicit BEGIN/COMMIT makes it atomic
            # (DDL is transactional in SQLite), and ROLLBACK undoes a partial failure.
            script = (
                "BEGIN IMMEDIATE;\n"
                f"{migration.sql}\n;"
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES "
                f"({migration.version}, '{migration.name}', '{iso(utcnow())}');\n"
                "COMMIT;"
            )
            try:
                await self._conn.executescript(script)
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    await self._conn.execute("ROLLBACK")
                raise MigrationError(f"migration {migration.name} failed: {exc}") from exc
            log.info("applied migration %s", migration.name)
            applied.append(migration.name)
        return applied

    # ------------------------------------------------------------------ papers
    async def upsert_papers(
        self, papers: Iterable[Paper], *, window: BackfillWindow | None = None
    ) -> UpsertResult:
        """Store new papers and newer versions of known ones, in one transaction.

        A paper already stored is updated only when the incoming copy is a newer version (or the
        same version with changed metadata, e.g. a cross-list or DOI added later); it keeps its
        row id and ``stored_at`` and does not count as new. With ``window``, the backfill window
        is recorded as complete in the same transaction.
        """
        incoming = _newest_per_id(papers)
        result = UpsertResult()
        now = iso(utcnow())
        async with self._write() as conn:
            existing = await self._existing_versions(conn, list(incoming))
            inserts: list[tuple[Any, ...]] = []
            updates: list[tuple[Any, ...]] = []
            for arxiv_id, paper in incoming.items():
                row = _paper_row(paper)
                known = existing.get(arxiv_id)
                if known is None:
                    inserts.append((*row, now))
                elif (paper.version, paper.updated) >= (known[0], known[1]) and row != known[2]:
                    updates.append((*row[1:], arxiv_id))
                else:
                    result.unchanged += 1
            if inserts:
                async with conn.execute("SELECT coalesce(max(id), 0) FROM papers") as cur:
                    (max_before,) = await cur.fetchone()  # type: ignore[misc]
                await conn.executemany(
                    "INSERT INTO papers (arxiv_id, version, title, abstract, authors,"
                    " primary_category, categories, published, updated, comment, journal_ref,"
                    " doi, stored_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    inserts,
                )
                async with conn.execute(
                    "SELECT id FROM papers WHERE id > ? ORDER BY id", (max_before,)
                ) as cur:
                    result.new_ids = [r[0] for r in await cur.fetchall()]
            if updates:
                await conn.executemany(
                    "UPDATE papers SET version=?, title=?, abstract=?, authors=?,"
                    " primary_category=?, categories=?, published=?, updated=?, comment=?,"
                    " journal_ref=?, doi=? WHERE arxiv_id=?",
                    updates,
                )
                result.updated = len(updates)
            if window is not None:
                await conn.execute(
                    "INSERT OR REPLACE INTO backfill_windows"
                    " (categories, window_start, window_end, papers, completed_at)"
                    " VALUES (?,?,?,?,?)",
                    (window.categories, window.start, window.end, len(incoming), now),
                )
        return result

    async def _existing_versions(
        self, conn: aiosqlite.Connection, arxiv_ids: list[str]
    ) -> dict[str, tuple[int, str, tuple[Any, ...]]]:
        found: dict[str, tuple[int, str, tuple[Any, ...]]] = {}
        for start in range(0, len(arxiv_ids), _CHUNK):
            chunk = arxiv_ids[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            async with conn.execute(
                "SELECT arxiv_id, version, title, abstract, authors, primary_category, categories,"
                " published, updated, comment, journal_ref, doi"
                f" FROM papers WHERE arxiv_id IN ({marks})",
                chunk,
            ) as cur:
                async for row in cur:
                    found[row[0]] = (row[1], row[8], tuple(row))
        return found

    async def get_paper(self, arxiv_id: str) -> StoredPaper | None:
        async with self._conn.execute(
            f"SELECT {_PAPER_COLUMNS} FROM papers WHERE arxiv_id = ?", (arxiv_id,)
        ) as cur:
            row = await cur.fetchone()
        return _stored_paper(row) if row else None

    async def papers_by_ids(self, ids: Sequence[int]) -> list[StoredPaper]:
        """Papers with these row ids, in the order given (unknown ids are skipped)."""
        by_id: dict[int, StoredPaper] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = list(ids[start : start + _CHUNK])
            marks = ",".join("?" * len(chunk))
            async with self._conn.execute(
                f"SELECT {_PAPER_COLUMNS} FROM papers WHERE id IN ({marks})", chunk
            ) as cur:
                async for row in cur:
                    by_id[row[0]] = _stored_paper(row)
        return [by_id[i] for i in ids if i in by_id]

    async def count_papers(self) -> int:
        async with self._conn.execute("SELECT count(*) FROM papers") as cur:
            (count,) = await cur.fetchone()  # type: ignore[misc]
        return int(count)

    async def primary_category_counts(self) -> list[tuple[str, int]]:
        async with self._conn.execute(
            "SELECT primary_category, count(*) FROM papers GROUP BY 1 ORDER BY 2 DESC, 1"
        ) as cur:
            return [(r[0], r[1]) for r in await cur.fetchall()]

    async def published_range(self) -> tuple[str | None, str | None]:
        async with self._conn.execute("SELECT min(published), max(published) FROM papers") as cur:
            row = await cur.fetchone()
        return (row[0], row[1]) if row else (None, None)

    async def database_bytes(self) -> int:
        async with self._conn.execute(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
        ) as cur:
            (size,) = await cur.fetchone()  # type: ignore[misc]
        return int(size)

    # ------------------------------------------------------------------ ingestion runs
    async def start_run(self, kind: str) -> int:
        async with self._write() as conn:
            cur = await conn.execute(
                "INSERT INTO ingest_runs (kind, started_at) VALUES (?, ?)", (kind, iso(utcnow()))
            )
            return int(cur.lastrowid or 0)

    async def finish_run(self, run_id: int, stats: RunStats) -> None:
        async with self._write() as conn:
            await conn.execute(
                "UPDATE ingest_runs SET finished_at=?, requests=?, new=?, updated=?, errors=?,"
                " duration_s=?, ok=?, message=? WHERE id=?",
                (
                    iso(utcnow()),
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

    async def last_run(self, kind: str | None = None) -> dict[str, Any] | None:
        where, args = ("WHERE kind = ?", (kind,)) if kind else ("", ())
        async with self._conn.execute(
            "SELECT id, kind, started_at, finished_at, requests, new, updated, errors,"
            f" duration_s, ok, message FROM ingest_runs {where} ORDER BY id DESC LIMIT 1",
            args,
        ) as cur:
            row = await cur.fetchone()
            names = [d[0] for d in cur.description]
        return dict(zip(names, row, strict=True)) if row else None

    async def recent_run_errors(self, since: str) -> int:
        async with self._conn.execute(
            "SELECT coalesce(sum(errors), 0) FROM ingest_runs WHERE started_at >= ?", (since,)
        ) as cur:
            (errors,) = await cur.fetchone()  # type: ignore[misc]
        return int(errors)

    # ------------------------------------------------------------------ backfill progress
    async def completed_backfill_windows(self, categories: str) -> set[str]:
        async with self._conn.execute(
            "SELECT window_start FROM backfill_windows WHERE categories = ?", (categories,)
        ) as cur:
            return {r[0] for r in await cur.fetchall()}
