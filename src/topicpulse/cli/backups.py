"""``topicpulse backup FILE`` and ``topicpulse restore FILE``: a consistent copy of the live
database (safe while the bot runs), and a checked copy put back in place (never under a
running bot). The work is the store's (``store/backup.py``); these print what was done."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from topicpulse.cli.common import CommandError
from topicpulse.config import Settings
from topicpulse.store.backup import BackupError, BackupInfo
from topicpulse.store.backup import backup as backup_database
from topicpulse.store.backup import restore as restore_database


def _summary(info: BackupInfo) -> str:
    return (
        f"{info.papers} papers, {info.chats} chats, {info.subscriptions} subscriptions, "
        f"migration {info.migration:04d}, {info.size / 1e6:.1f} MB"
    )


async def cmd_backup(args: argparse.Namespace, settings: Settings) -> int:
    target = Path(args.file)
    try:
        info = await asyncio.to_thread(backup_database, settings.db, target)
    except BackupError as exc:
        raise CommandError(str(exc)) from None
    print(f"backed up {settings.db} to {target}: {_summary(info)}")
    return 0


async def cmd_restore(args: argparse.Namespace, settings: Settings) -> int:
    source = Path(args.file)
    try:
        info = await asyncio.to_thread(restore_database, source, settings.db)
    except BackupError as exc:
        raise CommandError(str(exc)) from None
    kept = settings.db.with_name(f"{settings.db.name}.before-restore")
    print(f"restored {source} to {settings.db}: {_summary(info)}")
    if kept.exists():
        print(f"the database it replaced is kept as {kept}")
    return 0
