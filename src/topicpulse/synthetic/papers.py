"""Synthetic arXiv papers: realistic, deterministic (seeded), and written from scratch.

It exists for tests, benchmarks and demos: the test suite runs on papers made here (so a fresh
clone needs no recorded arXiv data), benchmarks scale to any volume (150,000 papers take a few
seconds), and a demo store can be filled without touching arXiv.

``generate_papers`` makes ``topicpulse.models.Paper`` objects that look like a stream of arXiv
submissions: a weekday rhythm (Monday and Tuesday heavy, weekends light), growth over time,
arXiv ids of the form YYMM.NNNNN numbered in submission order within each month, 2–8 authors,
a primary category with cross-lists, revised versions (v2, v3 … with a later ``updated``),
optional comment / journal_ref / doi, and titles and abstracts (80–250 words) built from
research-theme vocabulary (``topicpulse.synthetic.vocabulary``) so that the catalogue's topics match
a plausible share of them. A few titles are hard cases (``<``, ``&``, ``$\\alpha$``, Unicode).
The same arguments always give the same papers.

How the papers are written out (JSON lines, Atom) is ``topicpulse.synthetic.feeds``.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import random
import unicodedata
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from topicpulse.models import Paper, iso
from topicpulse.synthetic import vocabulary as V

# Relative submission volume per weekday, Monday first (per_weekday × this).
WEEKDAY_WEIGHTS = (1.2, 1.15, 1.0, 0.95, 0.9, 0.3, 0.3)
VERSION_SHARES = (0.70, 0.20, 0.07, 0.02, 0.01)  # v1 … v5
_VERSION_CUMULATIVE = tuple(itertools.accumulate(VERSION_SHARES))[:-1]
AUTHOR_SHARES = (0.12, 0.22, 0.24, 0.18, 0.11, 0.07, 0.06)  # 2 … 8 authors
_AUTHOR_CUMULATIVE = tuple(itertools.accumulate(AUTHOR_SHARES))[:-1]
_SMALL_WORDS = frozenset(
    ("a", "an", "and", "as", "at", "by", "for", "in", "of", "on", "or", "the", "to", "via", "with")
)


# ---------------------------------------------------------------------------------- volume
def daily_counts(
    count: int | None = None,
    *,
    start: date,
    days: int,
    per_weekday: int = 100,
    growth: float = 0.0,
) -> list[int]:
    """Papers per day over [start, start+days): per_weekday × the weekday's weight ×
    (1+growth)^week; with ``count``, the same shape scaled to exactly ``count`` papers."""
    if days < 0 or per_weekday < 0 or (count is not None and count < 0):
        raise ValueError("days, per_weekday and count must not be negative")
    expected = [
        per_weekday * WEEKDAY_WEIGHTS[(start + timedelta(d)).weekday()] * (1 + growth) ** (d // 7)
        for d in range(days)
    ]
    if count is not None:
        total = sum(expected)
        if count and not total:
            raise ValueError("count > 0 needs days > 0 and per_weekday > 0")
        expected = [e * count / total for e in expected] if total else expected
    # Round the running sum, so the days add up to round(total) (exactly count if given).
    sums = [round(s) for s in itertools.accumulate(expected, initial=0.0)]
    return [b - a for a, b in itertools.pairwise(sums)]


# ---------------------------------------------------------------------------------- papers
def generate_papers(
    count: int | None = None,
    *,
    start: date,
    days: int,
    per_weekday: int = 100,
    growth: float = 0.0,
    seed: int = 0,
) -> list[Paper]:
    """Papers first published over [start, start+days), sorted by ``published``.

    Each day gets per_weekday × its weekday's weight (Monday 1.2 … weekend 0.3) ×
    (1+growth)^(week index) papers; with ``count``, exactly ``count`` papers spread over the
    range in the same rhythm. Ids are unique within one call; versions > 1 are only given
    when the revision date still falls inside the range.
    """
    if start < date(2007, 4, 1):
        raise ValueError("synthetic papers use YYMM.NNNNN ids: start in April 2007 or later")
    rng = random.Random(f"topicpulse.synthetic:{seed}")
    write = _PaperWriter(rng)
    last = start + timedelta(days)
    end = datetime(last.year, last.month, last.day, tzinfo=UTC)
    themes = V.THEMES
    drafts: list[tuple[str, V.Theme]] = []
    for day, n in enumerate(daily_counts(count, start=start, days=days,
                                         per_weekday=per_weekday, growth=growth)):  # fmt: skip
        if not n:
            continue
        week = day // 7
        weights = [t.weight * (1 + t.trend) ** week for t in themes]
        prefix = f"{start + timedelta(day)}T"
        stamps = sorted(int(86_400 * rng.random()) for _ in range(n))
        picked = rng.choices(themes, weights=weights, k=n)
        drafts += [
            (f"{prefix}{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}Z", theme)
            for s, theme in zip(stamps, picked, strict=True)
        ]
    ids = _arxiv_ids([published for published, _ in drafts], rng)
    return [
        write.paper(arxiv_id, published, theme, end)
        for arxiv_id, (published, theme) in zip(ids, drafts, strict=True)
    ]


def _arxiv_ids(published: Sequence[str], rng: random.Random) -> list[str]:
    """YYMM.NNNNN ids increasing with submission time within each month (gaps stand for the
    papers of other fields), 4-digit numbers before 2015 as arXiv had."""
    ids: list[str] = []
    for month, group in itertools.groupby(published, key=lambda p: p[2:4] + p[5:7]):
        stamps = list(group)
        n, digits = len(stamps), 4 if month < "1501" else 5
        limit = 10**digits - 1
        if n > limit:
            raise ValueError(f"{n} papers in month {month} do not fit {digits}-digit arXiv ids")
        step = max(1, min(6, limit // (2 * n)))  # gaps of 1..step: at most n*step numbers
        spare = limit - n * step
        number = 1 + int(spare * (int(stamps[0][8:10]) - 1) / 31)  # later days, higher numbers
        for _ in range(n):
            ids.append(f"{month}.{number:0{digits}d}")
            number += 1 + int(rng.random() * step)
    return ids


class _PaperWriter:
    """Fills the vocabulary's templates for one paper at a time (all draws from ``rng``)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.random = rng.random

    def pick(self, seq: Sequence[str]) -> str:
        return seq[int(self.random() * len(seq))]

    def two(self, seq: Sequence[str]) -> tuple[str, str]:
        n = len(seq)
        i = int(self.random() * n)
        j = (i + 1 + int(self.random() * (n - 1))) % n if n > 1 else i
        return seq[i], seq[j]

    def paper(self, arxiv_id: str, published: str, theme: V.Theme, end: datetime) -> Paper:
        pick, r = self.pick, self.random
        slots = _Slots(self, theme)
        template = pick(V.HARD_TITLES if r() < 0.03 else V.TITLES)
        if "{name}" not in template and r() < 0.4:
            template = "{name}: " + template
        title = _capital(template.format_map(slots.titled()))
        version, updated = self.revision(published, end)
        primary = pick(theme.primary)
        categories = dict.fromkeys([primary])
        for _ in range(min(3, int(-2.2 * math.log1p(-r())))):  # exponential; none: ~35%
            categories[pick(theme.cross)] = None
        return Paper(
            arxiv_id=arxiv_id,
            version=version,
            title=title,
            abstract=self.abstract(slots),
            authors=self.authors(),
            primary_category=primary,
            categories=tuple(categories),
            published=published,
            updated=updated,
            comment=pick(V.COMMENTS).format_map(slots) if r() < 0.55 else None,
            journal_ref=pick(V.JOURNALS).format_map(slots) if r() < 0.07 else None,
            doi=pick(V.DOIS).format_map(slots) if r() < 0.08 else None,
            affiliations=_affiliations(arxiv_id),
        )

    def abstract(self, slots: _Slots) -> str:
        """4-10 sentences; only openers can start with a slot that needs a capital."""
        pick, r = self.pick, self.random
        sentences = [_capital(pick(V.OPENERS).format_map(slots))]
        if r() < 0.8:
            sentences.append(pick(V.GAPS).format_map(slots))
        sentences.append(pick(V.CONTRIBUTIONS).format_map(slots))
        optional = list(self.two(V.DETAILS))[: 1 + int(r() * 2)]
        optional += list(self.two(V.EXPERIMENTS))[: 1 + int(r() * 2)]
        optional += list(self.two(V.CLOSERS))[: int(r() * 3)]
        if r() < 0.1:
            optional.insert(1, pick(V.LATEX))
        sentences += [s.format_map(slots) for s in optional]
        text = " ".join(sentences)
        words = text.count(" ") + 1
        fillers = (V.DETAILS, V.CLOSERS, V.GAPS)
        while words < 80:  # rare: only short sentences were picked
            sentences.append(pick(fillers[len(sentences) % 3]).format_map(slots))
            text = " ".join(sentences)
            words = text.count(" ") + 1
        while words > 250 and len(sentences) > 4:
            sentences.pop()
            text = " ".join(sentences)
            words = text.count(" ") + 1
        return text

    def authors(self) -> tuple[str, ...]:
        """2-8 distinct names, most papers 3-5."""
        pick, r = self.pick, self.random
        n = bisect.bisect(_AUTHOR_CUMULATIVE, r()) + 2
        names: dict[str, None] = {}
        while len(names) < n:
            middle = f" {pick(V.INITIALS)}." if r() < 0.12 else ""
            names[f"{pick(V.FIRST_NAMES)}{middle} {pick(V.SURNAMES)}"] = None
        return tuple(names)

    def revision(self, published: str, end: datetime) -> tuple[int, str]:
        """(version, updated): later versions a few days to months after the first."""
        version = bisect.bisect(_VERSION_CUMULATIVE, self.random()) + 1
        if version == 1:
            return 1, published
        when = datetime.fromisoformat(published.replace("Z", "+00:00"))
        for _ in range(version - 1):
            when += timedelta(days=2 + int(self.random() * 40), seconds=int(self.random() * 86400))
        return (version, iso(when)) if when < end else (1, published)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


@functools.lru_cache(maxsize=4096)
def _title_case(phrase: str) -> str:
    words = phrase.split()
    if words and words[0].lower() in ("a", "an", "the"):
        words = words[1:]
    out = []
    for i, word in enumerate(words):
        if (i and word in _SMALL_WORDS) or any(c.isupper() for c in word):
            out.append(word)
        else:
            parts = word.split("-")
            out.append("-".join(p if j and p in _SMALL_WORDS else p[:1].upper() + p[1:]
                                for j, p in enumerate(parts)))  # fmt: skip
    return " ".join(out)


class _Slots(dict[str, str]):
    """Template slots: the ones most templates use drawn at once, the rest on first use."""

    def __init__(self, writer: _PaperWriter, theme: V.Theme) -> None:
        r, pick, two = writer.random, writer.pick, writer.two
        part, part2 = two(theme.parts)
        task, task2 = two(theme.tasks)
        bench, bench2 = two(theme.benches)
        rest = [b for b in theme.benches if b not in (bench, bench2)] or [bench2]
        super().__init__(
            area=pick(theme.areas), topic=pick(theme.topics), problem=pick(theme.problems),
            method=pick(theme.methods), metric=pick(theme.metrics), head=pick(theme.heads),
            part=part, part2=part2, task=task, task2=task2,
            bench=bench, bench2=bench2, bench3=pick(rest),
            name=pick(V.NAMES) + pick(V.NAME_SUFFIXES), finding=pick(V.FINDINGS),
            baseline=pick(V.BASELINES), adj=pick(V.ADJECTIVES), property=pick(V.PROPERTIES),
            size1=pick(V.SIZES[:4]), size2=pick(V.SIZES[4:]),
            n=str(3 + int(r() * 10)), small=str(1 + int(r() * 5)),
            gain=f"{0.8 + r() * 11:.1f}", pct=f"{55 + r() * 40:.1f}", pct2=f"{35 + r() * 20:.1f}",
            count=f"{2 + int(r() * 60)},000",
        )  # fmt: skip
        self.writer = writer

    def __missing__(self, key: str) -> str:
        self[key] = value = self.draw(key)
        return value

    def draw(self, key: str) -> str:
        pick, r = self.writer.pick, self.writer.random
        if key == "handle":
            surname = unicodedata.normalize("NFKD", pick(V.SURNAMES)).encode("ascii", "ignore")
            return f"{surname.decode().lower()}-lab"
        if key == "venue":
            return pick(V.VENUES)
        if key == "repo":
            return self["name"].lower().replace("+", "p")
        if key == "page2":
            return str(int(self["page"]) + 8 + int(r() * 20))
        if key.startswith("d") and key[1:].isdigit():  # d4: four random digits
            return "".join(str(int(r() * 10)) for _ in range(int(key[1:])))
        low, spread = _NUMBERS[key]
        return (
            f"{low + r() * spread:.1f}" if isinstance(low, float) else str(low + int(r() * spread))
        )

    def titled(self) -> dict[str, str]:
        """Slots for titles: title case, parts without their article."""
        return _TitleSlots(self)


# Numeric slots drawn on first use: (low, spread); a float low gives one decimal.
_NUMBERS: dict[str, tuple[float, float]] = {
    "speedup": (1.5, 3), "pages": (6, 30), "figures": (1, 12), "tables": (1, 8), "page": (1, 900),
}  # fmt: skip


class _TitleSlots(dict[str, str]):
    def __init__(self, slots: _Slots) -> None:
        super().__init__()
        self.slots = slots

    def __missing__(self, key: str) -> str:
        value = self.slots[key]
        return value if key in ("name", "head") else _title_case(value)


def _affiliations(arxiv_id: str) -> tuple[str, ...]:
    """About 60% of papers name 1-3 institutions (as arXiv gives them for some authors). Drawn
    from the id, not the generator's stream, so adding them changed no other field."""
    rng = random.Random(f"affiliations/{arxiv_id}")
    if rng.random() >= 0.6:
        return ()
    count = 1 + int(rng.random() * 3)
    return tuple(dict.fromkeys(rng.choice(V.INSTITUTIONS) for _ in range(count)))
