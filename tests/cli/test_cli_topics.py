"""The topic commands of the CLI, run as real subprocesses on a corpus of papers.

The corpus is a generated one (``topicpulse.synthetic``: a listing over the real listing's 8
weeks and 11 Atom pages shaped like the recorded API responses) and, when ../shared has it, the
real one. ``python -m topicpulse import`` stores the listing (and, in a second database, the API
pages) once per corpus; the read-only commands then run concurrently (each a separate process
on a WAL database) and the tests check their JSON shapes and that their figures agree:
momentum's 4-week counts are what preview lists for the same windows, a query's momentum total
is what search counts, and so on.

Every command that resolves topics loads the catalogue
(``src/topicpulse/topics/catalogue.toml``), so those checks are skipped while that file does not
exist; ``import`` and ``search`` never are.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import LISTINGS, ROOT, SAMPLES, requires_real_data
from topicpulse.sources.ingest import read_papers_file
from topicpulse.store import Store
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import UnknownTopic, load_catalogue, resolve_topic, sync_catalogue

CATALOGUE_FILE = ROOT / "src" / "topicpulse" / "topics" / "catalogue.toml"
HAS_CATALOGUE = CATALOGUE_FILE.exists()
needs_catalogue = pytest.mark.skipif(not HAS_CATALOGUE, reason="catalogue.toml not written yet")

RL = "RL for Language Models"
QUERY = '(grpo OR rlhf OR "reinforcement learning") AND (llm OR "language model")'
AS_OF = "2026-05-22"  # the corpus's last day: as of its end, 2026-05-23T00:00Z
PREV_AS_OF = "2026-04-24"  # 28 days earlier: the four weeks before
MOMENTUM_KEYS = ["topic", "query", "as_of", "last_4w", "prev_4w", "change_pct", "share_pct",
                 "total", "weekly"]  # fmt: skip
PAPER_KEYS = ["arxiv_id", "title", "published", "url", "categories"]
BAD_QUERY = "grpo AND xx:foo"


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, f"{self.args}: exit {self.code}\n{self.stderr}"
        return json.loads(self.stdout)

    def last_error_line(self) -> str:
        return self.stderr.strip().splitlines()[-1]


def _env(db: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("TOPICPULSE_") or k == "TELEGRAM_BOT_TOKEN")
    }
    env["TOPICPULSE_DB"] = str(db)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


Command = tuple[Path, list[str]]  # (database, arguments)


def _run_all(cwd: Path, commands: dict[str, Command]) -> dict[str, Run]:
    """Run the CLI once per command, all at the same time; wait for every one."""
    started = {
        name: (
            tuple(args),
            subprocess.Popen(
                [sys.executable, "-m", "topicpulse", *args],
                cwd=cwd,
                env=_env(db),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        )
        for name, (db, args) in commands.items()
    }
    runs = {}
    for name, (args, process) in started.items():
        out, err = process.communicate(timeout=300)
        runs[name] = Run(args, process.returncode, out, err)
    return runs


@dataclass(frozen=True)
class Corpus:
    """What the commands run on: a listing and API pages, generated or real."""

    real: bool
    listing: Path
    samples: list[Path]
    papers: int  # in the listing
    min_search: int  # QUERY finds more papers than this in the listing


@pytest.fixture(
    scope="module", params=["synthetic", pytest.param("real", marks=requires_real_data)]
)
def corpus(
    request: pytest.FixtureRequest, synthetic_listing_file: Path, synthetic_samples: list[Path]
) -> Corpus:
    if request.param == "real":
        return Corpus(True, LISTINGS, sorted(SAMPLES.glob("*.xml")), 5861, 300)
    with synthetic_listing_file.open(encoding="utf-8") as handle:
        papers = sum(1 for line in handle if line.strip())
    return Corpus(False, synthetic_listing_file, synthetic_samples, papers, papers // 20)


def _catalogue_commands(listings: Path, samples: Path) -> dict[str, Command]:
    window = ["--days", "28", "--json"]
    return {
        "topics": (listings, ["topics", "--json"]),
        "momentum_topic": (listings, ["momentum", "--topic", RL, "--as-of", AS_OF, "--json"]),
        "preview_topic": (listings, ["preview", "--topic", RL, "--as-of", AS_OF, *window]),
        "preview_topic_prev": (
            listings,
            ["preview", "--topic", RL, "--as-of", PREV_AS_OF, *window],
        ),
        "momentum_query": (
            listings,
            ["momentum", QUERY, "--as-of", AS_OF, "--json", "--chart", "q.png"],
        ),
        "trending": (listings, ["trending", "--as-of", AS_OF, "--json"]),
        "unknown": (listings, ["momentum", "--topic", "RL for Languag Models", "--as-of", AS_OF]),
        "samples_topic": (samples, ["momentum", "--topic", RL, "--json"]),
        "samples_query": (samples, ["momentum", "testing", "--json", "--as-of", "2026-04-12"]),
    }


@pytest.fixture(scope="module")
def cli(corpus: Corpus, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Run]]:
    """All the runs, in two waves: the imports (and a command that needs no data), then every
    read command at once. Each topic command loads the catalogue in its own write transactions
    (BEGIN IMMEDIATE), so concurrent first loads queue up instead of clashing."""
    cwd = tmp_path_factory.mktemp("cli")
    listings, samples = cwd / "listings.db", cwd / "samples.db"
    runs = _run_all(
        cwd,
        {
            "import": (listings, ["import", str(corpus.listing)]),
            "samples_import": (samples, ["import", *map(str, corpus.samples)]),
            "bad_search": (cwd / "unused.db", ["search", BAD_QUERY, "--json"]),
        },
    )
    commands = {"search": (listings, ["search", QUERY, "--json", "--limit", "5"])}
    if HAS_CATALOGUE:
        commands.update(_catalogue_commands(listings, samples))
    runs.update(_run_all(cwd, commands))
    return cwd, runs


def _check_momentum(data: Any, *, topic: str | None, query: str, as_of: str) -> None:
    assert list(data) == MOMENTUM_KEYS
    assert (data["topic"], data["query"], data["as_of"]) == (topic, query, as_of)
    for key in ("last_4w", "prev_4w", "total"):
        assert isinstance(data[key], int) and data[key] >= 0
    assert data["change_pct"] is None or isinstance(data["change_pct"], float | int)
    assert isinstance(data["share_pct"], float | int) and 0 <= data["share_pct"] <= 100
    assert [list(w) for w in data["weekly"]] == [["week_start", "count"]] * 12
    starts = [date.fromisoformat(w["week_start"]) for w in data["weekly"]]
    assert all(d.weekday() == 0 for d in starts)
    assert [b - a for a, b in itertools.pairwise(starts)] == [timedelta(days=7)] * 11
    assert all(isinstance(w["count"], int) and w["count"] >= 0 for w in data["weekly"])
    assert sum(w["count"] for w in data["weekly"]) <= data["total"]


def _check_papers(data: Any, *, query: str) -> None:
    assert list(data) == ["query", "count", "papers"]
    assert data["query"] == query
    for paper in data["papers"]:
        assert list(paper) == PAPER_KEYS
        assert paper["url"] == f"https://arxiv.org/abs/{paper['arxiv_id']}"
        assert isinstance(paper["categories"], list) and paper["categories"]
        assert paper["published"].endswith("Z")


def _check_png(path: Path) -> None:
    png = path.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(png[16:20], "big") == 960
    assert int.from_bytes(png[20:24], "big") == 540


# ---------------------------------------------------------------------------- import and search
def test_import_reports_the_listings(cli: tuple[Path, dict[str, Run]], corpus: Corpus) -> None:
    _, runs = cli
    assert runs["import"].code == 0, runs["import"].stderr
    assert runs["import"].stdout == f"import: {corpus.papers} new, 0 updated from 1 file(s)\n"
    assert corpus.papers == 5861 or not corpus.real


def test_search_json_shape(cli: tuple[Path, dict[str, Run]], corpus: Corpus) -> None:
    _, runs = cli
    data = runs["search"].json()
    _check_papers(data, query=QUERY)
    assert data["count"] > corpus.min_search
    assert len(data["papers"]) == 5  # --limit 5, best matches first
    assert len({p["arxiv_id"] for p in data["papers"]}) == 5


def test_search_rejects_a_malformed_query(cli: tuple[Path, dict[str, Run]]) -> None:
    _, runs = cli
    run = runs["bad_search"]
    with pytest.raises(ql.QueryError) as caught:
        ql.parse(BAD_QUERY)
    assert run.code == 1
    assert run.stdout == ""
    assert run.last_error_line() == f"topicpulse: bad query: {caught.value}"


# ---------------------------------------------------------------------------- topic commands
@needs_catalogue
def test_momentum_of_a_topic_agrees_with_preview(
    cli: tuple[Path, dict[str, Run]], corpus: Corpus
) -> None:
    _, runs = cli
    data = runs["momentum_topic"].json()
    (topic,) = [t for t in runs["topics"].json() if t["name"] == RL]
    _check_momentum(data, topic=RL, query=topic["query"], as_of="2026-05-23T00:00:00Z")
    assert data["weekly"][-1]["week_start"] == "2026-05-18"
    last, prev = runs["preview_topic"].json(), runs["preview_topic_prev"].json()
    for preview in (last, prev):
        _check_papers(preview, query=topic["query"])
        assert preview["count"] == len(preview["papers"])
    assert data["last_4w"] == last["count"] > 0
    assert data["prev_4w"] == prev["count"] > 0
    assert all("2026-04-25" <= p["published"] < "2026-05-23" for p in last["papers"])
    assert all("2026-03-28" <= p["published"] < "2026-04-25" for p in prev["papers"])
    # The last four bars are the Monday weeks from 27 April: the window less 25–26 April (a
    # weekend, on which the real corpus, a Monday-to-Friday listing, has no papers).
    weekend = sum(p["published"] < "2026-04-27" for p in last["papers"])
    assert sum(w["count"] for w in data["weekly"][-4:]) == data["last_4w"] - weekend
    assert weekend == 0 or not corpus.real


@needs_catalogue
def test_momentum_of_a_query_agrees_with_search(cli: tuple[Path, dict[str, Run]]) -> None:
    cwd, runs = cli
    data = runs["momentum_query"].json()
    _check_momentum(data, topic=None, query=QUERY, as_of="2026-05-23T00:00:00Z")
    assert data["last_4w"] > 0
    assert data["total"] == runs["search"].json()["count"]
    assert sum(w["count"] for w in data["weekly"]) == data["total"]  # 12 weeks hold the corpus
    _check_png(cwd / "q.png")


@needs_catalogue
def test_topics_json_lists_the_catalogue(cli: tuple[Path, dict[str, Run]]) -> None:
    _, runs = cli
    topics = runs["topics"].json()
    assert all(list(t) == ["name", "slug", "query"] for t in topics)
    entries = load_catalogue()
    assert sorted((t["name"], t["slug"], t["query"]) for t in topics) == sorted(
        (e.name, e.slug, e.query) for e in entries
    )
    names = [t["name"] for t in topics]
    assert names == sorted(names, key=str.lower)
    assert RL in names


@needs_catalogue
def test_trending_json(cli: tuple[Path, dict[str, Run]]) -> None:
    _, runs = cli
    ranked = runs["trending"].json()
    assert 0 < len(ranked) <= 10
    for item in ranked:
        _check_momentum(
            item, topic=item["topic"], query=item["query"], as_of="2026-05-23T00:00:00Z"
        )
        assert item["last_4w"] >= 5
    keys = [float("inf") if m["change_pct"] is None else m["change_pct"] for m in ranked]
    assert keys == sorted(keys, reverse=True)


@needs_catalogue
def test_unknown_topic_suggests_names(cli: tuple[Path, dict[str, Run]], tmp_path: Path) -> None:
    _, runs = cli

    async def expected() -> str:
        store = await Store.open(tmp_path / "names.db")
        try:
            await sync_catalogue(store)
            with pytest.raises(UnknownTopic) as caught:
                await resolve_topic(store, "RL for Languag Models")
            return str(caught.value)
        finally:
            await store.close()

    message = asyncio.run(expected())
    run = runs["unknown"]
    assert run.code == 1
    assert run.stdout == ""
    assert "Did you mean" in message and RL in message
    assert run.last_error_line() == f"topicpulse: {message}"


# ---------------------------------------------------------------------------- the API samples
@needs_catalogue
def test_momentum_on_the_api_samples(cli: tuple[Path, dict[str, Run]], corpus: Corpus) -> None:
    cwd, runs = cli
    unique = {p.arxiv_id for f in corpus.samples for p in read_papers_file(f)}
    assert runs["samples_import"].code == 0, runs["samples_import"].stderr
    assert runs["samples_import"].stdout.startswith(f"import: {len(unique)} new, ")
    topic = runs["samples_topic"].json()
    _check_momentum(topic, topic=RL, query=topic["query"], as_of=topic["as_of"])
    query = runs["samples_query"].json()
    _check_momentum(query, topic=None, query="testing", as_of="2026-04-13T00:00:00Z")

    async def counts() -> tuple[int, int]:
        store = await Store.open(cwd / "samples.db")
        try:
            (rl,) = [t for t in await store.topics(kind="catalogue") if t.name == RL]
            return (
                await store.count_matches(topic_id=rl.id),
                await store.count_matches(fts=ql.compile_query("testing")),
            )
        finally:
            await store.close()

    assert (topic["total"], query["total"]) == asyncio.run(counts())
    assert query["total"] > 0
