"""The database connections: one writer, a few read-only readers, and the schema migrations.

SQLite in WAL mode lets readers see the last committed state while a write transaction is
open, so the store keeps them apart: every write goes through ``_write()`` (one transaction at
a time on the writer connection, ``BEGIN IMMEDIATE … COMMIT``, rolled back on any error) and
every read borrows one of a small pool of read-only connections (``_read()``). A command that
only reads never waits behind an ingestion or matching round, and never sees one half done.
Each aiosqlite connection runs its statements on its own thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from topicpulse.models import StoredPaper, Topic, iso, utcnow
from topicpulse.store import lock
from topicpulse.store.cache import ReadCache
from topicpulse.store.readers import ReaderPool, UsersFirst

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000  # how long a statement waits for a lock another connection holds
READERS = 3  # read-only connections: a slow read (a big momentum count) never blocks a reply
RESERVED = 1  # … of which this many serve only interactive reads (replies to users)
# Set while serving a user (the bot's command wrapper): such reads may also use the reserved
# reader, so a delivery pass or a spike check holding the others never keeps a reply waiting.
_INTERACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("interactive", default=False)


@contextmanager
def interactive() -> Iterator[None]:
    """Reads inside this block are a user's: they go ahead of background work."""
    token = _INTERACTIVE.set(True)
    try:
        yield
    finally:
        _INTERACTIVE.reset(token)


_MIGRATION_NAME = re.compile(r"^(\d{4})_[\w-]+\.sql$")


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
    return Path(__file__).resolve().parents[3] / "migrations"


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


def read_only_uri(path: str | Path) -> str:
    """The URI that opens the database file at ``path`` read-only (WAL: it sees what the writer
    last committed, and never blocks it)."""
    return f"{Path(path).resolve().as_uri()}?mode=ro"


# SQLite's page cache per connection, in KiB. The writer's absorbs a round's inserts into the
# match indexes; a reader serves one query at a time, the rest coming from the operating
# system's file cache. At 32 MB each (the old figure) the four caches filled on a big store:
# bench/bench_memory.py --ratings 50 measured 86 MB of the bot's +201 MB there.
WRITER_CACHE_KB = 16_000
READER_CACHE_KB = 4_000


async def _connect(target: str, *, uri: bool = False, cache_kb: int) -> aiosqlite.Connection:
    conn = await aiosqlite.connect(target, isolation_level=None, uri=uri)
    conn.row_factory = aiosqlite.Row  # rows are read by column name
    try:
        await conn.execute_fetchall(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        await conn.execute_fetchall("PRAGMA foreign_keys=ON")
        await conn.execute_fetchall(f"PRAGMA cache_size=-{int(cache_kb)}")
    except BaseException:
        await conn.close()
        raise
    return conn


def _in_read_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    if conn.in_transaction:  # (an in-memory store reads on its writer, maybe inside a write)
        return work(conn)
    conn.execute("BEGIN")
    try:
        return work(conn)
    finally:
        conn.execute("COMMIT")


# How a writer waits while another connection (a worker storing a page) holds the write
# lock. SQLite's busy handler sleeps longer and longer between its tries (up to 100 ms after
# the first ~0.2 s), and slept through the short gaps a worker leaves between a page's slices
# (``sources.storing``). So it is given ``LOCK_POLL_MS`` at a time, in which it tries at
# +0, 1, 3 and 5 ms (its sleeps release the GIL), and asked again: a 👍 gets in at the next
# gap (bench/bench_replies.py --raters 1000: taps during a round acknowledged at p95 ~50 ms
# instead of ~200-300 ms). A loop sleeping 2 ms in Python would take the GIL twice as often.
LOCK_POLL_MS = 5
LOCK_WAIT = 10.0  # s before giving up with SQLite's "database is locked", as busy_timeout did


def begin_immediate(conn: sqlite3.Connection, wait: float = LOCK_WAIT) -> None:
    """``BEGIN IMMEDIATE`` on the connection's thread, trying again and again, for up to
    ``wait`` seconds, while another connection holds the write lock."""
    conn.execute(f"PRAGMA busy_timeout={LOCK_POLL_MS}")
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
                if not busy or time.monotonic() > deadline:
                    raise
    finally:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


def _roll_back(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _in_write_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    begin_immediate(conn)
    try:
        result = work(conn)
        conn.execute("COMMIT")
    finally:
        if conn.in_transaction:  # failed in ``work`` or in COMMIT
            conn.execute("ROLLBACK")
    return result


class Database:
    """The connections and the transaction helpers the query mixins build on."""

    def __init__(
        self, writer: aiosqlite.Connection, readers: Sequence[aiosqlite.Connection], path: str
    ) -> None:
        self._conn = writer  # the writer; also reads inside a write transaction
        self._readers = ReaderPool(readers, RESERVED)
        self.users = UsersFirst()  # commands being answered: bulk work waits for them
        self.path = path
        self._in_use: int | None = None  # the shared lock of the file (store/lock.py)
        self._write_lock = asyncio.Lock()
        self.clock: Callable[[], datetime] = utcnow  # the time written into rows
        # Document frequencies read from the index, kept until the store grows by a few
        # percent (a common term's count costs a scan of its whole posting list).
        self._term_documents: dict[str, int] = {}
        self._term_documents_papers = 0
        # the papers of a round and their catalogue tags, read alike by every chat
        self._paper_cache: ReadCache[StoredPaper] = ReadCache()
        self._tag_cache: ReadCache[tuple[Topic, ...]] = ReadCache()
        # 👍 / 👎 taps waiting to be written together, and the task writing them (ratings.py)
        self._taps: list[Any] = []
        self._tap_writer: asyncio.Task[None] | None = None
        # chats seen active, with their type and title, and when (chats.py: ``chat_wrote``)
        self._chats_seen: dict[int, tuple[str, str | None, float]] = {}
        self._chats_forgotten = 0  # times a chat was deactivated or moved (chat_wrote's check)

    def _now(self) -> str:
        return iso(self.clock())

    def papers_written_apart(self) -> None:
        """Another process stored papers (the intake's worker): the read caches forget them."""
        self._paper_cache.clear()

    def cache_marks(self) -> tuple[int, int]:
        """Where the read caches stand: they change whenever a cache is cleared (a write)."""
        return self._paper_cache.generation, self._tag_cache.generation

    def share_caches(self, kept: dict[str, Any], marks: tuple[int, int]) -> None:
        """(A store in another process, reading what the bot's writes.) Read through the
        caches ``kept`` there, cleared first whenever ``marks`` (the bot's store's
        ``cache_marks``) moved since the last call: it wrote what they may hold."""
        papers = kept.setdefault("papers", ReadCache())
        tags = kept.setdefault("tags", ReadCache())
        if kept.get("marks") != marks:
            papers.clear()
            tags.clear()
            kept["marks"] = marks
        self._paper_cache, self._tag_cache = papers, tags

    @contextmanager
    def serving(self) -> Iterator[None]:
        """A user's command is being answered: its reads go ahead of background reads, and
        delivery workers start no new chat until it is done (``users.after_users``)."""
        self.users.enter()
        try:
            with interactive():
                yield
        finally:
            self.users.leave()

    @contextmanager
    def answered(self) -> Iterator[None]:
        """Inside ``serving``, once the user has their answer: what the handler does after it
        (a 👎's refinement check) is background work. Its reads queue behind users' reads,
        and delivery no longer waits for it."""
        if not _INTERACTIVE.get():  # (not serving a user: nothing to step out of)
            yield
            return
        self.users.leave()
        token = _INTERACTIVE.set(False)
        try:
            yield
        finally:
            _INTERACTIVE.reset(token)
            self.users.enter()

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        migrate: bool = True,
        readers: int = READERS,
        clock: Callable[[], datetime] = utcnow,
    ) -> Any:  # Self of the subclass (Store)
        """Open (and by default migrate) the database at ``path``, creating it if needed.
        ``clock`` gives the times written into rows (tests and simulations inject one).
        The file stays marked in use (``store/lock.py``) until ``close()``: no restore replaces
        it meanwhile."""
        in_use = None if str(path) == ":memory:" else await lock.hold_shared(path)
        try:
            writer = await _connect(str(path), cache_kb=WRITER_CACHE_KB)
        except BaseException:
            lock.release(in_use)
            raise
        opened: list[aiosqlite.Connection] = []
        try:
            await writer.execute_fetchall("PRAGMA journal_mode=WAL")
            await writer.execute_fetchall("PRAGMA synchronous=NORMAL")
            store = cls(writer, [], str(path))
            store.clock = clock
            if migrate:
                await store.migrate()
            if store.file_backed():  # an in-memory database has no second connection
                target = read_only_uri(path)
                for _ in range(readers):
                    opened.append(await _connect(target, uri=True, cache_kb=READER_CACHE_KB))
            store._readers = ReaderPool(opened, RESERVED)
        except BaseException:
            # Not a database, or a failed migration: close, or aiosqlite's (non-daemon) worker
            # threads keep the process alive after the error is reported.
            for conn in (writer, *opened):
                await conn.close()
            lock.release(in_use)
            raise
        store._in_use = in_use
        return store

    def file_backed(self) -> bool:
        """Whether other connections and processes can open this database (not ``:memory:``)."""
        return self.path != ":memory:"

    async def close(self) -> None:
        if self._tap_writer is not None:  # the taps taken in are written first
            await asyncio.gather(self._tap_writer, return_exceptions=True)
        for reader in self._readers.connections:
            await reader.close()
        await self._conn.close()
        lock.release(self._in_use)
        self._in_use = None

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ transactions
    @asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction at a time; rolled back on any error."""
        async with self._write_lock:
            committed = False
            try:
                await self._conn._execute(begin_immediate, self._conn._conn)  # (its thread)
                yield self._conn
                await self._conn.execute("COMMIT")
                committed = True
            finally:
                if not committed:
                    # Cancelled or failed anywhere (even while BEGIN waits for the lock, or in
                    # COMMIT): never leave the writer inside a transaction, or every later
                    # write would fail. Queued on the writer's thread, after what runs there.
                    await asyncio.shield(self._conn._execute(_roll_back, self._conn._conn))

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[aiosqlite.Connection]:
        """A read-only connection for a moment: it sees the last committed state."""
        if not self._readers:
            yield self._conn
            return
        loan = await self._readers.borrow(interactive=_INTERACTIVE.get())
        try:
            yield loan.conn
        finally:
            self._readers.give_back(loan)

    async def _trip(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` run on a read-only connection's own thread, in one trip, inside one read
        transaction (its statements see one state). A delivery reads half a dozen things per
        chat: as separate reads that is a hand-off to a thread and back for each, which at a
        hundred thousand chats cost more than the queries (bench/bench_scale.py). ``work``
        runs SQL and builds rows into values; it never touches the event loop."""
        async with self._read() as conn:
            return await conn._execute(_in_read_transaction, conn._conn, work)  # (its thread)

    async def _write_trip(
        self, work: Callable[[sqlite3.Connection], T], *, locked: bool = False
    ) -> T:
        """One write transaction in one trip to the writer's thread (``BEGIN IMMEDIATE``,
        ``work``, ``COMMIT``; rolled back there on any error). Cancelling the caller cannot
        leave it half done: the thread finishes it, committed or rolled back. ``locked``: the
        caller holds the write lock already."""
        if locked:
            return await self._conn._execute(_in_write_transaction, self._conn._conn, work)
        async with self._write_lock:
            return await self._conn._execute(_in_write_transaction, self._conn._conn, work)

    # A read is one trip to the reader's thread (execute and fetch together): while a round
    # keeps other threads busy, every trip back to the event loop waits for the GIL.
    async def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        async with self._read() as conn:
            return list(await conn.execute_fetchall(sql, args))

    async def _row(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Row | None:
        """The first row (callers ask for one row: an aggregate, a key or ``LIMIT 1``)."""
        async with self._read() as conn:
            found = list(await conn.execute_fetchall(sql, args))
            return found[0] if found else None

    async def _value(self, sql: str, args: Sequence[Any] = ()) -> Any:
        row = await self._row(sql, args)
        return None if row is None else row[0]

    # ------------------------------------------------------------------ migrations
    async def applied_migrations(self) -> list[int]:
        await self._conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        async with self._conn.execute("SELECT version FROM schema_migrations ORDER BY 1") as cur:
            return [row["version"] for row in await cur.fetchall()]

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
                f"({migration.version}, '{migration.name}', '{self._now()}');\n"
                "COMMIT;"
            )
            async with self._write_lock:
                try:
                    await self._conn.executescript(script)
                except sqlite3.Error as exc:
                    if self._conn.in_transaction:
                        await self._conn.execute("ROLLBACK")
                    raise MigrationError(f"migration {migration.name} failed: {exc}") from exc
            log.debug("applied migration %s", migration.name)
            applied.append(migration.name)
        if applied:
            first = "created" if len(applied) == len(migrations) else "upgraded"
            log.info("%s the database %s: %d migration(s), now at %s", first, self.path,
                     len(applied), applied[-1])  # fmt: skip
        return applied

    # ------------------------------------------------------------------ upkeep
    async def database_bytes(self) -> int:
        return int(
            await self._value(
                "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
            )
        )

    async def used_bytes(self) -> int:
        """Bytes in pages that hold data (freed pages are reused, never returned to the disk)."""
        return int(
            await self._value(
                "SELECT (page_count - freelist_count) * page_size"
                " FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size()"
            )
        )

    async def checkpoint(self) -> None:
        """Fold the write-ahead log back into the database file and let SQLite refresh its
        query-planner statistics (part of the daily maintenance)."""
        async with self._write_lock:
            # (each statement read to its end: a checkpoint's unread row would stay a
            # statement in progress on the writer, and no later COMMIT could pass it)
            await self._conn.execute_fetchall("PRAGMA optimize")
            await self._conn.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
