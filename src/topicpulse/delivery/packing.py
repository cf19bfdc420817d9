"""How blocks of text fill Telegram messages: ``MAX_MESSAGE`` UTF-16 code units each, split only
between blocks (a block too long alone is cut at a line), and, when a caller only needs to
know whether they fit, packed no further than the first overflow.

Lengths are counted on the HTML source, which is never less than what Telegram counts after
parsing the entities.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

MAX_MESSAGE = 4096


def tg_len(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def pack(
    blocks: Iterable[str], *, header: str = "", limit: int = MAX_MESSAGE, separator: str = "\n\n"
) -> list[str]:
    """Join blocks into as few messages as fit in ``limit``, splitting only between blocks.
    A block too long on its own (impossible for our blocks) is cut at a line boundary."""
    messages: list[str] = []
    current = header
    for block in blocks:
        candidate = f"{current}{separator}{block}" if current else block
        if tg_len(candidate) <= limit:
            current = candidate
            continue
        if current:
            messages.append(current)
        current = block if tg_len(block) <= limit else cut_lines(block, limit)
    if current and current != header:
        messages.append(current)
    return messages


def pack_keyed(
    blocks: Iterable[tuple[str, int | Sequence[int] | None]],
    *,
    header: str = "",
    separator: str = "\n\n",
    most: int | None = None,
) -> list[tuple[str, list[int]]]:
    """Like ``pack``, for blocks that carry a key (a paper id, several for a block of papers,
    or None for a heading): returns each message with the keys of the blocks it holds.
    (Lengths are added up, not re-measured: a message is measured once per block.)
    With ``most``, packing stops at the block that would open message ``most`` + 1, read no
    further: the answer then has ``most`` + 1 entries, the last unfinished (for a caller that
    only needs to know the blocks do not fit)."""
    messages: list[tuple[str, list[int]]] = []
    current, keys = header, []
    size, gap = tg_len(header), tg_len(separator)
    for block, key in blocks:
        length = tg_len(block)
        if current and size + gap + length > MAX_MESSAGE:
            messages.append((current, keys))
            if most is not None and len(messages) >= most:
                return [*messages, (block, [])]
            current, keys, size = "", [], 0
        if current:
            current, size = f"{current}{separator}{block}", size + gap + length
        elif length <= MAX_MESSAGE:
            current, size = block, length
        else:
            current = cut_lines(block, MAX_MESSAGE)
            size = tg_len(current)
        if isinstance(key, int):
            keys.append(key)
        elif key is not None:
            keys.extend(key)
    if keys:
        messages.append((current, keys))
    return messages


def cut_lines(block: str, limit: int) -> str:
    kept: list[str] = []
    for line in block.split("\n"):
        if tg_len("\n".join([*kept, line])) > limit - 2:
            break
        kept.append(line)
    return "\n".join(kept) + "\n…"
