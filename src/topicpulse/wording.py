"""Small wording helpers shared by every text the bot writes (no Telegram, no HTML here)."""

from __future__ import annotations

from datetime import date


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    """The count and the noun in the right number: "1 paper", "0 papers", "2 papers"."""
    return f"{count} {noun if count == 1 else plural_noun or noun + 's'}"


def day_label(day: date) -> str:
    """ "Jul 13": the month's abbreviation and the day, unpadded (strftime's flag for that is
    glibc's own)."""
    return f"{day:%b} {day.day}"
