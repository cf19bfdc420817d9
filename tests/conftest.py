"""Shared fixtures: a fresh SQLite store per test, generated data, and the real data in ../shared.

The core suite runs on data the project makes itself (``topicpulse.synthetic``): a listing
shaped like the real one and Atom pages shaped like the recorded API responses. Tests of the
real corpus (``$TOPICPULSE_SHARED`` or ../shared) run whenever it is there and are skipped with
one line saying why when it is not: mark them ``requires_real_data`` (or ``requires_samples`` /
``requires_listings``), ask for ``sample_files``, or parametrize over ``listing_file``, which
gives every test a generated listing and, when present, the real one.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path

import pytest

from fake_arxiv import synthetic_listing
from topicpulse.models import Paper
from topicpulse.store import Store
from topicpulse.synthetic import generate_papers, to_atom, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOPICPULSE_SHARED", ROOT.parent / "shared"))
SAMPLES = SHARED / "arxiv-samples"
LISTINGS = SHARED / "arxiv-listings" / "papers.jsonl"

HAS_SAMPLES = SAMPLES.is_dir() and any(SAMPLES.glob("*.xml"))
HAS_LISTINGS = LISTINGS.is_file()
NO_REAL_DATA = f"real arXiv data not found at {SHARED}: set TOPICPULSE_SHARED"
requires_samples = pytest.mark.skipif(not HAS_SAMPLES, reason=NO_REAL_DATA)
requires_listings = pytest.mark.skipif(not HAS_LISTINGS, reason=NO_REAL_DATA)
requires_real_data = pytest.mark.skipif(not (HAS_SAMPLES and HAS_LISTINGS), reason=NO_REAL_DATA)

# The pages of the recorded responses in arxiv-samples: (start, max_results) of one result list.
SAMPLE_PAGES = ((0, 100), (0, 10), (0, 15), (5, 10), (5, 15), (9, 15), (10, 10), (20, 10),
                (30, 10), (40, 10), (50, 10))  # fmt: skip
SYNTHETIC_TOTAL = 4821  # totalResults of the generated pages (the search found more than 100)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's .env or environment, or writes to the working folder."""
    for name in list(os.environ):
        if (
            name.startswith("TOPICPULSE_") and name != "TOPICPULSE_SHARED"
        ) or name == "TELEGRAM_BOT_TOKEN":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def sample_files() -> list[Path]:
    """The recorded arXiv API responses (tests asking for them are skipped without them)."""
    if not HAS_SAMPLES:
        pytest.skip(NO_REAL_DATA)
    return sorted(SAMPLES.glob("*.xml"))


def synthetic_sample_papers() -> list[Paper]:
    """100 generated papers over seven years, newest first (as a submittedDate search)."""
    papers = generate_papers(100, start=date(2019, 1, 7), days=7 * 365, seed=11)
    return sorted(papers, key=lambda p: (p.published, p.arxiv_id), reverse=True)


def write_synthetic_samples(folder: Path) -> list[Path]:
    """Generated stand-ins for arxiv-samples: the same 11 overlapping pages of one result list
    (``SAMPLE_PAGES``), abstracts hard-wrapped as in many real responses."""
    papers = synthetic_sample_papers()
    paths = []
    for start, size in SAMPLE_PAGES:
        path = folder / f"q_synthetic_s{start}_m{size}.xml"
        page = papers[start : start + size]
        path.write_bytes(
            to_atom(page, total=SYNTHETIC_TOTAL, start=start, max_results=size, wrap=78)
        )
        paths.append(path)
    return sorted(paths)


@pytest.fixture(scope="session")
def synthetic_samples(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Generated Atom pages shaped like arxiv-samples (read-only: shared by all tests)."""
    return write_synthetic_samples(tmp_path_factory.mktemp("synthetic-samples"))


@pytest.fixture(scope="session")
def synthetic_listing_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated papers.jsonl over the real listing's 8 weeks (read-only: shared)."""
    return write_jsonl(synthetic_listing(), tmp_path_factory.mktemp("synthetic") / "papers.jsonl")


@pytest.fixture(
    scope="session", params=["synthetic", pytest.param("real", marks=requires_listings)]
)
def listing_file(request: pytest.FixtureRequest, synthetic_listing_file: Path) -> Path:
    """A listing to import: the generated one, then (when present) the real papers.jsonl."""
    return LISTINGS if request.param == "real" else synthetic_listing_file


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "test.db")
    try:
        yield opened
    finally:
        await opened.close()


class Trips:
    """Counts a store's trips to a reader from now on (each borrow of a read connection,
    ``Database._read``): a reply's reads each wait for the event loop while a round runs."""

    def __init__(self, store: Store) -> None:
        self.count = 0
        borrow = store._read

        def counted() -> object:
            self.count += 1
            return borrow()

        store._read = counted  # type: ignore[method-assign]
