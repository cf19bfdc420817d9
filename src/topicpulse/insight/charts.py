"""Charts: the 12-week momentum histogram as a PNG, sized to read well on a phone."""

from __future__ import annotations

import functools
import io
from typing import TYPE_CHECKING

from topicpulse.insight.momentum import Momentum, headline
from topicpulse.wording import day_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_RECENT = "#2f6fdf"  # last four weeks
_EARLIER = "#b8c4d6"


def render_chart(m: Momentum, *, title: str | None = None) -> bytes:
    """A bar chart of ``m.weekly``: title = topic name, subtitle = the headline numbers, the last
    four weeks highlighted, a count on each bar, week labels like "Jul 13".

    Rendering costs a few hundred ms of CPU, so the PNGs of the most recent distinct charts are
    kept: asking for the same topic again until its numbers change costs nothing."""
    return _render(
        title or m.topic or m.query,
        headline(m),
        tuple(day_label(w) for w, _ in m.weekly),
        tuple(c for _, c in m.weekly),
    )


@functools.lru_cache(maxsize=128)
def _render(name: str, subtitle: str, labels: tuple[str, ...], counts: tuple[int, ...]) -> bytes:
    colours = [_EARLIER] * max(0, len(counts) - 4) + [_RECENT] * min(4, len(counts))

    fig = _figure()
    ax = fig.add_subplot()
    bars = ax.bar(range(len(counts)), counts, color=colours, width=0.75)
    ax.bar_label(bars, labels=[str(c) if c else "" for c in counts], fontsize=9, padding=2)
    ax.set_xticks(range(len(counts)), list(labels), rotation=45, ha="right", fontsize=9)
    ax.set_ylabel("papers per week")
    top = max([*counts, 1]) * 1.18
    ax.set_ylim(0, top)
    ax.spines[["top", "right"]].set_visible(False)
    ax.yaxis.get_major_locator().set_params(integer=True)
    # parse_math=False: a "$" in a name (users' queries) is text, not mathtext that can fail
    fig.suptitle(_shorten(name, 60), fontsize=14, fontweight="bold", x=0.02, ha="left",
                 parse_math=False)  # fmt: skip
    ax.set_title(_shorten(subtitle, 110), fontsize=9.5, loc="left", color="#444444",
                 parse_math=False)  # fmt: skip
    fig.text(
        0.99,
        0.01,
        "last 4 weeks highlighted · weeks start Monday",
        ha="right",
        fontsize=7.5,
        color="#777777",
    )
    # Fixed margins instead of tight_layout(), which measured every text twice (≈ 60% of the
    # time); only the y tick labels vary in width: from 1e6 on they read "2.0" under a "1e6".
    digits = len(str(int(top))) if top < 1e6 else 4
    fig.subplots_adjust(left=0.085 + 0.012 * max(0, digits - 4), right=0.985, top=0.85,
                        bottom=0.16)  # fmt: skip
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", pil_kwargs={"compress_level": 1})  # faster, +5% bytes
    return buffer.getvalue()


def _figure() -> Figure:
    """A 960×540 px figure (sharp in Telegram's photo viewer). matplotlib is imported here, not
    at module level: it takes seconds to import and most commands never draw a chart."""
    from matplotlib.figure import Figure  # pyplot-free: renders with Agg, no display, thread-safe

    return Figure(figsize=(8, 4.5), dpi=120)


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())  # one line: a newline or tab in a query would break the title
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
