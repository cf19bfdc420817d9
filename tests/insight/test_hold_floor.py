"""The hold-back floor (``taste.hold_floor``): the HOLD × (1 − s) quantile of the scores of the
followed topics' recent unrated papers, s the share of 👍 among the chat's ratings; nothing held
back before enough ratings of both kinds or for a chat that wants most of its topics."""

from __future__ import annotations

import pytest

from topicpulse.insight import taste

SCORES = [n / 100 for n in range(101)]  # 0.00, 0.01, …, 1.00: the floor is the quantile itself


def test_the_floor_is_a_quantile_that_grows_as_the_chat_wants_less() -> None:
    up, down = taste.MIN_UP, 3 * taste.MIN_UP  # wants a quarter of its topics
    floor = taste.hold_floor(SCORES, up, down, hold=0.5, most=0.5)
    assert floor == pytest.approx(0.5 * (1 - 0.25), abs=0.011)
    pickier = taste.hold_floor(SCORES, up, 9 * up, hold=0.5, most=0.5)  # wants a tenth
    assert pickier > floor
    assert taste.hold_floor(SCORES, up, down, hold=0.3, most=0.5) < floor
    assert taste.hold_floor(list(reversed(SCORES)), up, down) == taste.hold_floor(SCORES, up, down)


def test_nothing_is_held_back_without_enough_ratings_or_for_a_broad_reader() -> None:
    assert taste.hold_floor(SCORES, taste.MIN_UP - 1, 40) == 0.0
    assert taste.hold_floor(SCORES, taste.MIN_UP, taste.MIN_DOWN - 1) == 0.0
    few = taste.MIN_RATED - taste.MIN_UP - 1  # enough 👎, too few ratings in all
    assert few >= taste.MIN_DOWN and taste.hold_floor(SCORES, taste.MIN_UP, few) == 0.0
    assert taste.hold_floor(SCORES, taste.MIN_UP, few + 1) > 0.0
    many = 4 * taste.MIN_DOWN
    assert taste.hold_floor(SCORES, many, many, most=0.5) == 0.0  # wants half: nothing held
    assert taste.hold_floor(SCORES, many, many, most=0.6) > 0.0
    assert taste.hold_floor([], taste.MIN_UP, 40) == 0.0


def test_a_taste_holds_back_below_its_floor_only() -> None:
    model = taste.Taste({"grpo": 4.0, "trading": -4.0}, 0.0, up=taste.MIN_UP, down=20)
    reference = [{"grpo": 1.0}] * 5 + [{"trading": 0.5 + n / 20} for n in range(15)]
    floored = model.with_floor(reference)
    assert floored.floor > 0
    assert floored.holds(model.score({"trading": 1.5})) is True
    assert floored.holds(model.score({"grpo": 1.0})) is False
    fresh = taste.Taste(model.weights, 0.0, up=taste.MIN_UP - 1, down=20).with_floor(reference)
    assert fresh.floor == 0.0 and not fresh.holds(0.0)
