"""Momentum: how a topic is moving — 4-week counts, change, share, 12-week histogram, spikes.

All counts are over the papers' first-version date (``published``) and come straight from the
store with indexed range counts, so they equal what ``preview`` lists for the same windows.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from topicpulse import offload
from topicpulse.models import Topic, iso, parse_iso, utcnow
from topicpulse.store import Store
from topicpulse.wording import plural

WINDOW = timedelta(days=28)
WEEKS = 12
SPARK_BARS = "▁▂▃▄▅▆▇█"
YIELD_EVERY = 50  # topics computed or checked between two chances for replies to run


@dataclass(frozen=True, slots=True)
class SpikeThresholds:
    """When a topic spikes (defaults documented in docs/configuration.md)."""

    min_last_4w: int = 10  # rule 1: at least this many papers in the last 4 weeks …
    min_change_pct: float = 50.0  # … and at least this much up on the 4 weeks before
    min_sigma: float = 3.0  # rule 2: latest complete week ≥ mean + 3σ of the 8 weeks before
    min_week_papers: int = 5  # … with at least this many papers that week
    baseline_weeks: int = 8
    rearm_days: int = 14  # an episode ends after the condition was false this long


@dataclass(slots=True)
class Momentum:
    topic: str | None
    query: str
    as_of: datetime
    last_4w: int
    prev_4w: int
    change_pct: float | None
    share_pct: float
    total: int
    weekly: list[tuple[date, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "query": self.query,
            "as_of": iso(self.as_of),
            "last_4w": self.last_4w,
            "prev_4w": self.prev_4w,
            "change_pct": None if self.change_pct is None else round(self.change_pct, 1),
            "share_pct": round(self.share_pct, 2),
            "total": self.total,
            "weekly": [{"week_start": w.isoformat(), "count": c} for w, c in self.weekly],
        }


def as_of_day(day: date) -> datetime:
    """``--as-of YYYY-MM-DD`` means "at the end of that day" (UTC): the day's papers count."""
    return datetime.combine(day + timedelta(days=1), time(), tzinfo=UTC)


def week_starts(as_of: datetime, weeks: int = WEEKS) -> list[date]:
    """The Monday-start weeks ending with the week that contains the instant before ``as_of``."""
    last = (as_of - timedelta(microseconds=1)).date()
    monday = last - timedelta(days=last.weekday())
    return [monday - timedelta(weeks=n) for n in range(weeks - 1, -1, -1)]


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _points(as_of: datetime) -> list[datetime]:
    """The edges of every window momentum needs: 8 and 4 weeks back, each week start, now."""
    weeks = (_midnight(w) for w in week_starts(as_of))
    return sorted({as_of - 2 * WINDOW, as_of - WINDOW, *weeks, as_of})


def _assemble(
    topic: Topic | None,
    query: str,
    as_of: datetime,
    counts: list[int],
    total: int,
    all_last: int,
) -> Momentum:
    """Momentum from the counts of papers between consecutive ``_points(as_of)``."""
    spans = list(zip(_points(as_of), counts, strict=False))

    def between(lo: datetime, hi: datetime) -> int:
        return sum(count for start, count in spans if lo <= start < hi)

    starts = week_starts(as_of)
    weeks = [_midnight(w) for w in starts]
    last, prev = between(as_of - WINDOW, as_of), between(as_of - 2 * WINDOW, as_of - WINDOW)
    return Momentum(
        topic=topic.name if topic else None,
        query=topic.query if topic else query,
        as_of=as_of,
        last_4w=last,
        prev_4w=prev,
        change_pct=(last - prev) / prev * 100 if prev else None,
        share_pct=last / all_last * 100 if all_last else 0.0,
        total=total,
        weekly=[
            (w, between(start, end))
            for w, start, end in zip(starts, weeks, [*weeks[1:], as_of], strict=True)
        ],
    )


async def compute(
    store: Store,
    *,
    topic: Topic | None = None,
    fts: str | None = None,
    query: str = "",
    as_of: datetime | None = None,
) -> Momentum:
    """Momentum of a stored topic (by its matches) or of an FTS query (by the full-text index),
    in one trip to the store: its windows (one count over the union of their edges), the whole
    store's papers in the last four weeks, and its papers in all."""
    as_of = as_of or utcnow()
    source = {"topic_id": topic.id} if topic else {"fts": fts}
    counts, store_wide, total = await store.momentum_counts(
        [iso(p) for p in _points(as_of)], [iso(as_of - WINDOW), iso(as_of)], **source
    )
    return _assemble(topic, query, as_of, counts, total, store_wide)


async def compute_many(store: Store, topics: list[Topic], *, as_of: datetime) -> list[Momentum]:
    """Momentum of several stored topics as of one instant, in one trip for any number of
    topics: the store's total and every topic's windows as indexed range counts in one
    statement (one grouped pass over all their matches is slower; one read per topic made /list
    hop to the reader thread 2N times, each hop a wait for the GIL while a round runs)."""
    if not topics:
        return []
    found, all_last = await store.topics_windows(
        [iso(p) for p in _points(as_of)], [t.id for t in topics], [iso(as_of - WINDOW), iso(as_of)]
    )
    result = []
    for n, t in enumerate(topics, start=1):
        if n % YIELD_EVERY == 0:  # hundreds of topics (spike detection): let replies run
            await asyncio.sleep(0)
        result.append(_assemble(t, "", as_of, *found[t.id], all_last))
    return result


# ---------------------------------------------------------------------------------- wording
def _share(pct: float) -> str:
    if pct == 0:
        return "0%"
    if pct < 0.1:
        return "<0.1%"
    return f"{pct:.1f}%" if pct < 10 else f"{pct:.0f}%"


def headline(m: Momentum) -> str:
    """The topic page's sentence: "36 papers in the last four weeks, up 71% on the four weeks
    before. 0.4% of all new papers." """
    if m.change_pct is None:
        trend = (
            "none in the four weeks before" if m.last_4w else "none in the four weeks before either"
        )
    elif round(m.change_pct) == 0:
        trend = "level with the four weeks before"
    elif m.change_pct > 0:
        trend = f"up {round(m.change_pct)}% on the four weeks before"
    else:
        trend = f"down {round(-m.change_pct)}% on the four weeks before"
    share = _share(m.share_pct)
    papers = plural(m.last_4w, "paper")
    return f"{papers} in the last four weeks, {trend}. {share} of all new papers."


def sparkline(counts: list[int]) -> str:
    """One character per value, ▁ (lowest) … █ (highest); all-zero is a flat ▁ line."""
    if not counts:
        return ""
    top = max(counts)
    if top == 0:
        return SPARK_BARS[0] * len(counts)
    steps = len(SPARK_BARS) - 1
    return "".join(SPARK_BARS[math.ceil(c / top * steps) if c else 0] for c in counts)


# ---------------------------------------------------------------------------------- spikes
@dataclass(frozen=True, slots=True)
class SpikeCheck:
    spiking: bool
    reason: str


def check_spike(m: Momentum, thresholds: SpikeThresholds = SpikeThresholds()) -> SpikeCheck:
    """Is the topic spiking as of ``m.as_of``? (Either rule; see ``SpikeThresholds``.)"""
    t = thresholds
    if m.last_4w >= t.min_last_4w and m.change_pct is not None and m.change_pct >= t.min_change_pct:
        return SpikeCheck(
            True, f"4-week count up {round(m.change_pct)}% ({m.prev_4w} → {m.last_4w})"
        )
    counts = [c for _, c in m.weekly]
    complete = counts if _week_complete(m) else counts[:-1]
    if len(complete) > t.baseline_weeks:
        latest, baseline = complete[-1], complete[-1 - t.baseline_weeks : -1]
        mean, sigma = statistics.fmean(baseline), statistics.pstdev(baseline)
        if latest >= t.min_week_papers and latest > mean and latest >= mean + t.min_sigma * sigma:
            return SpikeCheck(
                True,
                f"last week {plural(latest, 'paper')} vs {mean:.1f} ± {sigma:.1f}"
                f" over the {t.baseline_weeks} weeks before",
            )
    return SpikeCheck(False, "")


def _week_complete(m: Momentum) -> bool:
    last_start = m.weekly[-1][0]
    return m.as_of >= _midnight(last_start + timedelta(days=7))


async def detect_spikes(
    store: Store,
    topics: list[Topic],
    *,
    now: datetime | None = None,
    thresholds: SpikeThresholds = SpikeThresholds(),
) -> list[int]:
    """Open an episode for each topic that starts spiking (its followers' alerts are queued in
    the same transaction), and close episodes whose condition has been false long enough.
    Returns the ids of the episodes opened."""
    now = now or utcnow()
    opened: list[int] = []
    episodes = await store.open_episodes([t.id for t in topics])
    moments = await compute_many(store, topics, as_of=now)
    for n, (topic, m) in enumerate(zip(topics, moments, strict=True), start=1):
        if n % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        check = check_spike(m, thresholds)
        episode = episodes.get(topic.id)
        if check.spiking:
            if episode is None:
                started = await store.start_episode(
                    topic.id,
                    at=iso(now),
                    reason=check.reason,
                    last_4w=m.last_4w,
                    prev_4w=m.prev_4w,
                    change_pct=m.change_pct,
                )
                if started is not None:  # None: another pass opened it meanwhile
                    opened.append(started)
            elif episode.quiet_since is not None:
                await store.set_episode_quiet(episode.id, None)
        elif episode is not None:
            if episode.quiet_since is None:
                await store.set_episode_quiet(episode.id, iso(now))
            elif now - parse_iso(episode.quiet_since) >= timedelta(days=thresholds.rearm_days):
                await store.end_episode(episode.id, iso(now))
    return opened


async def detect_followed_spikes(
    store: Store, *, now: datetime, thresholds: SpikeThresholds, in_process: bool = False
) -> list[int]:
    """``detect_spikes`` for every followed topic; with ``in_process`` (and a store in a file)
    in the worker process (``offload``), through a connection of its own: the bot does that, so
    hundreds of topics' windows are assembled off its event loop."""
    if in_process and store.file_backed():
        return await offload.run(_detect_followed_apart, store.path, now, thresholds)
    return await detect_spikes(store, await store.followed_topics(), now=now, thresholds=thresholds)


def _detect_followed_apart(path: str, now: datetime, thresholds: SpikeThresholds) -> list[int]:
    async def detect(store: Store) -> list[int]:
        topics = await store.followed_topics()
        return await detect_spikes(store, topics, now=now, thresholds=thresholds)

    return Store.run_apart(path, now, detect)


def rising_first(m: Momentum) -> tuple[float, int]:
    """Sort key (with ``reverse=True``) for a chat's or the catalogue's topics: the biggest
    change first, topics with no papers before at the bottom, ties by volume."""
    return (m.change_pct if m.change_pct is not None else -1e9, m.last_4w)


async def trending(
    store: Store, *, as_of: datetime | None = None, min_volume: int = 5, limit: int = 10
) -> list[Momentum]:
    """Catalogue topics ranked by momentum: rising fastest first, among those with at least
    ``min_volume`` papers in the last four weeks (ties broken by volume)."""
    as_of = as_of or utcnow()
    results = await compute_many(store, await store.topics(kind="catalogue"), as_of=as_of)
    eligible = [m for m in results if m.last_4w >= min_volume]
    eligible.sort(
        key=lambda m: (m.change_pct if m.change_pct is not None else math.inf, m.last_4w),
        reverse=True,
    )
    return eligible[:limit]
