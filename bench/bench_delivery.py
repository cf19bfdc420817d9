"""Fan-out benchmark: 10,000 alerts to 3,000 private chats through the real Application and a
fake Bot API that enforces Telegram's limits (30/s overall, 1/s per private chat with bursts of
3, 20/min per group, 429 + growing penalties) with 100 ms latency per request.

Measures, from the fake's own records: sustained messages/s, 429s received, alerts lost and
delivered twice, peak RSS of the process (bot and fakes); and the responsiveness of commands
(/help and /momentum typed by subscribers) while the fan-out drains, against an idle bot.

    .venv/bin/python bench/bench_delivery.py                  # the full run (~2.5 min)
    .venv/bin/python bench/bench_delivery.py --alerts 1000 --chats 300   # a quick one
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from dataclasses import dataclass

from _support import (
    ARXIV_LINK,
    OUT,
    BotProcess,
    RssSampler,
    bot_env,
    delivered,
    fresh_db,
    mb,
    outbox_counts,
    pending_rows,
    percentile,
    prepare_fanout,
    wait_until,
)
from fake_arxiv import FakeArxiv
from fake_telegram import FakeTelegram

HELP_PREFIX = "<b>topicpulse</b>"
MOMENTUM_PREFIX = "📊"


@dataclass
class Probe:
    chat_id: int
    command: str
    sent_at: float  # fake clock (time.monotonic)
    latency: float | None = None


def _is_reply(text: str | None) -> bool:
    return bool(text) and (text.startswith(HELP_PREFIX) or text.startswith(MOMENTUM_PREFIX))


async def probe_loop(
    fake: FakeTelegram,
    chats: list[int],
    topic_of: dict[int, str],
    *,
    every: float,
    momentum_every: int,
    keep_going: asyncio.Event | None = None,
    count: int | None = None,
) -> list[Probe]:
    """Users type commands every ``every`` seconds (±50%) until ``keep_going`` is cleared or
    ``count`` were sent; each command's latency is from user_sends to the reply's arrival."""
    probes: list[Probe] = []
    rng = random.Random(7)
    busy: set[int] = set()
    n = 0
    while (keep_going is None or keep_going.is_set()) and (count is None or n < count):
        chat_id = rng.choice([c for c in rng.sample(chats, 5) if c not in busy] or chats)
        momentum = momentum_every > 0 and n % momentum_every == momentum_every - 1
        command = f"/momentum {topic_of[chat_id]}" if momentum else "/help"
        busy.add(chat_id)
        probe = Probe(chat_id, command.split()[0], time.monotonic())
        fake.user_sends(chat_id, command)
        probes.append(probe)
        asyncio.get_running_loop().create_task(_await_reply(fake, probe, busy))
        n += 1
        await asyncio.sleep(every * rng.uniform(0.5, 1.5))
    for _ in range(200):  # let the last replies arrive
        if all(p.latency is not None for p in probes):
            break
        await asyncio.sleep(0.05)
    return probes


async def _await_reply(fake: FakeTelegram, probe: Probe, busy: set[int]) -> None:
    try:
        message = await fake.wait_for(
            lambda m: m.chat_id == probe.chat_id and m.time >= probe.sent_at and _is_reply(m.text),
            timeout=30,
        )
        probe.latency = message.time - probe.sent_at
    except AssertionError:
        pass
    finally:
        busy.discard(probe.chat_id)


def latency_line(label: str, probes: list[Probe]) -> tuple[float, float]:
    values = [p.latency for p in probes if p.latency is not None]
    missing = sum(p.latency is None for p in probes)
    p50, p95 = percentile(values, 50), percentile(values, 95)
    print(
        f"  {label:<26} n={len(values):>4}  p50={p50 * 1000:6.0f} ms  p95={p95 * 1000:6.0f} ms"
        + (f"  (no reply: {missing})" if missing else "")
    )
    return p50, p95


async def main(args: argparse.Namespace) -> int:
    db = fresh_db("delivery.db")
    log_path = OUT / "delivery-bot.log"
    log_path.unlink(missing_ok=True)
    started = time.monotonic()
    fan = await prepare_fanout(db, chats=args.chats, alerts=args.alerts)
    print(
        f"prepared {db.name}: {fan.alerts} alerts queued for {len(fan.expected)} chats "
        f"({time.monotonic() - started:.1f}s)"
    )
    fake = FakeTelegram(enforce_limits=True, latency=0.1)
    await fake.start()
    arxiv = FakeArxiv()
    await arxiv.start()
    chats = sorted(fan.expected)
    n_topics = -(-len(chats) // 10)
    topic_of = {c: f"kw{i % n_topics:05d}" for i, c in enumerate(chats)}
    bot = await BotProcess(bot_env(fake, arxiv, db), log_path).start()
    rss = RssSampler(bot.pid).start()
    try:
        if not await wait_until(lambda: fake.stats["accepted"] > 0, timeout=60):
            print("the bot did not start; see", log_path)
            return 1
        # --- fan-out, with commands typed all along
        draining = asyncio.Event()
        draining.set()
        prober = asyncio.create_task(
            probe_loop(
                fake,
                chats,
                topic_of,
                every=args.probe_every,
                momentum_every=args.momentum_every,
                keep_going=draining,
            )
        )
        t0 = time.monotonic()
        while pending_rows(db):
            await asyncio.sleep(0.5)
            if time.monotonic() - t0 > args.timeout:
                print(f"TIMEOUT after {args.timeout}s: {outbox_counts(db)}")
                break
        drain_s = time.monotonic() - t0
        draining.clear()
        loaded = await prober
        rss_loaded = rss.peak
        # --- the same commands on the idle bot
        await asyncio.sleep(1.5)
        idle = await probe_loop(
            fake,
            chats,
            topic_of,
            every=args.probe_every,
            momentum_every=args.momentum_every,
            count=args.idle_probes,
        )
    finally:
        code = await bot.stop()
        await rss.stop()
    counts = outbox_counts(db)
    await arxiv.close()
    await fake.stop()
    token_leaks = log_path.read_text("utf-8", "replace").count(fake.token)

    # ------------------------------------------------------------------ figures
    alert_messages = [
        m
        for m in fake.sent
        if m.method == "sendMessage" and not _is_reply(m.text) and ARXIV_LINK.search(m.text or "")
    ]
    times = sorted(m.time for m in alert_messages)
    all_times = sorted(
        m.time for m in fake.sent if times and times[0] <= m.time <= times[-1]
    )  # alerts and replies: Telegram's 30/s counts both
    span = times[-1] - times[0] if len(times) > 1 else float("nan")
    rate = (len(times) - 1) / span if len(times) > 1 else float("nan")
    total_rate = (len(all_times) - 1) / span if len(times) > 1 else float("nan")
    window_max, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - 1.0:
            j += 1
        window_max = max(window_max, i - j + 1)
    got = delivered(alert_messages, set(fan.expected))
    lost = sum(len(ids - set(got.get(c, []))) for c, ids in fan.expected.items())
    dupes = sum(len(v) - len(set(v)) for v in got.values())
    alerts_ok = sum(len(set(v)) for v in got.values())
    errors = dict(fake.stats["by_error_code"])

    print("\n=== bench_delivery: fan-out at Telegram's limits ===")
    print(f"alerts queued          {fan.alerts} to {len(fan.expected)} private chats")
    print(f"alert messages sent    {len(alert_messages)} (alerts packed per chat)")
    print(f"drain time             {drain_s:.1f} s (first→last alert message {span:.1f} s)")
    print(
        f"sustained rate         {total_rate:.2f} messages/s, all sends (goal ≥ 28): "
        f"{rate:.2f}/s of them alert messages ({alerts_ok / span:.0f} alerts/s), the rest replies"
    )
    print(f"busiest 1-s window     {window_max} messages (fake allows 30/s)")
    print(f"429s received          {errors.get(429, 0)} (goal 0); all errors: {errors or 'none'}")
    print(f"lost                   {lost} (must be 0); outbox: {counts}")
    print(f"duplicates             {dupes} (must be 0)")
    print(f"bot peak RSS           {mb(rss_loaded)} during fan-out, {mb(rss.peak)} overall")
    print(f"token in bot log       {token_leaks} times; bot exit code {code}")
    print("command reply latency (user_sends → reply in the fake):")
    lp50, lp95 = latency_line("during fan-out", loaded)
    ip50, ip95 = latency_line("idle bot", idle)
    for command in ("/help", "/momentum"):
        latency_line(f"  {command} during fan-out", [p for p in loaded if p.command == command])
        latency_line(f"  {command} idle", [p for p in idle if p.command == command])
    print(f"ratio loaded/idle      p50 {lp50 / ip50:.2f}, p95 {lp95 / ip95:.2f} (goal ≤ 1.5)")
    ok = (
        total_rate >= 28
        and errors.get(429, 0) == 0
        and lost == 0
        and dupes == 0
        and lp50 / ip50 <= 1.5
        and lp95 / ip95 <= 1.5
    )
    if args.verbose:
        for p in sorted(loaded, key=lambda p: -(p.latency or 99))[:8]:
            around = [
                (round(m.time - p.sent_at, 2), m.method, (m.text or "")[:12])
                for m in fake.messages_to(p.chat_id)
                if abs(m.time - p.sent_at) < 5
            ]
            print(f"  slow {p.command} chat {p.chat_id}: {p.latency}; chat traffic ±5s: {around}")
    print("RESULT:", "all goals met" if ok else "some goal missed (see above)")
    return 0 if lost == 0 and dupes == 0 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alerts", type=int, default=10_000)
    parser.add_argument("--chats", type=int, default=3_000)
    parser.add_argument("--probe-every", type=float, default=1.0, help="seconds between commands")
    parser.add_argument(
        "--momentum-every", type=int, default=4, help="every Nth command is /momentum (0: none)"
    )
    parser.add_argument("--idle-probes", type=int, default=40)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--timeout", type=float, default=600)
    raise SystemExit(asyncio.run(main(parser.parse_args())))
