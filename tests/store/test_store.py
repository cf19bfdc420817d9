"""The SQLite store: migrations (idempotent, atomic), connection settings, the upsert rules for
papers and versions, all-or-nothing batches, and the full-text index kept in step."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from pathlib import Path

import pytest

from conftest import Trips
from fake_arxiv import make_paper
from topicpulse.models import Chat, RunStats
from topicpulse.store import (
    IntakeUpdate,
    Migration,
    MigrationError,
    Store,
    load_migrations,
    migrations_dir,
)
from topicpulse.store import chats as store_chats
from topicpulse.topics import catalogue as topics


def schema(path: str | Path) -> list[tuple[str, str]]:
    """Every table, index, trigger and view in the database: (type, name)."""
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY 1, 2"
        ).fetchall()


def applied(path: str | Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT version, name FROM schema_migrations ORDER BY 1").fetchall()


def fts_ids(path: str | Path, match: str) -> list[int]:
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT rowid FROM papers_fts WHERE papers_fts MATCH ? ORDER BY rowid", (match,)
        )
        return [r[0] for r in rows]


# ---------------------------------------------------------------------------------- migrations
async def test_migrations_on_a_fresh_database_then_idempotent(tmp_path: Path) -> None:
    expected = load_migrations()
    assert [m.version for m in expected][:1] == [1]
    assert [m.version for m in expected] == sorted({m.version for m in expected})
    path = tmp_path / "fresh.db"
    async with await Store.open(path, migrate=False) as store:
        first = await store.migrate()
        assert first == [m.name for m in expected] and "0001_papers.sql" in first
        after_first = schema(path)
        assert await store.migrate() == []
        assert await store.applied_migrations() == [m.version for m in expected]
    assert schema(path) == after_first
    assert applied(path) == [(m.version, m.name) for m in expected]
    names = {name for _, name in after_first}
    assert {"papers", "papers_fts", "ingest_runs", "backfill_windows", "schema_migrations"} <= names
    assert {"papers_fts_insert", "papers_fts_update", "papers_fts_delete"} <= names

    async with await Store.open(path) as again:  # opening migrates: nothing left to do
        assert await again.migrate() == []
    assert applied(path) == [(m.version, m.name) for m in expected]


async def test_an_existing_database_keeps_its_shared_links_through_0011(tmp_path: Path) -> None:
    """A deployed bot's follow links made before ``used_at`` existed count as used when made,
    so the upgrade forgets none of them early."""
    path = tmp_path / "deployed.db"
    before = [m for m in load_migrations() if m.version <= 10]
    async with await Store.open(path, migrate=False) as store:
        await store.migrate(before)
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO shared_queries (code, query, created_at) VALUES"
            " ('abcdefghij', 'rl for llms', '2026-11-01T00:00:00Z')"
        )
    async with await Store.open(path) as store:  # opening applies 0011 and later
        assert await store.prune_shared_queries("2026-11-01T00:00:00Z") == 0
        assert await store.prune_shared_queries("2026-11-01T00:00:01Z") == 1


async def test_an_existing_database_moves_to_the_oai_intake_through_0012(tmp_path: Path) -> None:
    """A bot that read the search API: its papers keep their dates (announced = published),
    its backfilled days become the history, and its last good poll the first harvest's day."""
    path = tmp_path / "deployed.db"
    async with await Store.open(path, migrate=False) as store:
        await store.migrate([m for m in load_migrations() if m.version <= 11])
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO backfill_windows VALUES ('cs.CL cs.LG', ?, ?, 10, '2026-11-20T00:00:00Z')",
            [(d, d) for d in ("2026-09-01", "2026-09-02", "2026-11-19")],
        )
        db.execute(
            "INSERT INTO ingest_runs (kind, started_at, finished_at, ok)"
            " VALUES ('poll', '2026-11-30T10:00:00Z', '2026-11-30T10:01:00Z', 1),"
            " ('poll', '2026-12-01T10:00:00Z', '2026-12-01T10:01:00Z', 0)"
        )
        db.execute(
            "INSERT INTO papers (arxiv_id, version, title, abstract, authors, primary_category,"
            " categories, published, updated, stored_at) VALUES ('2611.00001', 1, 'T', 'A',"
            " '[]', 'cs.CL', 'cs.CL', '2026-11-02T10:00:00Z', '2026-11-02T10:00:00Z', 'x')"
        )
    async with await Store.open(path) as store:
        state = await store.intake_state("cs.CL cs.LG")
        assert (state.watermark, state.history_from) == ("2026-11-30", "2026-09-01")
        assert state.pending_from is None
        assert (await store.intake_state("cs.AI")).watermark is None
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT announced FROM papers").fetchone() == ("2026-11-02T10:00:00Z",)


async def test_an_existing_database_gets_forum_threads_through_0013(tmp_path: Path) -> None:
    """A deployed bot's follows (from before forum topics were kept) go on to General; new
    follows keep their topic, and following again from elsewhere moves the alerts there."""
    path = tmp_path / "deployed.db"
    before = [m for m in load_migrations() if m.version < 13]
    async with await Store.open(path, migrate=False) as store:
        await store.migrate(before)
        old = await topics.custom_topic(store, "grpo")
        new = await topics.custom_topic(store, "dpo")
    with sqlite3.connect(path) as db:  # (as the code of then wrote them)
        db.execute(
            "INSERT INTO chats (chat_id, type, created_at, updated_at)"
            " VALUES (-1000000000001, 'supergroup', '2026-11-01T00:00:00Z', '2026-11-01T00:00:00Z')"
        )
        db.execute(
            "INSERT INTO subscriptions (chat_id, topic_id, after_paper_id, created_at)"
            " VALUES (-1000000000001, ?, 0, '2026-11-01T00:00:00Z')",
            (old.id,),
        )
    async with await Store.open(path) as store:  # opening applies 0013
        assert 13 in await store.applied_migrations()
        chat = await store.chat(-1_000_000_000_001)
        assert chat is not None and chat.topic_closed_at is None
        assert await store.subscription_threads(-1_000_000_000_001) == {old.id: None}
        assert await store.subscribe(-1_000_000_000_001, new.id, thread_id=7)
        assert not await store.subscribe(-1_000_000_000_001, old.id, thread_id=9)  # moved
        threads = await store.subscription_threads(-1_000_000_000_001)
        assert threads == {old.id: 9, new.id: 7}
        assert await store.mark_topic_closed(-1_000_000_000_001)
        assert not await store.mark_topic_closed(-1_000_000_000_001)  # told once
        await store.clear_topic_closed(-1_000_000_000_001)
        assert await store.mark_topic_closed(-1_000_000_000_001)


async def test_a_broken_migration_leaves_the_database_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    good = Migration(1, "0001_good.sql", "CREATE TABLE good (x INTEGER);")
    broken = Migration(
        2,
        "0002_broken.sql",
        "CREATE TABLE half_done (y INTEGER);\n"
        "INSERT INTO good VALUES (1);\n"
        "INSERT INTO no_such_table VALUES (1);\n"
        "CREATE TABLE never (z INTEGER);",
    )
    async with await Store.open(path, migrate=False) as store:
        with pytest.raises(MigrationError, match=r"0002_broken\.sql") as failure:
            await store.migrate([good, broken])
        assert "no_such_table" in str(failure.value)
        assert await store.applied_migrations() == [1]
        # The connection is usable afterwards (no transaction left open)...
        assert await store.migrate([good]) == []
        # ...and a fixed migration applies.
        fixed = dataclasses.replace(broken, sql="CREATE TABLE half_done (y INTEGER);")
        before_fix = schema(path)
        assert ("table", "half_done") not in before_fix and ("table", "never") not in before_fix
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT count(*) FROM good").fetchone() == (0,)
        assert await store.migrate([good, fixed]) == ["0002_broken.sql"]
    assert ("table", "half_done") in schema(path)
    assert applied(path) == [(1, "0001_good.sql"), (2, "0002_broken.sql")]


async def test_syntax_error_in_a_migration_after_the_real_ones(tmp_path: Path) -> None:
    path = tmp_path / "syntax.db"
    real = load_migrations()
    bad = Migration(
        real[-1].version + 1, "9999_bad.sql", "CREATE TABLE ok_part (a);\nCREATE TABL x;"
    )
    async with await Store.open(path, migrate=False) as store:
        with pytest.raises(MigrationError, match=r"9999_bad\.sql"):
            await store.migrate([*real, bad])
    # The real migrations (each its own transaction) stay applied; the bad one left nothing.
    assert applied(path) == [(m.version, m.name) for m in real]
    assert ("table", "ok_part") not in schema(path)


def test_migration_files_are_validated(tmp_path: Path) -> None:
    assert sorted(p.name for p in migrations_dir().glob("*.sql"))[0] == "0001_papers.sql"
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "0001_b.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="share a number"):
        load_migrations(tmp_path)
    (tmp_path / "0001_b.sql").unlink()
    (tmp_path / "add-column.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match=r"NNNN_description\.sql"):
        load_migrations(tmp_path)


async def test_connection_uses_wal_and_foreign_keys(store: Store) -> None:
    conn = store._conn
    async with conn.execute("PRAGMA journal_mode") as cur:
        assert tuple(await cur.fetchone()) == ("wal",)  # type: ignore[arg-type]
    async with conn.execute("PRAGMA foreign_keys") as cur:
        assert tuple(await cur.fetchone()) == (1,)  # type: ignore[arg-type]
    await store.upsert_papers([make_paper("2605.00001", "2026-05-01T00:00:00Z")])
    assert Path(f"{store.path}-wal").exists()
    with sqlite3.connect(store.path) as db:  # WAL is a property of the file, seen by others too
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


# ---------------------------------------------------------------------------------- upserts
async def test_upsert_new_same_newer_older(store: Store) -> None:
    v1 = make_paper("2605.00001", "2026-05-01T10:00:00Z", title="Sparse attention for parsing")
    other = make_paper("2605.00002", "2026-05-01T11:00:00Z")

    first = await store.upsert_papers([v1, other])
    assert (first.new, first.updated, first.unchanged) == (2, 0, 0)
    row = await store.get_paper("2605.00001")
    assert row is not None and first.new_ids[0] == row.id and first.new_ids == sorted(first.new_ids)

    same = await store.upsert_papers([v1])
    assert (same.new, same.updated, same.unchanged) == (0, 0, 1)

    v2 = dataclasses.replace(
        v1, version=2, title="Dense attention for parsing", updated="2026-05-08T09:00:00Z"
    )
    newer = await store.upsert_papers([v2])
    assert (newer.new, newer.updated, newer.unchanged) == (0, 1, 0)
    after = await store.get_paper("2605.00001")
    assert after is not None
    assert (after.id, after.version, after.title, after.updated) == (
        row.id, 2, "Dense attention for parsing", "2026-05-08T09:00:00Z",
    )  # fmt: skip
    assert after.stored_at == row.stored_at

    older = await store.upsert_papers([v1])
    assert (older.new, older.updated, older.unchanged) == (0, 0, 1)
    kept = await store.get_paper("2605.00001")
    assert kept is not None and (kept.version, kept.title) == (2, "Dense attention for parsing")
    assert await store.count_papers() == 2


async def test_same_version_with_new_metadata_is_an_update(store: Store) -> None:
    paper = make_paper("2605.00005", "2026-05-01T10:00:00Z")
    await store.upsert_papers([paper])
    with_doi = dataclasses.replace(paper, doi="10.1000/xyz", categories=("cs.CL", "cs.AI"))
    result = await store.upsert_papers([with_doi])
    assert (result.new, result.updated) == (0, 1)
    stored = await store.get_paper("2605.00005")
    assert stored is not None and (stored.doi, stored.categories) == (
        "10.1000/xyz", ("cs.CL", "cs.AI"),
    )  # fmt: skip


async def test_duplicate_ids_inside_one_batch(store: Store) -> None:
    v1 = make_paper("2605.00009", "2026-05-01T10:00:00Z", title="First")
    v3 = dataclasses.replace(v1, version=3, title="Third", updated="2026-05-09T00:00:00Z")
    v2 = dataclasses.replace(v1, version=2, title="Second", updated="2026-05-05T00:00:00Z")
    result = await store.upsert_papers([v1, v3, v2, v1])
    assert (result.new, result.updated, len(result.new_ids)) == (1, 0, 1)
    stored = await store.get_paper("2605.00009")
    assert stored is not None and (stored.version, stored.title) == (3, "Third")
    assert await store.count_papers() == 1


async def test_large_batches_and_round_trip_of_every_field(store: Store) -> None:
    papers = [
        make_paper(
            f"2605.{i:05d}",
            f"2026-05-{1 + i % 28:02d}T10:00:00Z",
            categories=("cs.CL", "cs.LG") if i % 2 else ("cs.AI",),
            authors=(f"Author {i}", "Zoë Ñandú"),
            comment=f"{i} pages" if i % 3 else None,
            journal_ref="J. Test 1" if i % 5 == 0 else None,
            doi=f"10.1/{i}" if i % 7 == 0 else None,
        )
        for i in range(1200)  # more than one chunk of ids in every IN (...) query
    ]
    first = await store.upsert_papers(papers)
    assert first.new == 1200 and len(set(first.new_ids)) == 1200
    again = await store.upsert_papers(reversed(papers))
    assert (again.new, again.updated, again.unchanged) == (0, 0, 1200)
    by_id = await store.papers_by_ids(first.new_ids)
    for paper, row in zip(papers, by_id, strict=True):
        assert row.arxiv_id == paper.arxiv_id
        fields = {f.name: getattr(paper, f.name) for f in dataclasses.fields(paper)}
        assert {name: getattr(row, name) for name in fields} == fields


async def test_a_failing_batch_stores_nothing(store: Store) -> None:
    good = make_paper("2605.00001", "2026-05-01T10:00:00Z")
    bad = dataclasses.replace(make_paper("2605.00002", "2026-05-01T10:00:00Z"), version=0)
    progress = IntakeUpdate("cs.CL", {"pending_from": "2026-05-01", "pending_token": "t1"})
    with pytest.raises(sqlite3.IntegrityError):
        await store.upsert_papers([good, bad], intake=progress)
    assert await store.count_papers() == 0
    assert (await store.intake_state("cs.CL")).pending_token is None  # nor the progress
    result = await store.upsert_papers([good], intake=progress)  # the store is still writable
    assert result.new == 1
    assert (await store.intake_state("cs.CL")).pending_token == "t1"


# ---------------------------------------------------------------------------------- FTS
async def test_fts_index_follows_inserts_and_updates(store: Store) -> None:
    v1 = make_paper(
        "2605.00001", "2026-05-01T10:00:00Z", title="Quantum annealing schedules",
        abstract="We study annealers.", authors=("Grace Hopper",),
    )  # fmt: skip
    other = make_paper("2605.00002", "2026-05-01T11:00:00Z", title="Tokenizer drift")
    result = await store.upsert_papers([v1, other])
    paper_id = result.new_ids[0]
    assert fts_ids(store.path, "annealing") == [paper_id]
    assert fts_ids(store.path, "title:tokenizer") == [result.new_ids[1]]
    assert fts_ids(store.path, "hopper") == [paper_id]  # authors are indexed too

    v2 = dataclasses.replace(
        v1, version=2, title="Photonic reservoir computing", updated="2026-05-03T00:00:00Z",
        abstract="We study reservoirs.",
    )  # fmt: skip
    await store.upsert_papers([v2])
    assert fts_ids(store.path, "annealing") == []
    assert fts_ids(store.path, "annealers") == []
    assert fts_ids(store.path, "photonic") == [paper_id]
    assert fts_ids(store.path, "reservoir") == [paper_id]  # porter stemming: reservoirs
    with sqlite3.connect(store.path) as db:  # the index agrees with its content table
        db.execute("INSERT INTO papers_fts (papers_fts, rank) VALUES ('integrity-check', 1)")


# ---------------------------------------------------------------------------------- runs
async def test_run_records(store: Store) -> None:
    assert await store.last_run() is None
    run_id = await store.start_run("poll")
    running = await store.last_run("poll")
    assert running is not None and running["id"] == run_id and running["ok"] is None
    stats = RunStats(kind="poll", requests=3, new=2, updated=1, errors=0, duration_s=1.23456)
    await store.finish_run(run_id, stats)
    done = await store.last_run("poll")
    assert done is not None
    assert (done["requests"], done["new"], done["updated"], done["errors"], done["ok"]) == (
        3, 2, 1, 0, 1,
    )  # fmt: skip
    assert done["duration_s"] == 1.235 and done["finished_at"] >= done["started_at"]
    failed = await store.start_run("backfill")
    await store.finish_run(failed, RunStats(kind="backfill", errors=1, ok=False, message="x"))
    assert (await store.last_run())["id"] == failed  # type: ignore[index]
    assert await store.recent_run_errors("2000-01-01T00:00:00Z") == 1
    with pytest.raises(sqlite3.IntegrityError):
        await store.start_run("nonsense")


# ---------------------------------------------------------------------------------- readers
async def test_reads_do_not_wait_behind_an_open_write_transaction(store: Store) -> None:
    """A command that only reads is answered while a round holds the write transaction, and
    sees the last committed state, never the round half done."""
    await store.upsert_papers([make_paper("2605.00001", "2026-05-01T00:00:00Z")])
    entered, release = asyncio.Event(), asyncio.Event()

    async def long_round() -> None:
        async with store._write() as conn:
            await conn.execute("DELETE FROM papers")  # half done: not yet committed
            entered.set()
            await release.wait()
            raise RuntimeError("the round fails and rolls back")

    task = asyncio.create_task(long_round())
    await entered.wait()
    # the writer is busy; a read on its own connection would block until release
    assert await asyncio.wait_for(store.count_papers(), timeout=30) == 1
    assert (await store.get_paper("2605.00001")) is not None
    assert not task.done()
    release.set()
    with pytest.raises(RuntimeError, match="rolls back"):
        await task
    assert await store.count_papers() == 1


async def test_readers_cannot_write(store: Store) -> None:
    async with store._read() as conn:
        assert conn is not store._conn
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            await conn.execute("DELETE FROM papers")


async def test_ensure_chat_writes_only_when_new_or_changed(store: Store) -> None:
    statements: list[str] = []
    await store._conn.set_trace_callback(statements.append)
    try:
        await store.ensure_chat(7, type="private")
        writes = len(statements)
        assert writes > 0
        for _ in range(3):
            await store.ensure_chat(7, type="private")
        assert len(statements) == writes  # known and unchanged: reads only, no write lock
        changed = await store.ensure_chat(7, type="group", title="Reading group")
        assert (changed.type, changed.title) == ("group", "Reading group")
        assert len(statements) > writes
    finally:
        await store._conn.set_trace_callback(None)


async def test_a_chat_that_wrote_again_is_not_read_again_until_it_changes(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every command and button goes through ``chat_wrote``: a chat seen active moments ago
    is not read again; whatever deactivates or moves it here makes the next one read."""
    await store.chat_wrote(7, type="private", title=None)
    trips = Trips(store)
    for _ in range(3):
        await store.chat_wrote(7, type="private", title=None)
    assert trips.count == 0
    await store.chat_wrote(7, type="group", title="Readers")  # changed: read and written
    assert trips.count == 1
    assert (await store.chat(7)).type == "group"  # type: ignore[union-attr]
    await store.deactivate_chat(7, "blocked")
    await store.chat_wrote(7, type="group", title="Readers")  # reactivated at once
    assert (await store.chat(7)).active  # type: ignore[union-attr]
    assert await store.migrate_chat(7, -1007)
    await store.chat_wrote(-1007, type="supergroup", title="Readers")
    assert (await store.chat(-1007)).type == "supergroup"  # type: ignore[union-attr]
    # another process deactivates it: seen again only after SEEN_FOR
    other = await Store.open(tmp_path / "test.db", migrate=False, readers=0)
    try:
        await other.deactivate_chat(-1007, "blocked")
    finally:
        await other.close()
    await store.chat_wrote(-1007, type="supergroup", title="Readers")
    assert not (await store.chat(-1007)).active  # type: ignore[union-attr]
    monkeypatch.setattr(store_chats, "SEEN_FOR", 0.0)
    await store.chat_wrote(-1007, type="supergroup", title="Readers")
    assert (await store.chat(-1007)).active  # type: ignore[union-attr]


async def test_a_chat_read_active_while_it_is_deactivated_is_not_remembered(
    store: Store,
) -> None:
    """A command's read that began before a deactivation committed must not leave the chat
    remembered as active: the next command reads it again, and reactivates it."""
    await store.ensure_chat(8, type="private")
    read = store.ensure_chat

    async def slow_read(*args: object, **kwargs: object) -> object:
        found = await read(*args, **kwargs)  # type: ignore[arg-type]
        await store.deactivate_chat(8, "blocked")  # commits while the command's read is held
        return found

    store.ensure_chat = slow_read  # type: ignore[method-assign]
    await store.chat_wrote(8, type="private", title=None)
    store.ensure_chat = read  # type: ignore[method-assign]
    assert not (await store.chat(8)).active  # type: ignore[union-attr]
    await store.chat_wrote(8, type="private", title=None)  # read again, not taken as seen
    assert (await store.chat(8)).active  # type: ignore[union-attr]


async def _group_with_settings(store: Store, chat_id: int) -> tuple[Chat, list[str]]:
    """A group following two topics, every setting changed from its default."""
    await store.ensure_chat(chat_id, type="group", title="Readers")
    for word in ("alpha", "beta"):
        topic = await store.custom_topic(name=word, query=word, normalised=word, fts=word)
        assert await store.subscribe(chat_id, topic, label=word.upper())
    await store.update_chat(
        chat_id,
        paused=1,
        mode="weekly",
        digest_time="09:30",
        digest_weekday=4,
        timezone="Europe/Berlin",
        spikes=0,
        next_digest_at="2030-01-04T08:30:00Z",
    )
    group = await store.chat(chat_id)
    assert group is not None
    followed = [s.topic.name for s in await store.subscriptions(chat_id)]
    assert followed == ["ALPHA", "BETA"]  # as the chat spelled them (the labels move too)
    return group, followed


@pytest.mark.parametrize("supergroup_spoke_first", [False, True], ids=["new-id", "known-id"])
async def test_migrating_a_chat_a_second_time_changes_nothing(
    store: Store, supergroup_spoke_first: bool
) -> None:
    """Telegram announces a migration in both chats: the second move (after the first, or at
    the same time) finds the old row gone and does nothing, instead of failing."""
    for old, new in ((-1, -1001), (-2, -1002)):
        group, followed = await _group_with_settings(store, old)
        if supergroup_spoke_first:  # a command in the supergroup before the migration
            await store.ensure_chat(new, type="supergroup", title="Readers")
        if old == -1:  # one after the other
            outcomes = [await store.migrate_chat(old, new), await store.migrate_chat(old, new)]
        else:  # concurrently
            outcomes = await asyncio.gather(*(store.migrate_chat(old, new) for _ in range(2)))
        assert sorted(outcomes) == [False, True]  # moved once
        assert await store.chat(old) is None
        assert await store.subscriptions(old) == []
        moved = await store.chat(new)
        assert moved == dataclasses.replace(group, chat_id=new, type="supergroup")
        assert [s.topic.name for s in await store.subscriptions(new)] == followed
    assert await store.chat_counts() == {"active": 2, "inactive": 0, "subscriptions": 4}
    assert await store.migrate_chat(-1001, -1001) is False  # (a chat never moves onto itself)


async def _hold_shared_readers(store: Store, release: asyncio.Event) -> list[asyncio.Task[None]]:
    """Both shared readers borrowed (a delivery pass, a spike check) until ``release``."""
    held = asyncio.Event()
    holding = 0

    async def hold_a_reader() -> None:
        nonlocal holding
        async with store._read():
            holding += 1
            if holding == 2:
                held.set()
            await release.wait()

    holders = [asyncio.create_task(hold_a_reader()) for _ in range(2)]
    await held.wait()
    return holders


async def test_a_users_read_goes_ahead_of_background_reads(store: Store) -> None:
    """With every shared reader busy (a delivery pass, a spike check), a read made while
    serving a user still runs at once, on the reader kept for users."""
    from topicpulse.store import interactive

    await store.upsert_papers([make_paper("2605.00001", "2026-05-01T00:00:00Z")])
    release = asyncio.Event()
    holders = await _hold_shared_readers(store, release)
    background = asyncio.create_task(store.count_papers())
    await asyncio.sleep(0)
    with interactive():
        assert await asyncio.wait_for(store.count_papers(), timeout=30) == 1
    assert not background.done()  # still waiting for a shared reader
    release.set()
    await asyncio.gather(*holders)
    assert await background == 1


async def test_after_the_answer_a_handlers_reads_are_background_reads(store: Store) -> None:
    """``answered`` inside ``serving`` (a 👎's follow-up after its acknowledgement): its reads
    wait for a shared reader like a delivery's, and the user no longer counts as being served
    (a delivery worker does not wait for it)."""
    await store.upsert_papers([make_paper("2605.00001", "2026-05-01T00:00:00Z")])
    release = asyncio.Event()
    holders = await _hold_shared_readers(store, release)
    with store.serving():
        assert store.users.count == 1
        with store.answered():
            assert store.users.count == 0
            follow_up = asyncio.create_task(store.count_papers())
            await asyncio.sleep(0)
        assert store.users.count == 1
        # a user's read runs at once on the reader kept for users; the follow-up did not
        # take that reader before it, and still waits for a shared one
        assert await asyncio.wait_for(store.count_papers(), timeout=30) == 1
        assert not follow_up.done()
    assert store.users.count == 0
    release.set()
    assert await follow_up == 1
    with store.answered():  # (outside serving: nothing changes)
        assert store.users.count == 0
    assert store.users.count == 0
    await asyncio.gather(*holders)


async def test_affiliations_are_stored_and_arriving_later_update_the_paper(store: Store) -> None:
    paper = make_paper("2605.00011", "2026-05-01T10:00:00Z")
    await store.upsert_papers([paper])
    stored = await store.get_paper("2605.00011")
    assert stored is not None and stored.affiliations == ()
    placed = dataclasses.replace(paper, affiliations=("Lab & Co", "Université Ouest"))
    result = await store.upsert_papers([placed])
    assert (result.new, result.updated) == (0, 1)
    stored = await store.get_paper("2605.00011")
    assert stored is not None and stored.affiliations == ("Lab & Co", "Université Ouest")
