"""The Dockerfile, built and run: the image answers ``/healthz`` (its own HEALTHCHECK turns
healthy), stops cleanly on SIGTERM, and a second container on the same volume finds the first
one's subscriptions and backs the database up while running.

Opt-in, as it takes a minute or more: ``TOPICPULSE_DOCKER_TEST=1 .venv/bin/pytest
tests/test_container.py`` on a machine where a Docker daemon runs (as root: ``dockerd``). The
first run also makes the Debian base image (about a minute, kept by the daemon afterwards; see
``docker_image.py``). Otherwise it is skipped with the reason. The container shares the host's
network, so the bot in it reaches the fake Bot API and the fake arXiv of this test on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator

import aiohttp
import pytest

from bot_harness import RL, USER, free_port
from docker_image import build_image, container_log, daemon_problem, docker
from fake_arxiv import FakeArxiv
from fake_telegram import FakeTelegram
from waiting import wait_for

pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    if os.environ.get("TOPICPULSE_DOCKER_TEST") != "1":
        pytest.skip("container test is opt-in: TOPICPULSE_DOCKER_TEST=1 (needs a Docker daemon)")
    problem = daemon_problem()
    if problem:
        pytest.skip(f"container test: {problem}")
    tag = f"topicpulse-test:{uuid.uuid4().hex[:8]}"
    build_image(tag)
    yield tag
    docker("rmi", "--force", tag, check=False)


def state(name: str) -> dict[str, object]:
    return dict(json.loads(docker("inspect", "--format", "{{json .State}}", name)))


async def adocker(*args: str) -> str:
    return await asyncio.to_thread(docker, *args)


async def test_the_image_runs_answers_health_stops_on_sigterm_and_keeps_its_data(
    image: str,
) -> None:
    volume = f"topicpulse-test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    names: list[str] = []
    async with FakeTelegram() as fake, FakeArxiv() as arxiv:
        environment = {
            "TELEGRAM_BOT_TOKEN": fake.token,
            "TOPICPULSE_TELEGRAM_API_URL": fake.base_url,
            "TOPICPULSE_ARXIV_API_URL": arxiv.url,
            "TOPICPULSE_ARXIV_OAI_URL": arxiv.oai_url,
            "TOPICPULSE_ARXIV_DELAY_SECONDS": "0",
            "TOPICPULSE_BACKFILL_WEEKS": "0",
            "TOPICPULSE_WEB_HOST": "127.0.0.1",
            "TOPICPULSE_WEB_PORT": str(port),
        }

        async def start() -> str:
            name = f"topicpulse-test-{uuid.uuid4().hex[:8]}"
            names.append(name)
            flags = [f for key, value in environment.items() for f in ("-e", f"{key}={value}")]
            await adocker(
                "run", "--detach", "--name", name, "--network", "host",
                "--volume", f"{volume}:/data", "--health-interval", "1s",
                "--health-start-period", "60s", *flags, image,
            )  # fmt: skip
            return name

        async def healthy(name: str) -> None:
            async def reported() -> bool:
                health = (await asyncio.to_thread(state, name)).get("Health") or {}
                return health.get("Status") == "healthy"  # type: ignore[union-attr]

            await wait_for(reported, timeout=120, poll=0.5, what=f"{name}'s HEALTHCHECK")

        try:
            first = await start()
            await healthy(first)
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/healthz") as response,
            ):
                assert response.status == 200
                assert (await response.json())["status"] == "ok"
            fake.user_sends(USER, f"/follow {RL}")
            await wait_for(lambda: fake.messages_to(USER), timeout=60, what="the follow's reply")

            await adocker("stop", "--time", "60", first)  # SIGTERM, then a clean exit
            stopped = state(first)
            assert stopped["ExitCode"] == 0 and not stopped["OOMKilled"], stopped
            log = await asyncio.to_thread(container_log, first)
            assert "topicpulse stopped; database closed" in log, log

            second = await start()
            await healthy(second)
            before = len(fake.messages_to(USER))
            fake.user_sends(USER, "/list")
            await wait_for(
                lambda: len(fake.messages_to(USER)) > before, timeout=60, what="/list's reply"
            )
            assert RL in (fake.messages_to(USER)[-1].text or "")
            await adocker("exec", second, "topicpulse", "backup", "/data/copy.db")
            listing = await adocker("exec", second, "ls", "-l", "/data")
            assert "copy.db" in listing
            await adocker("stop", "--time", "60", second)
            assert state(second)["ExitCode"] == 0
        finally:
            for name in names:
                docker("rm", "--force", name, check=False)
            docker("volume", "rm", "--force", volume, check=False)
    assert fake.token not in log
