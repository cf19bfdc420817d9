"""Backups of the database file: a consistent copy of the live store, a checked restore, and
the optional daily snapshots with their rotation.

A backup uses SQLite's online backup API from a connection of its own, in one step: in WAL
mode that step reads one committed state (whatever the writer is doing meanwhile, and without
holding it up), so the copy never holds half a round. The copy is written beside the target
and renamed onto it, so a backup file is complete or absent. A restore checks the file first
(``integrity_check``, a topicpulse schema at a migration level this version knows), refuses
while any process has the database open (``store/lock.py``), keeps the current file as
``<db>.before-restore``, and renames the checked copy into place.

These are blocking calls (a thread, or a command): the bot runs them with ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from topicpulse.store import lock
from topicpulse.store.database import load_migrations

SNAPSHOT = re.compile(r"^topicpulse-(\d{4}-\d{2}-\d{2})\.db$")


class BackupError(RuntimeError):
    """A backup or restore that cannot be done; the message is one line for a human."""


@dataclass(frozen=True, slots=True)
class BackupInfo:
    """What a checked database file holds."""

    path: Path
    migration: int  # the highest migration applied
    papers: int
    chats: int
    subscriptions: int
    size: int


def backup(db: Path, target: Path) -> BackupInfo:
    """Copy the live database ``db`` to ``target`` (replaced if there), consistently."""
    if not db.is_file():
        raise BackupError(f"no database at {db}: nothing to back up")
    if target.resolve() == db.resolve():
        raise BackupError(f"{target} is the database itself: give another file")
    if not target.parent.is_dir():
        raise BackupError(f"cannot write {target}: folder {target.parent} is missing")
    partial = target.with_name(f".{target.name}.partial")
    with _failures(f"cannot back up {db} to {target}"), _removed(partial):
        _copy(db, partial)
        info = inspect(partial)
        os.replace(partial, target)
        _sync(target.parent)
    return _placed(info, target)


def _copy(source: Path, target: Path) -> None:
    """SQLite's online backup of ``source`` into a new file ``target``, in one step (one
    committed state; a writer of ``source`` never waits), as one self-contained file on disk."""
    target.unlink(missing_ok=True)
    given = sqlite3.connect(_read_only(source), uri=True, timeout=30)
    with contextlib.closing(given), contextlib.closing(sqlite3.connect(target)) as copy:
        given.backup(copy)
        copy.execute("PRAGMA journal_mode=DELETE")
    _sync(target)


@contextlib.contextmanager
def _failures(action: str) -> Iterator[None]:
    """SQLite's and the system's errors as one ``BackupError`` line."""
    try:
        yield
    except sqlite3.Error as exc:
        raise BackupError(f"{action}: {exc}") from None
    except OSError as exc:
        raise BackupError(f"{action}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _removed(path: Path) -> Iterator[None]:
    """``path`` (a file being written) is gone afterwards, whatever happened."""
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _placed(info: BackupInfo, path: Path) -> BackupInfo:
    return dataclasses.replace(info, path=path, size=path.stat().st_size)


def inspect(path: Path) -> BackupInfo:
    """Check that ``path`` is a whole topicpulse database this version can open; what it holds."""
    if not path.is_file():
        raise BackupError(f"cannot read {path}: no such file")
    known = {m.version for m in load_migrations()}
    try:
        conn = sqlite3.connect(_read_only(path), uri=True)
    except sqlite3.Error as exc:
        raise BackupError(f"cannot open {path}: {exc}") from None
    try:
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise BackupError(f"{path} is damaged: {problems[0]} (integrity_check)")
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if not {"schema_migrations", "papers", "chats", "subscriptions"} <= tables:
            raise BackupError(f"{path} is not a topicpulse database (no topicpulse tables)")
        applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        unknown = sorted(applied - known)
        if unknown:
            raise BackupError(
                f"{path} was made by a newer topicpulse (migration {unknown[0]:04d} is unknown"
                " here): upgrade topicpulse, then restore"
            )
        level = max(applied, default=0)
        if applied != {v for v in known if v <= level}:
            raise BackupError(f"{path} has gaps in its migrations: not a database topicpulse made")
        counts = [
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("papers", "chats", "subscriptions")
        ]
    except sqlite3.DatabaseError as exc:  # e.g. "file is not a database"
        raise BackupError(f"{path}: {exc}") from None
    finally:
        conn.close()
    return BackupInfo(path, level, *counts, path.stat().st_size)


def restore(source: Path, db: Path) -> BackupInfo:
    """Put the checked copy ``source`` in place of ``db`` (the old file kept beside it)."""
    info = inspect(source)
    if not db.parent.is_dir():
        raise BackupError(f"cannot restore to {db}: folder {db.parent} is missing")
    if db.exists() and source.resolve() == db.resolve():
        raise BackupError(f"{source} is the database itself: nothing to restore")
    incoming = db.with_name(f".{db.name}.restoring")
    try:
        with _failures(f"cannot restore {source} to {db}"), _removed(incoming), lock.exclusive(db):
            _copy(source, incoming)
            if db.exists():
                _set_aside(db)
            os.replace(incoming, db)
            _sync(db.parent)
    except lock.DatabaseInUse as exc:
        raise BackupError(f"cannot restore: {exc}") from None
    return _placed(info, db)


def _set_aside(db: Path) -> None:
    """Keep the database being replaced as ``<db>.before-restore``, its write-ahead log folded
    in where it can be (a damaged file is kept as it is, with its log beside it). ``db`` itself
    stays in place until the new file replaces it in one rename; no log of the old file is
    left beside the new one."""
    with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    kept = db.with_name(f"{db.name}.before-restore")
    for stale in (kept, Path(f"{kept}-wal"), Path(f"{kept}-shm")):
        stale.unlink(missing_ok=True)
    os.link(db, kept)
    for suffix in ("-wal", "-shm"):
        log = Path(f"{db}{suffix}")
        if log.exists():
            os.replace(log, Path(f"{kept}{suffix}"))


def _read_only(path: Path) -> str:
    return f"{path.resolve().as_uri()}?mode=ro"


def snapshot(db: Path, folder: Path, keep: int, today: date) -> Path | None:
    """The daily snapshot: ``folder/topicpulse-YYYY-MM-DD.db`` unless today's exists, then the
    oldest beyond ``keep`` removed. Returns the new file, or None if today had one already."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"topicpulse-{today.isoformat()}.db"
    made = None
    if not target.exists():
        made = backup(db, target).path
    dated = sorted(p for p in folder.iterdir() if SNAPSHOT.match(p.name))
    for old in dated[:-keep]:
        old.unlink(missing_ok=True)
    return made


def _sync(path: Path) -> None:
    """Flush a file (or a folder's entries) to the disk."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
