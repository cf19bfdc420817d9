"""Charts: the 12-week momentum histogram as a PNG, sized to read well on a phone."""

from __future__ import annotations

import io

from matplotlib.figure import Figure  # pyplot-free: renders with Agg, no display, thread-safe

from topicpulse.momentum import Momentum, headline

_RECENT = "#2f6fdf"  # last four weeks
_EARLIER = "#b8c4d6"


def render_chart(m: Momentum, *, title: str | None = None) -> bytes:
    """A bar chart of ``m.weekly``: title = topic name, subtitle = the headline numbers, the last
    four weeks highlighted, a count on each bar, week labels like "Jul 13"."""
    counts = [c for _, c in m.weekly]
    labels = [w.strftime("%b %-d") for w, _ in m.weekly]
    colours = [_EARLIER] * max(0, len(counts) - 4) + [_RECENT] * min(4, len(counts))

    fig = Figure(figsize=(8, 4.5), dpi=120)  # 960×540 px: sharp in Telegram's photo viewer
    ax = fig.add_subplot()
    bars = ax.bar(range(len(counts)), counts, color=colours, width=0.75)
    ax.bar_label(bars, labels=[str(c) if c else "" for c in counts], fontsize=9, padding=2)
    ax.set_xticks(range(len(counts)), labels, rotation=45, ha="right", fontsize=9)
    ax.set_ylabel("papers per week")
    ax.set_ylim(0, max([*counts, 1]) * 1.18)
    ax.spines[["top", "right"]].set_visible(False)
    ax.yaxis.get_major_locator().set_params(integer=True)
    name = title or m.topic or m.query
    fig.suptitle(_shorten(name, 60), fontsize=14, fontweight="bold", x=0.02, ha="left")
    ax.set_title(_shorten(headline(m), 110), fontsize=9.5, loc="left", color="#444444")
    fig.text(0.99, 0.01, "last 4 weeks highlighted · weeks start Monday", ha="right",
             fontsize=7.5, color="#777777")  # fmt: skip
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
