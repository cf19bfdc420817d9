"""The buttons under the papers the engine sends: 👍 / 👎 rows (callback data as
``bot.callbacks.Rate`` reads it), "why?" and the quiet list's "show"."""

from __future__ import annotations

from collections.abc import Sequence

Row = list[tuple[str, str]]  # inline buttons side by side: (label, callback data)
RATED = " ✓"  # after the label of the rating a chat gave


SHOW_HELD = ("🔕 show", "hb")  # the quiet list's button (``bot.callbacks.ShowHeld``)


def held_back_line(count: int) -> str:
    return f"🔕 {count} held back as probably not for you"


def rate_data(paper_id: int, value: int) -> str:
    """The callback data of 👍 (``value`` 1) or 👎 (-1) on a paper (``bot.callbacks.Rate``)."""
    return f"r:{paper_id}:{'+' if value > 0 else '-'}"


def why_data(paper_id: int) -> str:
    """The callback data of "why?" under a paper (``bot.callbacks.Why``)."""
    return f"w:{paper_id}"


def rating_row(paper_id: int, rating: int = 0, number: int | None = None) -> Row:
    """👍 / 👎 for one paper (numbered as its entry in a list), the chat's rating ticked."""
    n = f" {number}" if number is not None else ""
    return [
        (f"👍{n}{RATED if rating > 0 else ''}", rate_data(paper_id, 1)),
        (f"👎{n}{RATED if rating < 0 else ''}", rate_data(paper_id, -1)),
    ]


def rating_rows(packed: Sequence[tuple[str, list[int]]], *, numbered: bool) -> list[list[Row]]:
    """Each packed message's 👍 / 👎 rows, numbered across the messages (for several papers)."""
    rows: list[list[Row]] = []
    number = 0
    for _, ids in packed:
        mine = []
        for pid in ids:
            number += 1
            mine.append(rating_row(pid, number=number if numbered else None))
        rows.append(mine)
    return rows
