"""CPU-heavy work runs in a separate worker process, which is replaced if it dies."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from datetime import date
from pathlib import Path

import pytest

from topicpulse import offload
from topicpulse.sources.arxiv import parse_feed
from topicpulse.synthetic import generate_papers, to_atom
from waiting import wait_for


async def test_a_feed_is_parsed_in_another_process_and_a_dead_worker_is_replaced() -> None:
    papers = generate_papers(count=20, start=date(2026, 5, 4), days=7, seed=3)
    feed = to_atom(papers)
    page = await offload.run(parse_feed, feed)
    assert [p.arxiv_id for p in page.papers] == [p.arxiv_id for p in papers]
    worker = await offload.run(os.getpid)
    assert worker != os.getpid()

    os.kill(worker, signal.SIGKILL)  # the worker dies between two calls
    again = await offload.run(parse_feed, feed)
    assert len(again.papers) == 20
    assert await offload.run(os.getpid) not in (worker, os.getpid())


async def test_workers_run_at_a_lower_cpu_priority_than_the_bot() -> None:
    """A round's parsing and matching take the CPU the event loop leaves, not the reverse."""
    here = os.getpriority(os.PRIO_PROCESS, 0)
    worker = await offload.run(os.getpid)
    assert os.getpriority(os.PRIO_PROCESS, worker) == min(here + offload.NICENESS, 19)


def _imports_sklearn() -> bool:
    return "sklearn" in sys.modules


def _train_one() -> bool:
    from topicpulse.insight import taste

    liked = [{"reward": 1.0}, {"policy": 0.8, "reward": 0.6}]
    disliked = [{"protein": 1.0}]
    return taste.fit(liked, disliked, [{"graph": 1.0}]) is not None and _imports_sklearn()


async def test_training_has_a_worker_process_of_its_own() -> None:
    """Only the training process imports scikit-learn (and keeps the training caches)."""
    trainer = await offload.run(os.getpid, pool=offload.TRAINING)
    assert await offload.run(os.getpid, pool=offload.TRAINING) == trainer  # one process
    general = {await offload.run(os.getpid) for _ in range(4)}
    assert trainer not in general and os.getpid() not in general
    assert await offload.run(_train_one, pool=offload.TRAINING)
    assert not any([await offload.run(_imports_sklearn) for _ in range(4)])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_the_training_process_stops_when_idle_and_starts_again_when_needed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its memory (scikit-learn, the caches) is held only while readers are rating."""
    monkeypatch.setitem(offload.LINGER, offload.TRAINING, 0.0)
    trainer = await offload.run(os.getpid, pool=offload.TRAINING)
    await wait_for(lambda: offload.TRAINING not in offload._pools and not _alive(trainer))
    again = await offload.run(_train_one, pool=offload.TRAINING)
    assert again
    assert await offload.run(os.getpid, pool=offload.TRAINING) != trainer


def _wait_for_file(path: str) -> bool:
    deadline = time.monotonic() + 60  # (a safety net: the test touches it at once)
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    return True


async def test_a_pool_is_not_stopped_while_a_call_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(offload.LINGER, offload.GENERAL, 0.0)
    gate = tmp_path / "go"
    waiting = asyncio.ensure_future(offload.run(_wait_for_file, str(gate)))
    worker = await offload.run(os.getpid)  # (ends while the other call still runs)
    await asyncio.sleep(0)
    assert offload.GENERAL in offload._pools and _alive(worker)
    gate.touch()
    assert await waiting
    await wait_for(lambda: offload.GENERAL not in offload._pools)
