"""The Bot API rate limiter (``bot.ratelimit``): budgets, priorities, and reactions to 429s.

The callbacks here stand in for PTB's HTTP call. Every timing assertion is a lower bound
("no faster than allowed", "waited at least retry_after"), which a slow machine cannot break."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from telegram.error import RetryAfter

from topicpulse.bot.ratelimit import (
    ChatCoolingDown,
    Limits,
    Priority,
    PriorityBucket,
    TelegramRateLimiter,
    _retry_after,
    paced,
    retry_seconds,
)


def now() -> float:
    return asyncio.get_running_loop().time()


def max_in_window(times: list[float], window: float) -> int:
    """The most events in any closed interval of length ``window``."""
    times = sorted(times)
    best, j = 0, 0
    for i, t in enumerate(times):
        while times[j] < t - window - 1e-9:
            j += 1
        best = max(best, i - j + 1)
    return best


def within_bucket(times: list[float], rate: float, burst: float) -> bool:
    """No interval [a, b] holds more than burst + rate·(b − a) events (leaky bucket)."""
    times = sorted(times)
    return all(
        j - i + 1 <= burst + rate * (times[j] - times[i]) + 1e-6
        for i in range(len(times))
        for j in range(i, len(times))
    )


class Api:
    """A stand-in for the HTTP call: records (chat, time) and raises what it is told to."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, float]] = []
        self.failures: dict[Any, list[Exception]] = {}

    def fail(self, chat: Any, *errors: Exception) -> None:
        self.failures.setdefault(chat, []).extend(errors)

    def callback(self, chat: Any) -> Callable[..., Any]:
        async def call() -> dict[str, Any]:
            self.calls.append((chat, now()))
            queue = self.failures.get(chat)
            if queue:
                raise queue.pop(0)
            return {"ok": True}

        return call

    def times(self, chat: Any) -> list[float]:
        return [t for c, t in self.calls if c == chat]


async def send(
    limiter: TelegramRateLimiter,
    api: Api,
    chat: Any,
    *,
    bulk: bool = False,
    endpoint: str = "sendMessage",
) -> Any:
    return await limiter.process_request(
        api.callback(chat),
        (),
        {},
        endpoint,
        {"chat_id": chat, "text": "x"},
        Priority.BULK if bulk else None,
    )


def flood(seconds: float) -> RetryAfter:
    return _retry_after(RetryAfter, seconds)


# ---------------------------------------------------------------------------------- buckets
async def test_bucket_never_goes_faster_than_its_rate() -> None:
    bucket = PriorityBucket(rate=100, burst=5)
    granted: list[float] = []

    async def one() -> None:
        await bucket.acquire()
        granted.append(now())

    start = now()
    await asyncio.gather(*(one() for _ in range(30)))
    assert within_bucket(granted, rate=100, burst=5)
    assert max(granted) - start >= (30 - 5) / 100 - 0.005


async def test_replies_go_ahead_of_queued_bulk_requests() -> None:
    bucket = PriorityBucket(rate=50, burst=2, reserve=1)
    order: list[str] = []

    async def take(tag: str, priority: Priority) -> None:
        await bucket.acquire(priority)
        order.append(tag)

    tasks = [asyncio.create_task(take(f"bulk{i}", Priority.BULK)) for i in range(6)]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(take("reply", Priority.REPLY)))
    await asyncio.gather(*tasks)
    assert order[:2] == ["bulk0", "reply"]
    assert order[2:] == [f"bulk{i}" for i in range(1, 6)]  # bulk stays in order


async def test_bulk_leaves_the_reserve_for_replies() -> None:
    bucket = PriorityBucket(rate=5, burst=4, reserve=2)
    bulk = [asyncio.create_task(bucket.acquire(Priority.BULK)) for _ in range(10)]
    for _ in range(3):
        await asyncio.sleep(0)
    assert sum(t.done() for t in bulk) == 2  # burst 4 minus the reserve of 2
    for _ in range(2):  # the reserve: two replies get through at once, bulk still queued
        reply = asyncio.create_task(bucket.acquire(Priority.REPLY))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert reply.done()
    for task in bulk:
        task.cancel()
    await asyncio.gather(*bulk, return_exceptions=True)
    assert bucket.waiting() == 0


async def test_a_cancelled_waiter_does_not_block_the_queue() -> None:
    bucket = PriorityBucket(rate=50, burst=1)
    await bucket.acquire()
    first = asyncio.create_task(bucket.acquire())
    second = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.wait_for(second, timeout=5)
    assert first.cancelled()


def test_burst_must_fit_the_reserve() -> None:
    with pytest.raises(ValueError):
        PriorityBucket(rate=1, burst=2, reserve=1.5)


# ---------------------------------------------------------------------------------- limiter
def test_only_message_sending_endpoints_are_paced() -> None:
    for endpoint in ("sendMessage", "sendPhoto", "editMessageText", "copyMessage"):
        assert paced(endpoint)
    for endpoint in ("getChatMember", "answerCallbackQuery", "sendChatAction", "getMe"):
        assert not paced(endpoint)


async def test_queries_pass_straight_through() -> None:
    limiter = TelegramRateLimiter()
    api = Api()
    await asyncio.gather(*(send(limiter, api, 1, endpoint="getChatMember") for _ in range(100)))
    assert len(api.calls) == 100
    assert limiter.stats.sent == 0  # no budget spent


async def test_private_chat_pacing() -> None:
    limits = Limits().scaled(20)  # 20 messages/s per private chat, bursts of 2
    limiter = TelegramRateLimiter(limits)
    api = Api()
    await asyncio.gather(*(send(limiter, api, 7, bulk=True) for _ in range(12)))
    times = api.times(7)
    assert len(times) == 12
    assert within_bucket(times, rate=limits.private_rate, burst=limits.private_burst)
    assert max(times) - min(times) >= 10 / limits.private_rate - 0.005  # bulk: burst 1


async def test_group_pacing_stays_under_twenty_a_minute() -> None:
    limits = Limits().scaled(60)  # one "minute" lasts one second
    limiter = TelegramRateLimiter(limits)
    api = Api()
    await asyncio.gather(*(send(limiter, api, -100555, bulk=True) for _ in range(30)))
    times = api.times(-100555)
    assert max_in_window(times, 1.0) <= 19
    assert within_bucket(times, rate=limits.group_rate, burst=limits.group_burst)


async def test_global_budget() -> None:
    limits = Limits().scaled(4)  # 116/s overall
    limiter = TelegramRateLimiter(limits)
    api = Api()
    await asyncio.gather(*(send(limiter, api, chat, bulk=True) for chat in range(1, 161)))
    times = [t for _, t in api.calls]
    assert within_bucket(times, rate=limits.global_rate, burst=limits.global_burst)
    assert max(times) - min(times) >= (160 - limits.global_burst) / limits.global_rate - 0.01


async def test_replies_overtake_a_bulk_backlog() -> None:
    limits = Limits().scaled(2)  # 58/s overall
    limiter = TelegramRateLimiter(limits)
    api = Api()
    bulk = [asyncio.create_task(send(limiter, api, c, bulk=True)) for c in range(1, 121)]
    await asyncio.sleep(0.3)  # the burst is spent, ~100 bulk sends queue for the budget
    queued = sum(not t.done() for t in bulk)
    assert queued > 50
    asked = now()
    await send(limiter, api, 5000)  # a reply to a user
    answered = next(t for c, t in api.calls if c == 5000)
    await asyncio.gather(*bulk)
    later_bulk = [t for c, t in api.calls if c != 5000 and t > answered]
    assert len(later_bulk) >= queued - 5  # went ahead of (almost) all the queued bulk sends
    assert answered - asked < 1.0  # and did not wait for the backlog (~1.5 s of it)


# ---------------------------------------------------------------------------------- 429s
async def test_a_429_closes_only_that_chat_for_bulk_sends() -> None:
    limiter = TelegramRateLimiter(Limits().scaled(20))
    api = Api()
    api.fail(1, flood(0.5))
    with pytest.raises(RetryAfter):
        await send(limiter, api, 1, bulk=True)
    assert limiter.cooldown(1) > 0.3
    assert limiter.cooldown(2) == 0
    # bulk into the closed chat is refused without a request; other chats flow
    with pytest.raises(ChatCoolingDown) as refused:
        await send(limiter, api, 1, bulk=True)
    assert retry_seconds(refused.value) > 0.3  # how long the caller should wait
    assert len(api.times(1)) == 1
    await send(limiter, api, 2, bulk=True)
    assert len(api.times(2)) == 1
    assert limiter.stats.floods == 1 and limiter.stats.global_floods == 0


async def test_a_reply_waits_out_its_chats_429_and_retries() -> None:
    limiter = TelegramRateLimiter(Limits().scaled(20))
    api = Api()
    api.fail(3, flood(0.4))
    assert await send(limiter, api, 3) == {"ok": True}
    first, second = api.times(3)
    assert second - first >= 0.4
    assert limiter.stats.reply_retries == 1


async def test_a_reply_gives_up_on_a_long_penalty() -> None:
    limiter = TelegramRateLimiter(Limits(reply_max_wait=5))
    api = Api()
    api.fail(3, flood(60))
    with pytest.raises(RetryAfter):
        await send(limiter, api, 3)
    with pytest.raises(RetryAfter):  # and does not send into the penalty afterwards
        await send(limiter, api, 3)
    assert len(api.times(3)) == 1


async def test_429s_from_several_chats_pause_everything() -> None:
    limiter = TelegramRateLimiter(Limits().scaled(20))
    api = Api()
    for chat in (1, 2, 3):
        api.fail(chat, flood(0.5))
    results = await asyncio.gather(
        *(send(limiter, api, c, bulk=True) for c in (1, 2, 3)), return_exceptions=True
    )
    assert all(isinstance(r, RetryAfter) for r in results)
    assert limiter.stats.global_floods == 1
    assert limiter.cooldown(None) > 0.3
    asked = now()
    await send(limiter, api, 9, bulk=True)  # an untouched chat waits for the bot-wide pause
    assert api.times(9)[0] - asked >= 0.3


async def test_idle_chat_buckets_are_forgotten() -> None:
    limiter = TelegramRateLimiter(Limits().scaled(500))
    api = Api()
    for start in range(1, 2600, 200):
        await asyncio.gather(*(send(limiter, api, c) for c in range(start, start + 200)))
    assert len(api.calls) == 2600
    assert len(limiter._chat_buckets) < 2000
