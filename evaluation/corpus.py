"""What the evaluation scripts share: where the real listings and the labels are, a store of
the listings, and a query's matches in it (catalogue queries may exceed the typed-query limit)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from topicpulse.sources.ingest import import_files  # noqa: E402
from topicpulse.store import Store  # noqa: E402
from topicpulse.topics import query as ql  # noqa: E402

SHARED = Path(os.environ.get("TOPICPULSE_SHARED", ROOT.parent / "shared"))
LISTINGS = SHARED / "arxiv-listings" / "papers.jsonl"
LABELS = ROOT / "evaluation" / "labels"
STRATA = ROOT / "evaluation" / "strata.json"
MISSING = f"real listings not found at {LISTINGS}: set TOPICPULSE_SHARED"


@asynccontextmanager
async def listings_store() -> AsyncIterator[Store]:
    """A throw-away store holding the real listings."""
    with tempfile.TemporaryDirectory() as tmp:
        async with await Store.open(Path(tmp) / "listings.db") as store:
            await import_files(store, [LISTINGS])
            yield store


async def matches(store: Store, query: str) -> set[str]:
    """arXiv ids of the stored papers a query (of any length) matches."""
    fts = ql.to_fts(ql.parse(query, max_length=None))
    return {p.arxiv_id for p in await store.matching_papers(fts=fts)}
