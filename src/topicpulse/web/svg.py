"""The 12-week chart as inline SVG: sharp at any size, no second request, readable without
colour (each bar carries its count and week as a tooltip and in the accessible table beside it).
A pure function of the momentum figures."""

from __future__ import annotations

from topicpulse.delivery.formatting import esc
from topicpulse.insight.momentum import Momentum
from topicpulse.wording import day_label

WIDTH, HEIGHT = 640, 220
LEFT, BOTTOM, TOP = 8, 28, 18


def weekly_chart(m: Momentum, *, label: str) -> str:
    """An ``<svg>`` bar chart of ``m.weekly``; ``label`` is its accessible name."""
    counts = [c for _, c in m.weekly]
    top = max(counts, default=0) or 1
    slot = (WIDTH - 2 * LEFT) / max(len(counts), 1)
    bar = slot * 0.72
    plot = HEIGHT - BOTTOM - TOP
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"'
        f' aria-label="{esc(label)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{esc(label)}</title>",
    ]
    for n, (week, count) in enumerate(m.weekly):
        height = plot * count / top
        x = LEFT + n * slot + (slot - bar) / 2
        y = TOP + plot - height
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{height:.1f}"'
            f' data-week="{week.isoformat()}" data-count="{count}">'
            f"<title>week of {day_label(week)}: {count}</title></rect>"
        )
        parts.append(
            f'<text class="count" x="{x + bar / 2:.1f}" y="{y - 4:.1f}"'
            f' text-anchor="middle">{count}</text>'
        )
        if n in (0, len(m.weekly) - 1) or n % 3 == 0:
            parts.append(
                f'<text class="week" x="{x + bar / 2:.1f}" y="{HEIGHT - 8}"'
                f' text-anchor="middle">{day_label(week)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)
