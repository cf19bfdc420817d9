"""Charts: the momentum histogram is a 960×540 PNG for any data and any topic name."""

from __future__ import annotations

import io
import struct
from datetime import UTC, datetime

import matplotlib.image
import numpy as np
import pytest

from topicpulse.insight.charts import render_chart
from topicpulse.insight.momentum import Momentum, week_starts

AS_OF = datetime(2026, 5, 23, tzinfo=UTC)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RECENT = (0x2F, 0x6F, 0xDF)  # the bar colour of the last four weeks
EARLIER = (0xB8, 0xC4, 0xD6)


def _momentum(counts: list[int], *, topic: str | None = "RL for Language Models",
              query: str = "rl AND llm") -> Momentum:  # fmt: skip
    last, prev = sum(counts[-4:]), sum(counts[-8:-4])
    return Momentum(
        topic=topic,
        query=query,
        as_of=AS_OF,
        last_4w=last,
        prev_4w=prev,
        change_pct=(last - prev) / prev * 100 if prev else None,
        share_pct=0.4,
        total=sum(counts),
        weekly=list(zip(week_starts(AS_OF, len(counts)), counts, strict=True)),
    )


def _pixels(png: bytes) -> np.ndarray:
    """The decoded image as uint8 RGB(A), read with matplotlib's own PNG reader."""
    image = matplotlib.image.imread(io.BytesIO(png), format="png")
    return np.rint(image * 255).astype(np.uint8) if image.dtype != np.uint8 else image


def _has_colour(pixels: np.ndarray, rgb: tuple[int, int, int]) -> bool:
    return bool(np.all(pixels[:, :, :3] == np.array(rgb, dtype=np.uint8), axis=2).any())


def _check_png(png: bytes) -> np.ndarray:
    assert png[:8] == PNG_MAGIC
    assert png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (960, 540)
    assert png[-12:] == b"\x00\x00\x00\x00IEND\xaeB`\x82"
    pixels = _pixels(png)
    assert pixels.shape[:2] == (540, 960)
    return pixels


def test_chart_is_a_960_by_540_png_with_both_bar_colours() -> None:
    pixels = _check_png(render_chart(_momentum([3, 5, 8, 2, 0, 4, 6, 9, 12, 7, 15, 21])))
    assert _has_colour(pixels, RECENT)
    assert _has_colour(pixels, EARLIER)


def test_chart_of_zero_data_has_no_bars() -> None:
    pixels = _check_png(render_chart(_momentum([0] * 12)))
    assert not _has_colour(pixels, RECENT)
    assert not _has_colour(pixels, EARLIER)


def test_chart_of_large_counts() -> None:
    counts = [123_456_789, 10**9, 0, 5, 77_777, 0, 0, 3, 9, 1, 1, 2**40]
    pixels = _check_png(render_chart(_momentum(counts)))
    assert _has_colour(pixels, RECENT)  # the earlier bars are under a pixel next to 2**40


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font")  # emoji, CJK: boxes
@pytest.mark.parametrize(
    "name",
    [
        "Cost of <b>RL</b> & $x<y$ — “quotes” 'and' \\alpha " * 8,  # long, and valid mathtext
        "$x^{$",  # mathtext that does not parse (raised ValueError before the fix)
        "$$ a $ b \\frac{1}{2} _^{}#%&~ 🚀 Emoji, 中文, עברית\nline break\ttab",
    ],
)
def test_chart_with_awkward_names(name: str) -> None:
    _check_png(render_chart(_momentum([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], topic=name)))


def test_chart_title_falls_back_to_the_query_and_can_be_overridden() -> None:
    _check_png(render_chart(_momentum([1] * 12, topic=None, query='ti:"$cost$" AND <b>')))
    _check_png(render_chart(_momentum([1] * 12), title="A $title$ & <more>"))


def test_chart_with_fewer_weeks() -> None:
    _check_png(render_chart(_momentum([4, 2])))
    _check_png(render_chart(_momentum([])))
