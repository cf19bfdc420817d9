"""The Bot API rate limiter (``bot.ratelimit``): budgets, priorities, and reactions to 429s.

The callbacks here stand in for PTB's HTTP call. The limiter runs on a virtual clock
(``clocks.VirtualClock``): time moves only when every task waits on it, so rates and waits are
exact ("no faster than allowed", and no slower either) whatever the machine's speed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from telegram.error import RetryAfter

from clocks import VirtualClock, settle
from topicpulse.bot.buckets import Priority, PriorityBucket, TokenBucket
from topicpulse.bot.ratelimit import (
    ChatCoolingDown,
    Limits,
    NoRoom,
    TelegramRateLimiter,
    _retry_after,
    paced,
    retry_seconds,
)


def on(clock: VirtualClock, limits: Limits | None = None) -> TelegramRateLimiter:
    """A limiter that runs on ``clock``."""
    return TelegramRateLimiter(limits, clock=clock, sleep=clock.sleep)


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

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.calls: list[tuple[Any, float]] = []
        self.failures: dict[Any, list[Exception]] = {}

    def fail(self, chat: Any, *errors: Exception) -> None:
        self.failures.setdefault(chat, []).extend(errors)

    def callback(self, chat: Any) -> Callable[..., Any]:
        async def call() -> dict[str, Any]:
            self.calls.append((chat, self.clock()))
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
def taker(
    bucket: PriorityBucket, order: list[str]
) -> Callable[[str, Priority], Coroutine[Any, Any, None]]:
    """A request that takes a token at ``priority`` and then writes its ``tag`` in ``order``."""

    async def take(tag: str, priority: Priority) -> None:
        await bucket.acquire(priority)
        order.append(tag)

    return take


def test_token_bucket_drains_at_its_rate() -> None:
    clock = VirtualClock()
    bucket = TokenBucket(rate=10, capacity=3, clock=clock)
    for _ in range(3):
        assert bucket.wait_time() == 0
        bucket.take()
    assert bucket.wait_time() == pytest.approx(0.1)
    assert bucket.wait_time(2) == pytest.approx(0.2)
    clock.now += 0.25
    assert bucket.level() == pytest.approx(0.5)
    assert bucket.wait_time(2) == 0 and not bucket.idle()
    clock.now += 0.05
    assert bucket.idle()


async def test_bucket_never_goes_faster_than_its_rate() -> None:
    clock = VirtualClock()
    bucket = PriorityBucket(rate=100, burst=5, clock=clock, sleep=clock.sleep)
    granted: list[float] = []

    async def one() -> None:
        await bucket.acquire()
        granted.append(clock())

    start = clock()
    await clock.run(asyncio.gather(*(one() for _ in range(30))))
    assert within_bucket(granted, rate=100, burst=5)
    assert max(granted) - start == pytest.approx((30 - 5) / 100)  # and no slower either


async def test_replies_go_ahead_of_queued_bulk_requests() -> None:
    clock = VirtualClock()
    bucket = PriorityBucket(rate=50, burst=2, reserve=1, clock=clock, sleep=clock.sleep)
    order: list[str] = []
    take = taker(bucket, order)
    tasks = [asyncio.create_task(take(f"bulk{i}", Priority.BULK)) for i in range(6)]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(take("reply", Priority.REPLY)))
    await clock.run(asyncio.gather(*tasks))
    assert order[:2] == ["bulk0", "reply"]
    assert order[2:] == [f"bulk{i}" for i in range(1, 6)]  # bulk stays in order


async def test_bulk_leaves_the_reserve_for_replies() -> None:
    clock = VirtualClock()  # stands still: nothing drains meanwhile
    bucket = PriorityBucket(rate=5, burst=4, reserve=2, clock=clock, sleep=clock.sleep)
    bulk = [asyncio.create_task(bucket.acquire(Priority.BULK)) for _ in range(10)]
    await settle()
    assert sum(t.done() for t in bulk) == 2  # burst 4 minus the reserve of 2
    for _ in range(2):  # the reserve: two replies get through at once, bulk still queued
        reply = asyncio.create_task(bucket.acquire(Priority.REPLY))
        await settle()
        assert reply.done()
    assert sum(t.done() for t in bulk) == 2
    await clock.advance(0.4)  # bulk needs 3 free (itself and the reserve): 1 is, 2 drained
    assert sum(t.done() for t in bulk) == 2
    await clock.advance(0.2)
    assert sum(t.done() for t in bulk) == 3
    for task in bulk:
        task.cancel()
    await asyncio.gather(*bulk, return_exceptions=True)
    assert bucket.waiting() == 0


async def test_low_sends_go_after_replies_and_bulk_and_leave_the_reserve() -> None:
    clock = VirtualClock()
    bucket = PriorityBucket(rate=50, burst=2, reserve=1, clock=clock, sleep=clock.sleep)
    order: list[str] = []
    take = taker(bucket, order)
    tasks = [asyncio.create_task(take(f"low{i}", Priority.LOW)) for i in range(3)]
    await asyncio.sleep(0)
    tasks += [asyncio.create_task(take(f"bulk{i}", Priority.BULK)) for i in range(2)]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(take("reply", Priority.REPLY)))
    await clock.run(asyncio.gather(*tasks))
    # low0 found the bucket empty; then the reply at once (the reserve), bulk, the rest of low
    assert order == ["low0", "reply", "bulk0", "bulk1", "low1", "low2"]


async def test_a_low_send_into_a_cooling_chat_is_refused_at_once() -> None:
    clock = VirtualClock()
    limiter = on(clock)
    api = Api(clock)
    api.fail(1, flood(5))
    with pytest.raises(RetryAfter):  # a 429 is not retried for a low send
        await clock.run(
            limiter.process_request(
                api.callback(1), (), {}, "editMessageReplyMarkup", {"chat_id": 1}, Priority.LOW
            )
        )
    with pytest.raises(ChatCoolingDown):
        await clock.run(
            limiter.process_request(
                api.callback(1), (), {}, "editMessageReplyMarkup", {"chat_id": 1}, Priority.LOW
            )
        )
    assert len(api.times(1)) == 1


async def test_a_low_send_waits_for_room_at_most_a_while() -> None:
    clock = VirtualClock()
    limits = Limits()
    limiter = on(clock, limits)
    api = Api(clock)
    bulk = [asyncio.create_task(send(limiter, api, c, bulk=True)) for c in range(1, 121)]
    await clock.advance(0.5)  # a backlog of alerts: more than low_max_wait of it
    low = asyncio.create_task(
        limiter.process_request(
            api.callback(5000), (), {}, "editMessageReplyMarkup", {"chat_id": 5000}, Priority.LOW
        )
    )
    asked = clock()
    with pytest.raises(NoRoom):
        await clock.run(low)
    assert clock() - asked == pytest.approx(limits.low_max_wait)
    assert api.times(5000) == []  # never sent
    await clock.run(asyncio.gather(*bulk))
    assert len(api.calls) == 120
    # room again: a low send goes out at once
    await clock.run(
        limiter.process_request(
            api.callback(5000), (), {}, "editMessageReplyMarkup", {"chat_id": 5000}, Priority.LOW
        )
    )
    assert len(api.times(5000)) == 1


async def test_a_cancelled_waiter_does_not_block_the_queue() -> None:
    clock = VirtualClock()
    bucket = PriorityBucket(rate=50, burst=1, clock=clock, sleep=clock.sleep)
    await bucket.acquire()
    first = asyncio.create_task(bucket.acquire())
    second = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    first.cancel()
    await clock.run(second)
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
    clock = VirtualClock()
    limiter = on(clock)
    api = Api(clock)
    await clock.run(
        asyncio.gather(*(send(limiter, api, 1, endpoint="getChatMember") for _ in range(100)))
    )
    assert len(api.calls) == 100
    assert limiter.stats.sent == 0  # no budget spent


async def test_private_chat_pacing() -> None:
    clock = VirtualClock()
    limits = Limits().scaled(20)  # 20 messages/s per private chat, bursts of 2
    limiter = on(clock, limits)
    api = Api(clock)
    await clock.run(asyncio.gather(*(send(limiter, api, 7, bulk=True) for _ in range(12))))
    times = api.times(7)
    assert len(times) == 12
    assert within_bucket(times, rate=limits.private_rate, burst=limits.private_burst)
    # bulk keeps the reserve of 1 free: one at a time, at the full rate
    assert max(times) - min(times) == pytest.approx(11 / limits.private_rate)


async def test_group_pacing_stays_under_twenty_a_minute() -> None:
    clock = VirtualClock()
    limiter = on(clock)  # Telegram's own limits: the minutes are virtual
    api = Api(clock)
    await clock.run(asyncio.gather(*(send(limiter, api, -100555, bulk=True) for _ in range(60))))
    times = api.times(-100555)
    assert max_in_window(times, 60.0) <= 19
    assert within_bucket(times, rate=limiter.limits.group_rate, burst=limiter.limits.group_burst)


async def test_global_budget() -> None:
    clock = VirtualClock()
    limits = Limits()  # 29.5/s overall
    limiter = on(clock, limits)
    api = Api(clock)
    await clock.run(
        asyncio.gather(*(send(limiter, api, chat, bulk=True) for chat in range(1, 161)))
    )
    times = [t for _, t in api.calls]
    assert within_bucket(times, rate=limits.global_rate, burst=limits.global_burst)
    # and as fast as the budget allows: bulk's burst is the global one less the reserve
    bulk_burst = limits.global_burst - limits.global_reserve
    assert max(times) - min(times) == pytest.approx((160 - bulk_burst) / limits.global_rate)


async def test_replies_overtake_a_bulk_backlog() -> None:
    clock = VirtualClock()
    limits = Limits()
    limiter = on(clock, limits)
    api = Api(clock)
    bulk = [asyncio.create_task(send(limiter, api, c, bulk=True)) for c in range(1, 121)]
    await clock.advance(1.0)  # the burst is spent, ~90 bulk sends queue for the budget
    queued = sum(not t.done() for t in bulk)
    assert queued > 50
    asked = clock()
    await clock.run(send(limiter, api, 5000))  # a reply to a user
    index, answered = next((i, t) for i, (c, t) in enumerate(api.calls) if c == 5000)
    await clock.run(asyncio.gather(*bulk))
    assert len(api.calls[index + 1 :]) == queued  # went ahead of all the queued bulk sends
    assert answered == asked  # and did not wait at all (the backlog takes ~3 s)


# ---------------------------------------------------------------------------------- 429s
async def test_a_429_closes_only_that_chat_for_bulk_sends() -> None:
    clock = VirtualClock()
    limiter = on(clock)
    api = Api(clock)
    api.fail(1, flood(5))
    with pytest.raises(RetryAfter):
        await clock.run(send(limiter, api, 1, bulk=True))
    assert limiter.cooldown(1) == 5
    assert limiter.cooldown(2) == 0
    await clock.advance(2)
    # bulk into the closed chat is refused without a request; other chats flow
    with pytest.raises(ChatCoolingDown) as refused:
        await clock.run(send(limiter, api, 1, bulk=True))
    assert retry_seconds(refused.value) == pytest.approx(3)  # how long the caller should wait
    assert len(api.times(1)) == 1
    await clock.run(send(limiter, api, 2, bulk=True))
    assert len(api.times(2)) == 1
    assert limiter.stats.floods == 1 and limiter.stats.global_floods == 0
    await clock.advance(3)
    await clock.run(send(limiter, api, 1, bulk=True))  # open again
    assert len(api.times(1)) == 2


async def test_a_reply_waits_out_its_chats_429_and_retries() -> None:
    clock = VirtualClock()
    limiter = on(clock)
    api = Api(clock)
    api.fail(3, flood(4))
    assert await clock.run(send(limiter, api, 3)) == {"ok": True}
    first, second = api.times(3)
    assert second - first == pytest.approx(4)  # retry_after honoured, and no more
    assert limiter.stats.reply_retries == 1


async def test_a_reply_gives_up_on_a_long_penalty() -> None:
    clock = VirtualClock()
    limiter = on(clock, Limits(reply_max_wait=5))
    api = Api(clock)
    api.fail(3, flood(60))
    with pytest.raises(RetryAfter):
        await clock.run(send(limiter, api, 3))
    with pytest.raises(RetryAfter):  # and does not send into the penalty afterwards
        await clock.run(send(limiter, api, 3))
    assert len(api.times(3)) == 1


async def test_429s_from_several_chats_pause_everything() -> None:
    clock = VirtualClock()
    limiter = on(clock)
    api = Api(clock)
    for chat in (1, 2, 3):
        api.fail(chat, flood(5))
    results = await clock.run(
        asyncio.gather(
            *(send(limiter, api, c, bulk=True) for c in (1, 2, 3)), return_exceptions=True
        )
    )
    assert all(isinstance(r, RetryAfter) for r in results)
    assert limiter.stats.global_floods == 1
    pause = limiter.cooldown(None)
    assert pause > 4
    asked = clock()
    await clock.run(send(limiter, api, 9, bulk=True))  # an untouched chat waits for the pause
    assert api.times(9)[0] - asked == pytest.approx(pause)


async def test_the_default_clock_is_real_time() -> None:
    """Without an injected clock the limiter reads time.monotonic and sleeps for real (lower
    bounds only: a slow machine can only make it later)."""
    limits = Limits().scaled(100)  # 100 messages/s per private chat
    limiter = TelegramRateLimiter(limits)
    api = Api(time.monotonic)
    await asyncio.gather(*(send(limiter, api, 7, bulk=True) for _ in range(4)))
    times = api.times(7)
    assert max(times) - min(times) >= 3 / limits.private_rate - 1e-3
    await limiter.shutdown()


async def test_idle_chat_buckets_are_forgotten() -> None:
    clock = VirtualClock()
    limiter = on(clock)
    api = Api(clock)
    for start in range(1, 2600, 200):
        await clock.run(asyncio.gather(*(send(limiter, api, c) for c in range(start, start + 200))))
        await clock.advance(5)  # their buckets drain
    assert len(api.calls) == 2600
    assert len(limiter._chat_buckets) < 2000
