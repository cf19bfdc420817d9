"""Telegram deep links into the bot (``https://t.me/<bot>?start=<payload>``): the one place
that writes and reads their payloads. A web page writes them; ``/start`` reads them.

- ``follow_<slug>`` follows a catalogue topic (a payload allows only A–Z, a–z, 0–9, _ and -,
  at most 64 characters; slugs' hyphens travel as underscores);
- ``q_<code>`` stands for a query a page offered (``chats.share_query`` issued the code): the
  bot shows it and follows it only on a tap.
"""

from __future__ import annotations

from dataclasses import dataclass

_TOPIC = "follow_"
_QUERY = "q_"


@dataclass(frozen=True, slots=True)
class FollowTopic:
    slug: str


@dataclass(frozen=True, slots=True)
class SharedQuery:
    code: str


def link(bot_username: str, payload: str) -> str:
    return f"https://t.me/{bot_username}?start={payload}"


def topic_payload(slug: str) -> str:
    return _TOPIC + slug.replace("-", "_")


def query_payload(code: str) -> str:
    return _QUERY + code


def parse(payload: str) -> FollowTopic | SharedQuery | None:
    """What a /start payload asks for (None: a plain /start, or not one of ours)."""
    if payload.startswith(_QUERY):
        return SharedQuery(payload.removeprefix(_QUERY))
    if payload.startswith(_TOPIC):
        return FollowTopic(payload.removeprefix(_TOPIC).replace("_", "-"))
    return None
