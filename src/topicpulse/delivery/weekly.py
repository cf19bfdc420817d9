"""The weekly /foryou: an opt-in message with what /foryou shows — the last 7 days' papers the
chat's taste rates highest among those none of its topics matched — once a week.

It comes with the chat's weekly digest (its weekday and time), or, for a chat with instant
alerts or a daily digest, on Mondays at its digest time, in its time zone. The time it is due
next is kept in the store (``tastes.weekly_next_at``) and moves on in the same statement that
records the week's message as sent (``Outgoing.weekly``): once a week, across restarts. A week
with nothing to recommend, or a chat whose taste has fewer than ``MIN_LIKED`` 👍, sends
nothing (the week is skipped, not kept for later).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from topicpulse.delivery import buttons, formatting, tastes
from topicpulse.delivery.chats import next_digest_at
from topicpulse.delivery.messages import Outgoing
from topicpulse.insight import taste as taste_model
from topicpulse.models import Chat, iso
from topicpulse.store import Store, TasteRow

MIN_LIKED = 5  # 👍 (imported likes count) before the weekly message is sent
HEADER = (
    "✨ <b>For you this week</b> — outside your topics, the last 7 days, best first"
    " (<code>/foryou off</code> stops these):"
)


def next_weekly_at(chat: Chat, now: datetime) -> datetime:
    """When the chat's next weekly /foryou is due (UTC), strictly after ``now``."""
    weekday = chat.digest_weekday if chat.mode == "weekly" else 0
    slot = dataclasses.replace(chat, mode="weekly", digest_weekday=weekday)
    due = next_digest_at(slot, now)
    assert due is not None
    return due


async def set_weekly(store: Store, chat: Chat, on: bool, now: datetime) -> datetime | None:
    """Turn the weekly /foryou on (returns when the first is due) or off (None)."""
    due = next_weekly_at(chat, now) if on else None
    await store.set_weekly(chat.chat_id, iso(due) if due else None)
    return due


async def reschedule(store: Store, chat: Chat, now: datetime) -> None:
    """The chat's digest schedule or time zone changed: its weekly /foryou moves with it."""
    row = await store.taste(chat.chat_id)
    if row is not None and row.weekly:
        await store.set_weekly(chat.chat_id, iso(next_weekly_at(chat, now)))


async def due_messages(store: Store, chat: Chat, now: datetime) -> list[Outgoing]:
    """The chat's weekly /foryou if it is due at ``now`` (its last message moves the due time
    on once accepted); nothing to send moves it on at once."""
    row = await store.taste(chat.chat_id)
    if row is None or not row.weekly or row.weekly_next_at is None:
        return []
    if row.weekly_next_at > iso(now):
        return []
    following = iso(next_weekly_at(chat, now))
    messages = await _messages(store, chat.chat_id, now)
    if not messages:
        await store.settle_weekly(chat.chat_id, due=row.weekly_next_at, next_at=following)
        return []
    messages[-1].weekly = (row.weekly_next_at, following)
    return messages


async def _messages(store: Store, chat_id: int, now: datetime) -> list[Outgoing]:
    """What /foryou shows, as messages with 👍 / 👎 and why? under each paper."""
    taste, _ = await taste_model.load(store, chat_id)
    if taste is None or taste.up < MIN_LIKED:
        return []
    found = await tastes.for_you(store, chat_id, now)
    if not found:
        return []
    papers = [p for p, _ in found]
    numbers = {p.id: n for n, p in enumerate(papers, start=1)}
    tags = await store.paper_topics(list(numbers), kind="catalogue")
    messages = []
    for text, ids in formatting.paper_list_keyed(papers, header=HEADER, tags=tags):
        rows = [
            [
                *buttons.rating_row(pid, number=numbers[pid]),
                (f"why? {numbers[pid]}", buttons.why_data(pid)),
            ]
            for pid in ids
        ]
        messages.append(Outgoing(chat_id, [], text, buttons=rows))
    return messages


_DAYS = ("Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays", "Sundays")


def when(chat: Chat) -> str:
    """When the chat's weekly /foryou comes, in words: "Mondays at 08:00 UTC"."""
    weekday = chat.digest_weekday if chat.mode == "weekly" else 0
    return f"{_DAYS[weekday]} at {chat.digest_time} {chat.timezone}"


def describe(chat: Chat | None, row: TasteRow | None) -> str:
    """The weekly /foryou as /taste tells it (plain text)."""
    if chat is None or row is None or not row.weekly:
        return "Weekly /foryou: off (/foryou weekly turns it on)"
    return f"Weekly /foryou: on — {when(chat)}"
