"""``topicpulse rank``: a query's papers in the order of a taste learned from the given
ratings alone, with scores and whether an alert would hold each back (the bot's code)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_cli_papers import cli

from bot_harness import paper
from topicpulse.models import Paper
from topicpulse.store import Store

pytestmark = pytest.mark.timeout(120)

NOW = datetime.now(UTC).replace(microsecond=0)
LIKED = "protein folding with diffusion language models"
DISLIKED = "stock trading agents built on language models"


def themed(n: int, theme: str, days_ago: float) -> Paper:
    return paper(
        n,
        f"{theme.capitalize()}, study {n}",
        days_ago=days_ago,
        abstract=f"We study {theme} in depth; {theme} matter. Variant {n}.",
        now=NOW,
    )


@pytest.fixture
async def db(tmp_path: Path) -> Path:
    path = tmp_path / "rank.db"
    papers = [themed(600 + n, LIKED, 20) for n in range(5)]
    papers += [themed(700 + n, DISLIKED, 20) for n in range(6)]  # mostly not wanted
    papers += [themed(650 + n, LIKED, 15) for n in range(4)]  # the topic's weeks, unrated
    trading = paper(
        801,
        "Stock trading agents built on language models",
        days_ago=2,
        abstract="Stock trading agents: language models trading stock, agents trading.",
        now=NOW,
    )
    papers += [trading, themed(802, LIKED, 3), themed(803, DISLIKED, 40)]
    async with await Store.open(path) as store:
        await store.upsert_papers(papers)
    (tmp_path / "liked.txt").write_text(
        "# what I like\n" + "\n".join(f"2611.{600 + n:05d}" for n in range(5)) + "\n"
    )
    (tmp_path / "disliked.txt").write_text(
        "\n".join(f"https://arxiv.org/abs/2611.{700 + n:05d}v1" for n in range(6))
    )
    return path


async def test_rank_orders_by_the_taste_and_tells_what_is_held_back(db: Path) -> None:
    run = await cli(
        db, "rank", "language", "--liked", str(db.parent / "liked.txt"),
        "--disliked", str(db.parent / "disliked.txt"), "--days", "7", "--json",
    )  # fmt: skip
    found = run.json()
    assert set(found) == {"query", "count", "papers"} and found["query"] == "language"
    assert found["count"] == 2  # the window: the last 7 days
    first, second = found["papers"]
    assert set(first) == {"arxiv_id", "title", "published", "score", "held_back"}
    assert (first["arxiv_id"], second["arxiv_id"]) == ("2611.00802", "2611.00801")  # not newest
    assert first["score"] > 0.5 > second["score"]
    assert first["held_back"] is False and second["held_back"] is True, found
    # --since: the window from that day on
    run = await cli(
        db, "rank", "language", "--liked", str(db.parent / "liked.txt"),
        "--disliked", str(db.parent / "disliked.txt"), "--json",
        "--since", (NOW.date().replace(day=1) if NOW.day > 1 else NOW.date()).isoformat(),
    )  # fmt: skip
    assert run.code == 0, run.stderr


async def test_rank_rejects_a_bad_ratings_file_in_one_line(db: Path) -> None:
    bad = db.parent / "bad.txt"
    bad.write_text("2611.00600\nnot-an-id\n")
    run = await cli(
        db, "rank", "language", "--liked", str(bad), "--disliked", str(db.parent / "liked.txt")
    )  # fmt: skip
    assert run.code != 0
    assert "bad.txt:2" in run.stderr and len(run.stderr.strip().splitlines()) == 1
