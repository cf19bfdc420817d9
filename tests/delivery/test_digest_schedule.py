"""A digest pass and a schedule change at the same time (issue tracker, defect 8): the pass read
the chat before sending, the chat's /digest or /timezone lands while the digest is in flight,
and the next digest time the pass writes afterwards must not undo the change."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from test_delivery import FakeSender

from fanout import fill_outbox
from topicpulse.delivery import Delivery, chats
from topicpulse.models import Chat
from topicpulse.store import Store
from waiting import wait_for

NOW = datetime(2027, 1, 11, 9, 0, tzinfo=UTC)  # a Monday; the daily 08:00 digest is due
CHAT = 1


async def digest_chat(store: Store, *, alerts: int = 3, mode: str = "daily") -> None:
    """Chat 1 with ``alerts`` papers waiting for its (daily) 08:00 UTC digest, due an hour ago."""
    await fill_outbox(store, [CHAT], alerts=alerts)
    await store.update_chat(
        CHAT,
        mode=mode,
        digest_time="08:00",
        timezone="UTC",
        next_digest_at="2027-01-11T08:00:00Z",
    )


def schedule(chat: Chat | None) -> tuple[object, ...]:
    assert chat is not None
    return (chat.mode, chat.digest_time, chat.digest_weekday, chat.timezone, chat.next_digest_at)


async def test_a_digest_pass_schedules_the_next_digest(store: Store) -> None:
    await digest_chat(store)
    sender = FakeSender()
    assert await Delivery(store, sender, clock=lambda: NOW).run_once() == 3
    assert len(sender.texts_to(CHAT)) == 1  # one digest
    chat = await store.chat(CHAT)
    assert chat is not None and chat.next_digest_at == "2027-01-12T08:00:00Z"


@pytest.mark.parametrize(
    "change",
    [
        ("digest", ["weekly", "18:30", "fri"]),
        ("digest", ["daily", "08:00"]),  # the same schedule again: from now, i.e. tomorrow
        ("digest", ["instant"]),
        ("timezone", "America/New_York"),
    ],
    ids=["weekly", "same-daily", "instant", "timezone"],
)
async def test_a_schedule_change_during_the_digest_is_kept(
    store: Store, change: tuple[str, object]
) -> None:
    await digest_chat(store)
    sender = FakeSender()
    sender.hold()  # the digest stays in flight until the change is made
    engine = Delivery(store, sender, clock=lambda: NOW)
    delivering = asyncio.create_task(engine.run_once())
    await wait_for(lambda: sender.in_flight, what="the digest to be in flight")
    what, args = change
    if what == "digest":
        assert isinstance(args, list)
        changed = await chats.set_digest(store, CHAT, args, now=NOW)
    else:
        assert isinstance(args, str)
        changed = await chats.set_timezone(store, CHAT, args, now=NOW)
    sender.release()
    assert await delivering == 3
    assert len(sender.texts_to(CHAT)) == 1
    assert schedule(await store.chat(CHAT)) == schedule(changed)
    await engine.run_once()  # and the next pass leaves it alone too
    assert schedule(await store.chat(CHAT)) == schedule(changed)


async def test_a_big_digest_is_one_message_counting_the_whole_backlog(store: Store) -> None:
    """A broad topic's weekly digest (issue 23 §6): before, 500 rows a batch, each batch its own
    digest with its own "500 new papers" header, dozens of messages. Now: one message with the
    counts over the whole backlog, the best papers first, the rest behind /latest buttons."""
    await digest_chat(store, alerts=1_200, mode="weekly")
    sender = FakeSender()
    assert await Delivery(store, sender, clock=lambda: NOW).run_once() == 1_200
    [digest] = sender.texts_to(CHAT)
    assert digest.startswith("📬 <b>Your weekly digest: 1200 new papers</b>"), digest[:120]
    assert "<b>kw00000</b>: 1200" in digest  # the topic's count over the whole backlog
    assert sender.buttons[CHAT][0], "a /latest button per topic"
    assert await store.pending_for_chat(CHAT, limit=10) == []
    chat = await store.chat(CHAT)
    assert chat is not None and chat.next_digest_at == "2027-01-18T08:00:00Z"


async def test_a_small_digest_keeps_its_papers(store: Store) -> None:
    await digest_chat(store, alerts=12, mode="daily")
    sender = FakeSender()
    assert await Delivery(store, sender, clock=lambda: NOW).run_once() == 12
    [digest] = sender.texts_to(CHAT)
    assert "Your daily digest</b>: 12 new papers" in digest


async def test_concurrent_digest_and_timezone_commands_both_count(store: Store) -> None:
    """/digest and /timezone at once: each used to read the chat, merge its change and write
    the next digest time from its own copy, so the last one written undid the other's half
    (e.g. an instant chat's /timezone wrote "no digest" over /digest weekly's due time)."""
    await store.ensure_chat(CHAT)
    digest, zone = await asyncio.gather(
        chats.set_digest(store, CHAT, ["weekly", "18:30", "fri"], now=NOW),
        chats.set_timezone(store, CHAT, "Europe/Berlin", now=NOW),
    )
    chat = await store.chat(CHAT)
    assert chat is not None
    assert (chat.mode, chat.digest_weekday, chat.timezone) == ("weekly", 4, "Europe/Berlin")
    assert chat.next_digest_at == "2027-01-15T17:30:00Z"  # Friday 18:30 in Berlin
    assert schedule(chat) in (schedule(digest), schedule(zone))  # the later one saw the other


async def test_the_delivery_worker_wakes_at_the_next_digest_time(store: Store) -> None:
    """A cohort of digests starts at its minute, not up to an idle tick after it: the worker's
    wait ends at the next digest time; one already due (its chat waiting) does not shorten it,
    and a paused chat's digest does not count."""
    await digest_chat(store)  # due at 08:00, an hour before NOW
    engine = Delivery(store, FakeSender(), clock=lambda: NOW)
    assert await engine.next_wake(5.0) == 5.0  # nothing ahead within the tick
    await store.update_chat(CHAT, next_digest_at="2027-01-11T09:00:02Z")
    assert await engine.next_wake(5.0) == pytest.approx(2.0)
    assert await engine.next_wake(1.0) == 1.0
    await store.update_chat(CHAT, paused=True)
    assert await engine.next_wake(5.0) == 5.0
