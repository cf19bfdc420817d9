"""Unit tests of ``topicpulse.delivery.chats``: input checks, time zones, digest schedules,
follows."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_arxiv import make_paper
from topicpulse.delivery import chats
from topicpulse.delivery.chats import UserError
from topicpulse.models import Chat
from topicpulse.store import Store
from topicpulse.topics.catalogue import CatalogueEntry, sync_catalogue
from topicpulse.topics.matching import match_new_papers

CHAT = 42
NOW = datetime(2027, 1, 12, 5, 0, tzinfo=UTC)  # a Tuesday in winter
IANA_HINT = "Use an IANA name such as Europe/Berlin or America/New_York."


def a_chat(
    mode: str = "daily", at: str = "08:00", weekday: int = 0, tz: str = "Europe/Berlin"
) -> Chat:
    return Chat(
        chat_id=CHAT,
        type="private",
        title=None,
        active=True,
        paused=False,
        mode=mode,
        digest_time=at,
        digest_weekday=weekday,
        timezone=tz,
        spikes=True,
        next_digest_at=None,
    )


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# ---------------------------------------------------------------------------------- arguments
def test_check_argument_collapses_spaces_and_limits_length() -> None:
    assert chats.check_argument("  reward \n  model\t") == "reward model"
    assert chats.check_argument("x" * 300) == "x" * 300
    assert chats.check_argument("a  " * 150, "query") == ("a " * 150).strip()  # 299 after collapse
    with pytest.raises(UserError, match=r"^That query is 301 characters; the limit is 300\.$"):
        chats.check_argument("y" * 301, "query")
    with pytest.raises(UserError, match=r"^Please give a topic name\.$"):
        chats.check_argument("   ", "topic name")


# ---------------------------------------------------------------------------------- times
@pytest.mark.parametrize(
    ("text", "expected"),
    [("08:00", "08:00"), ("8:05", "08:05"), (" 23:59 ", "23:59"), ("0:00", "00:00")],
)
def test_parse_time(text: str, expected: str) -> None:
    assert chats.parse_time(text) == expected


@pytest.mark.parametrize("text", ["24:00", "8", "08:60", "8am", "", "12:5", "noon", "-1:00"])
def test_parse_time_rejects(text: str) -> None:
    with pytest.raises(UserError, match=r"is not a time\. Use 24-hour HH:MM, e\.g\. 08:00\.$"):
        chats.parse_time(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Europe/Berlin", "Europe/Berlin"),
        ("europe/berlin", "Europe/Berlin"),
        ("  AMERICA/NEW_YORK ", "America/New_York"),
        ("utc", "UTC"),
        ("Asia/Kolkata", "Asia/Kolkata"),
        ("america/argentina/buenos_aires", "America/Argentina/Buenos_Aires"),
    ],
)
def test_parse_timezone_fixes_up_case(text: str, expected: str) -> None:
    assert chats.parse_timezone(text) == expected


@pytest.mark.parametrize(
    "text",
    ["Mars/Base", "Europe", "Europe/", "localtime", "posixrules", "posix/Europe/Berlin",
     "../../etc/passwd", "Berlin", "", "x" * 100, "Europe/Berlin; DROP TABLE"],
)  # fmt: skip
def test_parse_timezone_rejects_unknown_names(text: str) -> None:
    with pytest.raises(UserError) as caught:
        chats.parse_timezone(text)
    message = str(caught.value)
    assert message.startswith("Unknown time zone “") and message.endswith(IANA_HINT)
    assert len(message) < 200


@pytest.mark.parametrize(
    ("text", "expected"),
    [("mon", 0), ("Monday", 0), ("TUE", 1), ("tues", 1), ("wednesday", 2), ("sun", 6),
     ("mo", None), ("money", None), ("08:00", None), ("", None)],
)  # fmt: skip
def test_parse_weekday(text: str, expected: int | None) -> None:
    assert chats.parse_weekday(text) == expected


# ---------------------------------------------------------------------------------- schedule
def test_instant_has_no_digest_time() -> None:
    assert chats.next_digest_at(a_chat("instant"), NOW) is None


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (utc(2027, 1, 12, 5, 0), utc(2027, 1, 12, 7, 0)),  # later today (08:00 CET = 07:00 UTC)
        (utc(2027, 1, 12, 7, 0), utc(2027, 1, 13, 7, 0)),  # strictly after now
        (utc(2027, 1, 12, 23, 30), utc(2027, 1, 13, 7, 0)),  # already the 13th in Berlin
        (utc(2027, 3, 27, 7, 30), utc(2027, 3, 28, 6, 0)),  # DST starts: 08:00 CEST = 06:00 UTC
        (utc(2026, 10, 24, 7, 0), utc(2026, 10, 25, 7, 0)),  # DST ends: 08:00 CET = 07:00 UTC
        (utc(2027, 3, 28, 0, 30), utc(2027, 3, 28, 6, 0)),  # on the day itself, before the switch
    ],
)
def test_daily_digest_keeps_local_time_across_dst(now: datetime, expected: datetime) -> None:
    due = chats.next_digest_at(a_chat("daily", "08:00"), now)
    assert due == expected and due.tzinfo == UTC


def test_daily_digest_in_new_york_across_its_own_dst_change() -> None:
    chat = a_chat("daily", "07:15", tz="America/New_York")
    assert chats.next_digest_at(chat, utc(2027, 3, 13, 13, 0)) == utc(2027, 3, 14, 11, 15)
    assert chats.next_digest_at(chat, utc(2027, 3, 14, 12, 0)) == utc(2027, 3, 15, 11, 15)


def test_digest_at_a_time_that_does_not_exist_or_happens_twice() -> None:
    # 02:30 does not exist in Berlin on 2027-03-28 (clocks jump 02:00 → 03:00): the digest
    # comes an hour late that day, at 03:30 CEST.
    skipped = chats.next_digest_at(a_chat("daily", "02:30"), utc(2027, 3, 27, 12, 0))
    assert skipped == utc(2027, 3, 28, 1, 30)
    # 02:30 happens twice on 2026-10-25: the first one counts, and only one.
    twice = a_chat("daily", "02:30")
    first = chats.next_digest_at(twice, utc(2026, 10, 24, 12, 0))
    assert first == utc(2026, 10, 25, 0, 30)
    assert chats.next_digest_at(twice, first) == utc(2026, 10, 26, 1, 30)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (utc(2027, 1, 12, 5, 0), utc(2027, 1, 15, 8, 30)),  # Tuesday → this Friday
        (utc(2027, 1, 15, 8, 0), utc(2027, 1, 15, 8, 30)),  # Friday, before the time
        (utc(2027, 1, 15, 8, 30), utc(2027, 1, 22, 8, 30)),  # Friday, at the time: next week
        (utc(2027, 3, 24, 12, 0), utc(2027, 3, 26, 8, 30)),  # the Friday before DST starts
        (utc(2027, 3, 26, 9, 0), utc(2027, 4, 2, 7, 30)),  # the first Friday in summer time
    ],
)
def test_weekly_digest_on_its_weekday(now: datetime, expected: datetime) -> None:
    assert chats.next_digest_at(a_chat("weekly", "09:30", weekday=4), now) == expected


ZONES = ["Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata", "UTC",
         "America/Santiago", "Pacific/Chatham", "Europe/London"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    now=st.datetimes(
        min_value=datetime(2025, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
    ),
    zone=st.sampled_from(ZONES),
    hour=st.integers(0, 23),
    minute=st.integers(0, 59),
    mode=st.sampled_from(["daily", "weekly"]),
    weekday=st.integers(0, 6),
)
def test_next_digest_properties(
    now: datetime, zone: str, hour: int, minute: int, mode: str, weekday: int
) -> None:
    chat = a_chat(mode, f"{hour:02d}:{minute:02d}", weekday=weekday, tz=zone)
    due = chats.next_digest_at(chat, now)
    assert due is not None and due > now
    horizon = timedelta(days=1 if mode == "daily" else 7, hours=2)  # DST shifts ≤ 1 h (+ slack)
    assert due - now <= horizon
    local = due.astimezone(ZoneInfo(zone))
    if (local.hour, local.minute) != (hour, minute):  # only when the clocks skipped that time
        wall = datetime.combine(local.date(), time(hour, minute), tzinfo=ZoneInfo(zone))
        shown = wall.astimezone(UTC).astimezone(ZoneInfo(zone))
        assert (shown.hour, shown.minute) != (hour, minute)
    if mode == "weekly":
        assert local.weekday() == weekday
    again = chats.next_digest_at(chat, due)  # the one after it is a different day
    assert again is not None and again.astimezone(ZoneInfo(zone)).date() > local.date()


def test_describe_schedule() -> None:
    assert chats.describe_schedule(a_chat("instant")) == "instant alerts"
    assert chats.describe_schedule(a_chat("daily")) == "daily digest at 08:00 Europe/Berlin"
    weekly = a_chat("weekly", "09:30", weekday=4, tz="UTC")
    assert chats.describe_schedule(weekly) == "weekly digest, Fri 09:30 UTC"


# ---------------------------------------------------------------------------------- settings
async def test_set_digest_and_timezone(store: Store) -> None:
    await store.ensure_chat(CHAT)
    chat = await chats.set_digest(store, CHAT, ["DAILY"], now=NOW)
    assert (chat.mode, chat.digest_time, chat.next_digest_at) == (
        "daily",
        "08:00",
        "2027-01-12T08:00:00Z",
    )
    chat = await chats.set_timezone(store, CHAT, "europe/berlin", now=NOW)
    assert (chat.timezone, chat.next_digest_at) == ("Europe/Berlin", "2027-01-12T07:00:00Z")
    chat = await chats.set_digest(store, CHAT, ["weekly", "fri", "9:30"], now=NOW)
    assert (chat.mode, chat.digest_time, chat.digest_weekday) == ("weekly", "09:30", 4)
    assert chat.next_digest_at == "2027-01-15T08:30:00Z"
    chat = await chats.set_digest(store, CHAT, ["weekly", "Monday"], now=NOW)
    assert (chat.digest_time, chat.digest_weekday) == ("09:30", 0)
    assert chat.next_digest_at == "2027-01-18T08:30:00Z"
    chat = await chats.set_digest(store, CHAT, ["instant"], now=NOW)
    assert (chat.mode, chat.next_digest_at) == ("instant", None)


USAGE = "Use /digest instant, /digest daily 08:00 or /digest weekly 08:00 mon."


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], USAGE),
        (["hourly"], USAGE),
        (["instant", "08:00"], USAGE),
        (["daily", "08:00", "09:00"], USAGE),
        (["weekly", "08:00", "mon", "tue"], USAGE),
        (["daily", "25:00"], "“25:00” is not a time. Use 24-hour HH:MM, e.g. 08:00."),
        (["daily", "fri"], "Daily digests have no weekday; e.g. /digest weekly 08:00 mon."),
        (["weekly", "funday"], "“funday” is neither a time (HH:MM) nor a weekday (mon … sun)."),
        (["weekly", "mon", "8pm"], "“8pm” is neither a time (HH:MM) nor a weekday (mon … sun)."),
    ],
)
async def test_set_digest_argument_errors_change_nothing(
    store: Store, args: list[str], message: str
) -> None:
    before = await store.ensure_chat(CHAT)
    with pytest.raises(UserError) as caught:
        await chats.set_digest(store, CHAT, args, now=NOW)
    assert str(caught.value) == message
    assert await store.chat(CHAT) == before


async def test_set_timezone_error_changes_nothing(store: Store) -> None:
    await store.ensure_chat(CHAT)
    before = await chats.set_digest(store, CHAT, ["daily", "08:00"], now=NOW)
    with pytest.raises(UserError, match="Unknown time zone “Mars/Base”"):
        await chats.set_timezone(store, CHAT, "Mars/Base", now=NOW)
    assert await store.chat(CHAT) == before


# ---------------------------------------------------------------------------------- follows
CATALOGUE = [
    CatalogueEntry(
        "rl-for-language-models",
        "RL for Language Models",
        "Reinforcement learning to train language models.",
        'GRPO OR RLHF OR "reward model"*',
    ),
    CatalogueEntry("diffusion-models", "Diffusion Models", "Diffusion.", "diffusion"),
]


@pytest.fixture
async def world(store: Store) -> Store:
    """A store with a small catalogue, one chat and a few papers (two recent GRPO ones)."""
    await sync_catalogue(store, CATALOGUE)
    await store.ensure_chat(CHAT)
    await store.upsert_papers(
        [
            make_paper("2701.00001", NOW - timedelta(days=2), title="GRPO for maths"),
            make_paper("2701.00002", NOW - timedelta(days=9), title="GRPO for code"),
            make_paper("2701.00003", NOW - timedelta(days=40), title="GRPO, an old paper"),
            make_paper("2701.00004", NOW - timedelta(days=1), title="Diffusion for video"),
        ]
    )
    await match_new_papers(store)  # the round that follows every ingest
    return store


async def test_follow_by_name_slug_or_query(world: Store) -> None:
    by_name = await chats.follow(world, CHAT, "rl FOR language   models", now=NOW)
    assert (by_name.topic.name, by_name.topic.kind, by_name.added) == (
        "RL for Language Models",
        "catalogue",
        True,
    )
    assert by_name.last_4w == 2
    assert [p.arxiv_id for p in by_name.latest] == ["2701.00001", "2701.00002"]
    by_slug = await chats.follow(world, CHAT, "rl-for-language-models", now=NOW)
    assert (by_slug.topic.id, by_slug.added) == (by_name.topic.id, False)

    custom = await chats.follow(world, CHAT, "grpo AND maths", now=NOW)
    assert (custom.topic.kind, custom.topic.name) == ("custom", "grpo AND maths")
    assert custom.added
    assert custom.last_4w == 1
    same = await chats.follow(world, CHAT, "GRPO  maths", now=NOW)  # the same query, respelled
    assert (same.topic.id, same.added) == (custom.topic.id, False)
    later = await chats.follow(world, CHAT, "diffusion models", now=NOW + timedelta(days=60))
    assert later.topic.kind == "catalogue" and later.last_4w == 0  # preview relative to `now`
    assert sorted(s.topic.name for s in await world.subscriptions(CHAT)) == [
        "Diffusion Models",
        "RL for Language Models",
        "grpo AND maths",
    ]


async def test_follow_malformed_or_overlong_query_stores_nothing(world: Store) -> None:
    with pytest.raises(UserError, match=r"^Could not read that query: unbalanced parenthesis"):
        await chats.follow(world, CHAT, "(grpo", now=NOW)
    with pytest.raises(UserError, match=r"^That topic name or query is 301 characters"):
        await chats.follow(world, CHAT, "z" * 301, now=NOW)
    with pytest.raises(UserError, match=r"^Please give a topic name or query\.$"):
        await chats.follow(world, CHAT, "  ", now=NOW)
    assert await world.subscriptions(CHAT) == []
    assert await world.topics(kind="custom") == []


async def test_follow_cap(world: Store) -> None:
    for n in range(chats.MAX_FOLLOWS):
        await chats.follow(world, CHAT, f"word{n}", now=NOW)
    with pytest.raises(UserError) as caught:
        await chats.follow(world, CHAT, "one too many", now=NOW)
    assert str(caught.value) == (
        "This chat already follows 50 topics, the most allowed. Unfollow one first (/list)."
    )
    with pytest.raises(UserError):
        await chats.follow(world, CHAT, "Diffusion Models", now=NOW)  # catalogue topics too
    again = await chats.follow(world, CHAT, "word7", now=NOW)  # already followed: fine
    assert not again.added
    assert not (await chats.follow(world, CHAT, "WORD7", now=NOW)).added  # however spelled
    assert len(await world.topics(kind="custom")) == chats.MAX_FOLLOWS  # none left behind
    assert await world.count_subscriptions(CHAT) == chats.MAX_FOLLOWS
    assert await world.count_subscriptions(CHAT + 1) == 0  # the cap is per chat
    await world.ensure_chat(CHAT + 1)
    assert (await chats.follow(world, CHAT + 1, "word7", now=NOW)).added


async def test_unfollow(world: Store) -> None:
    await chats.follow(world, CHAT, "RL for Language Models", now=NOW)
    await chats.follow(world, CHAT, "grpo AND maths", now=NOW)
    with pytest.raises(UserError) as caught:
        await chats.unfollow(world, CHAT, "Diffusion Models")
    assert str(caught.value) == "This chat does not follow “Diffusion Models”. See /list."
    with pytest.raises(UserError, match=r"^No topic called “Quantum Basket Weaving”\."):
        await chats.unfollow(world, CHAT, "Quantum Basket Weaving")
    with pytest.raises(UserError, match=r"Did you mean: RL for Language Models\?$"):
        await chats.unfollow(world, CHAT, "RL for Language Model")
    gone = await chats.unfollow(world, CHAT, '"grpo" maths')  # the query, spelled differently
    assert gone.name == "grpo AND maths"
    gone = await chats.unfollow(world, CHAT, "rl-for-language-models")
    assert gone.name == "RL for Language Models"
    assert await world.subscriptions(CHAT) == []
    with pytest.raises(UserError, match="does not follow"):
        await chats.unfollow(world, CHAT, "rl-for-language-models")


async def test_any_topic_sees_the_catalogue_and_the_chats_own_queries(world: Store) -> None:
    await chats.follow(world, CHAT, "grpo AND maths", now=NOW)
    assert (await chats.any_topic(world, CHAT, "Diffusion Models")).kind == "catalogue"
    assert (await chats.any_topic(world, CHAT, "grpo and maths")).kind == "custom"
    await world.ensure_chat(CHAT + 1)
    with pytest.raises(UserError, match=r"^No topic called “grpo AND maths”"):
        await chats.any_topic(world, CHAT + 1, "grpo AND maths")  # another chat's query
