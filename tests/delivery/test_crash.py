"""Crash safety: ``python -m topicpulse run`` killed with SIGKILL in the middle of a fan-out,
three times, and restarted each time, against a fake Bot API (Telegram's limits, 100 ms
latency) running in this process.

Every alert must arrive, and an alert may arrive twice only if it was in flight at a kill:
accepted by Telegram but not yet marked sent in the outbox. Those are counted after each kill
from the fake's records and the database; the duplicates must be exactly these, and few.

Nothing here races the bot: the fake accepts the sends past a given count but holds back their
answers, so each kill lands mid-fan-out with requests in flight however fast or slow the machine
is; the count is taken once the server has finished every request of the dead process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bot_process import BotProcess
from fake_arxiv import FakeArxiv
from fake_telegram import FakeTelegram
from fanout import delivered, fill_outbox, lost_and_duplicated
from topicpulse.delivery import DEFAULT_CONCURRENCY
from topicpulse.store import Store
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
CHATS = 180
KILLS = 3
SENDS_BETWEEN_KILLS = 35


def marked_sent(db: Path) -> set[tuple[int, str]]:
    """(chat, arXiv id) settled as delivered: outbox rows marked sent, and the papers of the
    chat's topics its watermark has passed (an alert from the matches, its last message
    accepted)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute(
            "SELECT o.chat_id, p.arxiv_id FROM outbox o JOIN papers p ON p.id = o.paper_id"
            " WHERE o.state = 'sent'"
            " UNION SELECT s.chat_id, p.arxiv_id FROM subscriptions s"
            " JOIN chats c ON c.chat_id = s.chat_id JOIN topic_papers tp"
            " ON tp.topic_id = s.topic_id AND tp.paper_id > s.after_paper_id"
            " AND tp.paper_id <= c.digest_through JOIN papers p ON p.id = tp.paper_id"
        ).fetchall()
    finally:
        conn.close()
    return {(int(c), str(a)) for c, a in rows}


def pending(db: Path) -> int:
    """Pending outbox rows and instant chats still marked as owed alerts."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return int(
            conn.execute(
                "SELECT (SELECT count(*) FROM outbox WHERE state = 'pending')"
                " + (SELECT count(*) FROM chats WHERE alerts_due IS NOT NULL)"
            ).fetchone()[0]
        )
    finally:
        conn.close()


async def test_kill_9_mid_fan_out_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    async with await Store.open(db) as store:
        fan = await fill_outbox(store, list(range(1, CHATS + 1)), alerts=2 * CHATS)
    fake = FakeTelegram(enforce_limits=True, latency=0.1)
    await fake.start()
    arxiv = FakeArxiv()
    await arxiv.start()
    log = tmp_path / "bot.log"
    bot = BotProcess(
        {
            "TELEGRAM_BOT_TOKEN": fake.token,
            "TOPICPULSE_TELEGRAM_API_URL": fake.base_url,
            "TOPICPULSE_ARXIV_API_URL": arxiv.url,
            "TOPICPULSE_ARXIV_OAI_URL": arxiv.oai_url,
            "TOPICPULSE_DB": str(db),
            "TOPICPULSE_ARXIV_DELAY_SECONDS": "0",
            "TOPICPULSE_BACKFILL_WEEKS": "0",
            "TOPICPULSE_POLL_SECONDS": "3600",
        },
        log,
    )

    in_flight_at_kills: list[int] = []
    try:
        for _ in range(KILLS):
            fake.hold_sends(after=SENDS_BETWEEN_KILLS)  # then the bot is stuck mid-fan-out
            await bot.start()
            await wait_for(lambda: fake.held > 0, timeout=120, what="the fan-out")
            await bot.kill()
            fake.release_sends()
            await wait_for(  # every request of the dead process was handled, no more can come
                lambda: fake.open_connections == 0 and fake.in_flight == 0,
                what="the fake to answer the killed bot's requests",
            )
            accepted = {
                (chat, arxiv_id)
                for chat, ids in delivered(fake.sent, fan.expected).items()
                for arxiv_id in ids
            }
            in_flight_at_kills.append(len(accepted - marked_sent(db)))
            assert pending(db) > 0, "the fan-out ended before the kill; send more alerts"
        await bot.start()
        await wait_for(lambda: pending(db) == 0, timeout=120, what="the outbox to drain")
        assert await bot.stop() == 0  # SIGTERM: a clean stop
    finally:
        if bot.proc is not None and bot.proc.returncode is None:
            bot.proc.kill()
            await bot.proc.wait()
        await arxiv.close()
        await fake.stop()

    lost, dupes = lost_and_duplicated(fan, fake.sent)
    print(f"in flight at the kills: {in_flight_at_kills}; duplicates: {dupes}")
    assert lost == 0
    # re-sent: only what was in flight at a kill, and at most one message per worker each time
    assert dupes <= sum(in_flight_at_kills), (dupes, in_flight_at_kills)
    assert all(1 <= n <= DEFAULT_CONCURRENCY * 2 for n in in_flight_at_kills)
    assert 429 not in fake.stats["by_error_code"]
    text = log.read_text("utf-8", "replace")
    assert text.count("topicpulse is running") == KILLS + 1
    assert fake.token not in text and fake.token.split(":")[1] not in text
