"""The ``topicpulse`` command line, run as a real subprocess (``python -m topicpulse``) with its
database in the test's folder: help, import of API pages and listings (generated ones, and the
real ones of ../shared when present), stats, poll and backfill against the fake arXiv API, and
one-line errors with non-zero exit codes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cli_process import acli, cli, one_line
from conftest import LISTINGS, SAMPLES, requires_samples
from fake_arxiv import FakeArxiv, make_paper, server_error, unavailable
from topicpulse.sources.arxiv import parse_feed
from topicpulse.sources.ingest import import_files, read_papers_file
from topicpulse.store import Store

COMMANDS = ("run", "migrate", "poll", "backfill", "import", "stats")


def stored_ids(tmp_path: Path) -> dict[str, int]:
    """arxiv_id → version of every stored paper."""
    with sqlite3.connect(tmp_path / "cli.db") as db:
        return dict(db.execute("SELECT arxiv_id, version FROM papers").fetchall())


# ---------------------------------------------------------------------------------- help
def test_help_lists_the_commands(tmp_path: Path) -> None:
    result = cli(tmp_path, "--help")
    assert result.returncode == 0 and result.stderr == ""
    for command in COMMANDS:
        assert f"    {command} " in result.stdout, command
    assert not (tmp_path / "cli.db").exists()


# ---------------------------------------------------------------------------------- import
def _category_lines(primaries: Counter[str]) -> str:
    """The ``by primary category`` block of ``stats`` (most papers first, then by name)."""
    ranked = sorted(primaries.items(), key=lambda item: (-item[1], item[0]))[:20]
    return "by primary category:\n" + "".join(f"  {c:<12} {n}\n" for c, n in ranked)


@pytest.mark.parametrize("source", ["synthetic", pytest.param("real", marks=requires_samples)])
def test_import_api_pages_then_stats(
    tmp_path: Path, synthetic_samples: list[Path], source: str
) -> None:
    files = sorted(SAMPLES.glob("*.xml")) if source == "real" else synthetic_samples
    papers = {p.arxiv_id: p for path in files for p in parse_feed(path.read_bytes()).papers}
    expected = {arxiv_id: p.version for arxiv_id, p in papers.items()}
    assert len(expected) == 100  # 215 entries in 11 files, 100 distinct papers

    first = cli(tmp_path, "import", *files)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "import: 100 new, 0 updated from 11 file(s)"
    assert stored_ids(tmp_path) == expected

    stats = cli(tmp_path, "stats")
    assert stats.returncode == 0, stats.stderr
    days = sorted(p.published[:10] for p in papers.values())
    assert f"papers:    100 (published {days[0]} … {days[-1]})" in stats.stdout
    assert "last poll: never" in stats.stdout
    primaries = Counter(p.primary_category for p in papers.values())
    assert _category_lines(primaries) in stats.stdout
    if source == "real":
        assert "papers:    100 (published 2001-03-17 … 2026-04-03)" in stats.stdout
        assert "by primary category:\n  cs.SE        64\n" in stats.stdout

    again = cli(tmp_path, "import", *files)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "import: 0 new, 0 updated from 11 file(s)"
    assert stored_ids(tmp_path) == expected
    with sqlite3.connect(tmp_path / "cli.db") as db:
        runs = db.execute("SELECT kind, new, ok FROM ingest_runs ORDER BY id").fetchall()
    assert runs == [("import", 100, 1), ("import", 0, 1)]


def test_import_a_listing(tmp_path: Path, listing_file: Path) -> None:
    with listing_file.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    result = cli(tmp_path, "import", listing_file)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"import: {len(rows)} new, 0 updated from 1 file(s)"
    with sqlite3.connect(tmp_path / "cli.db") as db:
        count, first, last = db.execute(
            "SELECT count(*), min(published), max(published) FROM papers"
        ).fetchone()
        primaries = dict(db.execute("SELECT primary_category, count(*) FROM papers GROUP BY 1"))
    days = sorted(row["date"] for row in rows)
    assert (count, first, last) == (len(rows), f"{days[0]}T00:00:00Z", f"{days[-1]}T00:00:00Z")
    assert primaries == Counter(row["categories"][0] for row in rows)
    if listing_file == LISTINGS:  # as SOURCES.md counts them
        assert (count, first, last) == (5861, "2026-03-30T00:00:00Z", "2026-05-22T00:00:00Z")
        assert primaries == {"cs.CL": 3079, "cs.AI": 2782}


def test_import_of_a_missing_file_fails_in_one_line(
    tmp_path: Path, synthetic_samples: list[Path]
) -> None:
    result = cli(tmp_path, "import", synthetic_samples[0], "missing.xml")
    assert result.returncode == 1
    assert one_line(result.stderr) == "topicpulse: cannot read missing.xml: no such file"
    assert result.stdout == "" and not (tmp_path / "cli.db").exists()


async def test_import_of_a_broken_file_stores_nothing(
    store: Store, tmp_path: Path, synthetic_samples: list[Path]
) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_bytes(synthetic_samples[0].read_bytes()[:5000])
    with pytest.raises(ValueError, match=r"broken\.xml: malformed arXiv response"):
        await import_files(store, [synthetic_samples[1], broken])
    assert await store.count_papers() == 0
    assert await store.last_run() is None


# ---------------------------------------------------------------------------------- errors
def test_run_without_a_token_fails_in_one_line(tmp_path: Path) -> None:
    result = cli(tmp_path, "run")
    assert result.returncode != 0
    assert "TELEGRAM_BOT_TOKEN" in one_line(result.stderr)


def test_run_with_the_bot_api_unreachable_fails_with_a_reason(tmp_path: Path) -> None:
    token = "123456:TEST-token-not-real"
    result = cli(tmp_path, "run", TELEGRAM_BOT_TOKEN=token,
                 TOPICPULSE_TELEGRAM_API_URL="http://127.0.0.1:9/bot")  # fmt: skip
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("topicpulse: cannot reach the Bot API at http://127.0.0.1:9/bot")
    assert token not in result.stderr + result.stdout


def test_bad_configuration_names_the_variable(tmp_path: Path) -> None:
    result = cli(tmp_path, "stats", TOPICPULSE_POLL_SECONDS="abc")
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith("topicpulse: invalid TOPICPULSE_POLL_SECONDS: ")
    assert not (tmp_path / "cli.db").exists()


def test_bad_database_paths_fail_in_one_line(tmp_path: Path) -> None:
    missing = cli(tmp_path, "stats", TOPICPULSE_DB=str(tmp_path / "no" / "such.db"))
    assert missing.returncode == 1
    assert "folder" in one_line(missing.stderr) and "no/such.db" in missing.stderr

    (tmp_path / "text.db").write_text("this is not an SQLite database " * 10)
    not_db = cli(tmp_path, "stats", TOPICPULSE_DB=str(tmp_path / "text.db"))
    assert not_db.returncode == 1
    assert one_line(not_db.stderr).endswith("file is not a database")


# ---------------------------------------------------------------------------------- arXiv
async def test_poll_and_backfill_against_the_fake_arxiv(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    recent = [make_paper(f"2605.{i:05d}", now - timedelta(hours=3 + 5 * i)) for i in range(23)]
    yesterday = (now - timedelta(days=1)).date()
    nine_am = datetime(*yesterday.timetuple()[:3], 9, tzinfo=UTC)
    old = [  # one a day, 9 to 20 days ago: before the first intake's 7 days, in a 3-week history
        make_paper(
            f"2604.{i:05d}", nine_am - timedelta(days=8 + i), categories=("stat.ML", "cs.LG")
        )
        for i in range(12)
    ]
    outside = make_paper("2605.99999", now - timedelta(hours=1), categories=("math.AG",))
    async with FakeArxiv([*recent, *old, outside]) as fake:
        fake.oai.page_size = 10
        env = {
            "TOPICPULSE_ARXIV_API_URL": fake.url,
            "TOPICPULSE_ARXIV_OAI_URL": fake.oai_url,
            "TOPICPULSE_ARXIV_DELAY_SECONDS": "0",
            "TOPICPULSE_CATEGORIES": "cs.CL,cs.LG",
            "TOPICPULSE_CONTACT": "ops@lab.example",
        }
        code, out, err = await acli(tmp_path, "poll", **env)
        assert code == 0, err
        # OAI-PMH's cs set from 7 days ago, pages of 10: the 23 recent papers (math.AG is not
        # in the set; the old papers changed before the first intake's reach)
        assert out.strip().startswith("poll: 23 new, 0 updated, 3 request(s), ")
        assert set(stored_ids(tmp_path)) == {p.arxiv_id for p in recent}
        assert [r.params.get("set") for r in fake.requests[:1]] == ["cs"]
        assert all("contact: ops@lab.example" in r.user_agent for r in fake.requests)

        fake.reset_requests()
        code, out, err = await acli(tmp_path, "backfill", "--weeks", "3", **env)
        assert code == 0, err
        # every record of the cs set changed in 3 weeks: 35, in 4 pages of 10
        assert out.strip() == "backfill: 12 new, 0 updated, 4 request(s)"
        assert set(stored_ids(tmp_path)) == {p.arxiv_id for p in recent + old}
        code, out, err = await acli(tmp_path, "backfill", "--weeks", "3", **env)
        assert out.strip() == "backfill: 0 new, 0 updated, 0 request(s)"  # complete already

    with sqlite3.connect(tmp_path / "cli.db") as db:
        runs = db.execute(
            "SELECT kind, requests, new, updated, errors, ok FROM ingest_runs ORDER BY id"
        ).fetchall()
    assert runs == [("poll", 3, 23, 0, 0, 1), ("backfill", 4, 12, 0, 0, 1)]


async def test_poll_failure_exits_non_zero(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    async with FakeArxiv([make_paper("2605.00001", now - timedelta(hours=2))]) as fake:
        fake.script(unavailable(retry_after="0"), server_error(500))
        code, out, err = await acli(
            tmp_path, "poll",
            TOPICPULSE_ARXIV_API_URL=fake.url,
            TOPICPULSE_ARXIV_OAI_URL=fake.oai_url, TOPICPULSE_ARXIV_DELAY_SECONDS="0",
            TOPICPULSE_ARXIV_RETRIES="1",
        )  # fmt: skip
    assert code == 1 and out == ""
    assert err.strip().splitlines()[-1].startswith("topicpulse: poll failed: arXiv unavailable")
    assert "poll round stopped" in err
    assert stored_ids(tmp_path) == {}
    assert len(fake.requests) == 2


@pytest.mark.parametrize("suffix", [".xml", ".jsonl"])
def test_read_papers_file_names_the_file_on_errors(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"bad{suffix}"
    path.write_text("not what it should be\n")
    with pytest.raises(ValueError, match=f"bad\\{suffix}: "):
        read_papers_file(path)


def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`topicpulse topics | head`: the reader leaves early; no BrokenPipeError traceback."""
    env = {**os.environ, "TOPICPULSE_DB": str(tmp_path / "pipe.db")}
    producer = subprocess.Popen(
        [sys.executable, "-m", "topicpulse", "topics"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert producer.stdout is not None
    producer.stdout.close()  # the reader hangs up before anything is written
    _, err = producer.communicate(timeout=60)
    assert b"Traceback" not in err and b"BrokenPipe" not in err
    assert producer.returncode == 0
