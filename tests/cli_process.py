"""The ``topicpulse`` command as a real subprocess (``python -m topicpulse``), its database in the
test's folder and no TOPICPULSE_* setting of the caller's environment: for the CLI's tests."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPICPULSE_")}
    env.pop("TELEGRAM_BOT_TOKEN", None)
    env.update({"TOPICPULSE_DB": str(tmp_path / "cli.db"), "PYTHONUNBUFFERED": "1", **extra})
    return env


def cli(tmp_path: Path, *args: str | Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "topicpulse", *map(str, args)],
        env=cli_env(tmp_path, **extra),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def acli(tmp_path: Path, *args: str, **extra: str) -> tuple[int, str, str]:
    """The CLI in a subprocess while this test's event loop keeps serving the fake arXiv."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "topicpulse", *args,
        env=cli_env(tmp_path, **extra), cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]
