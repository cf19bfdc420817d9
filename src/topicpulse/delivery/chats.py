"""Chats: what a chat follows and how it wants to be told — the engine behind the commands.

Validates user input (caps, time zones, digest times) and raises ``UserError`` with a short,
fixable message before anything in the store changes. Works on plain ids and strings: no
Telegram objects here.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import re
import sqlite3
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

from topicpulse.delivery.formatting import shorten
from topicpulse.insight import ask, examples, momentum
from topicpulse.models import Chat, StoredPaper, Topic, iso, utcnow
from topicpulse.sources.arxiv import ArxivUnavailable
from topicpulse.store import Store, SubscriptionsFull
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import (
    UnknownTopic,
    custom_topic,
    find_catalogue_topic,
    resolve_topic,
    topic_for,
)
from topicpulse.topics.matching import ALERT_MAX_AGE

MAX_FOLLOWS = 50
_FULL = (
    f"This chat already follows {MAX_FOLLOWS} topics, the most allowed. Unfollow one first (/list)."
)
MAX_ARGUMENT = ql.MAX_QUERY_LENGTH
MODES = ("instant", "daily", "weekly")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_HHMM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
SHARE_CODE = re.compile(r"[a-z2-7]{10,26}")  # a follow link's code for a query (base32)
_INVISIBLE = frozenset(
    {"Cc", "Cf", "Cs", "Co", "Cn"}
)  # control, format, surrogate, private, unassigned


class UserError(ValueError):
    """Bad input from a user; ``str()`` is the one-line reply that says how to fix it."""


def clean_text(text: str) -> str:
    """User text as it may be stored or shown: control and format characters (NUL, escape
    codes, right-to-left overrides, zero-width joiners …) removed, whitespace collapsed."""
    kept = "".join(
        " " if ch.isspace() else ch
        for ch in text
        if ch.isspace() or unicodedata.category(ch) not in _INVISIBLE
    )
    return " ".join(kept.split())


def check_argument(text: str, what: str = "argument") -> str:
    text = clean_text(text)
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
    rule: examples.LikeRule | None = None  # a topic defined by example papers


async def follow(
    store: Store,
    chat_id: int,
    text: str,
    *,
    now: datetime | None = None,
    query_only: bool = False,
    lookup: Lookup | None = None,
    thread_id: int | None = None,
) -> FollowResult:
    """Follow a catalogue topic (by name or slug), a custom query, or papers like one to five
    examples (``like <id> …``), with a preview of the four weeks before ``now``.
    ``query_only``: ``text`` is a query, even if it reads like a topic's name or ``like …``
    (a web page's query: follow what the page showed). ``thread_id``: the forum topic the
    follow came from, where its alerts go (None: General, or a chat without topics)."""
    text = check_argument(text, "topic name or query")
    now = now or utcnow()
    window = [iso(now - momentum.WINDOW), iso(now)]
    label = text
    rule = None
    find = custom_topic if query_only else topic_for
    make: Callable[[], Awaitable[Topic]] = functools.partial(find, store, text)
    word, _, rest = text.partition(" ")
    if word.casefold() == "like" and rest.strip() and not query_only:
        ids, rule = await example_rule(store, rest, window, lookup=lookup)
        text = rule.query
        label = f"papers like {', '.join(ids)}"
        make = functools.partial(custom_topic, store, text, max_length=None)
    followed = [s.topic for s in await store.subscriptions(chat_id)]
    if len(followed) >= MAX_FOLLOWS:  # checked first: a refused query creates no topic
        known = await find_catalogue_topic(store, text) or _same_query(followed, text)
        if known is None or known.id not in {t.id for t in followed}:
            raise UserError(_FULL)
    for attempt in range(2):
        try:
            topic = await make()
            await store.refresh_topic_matches(topic)
            # the cap is checked again in the follow's own transaction: races cannot pass it
            added = await store.subscribe(
                chat_id,
                topic.id,
                cap=MAX_FOLLOWS,
                label=label if topic.is_custom else None,
                thread_id=thread_id,
            )
            break
        except ql.QueryError as exc:
            raise UserError(f"Could not read that query: {exc}") from None
        except SubscriptionsFull:
            raise UserError(_FULL) from None
        except (sqlite3.IntegrityError, AssertionError):
            # the daily upkeep removed this abandoned topic just now: make it anew, once
            if attempt:
                raise
    # As this chat sees it: a shared custom topic carries the chat's own spelling.
    topic = await store.subscribed_topic(chat_id, topic.id) or topic
    (count,) = await store.count_windows(window, topic_id=topic.id)
    latest = await store.matching_papers(
        topic_id=topic.id, since=window[0], until=window[1], limit=3
    )
    return FollowResult(topic, added, count, latest, rule)


Lookup = Callable[[Sequence[str]], Awaitable[list[int]]]  # fetch and store papers by id


async def lookup_or_explain(lookup: Lookup, arxiv_ids: Sequence[str]) -> None:
    """Fetch papers the store lacks from arXiv (``Ingestor.lookup``); arXiv not answering is
    the reader's one line, not a crash."""
    try:
        await lookup(arxiv_ids)
    except ArxivUnavailable:
        raise UserError("arXiv did not answer just now: try again in a few minutes.") from None


async def example_rule(
    store: Store, text: str, window: list[str], *, lookup: Lookup | None = None
) -> tuple[list[str], examples.LikeRule]:
    """The ids ``text`` names (ids or links) and the query they define as a topic
    (``/follow like``, ``topicpulse preview --like``), its words weighed over ``window``.
    Examples the store lacks are fetched from arXiv with ``lookup``, where given."""
    try:
        ids = examples.parse_ids(text)
        found = {i: await store.get_paper(i) for i in ids}
        missing = [i for i, p in found.items() if p is None]
        if missing and lookup is not None:
            await lookup_or_explain(lookup, missing)
            found.update({i: await store.get_paper(i) for i in missing})
            missing = [i for i, p in found.items() if p is None]
        if missing:
            raise UserError(
                f"{missing[0]} is not stored (yet): examples must be papers I have;"
                " /search finds them."
            )
        papers = [p for p in found.values() if p is not None]
        return ids, await examples.like_rule(store, papers, window)
    except examples.ExampleError as exc:
        raise UserError(str(exc)) from None


# ---------------------------------------------------------------------------------- shared
async def share_query(store: Store, text: str) -> str:
    """The short code a web page's follow link carries for a query (a deep link's payload
    holds 64 characters; a query may be longer): the same code every time for the same text."""
    text = check_argument(text, "query")
    digest = base64.b32encode(hashlib.blake2s(text.encode("utf-8")).digest()).decode().lower()
    for length in (10, 16, 26):  # a longer code only if another query holds the short one
        code = await store.share_query(text, digest[:length])
        if code is not None:
            return code
    raise RuntimeError("no free code for a shared query")  # a 130-bit collision


async def shared_query(store: Store, code: str) -> str | None:
    """The query a follow link's code stands for (None: not a code this server issued)."""
    return await store.shared_query(code) if SHARE_CODE.fullmatch(code) else None


def _same_query(topics: list[Topic], text: str) -> Topic | None:
    """The custom topic among ``topics`` whose query means the same as ``text`` (custom topics
    are shared, so its name may be how another chat first spelled it)."""
    try:
        normalised = ql.normalise(text, max_length=None)  # a generated query may be long
    except ql.QueryError:
        return None
    for topic in topics:
        if not topic.is_custom:
            continue
        if topic.query == normalised:
            return topic
        with contextlib.suppress(ql.QueryError):
            if ql.normalise(topic.query, max_length=None) == normalised:
                return topic
    return None


async def _resolve(store: Store, text: str, custom: list[Topic]) -> Topic:
    try:
        return await resolve_topic(store, text, extra=custom)
    except UnknownTopic as exc:
        same = _same_query(custom, text)
        if same is None:
            raise UserError(str(exc)) from None
        return same


async def followed_topic(store: Store, chat_id: int, text: str) -> Topic:
    """One of the chat's followed topics, by name, slug or query text."""
    text = check_argument(text, "topic name")
    followed = [s.topic for s in await store.subscriptions(chat_id)]
    topic = await _resolve(store, text, [t for t in followed if t.is_custom])
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
    return await _resolve(store, text, followed)


async def ask_question(store: Store, chat_id: int, text: str) -> ask.Answer:
    """``/ask [<topic>:] <question>``: passages from the topic's papers (a followed custom
    topic or a catalogue one), or from every stored paper when the text before the first ":"
    is not a topic's name (a question may contain a colon)."""
    text = check_argument(text, "question")
    topic: Topic | None = None
    name, colon, rest = text.partition(":")
    if colon and name.strip() and rest.strip():
        with contextlib.suppress(UserError):
            topic = await any_topic(store, chat_id, name.strip())
        if topic is not None:
            text = rest.strip()
    return await answer_question(store, text, topic)


async def ask_about(store: Store, chat_id: int, name: str, question: str) -> ask.Answer:
    """A question about the topic named ``name`` (a reply to "Ask about this topic")."""
    topic = await any_topic(store, chat_id, name)
    return await answer_question(store, check_argument(question, "question"), topic)


async def answer_question(store: Store, question: str, topic: Topic | None) -> ask.Answer:
    """The passages of ``topic``'s papers (or all stored papers) that answer ``question``."""
    try:
        return await ask.ask(store, question, topic=topic)
    except ask.QuestionError as exc:
        raise UserError(str(exc)) from None


# ---------------------------------------------------------------------------------- digests
def parse_time(text: str) -> str:
    """Normalise a 24-hour time: "8:05" → "08:05"."""
    match = _HHMM.match(text.strip())
    if not match:
        raise UserError(f"“{shorten(text, 20)}” is not a time. Use 24-hour HH:MM, e.g. 08:00.")
    return f"{int(match.group(1)):02d}:{match.group(2)}"


_NOT_ZONES = frozenset({"localtime", "factory", "posixrules"})


@functools.cache
def _zones() -> dict[str, str]:
    """IANA time zone names by their case-folded spelling."""
    return {z.casefold(): z for z in available_timezones() if z.casefold() not in _NOT_ZONES}


def parse_timezone(text: str) -> str:
    """The canonical IANA name for ``text`` (case-insensitive: "europe/berlin" works)."""
    name = text.strip()
    found = _zones().get(name.casefold()) if len(name) <= 64 else None
    if found is None:
        shown = shorten(name, 40)
        raise UserError(
            f"Unknown time zone “{shown}”. Use an IANA name such as Europe/Berlin "
            "or America/New_York."
        )
    return found


DIGEST_PERIODS = {"daily": timedelta(days=1), "weekly": timedelta(days=7)}
ALERT_LAG = timedelta(days=1)  # how long after its round an instant alert may still go out


def published_since(mode: str, now: datetime) -> str:
    """The age rule of alerts (``matching.ALERT_MAX_AGE``) for a digest due at ``now``, as of
    its period's first round (for an instant alert, of a round up to ``ALERT_LAG`` before):
    papers announced before this are history, not news."""
    period = ALERT_LAG if mode == "instant" else DIGEST_PERIODS.get(mode, DIGEST_PERIODS["weekly"])
    return iso(now - ALERT_MAX_AGE - period)


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
    usage = "Use /digest instant, /digest daily 08:00 or /digest weekly 08:00 mon."
    if not args or args[0].lower() not in MODES:
        raise UserError(usage)
    mode = args[0].lower()
    if len(args) > {"instant": 1, "daily": 2, "weekly": 3}[mode]:
        raise UserError(usage)
    settings: dict[str, object] = {"mode": mode}
    for extra in args[1:]:
        day = parse_weekday(extra)
        if day is not None and "digest_weekday" in settings:
            raise UserError("Give one weekday, e.g. /digest weekly 08:00 mon.")
        if day is None and "digest_time" in settings:
            raise UserError("Give one time, e.g. /digest daily 08:00.")
        if day is None and mode == "weekly" and not _HHMM.match(extra.strip()):
            raise UserError(
                f"“{shorten(extra, 20)}” is neither a time (HH:MM) nor a weekday (mon … sun)."
            )
        if day is None:
            settings["digest_time"] = parse_time(extra)
        elif mode == "weekly":
            settings["digest_weekday"] = day
        else:
            raise UserError("Daily digests have no weekday; e.g. /digest weekly 08:00 mon.")
    return await _save_schedule(store, chat_id, settings, now)


def parse_weekday(text: str) -> int | None:
    """0-6 for "mon", "Monday", "tues"…; None if ``text`` is not a weekday."""
    word = text.strip().casefold()
    if len(word) < 3:
        return None
    for index, name in enumerate(_WEEKDAY_NAMES):
        if name.startswith(word):
            return index
    return None


async def set_timezone(
    store: Store, chat_id: int, text: str, *, now: datetime | None = None
) -> Chat:
    return await _save_schedule(store, chat_id, {"timezone": parse_timezone(text)}, now)


async def _save_schedule(
    store: Store, chat_id: int, settings: dict[str, object], now: datetime | None
) -> Chat:
    """Apply ``settings`` and the next digest time they give, read, merged and written in one
    store transaction (two commands at once cannot undo each other's half). A chat turning
    from digests to instant alerts gets what its next digest would have held as alerts; one
    turning to digests starts its digests where the engine stands."""
    if await store.chat(chat_id) is None:  # the command registered it (keeping its real type)
        await store.ensure_chat(chat_id)
    when = now or utcnow()

    def next_due(chat: Chat) -> str | None:
        due = next_digest_at(chat, when)
        return iso(due) if due else None

    return await store.update_schedule(
        chat_id, settings, next_due, alerts_since=lambda mode: published_since(mode, when)
    )


def describe_schedule(chat: Chat) -> str:
    if chat.mode == "instant":
        return "instant alerts"
    when = f"{chat.digest_time} {chat.timezone}"
    if chat.mode == "weekly":
        return f"weekly digest, {WEEKDAYS[chat.digest_weekday].capitalize()} {when}"
    return f"daily digest at {when}"
