"""Inline buttons' callback data: the one place that encodes and decodes it.

Telegram hands back whatever ``callback_data`` a client sends, and a modified client can send
anything, for any message. So data is parsed with strict patterns (ids that fit SQLite's
integers, pages within reason) into typed buttons, and ``offered`` tells whether the message the
press came from really carries that button: the handlers act only on what a message offered.
Anything else — unknown, malformed, from a message too old to see — is answered as expired.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from topicpulse.delivery.buttons import rate_data, why_data
from topicpulse.delivery.chats import SHARE_CODE

MAX_DATA = 64  # bytes: Telegram's limit on callback_data
EXPIRED = "This button has expired."
_ID = r"([1-9][0-9]{0,17})"  # a positive row id below 2**63
_PAGE = r"(0|[1-9][0-9]{0,3})"


@dataclass(frozen=True, slots=True)
class FollowTopic:
    """➕ on a /topics page: follow this catalogue topic."""

    topic_id: int


@dataclass(frozen=True, slots=True)
class Undo:
    """↩️ under a follow confirmation: unfollow what it followed."""

    topic_id: int


@dataclass(frozen=True, slots=True)
class UnfollowFromList:
    """✖ in /list: unfollow and redraw the list."""

    topic_id: int


@dataclass(frozen=True, slots=True)
class TopicsPage:
    """◀ / ▶ on a /topics page: the same filter, another page. A filter too long for the
    callback data travels as ``key``, a short digest the chat's memory maps back to it."""

    page: int
    words: str = ""
    key: str = ""


@dataclass(frozen=True, slots=True)
class LatestOf:
    """ "Show all" under a catch-up: the topic's latest papers."""

    topic_id: int


@dataclass(frozen=True, slots=True)
class MoreLike:
    """ "More like this" under a /paper card: the stored papers most like that one."""

    paper_id: int


@dataclass(frozen=True, slots=True)
class AskAbout:
    """ "Ask about this topic" under /momentum: prompts for a question about it."""

    topic_id: int


@dataclass(frozen=True, slots=True)
class FollowShared:
    """✅ under a web page's follow link (/start q_<code>): follow the query the code stands for."""

    code: str


@dataclass(frozen=True, slots=True)
class Rate:
    """👍 (``value`` 1) or 👎 (-1) under a paper: rate it for the chat's taste; a second tap
    on the same one undoes."""

    paper_id: int
    value: int


@dataclass(frozen=True, slots=True)
class ShowHeld:
    """ "show" under the line that offers the papers an alert held back."""


@dataclass(frozen=True, slots=True)
class Why:
    """ "why?" under a held-back or recommended paper: what weighed most."""

    paper_id: int


@dataclass(frozen=True, slots=True)
class LeaveOut:
    """ "Leave out X" under an offer to refine a topic from 👎: accept it."""

    refinement_id: int


@dataclass(frozen=True, slots=True)
class NoThanks:
    """ "No thanks" under such an offer: never offered again."""

    refinement_id: int


@dataclass(frozen=True, slots=True)
class PutBack:
    """↩️ Undo under "Left out X": the papers about it are back in the topic."""

    refinement_id: int


@dataclass(frozen=True, slots=True)
class PutBackListed:
    """✖ beside a left-out word in /taste: the same, then /taste is redrawn."""

    refinement_id: int


Refining = LeaveOut | NoThanks | PutBack | PutBackListed

Button = (
    FollowTopic
    | Undo
    | UnfollowFromList
    | TopicsPage
    | LatestOf
    | MoreLike
    | AskAbout
    | FollowShared
    | Rate
    | ShowHeld
    | Why
    | Refining
)
_REFINING: dict[type, str] = {LeaveOut: "lo", NoThanks: "ln", PutBack: "lu", PutBackListed: "lr"}

_PATTERNS: list[tuple[re.Pattern[str], type]] = [
    (re.compile(rf"f:{_ID}"), FollowTopic),
    (re.compile(rf"u:{_ID}"), Undo),
    (re.compile(rf"ul:{_ID}"), UnfollowFromList),
    (re.compile(rf"l:{_ID}"), LatestOf),
    (re.compile(rf"m:{_ID}"), MoreLike),
    (re.compile(rf"a:{_ID}"), AskAbout),
    (re.compile(rf"w:{_ID}"), Why),
    *((re.compile(rf"{prefix}:{_ID}"), kind) for kind, prefix in _REFINING.items()),
]
_RATE = re.compile(rf"r:{_ID}:([+-])")
_SHARED = re.compile(rf"fq:({SHARE_CODE.pattern})")
_PAGE_WORDS = re.compile(rf"tp:{_PAGE}(?::(.+))?", re.DOTALL)
_PAGE_KEY = re.compile(rf"tp:{_PAGE}#([0-9a-f]{{12}})")


def filter_key(words: str) -> str:
    return hashlib.blake2s(words.encode("utf-8"), digest_size=6).hexdigest()


def encode(button: Button) -> str:
    if isinstance(button, TopicsPage):
        data = f"tp:{button.page}:{button.words}" if button.words else f"tp:{button.page}"
        if len(data.encode("utf-8")) > MAX_DATA:
            data = f"tp:{button.page}#{button.key or filter_key(button.words)}"
        return data
    if isinstance(button, MoreLike):
        return f"m:{button.paper_id}"
    if isinstance(button, FollowShared):
        return f"fq:{button.code}"
    if isinstance(button, Rate):
        return rate_data(button.paper_id, button.value)
    if isinstance(button, ShowHeld):
        return "hb"
    if isinstance(button, Why):
        return why_data(button.paper_id)
    if isinstance(button, LeaveOut | NoThanks | PutBack | PutBackListed):
        return f"{_REFINING[type(button)]}:{button.refinement_id}"
    prefix = {FollowTopic: "f", Undo: "u", UnfollowFromList: "ul", LatestOf: "l", AskAbout: "a"}[
        type(button)
    ]
    return f"{prefix}:{button.topic_id}"


@functools.lru_cache(maxsize=4096)
def decode(data: str | None) -> Button | None:
    """The button ``data`` stands for, or None when it is not one of ours. (Remembered: a tap
    on 👍 reads every button of its message, twice, and buttons are frozen values.)"""
    if not data or len(data.encode("utf-8")) > MAX_DATA:
        return None
    for pattern, kind in _PATTERNS:
        match = pattern.fullmatch(data)
        if match:
            return kind(int(match.group(1)))  # type: ignore[no-any-return]
    if match := _RATE.fullmatch(data):
        return Rate(int(match.group(1)), 1 if match.group(2) == "+" else -1)
    if data == "hb":
        return ShowHeld()
    if match := _SHARED.fullmatch(data):
        return FollowShared(match.group(1))
    if match := _PAGE_KEY.fullmatch(data):
        return TopicsPage(int(match.group(1)), key=match.group(2))
    if match := _PAGE_WORDS.fullmatch(data):
        return TopicsPage(int(match.group(1)), words=match.group(2) or "")
    return None


def offered(data: str, keyboard: Iterable[Iterable[object]] | None) -> bool:
    """Whether ``data`` is the callback data of one of the keyboard's buttons."""
    return any(
        getattr(button, "callback_data", None) == data for row in keyboard or () for button in row
    )
