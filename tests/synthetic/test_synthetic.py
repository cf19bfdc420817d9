"""The synthetic paper generator (``topicpulse.synthetic``): deterministic, shaped like arXiv
(weekday rhythm, growth, ids, versions, cross-lists, optional fields), and readable by the parts
of topicpulse that take real data: the Atom parser and the JSON-lines importer."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pytest

from conftest import LISTINGS, requires_listings
from topicpulse.models import Paper, parse_iso
from topicpulse.sources.arxiv import parse_feed
from topicpulse.sources.ingest import import_files, read_papers_file
from topicpulse.store import Store
from topicpulse.synthetic import (
    WEEKDAY_WEIGHTS,
    daily_counts,
    generate_papers,
    paper_to_jsonl,
    to_atom,
    write_jsonl,
)

MONDAY = date(2026, 3, 2)


@pytest.fixture(scope="module")
def papers() -> list[Paper]:
    """Four weeks at 100 papers a weekday (plus 30 on weekend days)."""
    return generate_papers(start=MONDAY, days=28, per_weekday=100, seed=7)


def _day(paper: Paper) -> date:
    return date.fromisoformat(paper.published[:10])


# ---------------------------------------------------------------------------------- determinism
def test_same_arguments_same_papers() -> None:
    first = generate_papers(400, start=MONDAY, days=14, seed=3)
    assert first == generate_papers(400, start=MONDAY, days=14, seed=3)
    other = generate_papers(400, start=MONDAY, days=14, seed=4)
    assert [p.title for p in other] != [p.title for p in first]


def test_count_gives_exactly_that_many_papers_over_the_range() -> None:
    for count in (0, 1, 7, 1234):
        papers = generate_papers(count, start=MONDAY, days=30, seed=1)
        assert len(papers) == count
        assert all(MONDAY <= _day(p) < MONDAY + timedelta(days=30) for p in papers)
    spread = {_day(p) for p in generate_papers(1234, start=MONDAY, days=30, seed=1)}
    assert len(spread) == 30  # every day of the range gets some
    assert generate_papers(start=MONDAY, days=0) == []


def test_papers_are_sorted_by_published(papers: list[Paper]) -> None:
    stamps = [p.published for p in papers]
    assert stamps == sorted(stamps)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s) for s in stamps)


# ---------------------------------------------------------------------------------- volume
def test_weekday_rhythm(papers: list[Paper]) -> None:
    per_day = Counter(_day(p) for p in papers)
    expected = daily_counts(start=MONDAY, days=28, per_weekday=100)
    assert [per_day[MONDAY + timedelta(days=d)] for d in range(28)] == expected
    assert expected[:7] == [120, 115, 100, 95, 90, 30, 30]
    by_weekday = Counter()
    for day, n in per_day.items():
        by_weekday[day.weekday()] += n
    monday, tuesday, *middle, saturday, sunday = (by_weekday[d] for d in range(7))
    assert monday > tuesday > max(middle) and min(middle) > 2 * max(saturday, sunday)
    assert len(papers) == round(100 * sum(WEEKDAY_WEIGHTS) * 4)


def test_growth_compounds_weekly() -> None:
    counts = daily_counts(start=MONDAY, days=70, per_weekday=200, growth=0.1)
    weeks = [sum(counts[w * 7 : w * 7 + 7]) for w in range(10)]
    for before, after in itertools.pairwise(weeks):
        assert after / before == pytest.approx(1.1, abs=0.01)
    grown = generate_papers(start=MONDAY, days=70, per_weekday=200, growth=0.1, seed=2)
    assert len(grown) == sum(counts)


def test_count_keeps_the_rhythm() -> None:
    counts = daily_counts(580, start=MONDAY, days=7, per_weekday=1)
    assert sum(counts) == 580 and counts == [120, 115, 100, 95, 90, 30, 30]


# ---------------------------------------------------------------------------------- ids
def test_ids_are_unique_and_match_the_published_month(papers: list[Paper]) -> None:
    assert len({p.arxiv_id for p in papers}) == len(papers)
    for paper in papers:
        assert re.fullmatch(r"\d{4}\.\d{5}", paper.arxiv_id), paper.arxiv_id
        assert paper.arxiv_id[:4] == paper.published[2:4] + paper.published[5:7]
    for _, group in itertools.groupby(papers, key=lambda p: p.arxiv_id[:4]):
        numbers = [int(p.arxiv_id[5:]) for p in group]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)


def test_ids_before_2015_have_four_digits_and_months_must_fit() -> None:
    old = generate_papers(300, start=date(2012, 3, 1), days=10, seed=1)
    assert all(re.fullmatch(r"1203\.\d{4}", p.arxiv_id) for p in old)
    with pytest.raises(ValueError, match="do not fit"):
        generate_papers(10_000, start=date(2012, 3, 1), days=10)
    with pytest.raises(ValueError, match="April 2007"):
        generate_papers(1, start=date(2007, 3, 1), days=1)


# ---------------------------------------------------------------------------------- fields
def test_versions_have_a_later_updated_inside_the_range(papers: list[Paper]) -> None:
    versions = Counter(p.version for p in papers)
    assert versions[1] > versions[2] > versions[3] > 0
    end = f"{MONDAY + timedelta(days=28)}T00:00:00Z"
    for paper in papers:
        if paper.version == 1:
            assert paper.updated == paper.published
        else:
            assert paper.published < paper.updated < end


def test_categories_authors_and_optional_fields(papers: list[Paper]) -> None:
    crossed = [p for p in papers if len(p.categories) > 1]
    assert 0.4 < len(crossed) / len(papers) < 0.8
    every = Counter(c for p in papers for c in p.categories)
    for category in ("cs.CL", "cs.AI", "cs.LG", "cs.CV", "stat.ML", "cs.IR", "eess.AS", "cs.RO"):
        assert every[category] > 0, category
    for paper in papers:
        assert paper.categories[0] == paper.primary_category
        assert len(set(paper.categories)) == len(paper.categories) <= 4
        assert 2 <= len(paper.authors) <= 8 and len(set(paper.authors)) == len(paper.authors)
    for field in ("comment", "journal_ref", "doi"):
        present = sum(getattr(p, field) is not None for p in papers)
        assert 0 < present < len(papers), field


def test_titles_and_abstracts_read_like_papers(papers: list[Paper]) -> None:
    for paper in papers:
        words = paper.abstract.split()
        assert 80 <= len(words) <= 250, paper.abstract
        assert " ".join(words) == paper.abstract  # single spaces, no line breaks
        assert paper.abstract.count(". ") >= 3  # four sentences or more
        assert paper.title and " ".join(paper.title.split()) == paper.title
        assert paper.title[0].isupper() or not paper.title[0].isalpha()
    assert len({p.title for p in papers}) > 0.9 * len(papers)
    assert len({p.abstract for p in papers}) == len(papers)
    hard = "".join(p.title for p in papers)
    for needle in ("<", "&", "$\\alpha$", "ü"):
        assert needle in hard, needle


# ---------------------------------------------------------------------------------- formats
def test_atom_round_trip(papers: list[Paper]) -> None:
    page = papers[100:160]
    body = to_atom(page, total=len(papers), start=100)
    parsed = parse_feed(body)
    assert (parsed.total_results, parsed.start_index, parsed.entries) == (len(papers), 100, 60)
    assert parsed.papers == page and parsed.skipped == 0
    assert parse_feed(to_atom(page, wrap=50)).papers == page  # hard line breaks in the XML
    assert to_atom(page) == to_atom(page)  # no wall clock in the feed
    assert parse_feed(to_atom([])).total_results == 0


def test_jsonl_has_the_listing_shape(papers: list[Paper]) -> None:
    line = paper_to_jsonl(papers[0])
    assert list(line) == ["arxiv_id", "title", "abstract", "authors", "categories", "date",
                          "source"]  # fmt: skip
    assert line["date"] == papers[0].published[:10]
    assert json.loads(json.dumps(line)) == line


@requires_listings
def test_jsonl_has_the_keys_of_the_real_listing(papers: list[Paper]) -> None:
    with LISTINGS.open(encoding="utf-8") as handle:
        real = json.loads(handle.readline())
    line = paper_to_jsonl(papers[0])
    assert list(line) == list(real)
    assert all(type(line[key]) is type(real[key]) for key in real)


async def test_jsonl_round_trip_through_the_importer(
    papers: list[Paper], tmp_path: Path, store: Store
) -> None:
    path = write_jsonl(papers, tmp_path / "generated.jsonl")
    # A listing records the day and the latest text, not times, versions or optional fields.
    expected = [
        dataclasses.replace(p, version=1, published=f"{p.published[:10]}T00:00:00Z",
                            updated=f"{p.published[:10]}T00:00:00Z", comment=None,
                            journal_ref=None, doi=None, affiliations=())
        for p in papers
    ]  # fmt: skip
    assert read_papers_file(path) == expected
    stats, result = await import_files(store, [path])
    assert (stats.new, result.new) == (len(papers), len(papers))
    assert await store.count_papers() == len(papers)
    first, last = await store.published_range()
    assert first is not None and last is not None
    assert parse_iso(first).date() == MONDAY and parse_iso(last).date() == _day(papers[-1])


@requires_listings
def test_no_text_comes_from_the_real_corpus() -> None:
    """Titles and abstract sentences are the generator's own, never the real listing's."""
    with LISTINGS.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    titles = {" ".join(r["title"].split()) for r in rows}
    sentences = {s for r in rows for s in re.split(r"(?<=\.)\s+", " ".join(r["abstract"].split()))}
    generated = generate_papers(3000, start=MONDAY, days=28, seed=9)
    assert not titles & {p.title for p in generated}
    ours = {s for p in generated for s in re.split(r"(?<=\.)\s+", p.abstract)}
    assert not {s for s in sentences & ours if len(s.split()) >= 6}
