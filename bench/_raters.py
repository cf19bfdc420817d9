"""Readers rating papers for ``bench_replies.py --raters N``: N chats tap 👍 / 👎 under a
message of papers the bot showed them, while the rounds run (issue 24: "a rating is
acknowledged at once, the model trains after, and the reply-latency benchmark still holds
≤ 1.5× idle with 1,000 chats rating while a round runs").

Each rater chat follows one catalogue topic, in a weekly digest (due days after the run: the
raters add no alerts to the rounds, so the rounds' own work stays that of the benchmark
without them), and has rated ``RATED_BEFORE`` stored papers already, its taste trained (in the
store's preparation, so the bot starts with nothing due); the fake Bot API holds one message
the bot "sent" it — ``RATER_PAPERS`` recent papers, each with its 👍 / 👎 row, as a digest has.
From the lead-in of each round to its tail the raters tap, together one tap every
``every / N`` seconds on average (Poisson arrivals): each tap is a ``callback_query`` through
the fake Bot API, on one of the message's buttons (👍 for 70%), so some taps change a rating,
some undo it. Every tap makes the chat's taste due: the bot acknowledges it, ticks the
message's buttons (editMessageReplyMarkup) and its Trainer retrains the chat in the worker
process. Measured: a tap's acknowledgement latency (the update
handed to the bot → its answerCallbackQuery at the fake), by the bot's state.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _support  # noqa: F401  (puts tests/ and src/ on the path)
from fake_telegram import FakeTelegram
from topicpulse.delivery import chats
from topicpulse.insight import taste
from topicpulse.store import Store

RATER_FIRST_ID = 700_001
RATED_BEFORE = 20  # ratings each rater has before the run (its taste trained)
RATER_PAPERS = 10  # papers on the message a rater taps under
LIKES = 0.7  # share of taps on 👍
WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
KIND = "weekly-digest raters"  # (in the prepared store's cache key)


async def prepare_raters(
    store: Store, count: int, topic_ids: Sequence[int], rng: random.Random
) -> dict[int, list[int]]:
    """``count`` rater chats in the store (a catalogue topic each, ``RATED_BEFORE`` ratings,
    a trained taste); returns each one's message papers (ids of recent stored papers)."""
    if not count:
        return {}
    papers = await store.recent_papers(20_000)
    later = WEEKDAYS[(datetime.now(UTC).weekday() + 3) % 7]  # the digest is not due in the run
    recent = papers[:2_000]
    raters: dict[int, list[int]] = {}
    for index in range(count):
        chat_id = RATER_FIRST_ID + index
        await store.ensure_chat(chat_id)
        await store.subscribe(chat_id, rng.choice(topic_ids))
        await chats.set_digest(store, chat_id, ["weekly", "08:00", later])
        for n, paper in enumerate(rng.sample(papers, RATED_BEFORE)):
            await store.toggle_rating(chat_id, paper, 1 if n % 3 else -1)
        await taste.learn(store, chat_id)
        raters[chat_id] = [p.id for p in rng.sample(recent, RATER_PAPERS)]
    return raters


def rating_keyboard(paper_ids: Sequence[int]) -> dict[str, Any]:
    return {
        "inline_keyboard": [
            [
                {"text": f"👍 {n}", "callback_data": f"r:{pid}:+"},
                {"text": f"👎 {n}", "callback_data": f"r:{pid}:-"},
            ]
            for n, pid in enumerate(paper_ids, start=1)
        ]
    }


def post_messages(fake: FakeTelegram, raters: dict[int, list[int]]) -> dict[int, int]:
    """The message each rater chat taps under, put in the fake as if the bot had sent it."""
    shown: dict[int, int] = {}
    for chat_id, paper_ids in raters.items():
        fake._register_chat(chat_id, "private", None, f"rater{chat_id}")
        text = "\n".join(f"{n}. A paper" for n in range(1, len(paper_ids) + 1))
        message = fake._new_message(chat_id, text=text, reply_markup=rating_keyboard(paper_ids))
        shown[chat_id] = int(message["message_id"])
    return shown


@dataclass
class Tap:
    chat_id: int
    update_id: int
    query_id: str
    queued: float
    delivered: float | None = None
    answered: float | None = None
    answer: str = ""
    state: str = "?"

    @property
    def latency(self) -> float | None:
        if self.answered is None or self.delivered is None:
            return None
        return self.answered - self.delivered


class Raters:
    """The rater chats, tapping at random (Poisson arrivals, ``every`` seconds a chat)."""

    def __init__(
        self,
        fake: FakeTelegram,
        raters: dict[int, list[int]],
        messages: dict[int, int],
        every: float,
    ) -> None:
        self.fake = fake
        self.raters = raters
        self.messages = messages
        self.chats = sorted(raters)
        self.gap = every / max(len(self.chats), 1)  # mean seconds between taps, all raters
        self.rng = random.Random(13)
        self.taps: list[Tap] = []

    def tap_one(self) -> Tap:
        chat_id = self.rng.choice(self.chats)
        paper_id = self.rng.choice(self.raters[chat_id])
        data = f"r:{paper_id}:{'+' if self.rng.random() < LIKES else '-'}"
        update_id = self.fake.user_presses(
            chat_id, self.messages[chat_id], data, username=f"rater{chat_id}"
        )
        query_id = str(self.fake._updates[-1]["callback_query"]["id"])  # the one just queued
        tap = Tap(chat_id, update_id, query_id, time.monotonic())
        self.taps.append(tap)
        return tap

    async def tap_until(self, done: Callable[[], bool]) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while not done():
            self.tap_one()
            due += self.rng.expovariate(1 / self.gap)
            await asyncio.sleep(max(0.0, due - loop.time()))


def collect_answers(fake: FakeTelegram, taps: list[Tap], handed: dict[int, float]) -> None:
    """Pair every tap with the bot's answerCallbackQuery (its time at the fake)."""
    answered = {
        str(call.params.get("callback_query_id")): call
        for call in fake.calls
        if call.method == "answerCallbackQuery" and call.ok
    }
    for tap in taps:
        tap.delivered = handed.get(tap.update_id)
        call = answered.get(tap.query_id)
        tap.answered = call.time if call else None
        tap.answer = str(call.params.get("text", "")) if call else ""


async def tastes_due(db: Path) -> int:
    """How many chats' tastes wait for the Trainer in the store at ``db``."""
    store = await Store.open(db, migrate=False, readers=0)
    try:
        return len(await store.tastes_due(limit=10**6))
    finally:
        await store.close()
