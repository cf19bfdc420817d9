"""Chats: what a chat follows and how it wants to be told — the engine behind the commands.

Validates user input (caps, time zones, digest times) and raises ``UserError`` with a short,
fixable message before anything in the store changes. Works on plain ids and strings: no
Telegram objects here.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from topicpulse import momentum
from topicpulse import query as ql
from topicpulse.models import Chat, StoredPaper, Topic, iso, utcnow
from topicpulse.store import Store
from topicpulse.topics import UnknownTopic, resolve_topic, topic_for

MAX_FOLLOWS = 50
MAX_ARGUMENT = ql.MAX_QUERY_LENGTH
MODES = ("instant", "daily", "weekly")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_HHMM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


class UserError(ValueError):
    """Bad input from a user; ``str()`` is the one-line reply that says how to fix it."""


def check_argument(text: str, what: str = "argument") -> str:
    text = " ".join(text.split())
    if not text:
        raise UserError(f"Please give a {what}.")
    if len(text) > MAX_ARGUMENT:
        raise UserError(f"That {what} is {len(text)} characters; the limit is {MAX_ARGUMENT}.")
    return text


# ---------------------------------------------------------------------------------- follow
@dataclass(slots=True)
class FollowResult:
    topic: Topic
    added: bool  # False: the chat already followed it
    last_4w: int
    latest: list[StoredPaper]


async def follow(store: Store, chat_id: int, text: str) -> FollowResult:
    """Follow a catalogue topic (by name or slug) or a custom query, with a preview."""
    text = check_argument(text, "topic name or query")
    try:
        topic = await topic_for(store, text)
    except ql.QueryError as exc:
        raise UserError(f"Could not read that query: {exc}") from None
    following = {s.topic.id for s in await store.subscriptions(chat_id)}
    if topic.id not in following and len(following) >= MAX_FOLLOWS:
        raise UserError(
            f"This chat already follows {MAX_FOLLOWS} topics, the most allowed. "
            "Unfollow one first (/list)."
        )
    await store.refresh_topic_matches(topic)
    added = await store.subscribe(chat_id, topic.id)
    now = utcnow()
    recent = await store.matching_papers(
        topic_id=topic.id, since=iso(now - momentum.WINDOW), until=iso(now)
    )
    return FollowResult(topic, added, len(recent), recent[:3])


async def followed_topic(store: Store, chat_id: int, text: str) -> Topic:
    """One of the chat's followed topics, by name, slug or query text."""
    text = check_argument(text, "topic name")
    followed = [s.topic for s in await store.subscriptions(chat_id)]
    try:
        topic = await resolve_topic(store, text, extra=[t for t in followed if t.is_custom])
    except UnknownTopic as exc:
        raise UserError(str(exc)) from None
    if topic.id not in {t.id for t in followed}:
        raise UserError(f"This chat does not follow “{topic.name}”. See /list.")
    return topic


async def unfollow(store: Store, chat_id: int, text: str) -> Topic:
    topic = await followed_topic(store, chat_id, text)
    await store.unsubscribe(chat_id, topic.id)
    return topic


async def any_topic(store: Store, chat_id: int, text: str) -> Topic:
    """A topic for read-only commands: followed custom topics, then the catalogue."""
    text = check_argument(text, "topic name")
    followed = [s.topic for s in await store.subscriptions(chat_id) if s.topic.is_custom]
    try:
        return await resolve_topic(store, text, extra=followed)
    except UnknownTopic as exc:
        raise UserError(str(exc)) from None


# ---------------------------------------------------------------------------------- digests
def parse_time(text: str) -> str:
    match = _HHMM.match(text.strip())
    if not match:
        raise UserError(f"“{text[:20]}” is not a time. Use 24-hour HH:MM, e.g. 08:00.")
    return f"{int(match.group(1)):02d}:{match.group(2)}"


def parse_timezone(text: str) -> str:
    name = text.strip()
    if len(name) > 64 or not re.fullmatch(r"[A-Za-z0-9_+\-/]+", name):
        raise UserError("Unknown time zone. Use an IANA name such as Europe/Berlin.")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        lowered = {z.casefold(): z for z in available_timezones()}
        if name.casefold() in lowered:
            return lowered[name.casefold()]
        raise UserError(
            f"Unknown time zone “{name}”. Use an IANA name such as Europe/Berlin "
            "or America/New_York."
        ) from None
    return name


def next_digest_at(chat: Chat, now: datetime) -> datetime | None:
    """When the chat's next digest is due (UTC), strictly after ``now``; None for instant."""
    if chat.mode == "instant":
        return None
    zone = ZoneInfo(chat.timezone)
    hour, minute = map(int, chat.digest_time.split(":"))
    local = now.astimezone(zone)
    candidate = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    step = timedelta(days=1)
    while candidate <= local or (
        chat.mode == "weekly" and candidate.weekday() != chat.digest_weekday
    ):
        candidate = (candidate + step).replace(hour=hour, minute=minute)
    return candidate.astimezone(now.tzinfo)


async def set_digest(
    store: Store, chat_id: int, args: list[str], *, now: datetime | None = None
) -> Chat:
    """``/digest instant|daily|weekly [HH:MM] [weekday]``."""
    if not args or args[0].lower() not in MODES:
        raise UserError("Use /digest instant, /digest daily 08:00 or /digest weekly 08:00 mon.")
    mode = args[0].lower()
    settings: dict[str, object] = {"mode": mode}
    for extra in args[1:3]:
        if extra[:3].lower() in WEEKDAYS and mode == "weekly":
            settings["digest_weekday"] = WEEKDAYS.index(extra[:3].lower())
        else:
            settings["digest_time"] = parse_time(extra)
    return await _save_schedule(store, chat_id, settings, now)


async def set_timezone(
    store: Store, chat_id: int, text: str, *, now: datetime | None = None
) -> Chat:
    return await _save_schedule(store, chat_id, {"timezone": parse_timezone(text)}, now)


async def _save_schedule(
    store: Store, chat_id: int, settings: dict[str, object], now: datetime | None
) -> Chat:
    chat = await store.ensure_chat(chat_id)
    updated = dataclasses.replace(chat, **settings)  # type: ignore[arg-type]
    due = next_digest_at(updated, now or utcnow())
    await store.update_chat(chat_id, **settings, next_digest_at=iso(due) if due else None)
    result = await store.chat(chat_id)
    assert result is not None
    return result


def describe_schedule(chat: Chat) -> str:
    if chat.mode == "instant":
        return "instant alerts"
    when = f"{chat.digest_time} {chat.timezone}"
    if chat.mode == "weekly":
        return f"weekly digest, {WEEKDAYS[chat.digest_weekday].capitalize()} {when}"
    return f"daily digest at {when}"
