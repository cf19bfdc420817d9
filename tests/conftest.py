"""Shared fixtures: a fresh SQLite store per test and the paths of the real data in ../shared."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from topicpulse.store import Store

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOPICPULSE_SHARED", ROOT.parent / "shared"))
SAMPLES = SHARED / "arxiv-samples"
LISTINGS = SHARED / "arxiv-listings" / "papers.jsonl"


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
    files = sorted(SAMPLES.glob("*.xml"))
    assert files, f"no arXiv samples found in {SAMPLES}"
    return files


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "test.db")
    try:
        yield opened
    finally:
        await opened.close()
