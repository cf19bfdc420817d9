"""A start that explains itself (``python -m topicpulse run`` as a real process): failures at
start are one line naming what failed and what to check, with the library's traceback only
under ``-v``; a first start says how many days it backfills and how long that takes at the
configured arXiv pace, shows its progress, says when the bot answers, and when it is done."""

from __future__ import annotations

import re
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot_harness import free_port
from bot_process import BotProcess, bot_env
from cli_process import acli, cli, one_line
from fake_arxiv import FakeArxiv, make_paper
from fake_telegram import FakeTelegram
from waiting import wait_for

UNREACHABLE = "http://127.0.0.1:9/bot"


def test_run_without_network_says_so_in_one_line_and_v_shows_the_traceback(
    tmp_path: Path,
) -> None:
    quiet = cli(tmp_path, "run", TELEGRAM_BOT_TOKEN="1:x", TOPICPULSE_TELEGRAM_API_URL=UNREACHABLE)
    assert quiet.returncode == 1
    line = one_line(quiet.stderr)
    assert line.startswith(f"topicpulse: cannot reach the Bot API at {UNREACHABLE} (")
    assert line.endswith("check the network, a proxy or firewall, and TOPICPULSE_TELEGRAM_API_URL")

    verbose = cli(tmp_path, "-v", "run", TELEGRAM_BOT_TOKEN="1:x",
                  TOPICPULSE_TELEGRAM_API_URL=UNREACHABLE)  # fmt: skip
    assert verbose.returncode == 1
    assert "Traceback (most recent call last)" in verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1] == line


async def test_run_with_a_wrong_token_says_so_in_one_line(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        wrong = fake.token.split(":")[0] + ":not-the-token"
        result = await acli(
            tmp_path, "run", TELEGRAM_BOT_TOKEN=wrong, TOPICPULSE_TELEGRAM_API_URL=fake.base_url
        )
    assert result[0] == 1
    assert one_line(result[2]) == (
        "topicpulse: Telegram rejected TELEGRAM_BOT_TOKEN: check it with @BotFather"
    )
    assert "not-the-token" not in result[2]


async def test_a_port_in_use_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with FakeTelegram() as fake, FakeArxiv() as arxiv:
            code, _, err = await acli(
                tmp_path, "run", TELEGRAM_BOT_TOKEN=fake.token,
                TOPICPULSE_TELEGRAM_API_URL=fake.base_url, TOPICPULSE_ARXIV_API_URL=arxiv.url,
                TOPICPULSE_BACKFILL_WEEKS="0", TOPICPULSE_WEB_HOST="127.0.0.1",
                TOPICPULSE_WEB_PORT=str(port),
            )  # fmt: skip
        served = await acli(tmp_path, "serve", "--host", "127.0.0.1", "--port", str(port))
    expected = (
        f"topicpulse: cannot listen on 127.0.0.1:{port} (address already in use): choose "
        "another TOPICPULSE_WEB_PORT (or PORT), or TOPICPULSE_WEB_HOST"
    )
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == expected
    assert served[0] == 1 and one_line(served[2]) == expected


def lines_of(log: Path) -> list[str]:
    """The log's messages, without the time stamp, level and logger name."""
    text = log.read_text("utf-8", "replace") if log.exists() else ""
    return [re.sub(r"^\S+ \S+ \S+ \S+: ", "", line) for line in text.splitlines()]


async def test_a_first_start_says_what_it_does_then_a_second_start_is_quiet(
    tmp_path: Path,
) -> None:
    today = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    papers = [make_paper(f"2605.{n:05d}", today - timedelta(days=n)) for n in range(1, 8)]
    log = tmp_path / "bot.log"
    async with FakeTelegram() as fake, FakeArxiv(papers) as arxiv:
        bot = BotProcess(
            bot_env(
                fake.base_url, fake.token, arxiv.url, tmp_path / "bot.db",
                TOPICPULSE_BACKFILL_WEEKS="1", TOPICPULSE_ARXIV_DELAY_SECONDS="0.2",
                TOPICPULSE_WEB_HOST="127.0.0.1", TOPICPULSE_WEB_PORT=str(free_port()),
            ),
            log,
        )  # fmt: skip
        try:
            await bot.start()
            await wait_for(
                lambda: any(line.startswith("backfill finished") for line in lines_of(log)),
                timeout=120, what="the backfill's end",
            )  # fmt: skip
            assert await bot.stop() == 0
            first = lines_of(log)
            await bot.start()
            await wait_for(
                lambda: sum("ready to answer" in line for line in lines_of(log)) == 2
                and fake.long_poll_waiting,
                timeout=60, what="the second start",
            )  # fmt: skip
            assert await bot.stop() == 0
        finally:
            if bot.proc is not None and bot.proc.returncode is None:
                bot.proc.kill()
                await bot.proc.wait()
    second = lines_of(log)[len(first) :]

    def index(prefix: str, lines: list[str]) -> int:
        found = [n for n, line in enumerate(lines) if line.startswith(prefix)]
        assert found, (prefix, "\n".join(lines))
        return found[0]

    created = index("created the database ", first)
    plan = index("first start: fetching the last 1 week of papers from arXiv", first)
    assert first[plan].startswith(
        "first start: fetching the last 1 week of papers from arXiv in the background, about 6"
        " OAI-PMH page(s) of 2,000 records: at least 1 s at one request every 0.2 s;"
    )
    ready = index("topicpulse is running as @", first)
    assert first[ready].endswith(
        "ready to answer commands (the backfill goes on in the background)"
    )
    progress = index("backfill: 1 of about 1 page(s) (set cs", first)
    assert first[progress].endswith("), done")
    finished = index("backfill finished: ", first)
    assert re.fullmatch(
        r"backfill finished: \d+ new papers in \d+ s; every paper of the last 1 week is in "
        r"the store",
        first[finished],
    )
    assert created < plan < ready and plan < progress < finished

    assert not any(line.startswith(("first start", "fetching", "created")) for line in second)
    assert second[index("topicpulse is running as @", second)].endswith(
        ": ready to answer commands"
    )
    assert fake.token not in log.read_text()
