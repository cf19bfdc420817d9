"""Slow Telegram answers (issue 23 §2): a send whose answer does not come within the sender's
read timeout was most likely delivered — it is settled as "maybe sent" and never sent again —,
several such chats do not pause delivery for everyone, and a spike's chart is uploaded once,
then sent to the other chats by its ``file_id``.

Through the real Application against the fake Bot API, which answers chosen sends only long
after it recorded (delivered) them: a real read timeout with a delivered message. The read
timeout is short here (``READ``) and the fake's delay far longer (``SLOW``), so whether a send
times out never depends on the machine's speed; the engine's pauses run on the session's
``SteerableClock``."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from test_degrade import start_spike
from test_faults import exactly_once, sends_to, session

from fake_telegram import FakeTelegram, UploadedFile
from topicpulse.bot.sender import SendTimeouts

READ = SendTimeouts(read=1.0)  # seconds the bot waits for an answer (production: 30)
SLOW = 60.0  # real seconds the fake holds a slow answer (it stops first)


def outbox_errors(db: Path, chat_id: int) -> list[tuple[str, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT state, last_error FROM outbox WHERE chat_id = ? ORDER BY id", (chat_id,)
        ).fetchall()


async def test_a_slow_answer_is_maybe_sent_and_never_sent_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: the read timeout was retried as a failure, and the chat got the alert twice."""

    def slow(fake: FakeTelegram) -> None:
        fake.answer_slowly("sendMessage", delay=SLOW, chat_id=5, count=1)

    with caplog.at_level(logging.WARNING, logger="topicpulse.delivery"):
        async with session(
            tmp_path, chat_ids=list(range(1, 21)), alerts=20, before_start=slow, send_timeouts=READ
        ) as s:
            await s.drained()
            await s.answers_help(5)  # the bot goes on; the slow chat gets its replies
            stats = s.pipeline.delivery.stats
    assert len(sends_to(s.fake, 5)) == 2  # the alert once (delivered, answered late), /help
    assert stats.maybe_sent == 1 and stats.failures == 0 and stats.pauses == 0
    [(state, error)] = outbox_errors(tmp_path / "faults.db", 5)
    assert state == "sent" and (error or "").startswith("maybe sent: ")  # recorded as such
    assert "not sent again" in caplog.text and "outbox rows [" in caplog.text
    exactly_once(s)  # nothing lost (Telegram had it), nothing twice


async def test_five_slow_chats_neither_pause_delivery_nor_get_a_copy(tmp_path: Path) -> None:
    """Before: five read timeouts in a row paused every chat's delivery, then resent all five."""
    slow_chats = [3, 7, 11, 15, 19]

    def slow(fake: FakeTelegram) -> None:
        for chat in slow_chats:
            fake.answer_slowly("sendMessage", delay=SLOW, chat_id=chat, count=1)

    async with session(
        tmp_path, chat_ids=list(range(1, 41)), alerts=40, before_start=slow, send_timeouts=READ
    ) as s:
        await s.drained()
        stats = s.pipeline.delivery.stats
    assert stats.maybe_sent == len(slow_chats)
    assert stats.pauses == 0 and stats.failures == 0
    assert all(len(sends_to(s.fake, chat)) == 1 for chat in slow_chats)
    exactly_once(s)


async def test_a_spike_chart_is_uploaded_once_per_spike(tmp_path: Path) -> None:
    """Before: every follower's spike alert uploaded the same chart again."""
    chat_ids = list(range(1, 21))  # two topics, ten followers each
    async with session(tmp_path, chat_ids=chat_ids, alerts=20) as s:
        await s.drained()
        keywords = sorted(set(s.fan.keyword.values()))
        for keyword in keywords:
            await start_spike(s.store, keyword)
        s.pipeline.wake.set()
        await s.drained()
        stats = s.pipeline.delivery.stats
    calls = [c for c in s.fake.calls_to("sendPhoto") if c.ok]
    uploads = [c for c in calls if isinstance(c.params.get("photo"), UploadedFile)]
    assert len(uploads) == len(keywords) == stats.charts_uploaded  # one upload per spike …
    assert len(calls) == len(chat_ids)  # … and its file_id for the other followers
    for keyword in keywords:
        followers = [c for c in chat_ids if s.fan.keyword[c] == keyword]
        alerts = [s.fake.messages_to(c)[-1] for c in followers]
        assert all(m.method == "sendPhoto" and "is spiking" in (m.text or "") for m in alerts)
        charts = {m.photo_bytes for m in alerts}  # every follower sees the same chart
        assert len(charts) == 1 and next(iter(charts), b"").startswith(b"\x89PNG")
    exactly_once(s)
