"""The bot as its own process (``python -m topicpulse run``), started, killed and restarted
by the tests of crash safety and of webhook mode."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bot_env(
    telegram_url: str, token: str, arxiv_url: str, db: Path, **extra: str
) -> dict[str, str]:
    """The settings of a bot against the fakes: no politeness delay, no backfill, one poll
    an hour (``extra`` overrides, by variable name)."""
    return {
        "TELEGRAM_BOT_TOKEN": token,
        "TOPICPULSE_TELEGRAM_API_URL": telegram_url,
        "TOPICPULSE_ARXIV_API_URL": arxiv_url,
        "TOPICPULSE_ARXIV_OAI_URL": arxiv_url.replace("/api/query", "/oai"),
        "TOPICPULSE_DB": str(db),
        "TOPICPULSE_ARXIV_DELAY_SECONDS": "0",
        "TOPICPULSE_BACKFILL_WEEKS": "0",
        "TOPICPULSE_POLL_SECONDS": "3600",
        **extra,
    }


class BotProcess:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOPICPULSE_")}
        env.pop("TELEGRAM_BOT_TOKEN", None)
        env.update(self.env)
        env["PYTHONPATH"] = str(ROOT / "src")
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "topicpulse",
                "run",
                cwd=str(self.log.parent),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )

    async def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()

    async def stop(self) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout=20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        return int(self.proc.returncode or 0)
