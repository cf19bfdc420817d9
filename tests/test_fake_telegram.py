"""Tests for the fake Bot API server in ``tests/fake_telegram.py``, driven by the real PTB."""

from __future__ import annotations

import asyncio
import datetime as dt
import html
import struct
import warnings
import zlib
from collections.abc import AsyncIterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telegram import (
    Bot,
    ChatMemberAdministrator,
    ChatMemberMember,
    ChatMemberOwner,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Update,
)
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    NetworkError,
    RetryAfter,
    TimedOut,
)
from telegram.ext import (
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
)
from telegram.request import HTTPXRequest

from fake_telegram import FakeTelegram
from telegram_html import parse_telegram_html, utf16_len, validate_telegram_html
from waiting import wait_for

# Reading RetryAfter.retry_after warns about its future timedelta type; that is PTB's business.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Deprecated since version v22.2:telegram.warnings.PTBDeprecationWarning"
)


class FakeClock:
    """A manually advanced clock, so rate-limit tests never depend on wall-clock speed."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def retry_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def make_png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def make_bot(server: FakeTelegram) -> Bot:
    """A real PTB Bot for ``server``.

    The requests are PTB's defaults except that httpx skips loading the CA bundle (the fake is
    plain http), which makes constructing a Bot ~20x cheaper.
    """
    return Bot(
        server.token,
        base_url=server.base_url,
        base_file_url=server.base_file_url,
        request=HTTPXRequest(httpx_kwargs={"verify": False}),
        get_updates_request=HTTPXRequest(connection_pool_size=1, httpx_kwargs={"verify": False}),
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    server = FakeTelegram()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    async with make_bot(fake) as b:
        yield b


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def limited(clock: FakeClock) -> AsyncIterator[FakeTelegram]:
    server = FakeTelegram(enforce_limits=True, clock=clock)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def limited_bot(limited: FakeTelegram) -> AsyncIterator[Bot]:
    async with make_bot(limited) as b:
        yield b


# --------------------------------------------------------------------------- basic methods


async def test_get_me(fake: FakeTelegram, bot: Bot) -> None:
    me = await bot.get_me()
    assert me.is_bot
    assert me.username == "topicpulse_test_bot"
    assert me.id == 123456
    assert me.can_join_groups is True
    assert fake.calls[0].method == "getMe" and fake.calls[0].ok


async def test_send_message_html(fake: FakeTelegram, bot: Bot) -> None:
    markup = InlineKeyboardMarkup([[InlineKeyboardButton("More", callback_data="more:1")]])
    msg = await bot.send_message(
        42,
        "<b>New</b> paper: <a href='https://arxiv.org/abs/2401.00001'>x &amp; y</a>",
        parse_mode=ParseMode.HTML,
        reply_markup=markup,
        disable_web_page_preview=True,
    )
    assert msg.text == "New paper: x & y"
    assert msg.chat.id == 42 and msg.chat.type == "private"
    assert msg.from_user is not None and msg.from_user.is_bot
    assert [(e.type, e.offset, e.length) for e in msg.entities] == [
        ("bold", 0, 3),
        ("text_link", 11, 5),
    ]
    assert msg.entities[1].url == "https://arxiv.org/abs/2401.00001"
    assert msg.reply_markup == markup

    [sent] = fake.sent
    assert sent.method == "sendMessage"
    assert sent.text.startswith("<b>New</b>")
    assert sent.plain_text == "New paper: x & y"
    assert sent.parse_mode == "HTML"
    assert sent.buttons == [("More", "more:1")]
    assert sent.link_preview_disabled
    assert fake.messages_to(42) == [sent]
    assert fake.stats["accepted"] == 1


async def test_message_ids_increase_per_chat(fake: FakeTelegram, bot: Bot) -> None:
    fake.user_sends(1, "hello")  # the user's message takes id 1 in chat 1
    a = await bot.send_message(1, "a")
    b = await bot.send_message(1, "b")
    c = await bot.send_message(2, "c")
    assert (a.message_id, b.message_id, c.message_id) == (2, 3, 1)


async def test_invalid_html_is_rejected(fake: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities: unsupported start tag"):
        await bot.send_message(1, "x <foo>bar</foo>", parse_mode=ParseMode.HTML)
    assert fake.sent == []
    assert fake.calls[-1].result == 400
    assert fake.calls[-1].description == (
        'Bad Request: can\'t parse entities: Unsupported start tag "foo" at byte offset 2'
    )
    # the same text without parse_mode is fine
    await bot.send_message(1, "x <foo>bar</foo>")


async def test_length_limits_after_entity_parsing(fake: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(1, "&lt;" * 4096, parse_mode=ParseMode.HTML)  # 4096 visible chars
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(1, "a" * 4097)
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(1, "😀" * 2049)  # 4098 UTF-16 code units
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bot.send_message(1, "<b> </b>", parse_mode=ParseMode.HTML)
    with pytest.raises(BadRequest, match=r"(?i)caption is too long"):
        await bot.send_photo(1, make_png(2, 2), caption="c" * 1025)
    assert len(fake.sent) == 1


async def test_blocked_chat_is_forbidden(fake: FakeTelegram, bot: Bot) -> None:
    fake.block_chat(7)
    with pytest.raises(Forbidden, match="bot was blocked by the user"):
        await bot.send_message(7, "hi")
    assert fake.stats["by_error_code"] == {403: 1}
    assert fake.messages_to(7) == []


async def test_fail_next_retry_after(fake: FakeTelegram, bot: Bot) -> None:
    fake.fail_next(
        "sendMessage", status=429, description="Too Many Requests: retry after 7", retry_after=7
    )
    with pytest.raises(RetryAfter) as info:
        await bot.send_message(1, "x")
    assert retry_seconds(info.value) == 7
    await bot.send_message(1, "x")  # only the next call failed


async def test_fail_next_scoped_to_chat_and_count(fake: FakeTelegram, bot: Bot) -> None:
    fake.fail_next("sendMessage", status=400, description="Bad Request: chat not found", chat_id=5)
    fake.fail_next("sendMessage", status=502, description="Bad Gateway", count=2, chat_id=6)
    await bot.send_message(4, "fine")
    with pytest.raises(BadRequest, match=r"(?i)chat not found"):
        await bot.send_message(5, "x")
    for _ in range(2):
        with pytest.raises(NetworkError, match="Bad Gateway"):
            await bot.send_message(6, "x")
    await bot.send_message(5, "ok now")
    await bot.send_message(6, "ok now")
    assert [m.chat_id for m in fake.sent] == [4, 5, 6]


async def test_migrated_group(fake: FakeTelegram, bot: Bot) -> None:
    fake.migrate_chat(-555, -1001234567890)
    with pytest.raises(ChatMigrated) as info:
        await bot.send_message(-555, "hello group")
    assert info.value.new_chat_id == -1001234567890
    msg = await bot.send_message(-1001234567890, "hello supergroup")
    assert msg.chat.type == "supergroup"


async def test_migration_notices_in_both_chats(fake: FakeTelegram, bot: Bot) -> None:
    fake.user_sends(-555, "hello", chat_title="Readers", username="ann")
    [hello] = await bot.get_updates()
    assert fake.migrate_chat(-555, -1001234567890) is None  # by default, no updates
    assert await bot.get_updates(offset=hello.update_id + 1) == ()
    ids = fake.migrate_chat(-555, -1001234567890, notify=True, username="ann")
    assert ids is not None
    to, from_ = await bot.get_updates(offset=hello.update_id + 1)
    assert (to.update_id, from_.update_id) == ids
    assert to.message is not None and from_.message is not None
    assert (to.message.chat.id, to.message.chat.type, to.message.chat.title) == (
        -555,
        "group",
        "Readers",
    )
    assert to.message.migrate_to_chat_id == -1001234567890
    assert to.message.from_user is not None and to.message.from_user.username == "ann"
    assert (from_.message.chat.id, from_.message.chat.type, from_.message.chat.title) == (
        -1001234567890,
        "supergroup",
        "Readers",
    )
    assert from_.message.migrate_from_chat_id == -555
    assert from_.message.from_user == to.message.from_user
    fake.migrate_chat(-556, -1001234567891, notify=True, supergroup_first=True)
    first, second = await bot.get_updates(offset=from_.update_id + 1)
    assert first.message is not None and first.message.migrate_from_chat_id == -556
    assert second.message is not None and second.message.migrate_to_chat_id == -1001234567891


async def test_messages_sent_on_behalf_of_a_chat(fake: FakeTelegram, bot: Bot) -> None:
    fake.user_sends(-555, "/pause", chat_title="Readers", sender_chat=-555)  # anonymous admin
    fake.user_sends(-1001234567890, "hi", sender_chat=-1009876543210)  # a channel speaks
    fake.user_sends(-555, "me", username="ann")
    anonymous, channel, ann = await bot.get_updates()
    assert anonymous.message is not None and anonymous.message.from_user is not None
    assert anonymous.message.from_user.to_dict() == {
        "id": 1087968824,
        "is_bot": True,
        "first_name": "Group",
        "username": "GroupAnonymousBot",
    }
    assert anonymous.message.sender_chat == anonymous.message.chat
    assert anonymous.message.sender_chat.title == "Readers"
    assert channel.message is not None and channel.message.sender_chat is not None
    assert channel.message.sender_chat.type == "channel"
    assert channel.message.sender_chat.id == -1009876543210
    assert channel.message.from_user is not None
    assert channel.message.from_user.username == "Channel_Bot"
    assert ann.message is not None and ann.message.sender_chat is None
    assert ann.message.from_user is not None and ann.message.from_user.username == "ann"
    with pytest.raises(ValueError, match="on behalf of a chat"):
        fake.user_sends(1, "hi", sender_chat=1)  # private chats have no senders but users


async def test_send_photo_upload(fake: FakeTelegram, bot: Bot) -> None:
    png = make_png(1000, 500)
    msg = await bot.send_photo(3, png, caption="<i>chart</i>", parse_mode=ParseMode.HTML)
    assert msg.caption == "chart"
    assert msg.caption_entities[0].type == "italic"
    largest = msg.photo[-1]
    assert (largest.width, largest.height) == (1000, 500)
    assert largest.file_size == len(png)
    assert [p.width for p in msg.photo] == [90, 320, 800, 1000]
    [sent] = fake.sent
    assert sent.method == "sendPhoto"
    assert sent.photo_bytes == png
    assert sent.text == "<i>chart</i>"
    upload = fake.calls[-1].params["photo"]
    assert upload.size == len(png)
    # the file can be fetched back through getFile + base_file_url
    file = await bot.get_file(largest.file_id)
    assert bytes(await file.download_as_bytearray()) == png


async def test_forgetting_history_keeps_sent_files_usable_but_not_their_bytes(
    fake: FakeTelegram, bot: Bot
) -> None:
    png = make_png(1000, 500) + bytes(5000)  # (a chart's size, not a header's)
    first = await bot.send_photo(3, png)
    fake.user_sends_document(3, b"@article{a, title={A}}", file_name="mine.bib")
    [upload] = [u for u in fake._updates if "message" in u and "document" in u["message"]]
    user_file = upload["message"]["document"]["file_id"]
    fake.forget_history()
    assert fake.sent == [] and fake.calls == []
    # the bot's photo: sent again by file_id, the same size; its bytes are gone
    again = await bot.send_photo(4, first.photo[-1].file_id)
    assert (again.photo[-1].width, again.photo[-1].height) == (1000, 500)
    assert len(fake._files[first.photo[-1].file_id][0]) < len(png)
    # a user's file stays whole: the bot may still fetch it
    file = await bot.get_file(user_file)
    assert bytes(await file.download_as_bytearray()) == b"@article{a, title={A}}"


async def test_send_photo_rejects_non_images(fake: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)image_process_failed"):
        await bot.send_photo(3, b"definitely not an image")


async def test_get_chat_member_statuses(fake: FakeTelegram, bot: Bot) -> None:
    fake.set_chat_admins(-100777, {11}, owner_id=10)
    owner = await bot.get_chat_member(-100777, 10)
    admin = await bot.get_chat_member(-100777, 11)
    member = await bot.get_chat_member(-100777, 12)
    assert isinstance(owner, ChatMemberOwner)
    assert isinstance(admin, ChatMemberAdministrator) and admin.can_delete_messages
    assert isinstance(member, ChatMemberMember)
    assert member.user.id == 12
    admins = await bot.get_chat_administrators(-100777)
    assert {m.user.id for m in admins} == {10, 11}


async def test_edit_and_not_modified(fake: FakeTelegram, bot: Bot) -> None:
    markup = InlineKeyboardMarkup([[InlineKeyboardButton("Open", url="https://arxiv.org")]])
    msg = await bot.send_message(9, "v1", reply_markup=markup)
    edited = await bot.edit_message_text(
        "v2", chat_id=9, message_id=msg.message_id, reply_markup=markup
    )
    assert isinstance(edited, type(msg)) and edited.text == "v2"
    assert edited.edit_date is not None
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text("v2", chat_id=9, message_id=msg.message_id, reply_markup=markup)
    with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
        await bot.edit_message_text("v3", chat_id=9, message_id=999)
    assert [m.method for m in fake.messages_to(9)] == ["sendMessage", "editMessageText"]
    assert fake.messages_to(9)[1].buttons == [("Open", "https://arxiv.org")]
    assert await bot.delete_message(9, msg.message_id)
    with pytest.raises(BadRequest, match=r"(?i)message to delete not found"):
        await bot.delete_message(9, msg.message_id)


async def test_documents_copies_and_other_edits(fake: FakeTelegram, bot: Bot) -> None:
    doc = await bot.send_document(4, b"a,b\n1,2\n", filename="papers.csv", caption="export")
    assert doc.document is not None and doc.document.file_name == "papers.csv"
    assert fake.sent[-1].document_bytes == b"a,b\n1,2\n"
    photo = await bot.send_photo(4, make_png(4, 4), caption="old")
    edited = await bot.edit_message_caption(4, photo.message_id, caption="new")
    assert isinstance(edited, type(photo)) and edited.caption == "new"
    markup = InlineKeyboardMarkup([[InlineKeyboardButton("Go", callback_data="go")]])
    with_markup = await bot.edit_message_reply_markup(4, photo.message_id, reply_markup=markup)
    assert isinstance(with_markup, type(photo)) and with_markup.reply_markup == markup
    with pytest.raises(BadRequest, match=r"(?i)no text in the message"):
        await bot.edit_message_text("x", chat_id=4, message_id=photo.message_id)
    copy_id = await bot.copy_message(5, from_chat_id=4, message_id=doc.message_id)
    forwarded = await bot.forward_message(6, from_chat_id=4, message_id=doc.message_id)
    assert forwarded.document is not None and forwarded.forward_origin is not None
    assert fake.message(5, copy_id.message_id)["caption"] == "export"
    assert [m.method for m in fake.sent] == [
        "sendDocument",
        "sendPhoto",
        "editMessageCaption",
        "editMessageReplyMarkup",
        "copyMessage",
        "forwardMessage",
    ]


async def test_press_on_unknown_message_is_inaccessible(fake: FakeTelegram, bot: Bot) -> None:
    fake.user_presses(1, 77, "stale")
    [update] = await bot.get_updates()
    query = update.callback_query
    assert query is not None and query.data == "stale"
    assert query.message is not None and not query.message.is_accessible
    assert await query.answer()
    with pytest.raises(BadRequest, match=r"(?i)query id is invalid"):
        await bot.answer_callback_query("12345")


async def test_callback_data_limit(fake: FakeTelegram, bot: Bot) -> None:
    markup = InlineKeyboardMarkup([[InlineKeyboardButton("x", callback_data="d" * 65)]])
    with pytest.raises(BadRequest, match=r"(?i)button_data_invalid"):
        await bot.send_message(1, "x", reply_markup=markup)


async def test_commands_chat_and_misc_methods(fake: FakeTelegram, bot: Bot) -> None:
    assert await bot.set_my_commands([("follow", "Follow a topic"), ("digest", "Get a digest")])
    commands = await bot.get_my_commands()
    assert [c.command for c in commands] == ["follow", "digest"]
    assert await bot.delete_my_commands()
    assert await bot.get_my_commands() == ()
    with pytest.raises(BadRequest):
        await bot.set_my_commands([("Bad-Name", "x")])
    fake.user_sends(-1001234567890, "hi", chat_title="Reading group")
    chat = await bot.get_chat(-1001234567890)
    assert chat.title == "Reading group" and chat.type == "supergroup"
    fake.user_sends(-4242, "hi", chat_title="Small group")
    assert (await bot.get_chat(-4242)).type == "group"
    assert await bot.send_chat_action(5, "typing")
    assert fake.chat_actions == [(5, "typing")]
    assert await bot.delete_webhook(drop_pending_updates=True)
    assert fake.pending_updates == 0


# --------------------------------------------------------------------------- updates


async def test_get_updates_offset_and_limit(fake: FakeTelegram, bot: Bot) -> None:
    ids = [fake.user_sends(1, f"m{i}") for i in range(3)]
    first = await bot.get_updates(limit=2)
    assert [u.update_id for u in first] == ids[:2]
    again = await bot.get_updates()  # not confirmed yet: delivered again
    assert [u.update_id for u in again] == ids
    rest = await bot.get_updates(offset=ids[1] + 1)
    assert [u.update_id for u in rest] == ids[2:]
    assert rest[0].message is not None and rest[0].message.text == "m2"
    assert await bot.get_updates(offset=ids[2] + 1, timeout=0) == ()
    assert fake.pending_updates == 0


async def test_long_poll_returns_when_update_arrives(fake: FakeTelegram, bot: Bot) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=30))
    await wait_for(lambda: fake.long_poll_waiting, what="the long poll")
    update_id = fake.user_sends(1, "/start")
    updates = await asyncio.wait_for(poll, 5)
    assert [u.update_id for u in updates] == [update_id]
    entity = updates[0].message.entities[0]
    assert (entity.type, entity.offset, entity.length) == ("bot_command", 0, 6)


async def test_second_poll_terminates_first(fake: FakeTelegram, bot: Bot) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=30))
    await wait_for(lambda: fake.long_poll_waiting, what="the long poll")
    # PTB gives getUpdates its own 1-connection pool, so the rival poll needs a second Bot
    # (which is also the real-world cause of this Conflict: two bot instances polling).
    async with make_bot(fake) as rival:
        assert await rival.get_updates(timeout=0) == ()
    with pytest.raises(Conflict, match="terminated by other getUpdates request"):
        await asyncio.wait_for(poll, 5)


async def test_unreachable_drops_connections(clock: FakeClock) -> None:
    async with (
        FakeTelegram(clock=clock) as server,
        make_bot(server) as b,
    ):
        server.set_unreachable(30)
        with pytest.raises(NetworkError):
            await b.send_message(1, "lost")
        clock.advance(31)
        await b.send_message(1, "back")
    assert [m.text for m in server.sent] == ["back"]
    assert server.stats["dropped"] == 1


async def test_unreachable_drops_pending_long_poll(fake: FakeTelegram, bot: Bot) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=30))
    await wait_for(lambda: fake.long_poll_waiting, what="the long poll")
    fake.set_unreachable(60)
    with pytest.raises(NetworkError):
        await asyncio.wait_for(poll, 5)
    fake.set_unreachable(0)
    assert await bot.get_updates(timeout=0) == ()


# --------------------------------------------------------------------------- raw protocol


async def test_raw_protocol_shapes(fake: FakeTelegram) -> None:
    base = f"{fake.base_url}{fake.token}"
    async with httpx.AsyncClient() as client:
        res = await client.post(f"{base}/fooBar")
        assert res.status_code == 404
        assert res.json() == {"ok": False, "error_code": 404, "description": "Not Found"}
        res = await client.post(f"{fake.base_url}1:wrong/getMe")
        assert res.status_code == 401
        res = await client.post(f"{base}/sendmessage", json={"chat_id": 5, "text": "json body"})
        assert res.json()["ok"] is True and res.json()["result"]["text"] == "json body"
        res = await client.post(
            f"{base}/sendMessage",
            data={"chat_id": "5", "text": "x", "reply_markup": "{not json"},
        )
        assert res.status_code == 400
    assert fake.sent[0].method == "sendMessage" and fake.sent[0].chat_id == 5


async def test_latency_and_concurrency() -> None:
    async with (
        FakeTelegram(latency=0.1) as server,
        make_bot(server) as b,
    ):
        server.hold_sends()  # caught in flight: handled concurrently, not one at a time
        sends = asyncio.gather(*(b.send_message(i, f"m{i}") for i in range(1, 21)))
        await wait_for(lambda: server.held > 1, what="concurrent sends")
        server.release_sends()
        await sends
    assert server.stats["accepted"] == 20
    assert server.stats["max_in_flight"] > 1


async def test_wait_for_timeout_reports_what_was_sent(fake: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(1, "something else")
    with pytest.raises(AssertionError, match="something else"):
        await fake.wait_for(lambda m: m.text == "never", timeout=0.05)
    with pytest.raises(AssertionError, match="expected 2 messages"):
        await fake.wait_for_messages(1, 2, timeout=0.05)


# --------------------------------------------------------------------------- flood control


async def test_private_chat_flood_control(
    limited: FakeTelegram, limited_bot: Bot, clock: FakeClock
) -> None:
    accepted = 0
    with pytest.raises(RetryAfter) as info:
        for i in range(10):
            await limited_bot.send_message(1, f"burst {i}")
            accepted += 1
    assert accepted == 3  # private_burst
    assert retry_seconds(info.value) == 1
    assert limited.calls[-1].description == "Too Many Requests: retry after 1"

    clock.advance(0.5)  # hammering while penalised doubles the penalty
    with pytest.raises(RetryAfter) as info:
        await limited_bot.send_message(1, "too eager")
    assert retry_seconds(info.value) == 2

    await limited_bot.send_message(2, "other chats are unaffected")
    clock.advance(2.5)
    await limited_bot.send_message(1, "after waiting")
    assert [m.text for m in limited.messages_to(1)][-1] == "after waiting"
    assert limited.stats["by_error_code"] == {429: 2}


async def test_group_and_global_limits(clock: FakeClock) -> None:
    async with (
        FakeTelegram(enforce_limits=True, clock=clock, global_rate=30) as server,
        make_bot(server) as b,
    ):
        for i in range(20):
            await b.send_message(-1001, f"g{i}")
        with pytest.raises(RetryAfter) as info:
            await b.send_message(-1001, "21st in a minute")
        assert retry_seconds(info.value) == 60
        for chat in range(1, 11):  # 20 + 10 = 30 = global burst
            await b.send_message(chat, "x")
        with pytest.raises(RetryAfter):
            await b.send_message(11, "over the global rate")
        clock.advance(1)
        await b.send_message(11, "refilled")
    times = [c.time for c in server.calls if c.method == "sendMessage" and c.ok]
    assert len(times) == 31 and times[-1] - times[0] == 1.0


async def test_application_start_command(fake: FakeTelegram) -> None:
    async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None
        markup = InlineKeyboardMarkup([[InlineKeyboardButton("Ping", callback_data="ping")]])
        await update.message.reply_text("hi", reply_markup=markup)

    async def button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        assert query is not None
        await query.answer("pong")
        await query.edit_message_text(f"pressed {query.data}")

    app = (
        ApplicationBuilder()
        .token(fake.token)
        .base_url(fake.base_url)
        .base_file_url(fake.base_file_url)
        .build()
    )
    app.add_handler(CommandHandler("start", start))
    app.add_handler(CallbackQueryHandler(button))
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0.0, timeout=1)
        try:
            fake.user_sends(1, "/start")
            hi = await fake.wait_for(lambda m: m.text == "hi")
            fake.user_sends(-1002, "/start@topicpulse_test_bot now", chat_title="Lab")
            in_group = await fake.wait_for(lambda m: m.chat_id == -1002)
            fake.user_presses(1, hi.message_id, hi.buttons[0][1] or "")
            edited = await fake.wait_for(lambda m: m.method == "editMessageText")
        finally:
            await app.updater.stop()
            await app.stop()
    assert hi.chat_id == 1 and in_group.text == "hi"
    assert edited.text == "pressed ping" and edited.message_id == hi.message_id
    assert [a.get("text") for a in fake.callback_answers.values()] == ["pong"]
    assert fake.pending_updates == 0  # PTB confirmed everything on shutdown
    # the long poll PTB cancelled on shutdown is "abandoned", not an error
    assert fake.stats["by_error_code"] == {}


# --------------------------------------------------------------------------- HTML validation


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("<b>bold <i>both</i></b>", 9),
        ("<B>upper</B> <strong>s</strong> <em>e</em> <ins>u</ins> <del>d</del>", 13),
        ("Tom &amp; Jerry &lt;3 &quot;q&quot; &gt;", 20),
        ("&#60;&#x3E;&#128512;", 4),
        ('<a href="https://arxiv.org/abs/2401.1?a=1&amp;b=2">link</a>', 4),
        ('<span class="tg-spoiler">s</span><tg-spoiler>t</tg-spoiler>', 2),
        ("<blockquote expandable>quote</blockquote>", 5),
        ('<pre><code class="language-python">x = 1</code></pre>', 5),
        ("$x&lt;y$ and a &gt; b", 15),
        ("a > b is fine", 13),
        ("😀", 2),
        ("<b>😀</b>é", 3),
        ("", 0),
    ],
)
def test_validate_html_ok(text: str, length: int) -> None:
    assert validate_telegram_html(text) == (True, "", length)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("$x<y$", "Unclosed start tag at byte offset 2"),
        ("a < b", 'Unsupported start tag "" at byte offset 2'),
        ("é<foo>", 'Unsupported start tag "foo" at byte offset 2'),
        ("<b><i>x</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
        ("<b>x", 'Can\'t find end tag corresponding to start tag "b"'),
        ("x</b>", "Unexpected end tag at byte offset 1"),
        ("<span>x</span>", 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        ("AT&T", 'Unsupported HTML entity or unescaped "&" at byte offset 2'),
        ("&nbsp;", 'Unsupported HTML entity or unescaped "&" at byte offset 0'),
        ('<a href="x?a=1&b=2">y</a>', 'unescaped "&" at byte offset 14'),
    ],
)
def test_validate_html_errors(text: str, error: str) -> None:
    ok, description, length = validate_telegram_html(text)
    assert not ok and length == 0
    assert error in description


def test_lenient_ampersand_like_tdlib() -> None:
    assert validate_telegram_html("AT&T &nbsp;", strict_entities=False) == (True, "", 11)


def test_parse_entities_offsets_in_utf16() -> None:
    text, entities = parse_telegram_html("😀 <b>bold</b> <code>c</code>")
    assert text == "😀 bold c"
    assert utf16_len(text) == 9
    assert entities == [
        {"type": "bold", "offset": 3, "length": 4},
        {"type": "code", "offset": 8, "length": 1},
    ]
    _, pre = parse_telegram_html('<pre><code class="language-py">x</code></pre>')
    assert pre == [{"type": "pre", "offset": 0, "length": 1, "language": "py"}]


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=("Cs",))))
def test_escaped_text_is_always_valid(text: str) -> None:
    assert validate_telegram_html(html.escape(text)) == (True, "", utf16_len(text))
    assert validate_telegram_html(f"<b>{html.escape(text)}</b>")[0]


# --------------------------------------------------------------------------- slow answers
async def test_a_slow_answer_is_delivered_before_the_client_gives_up(
    fake: FakeTelegram, bot: Bot
) -> None:
    fake.answer_slowly("sendMessage", delay=60, chat_id=5, count=1)
    with pytest.raises(TimedOut) as caught:
        await bot.send_message(5, "slow", read_timeout=0.5)
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)  # the request went out whole
    assert [m.text for m in fake.messages_to(5)] == ["slow"]  # … and was delivered
    await bot.send_message(5, "fast again", read_timeout=10)  # count=1: only the first
    await bot.send_message(6, "another chat", read_timeout=10)
    assert [m.text for m in fake.messages_to(5)] == ["slow", "fast again"]


# --------------------------------------------------------------------------- forum topics
FORUM = -1_000_000_000_555


async def test_forum_topics_carry_and_take_a_thread(fake: FakeTelegram, bot: Bot) -> None:
    fake.make_forum(FORUM, title="Lab")
    thread = fake.create_topic(FORUM, "arXiv")
    fake.user_sends(FORUM, "/list", thread_id=thread)
    fake.user_sends(FORUM, "/list")  # in General
    updates = await bot.get_updates(timeout=0)
    in_topic, in_general = (u.message for u in updates)
    assert in_topic is not None and in_general is not None
    assert in_topic.chat.is_forum and in_topic.is_topic_message
    assert in_topic.message_thread_id == thread
    assert not in_general.is_topic_message and in_general.message_thread_id is None
    posted = await bot.send_message(FORUM, "in the topic", message_thread_id=thread)
    assert posted.message_thread_id == thread and posted.is_topic_message
    replied = await in_topic.reply_text("a reply")  # PTB passes the topic on
    assert replied.message_thread_id == thread
    await bot.send_message(FORUM, "in General")
    assert [m.thread_id for m in fake.messages_to(FORUM)] == [thread, thread, None]
    with pytest.raises(BadRequest, match="thread not found"):
        await bot.send_message(FORUM, "nowhere", message_thread_id=thread + 100)
    with pytest.raises(BadRequest, match="thread not found"):  # a chat without topics
        await bot.send_message(-1_000_000_000_556, "nowhere", message_thread_id=thread)


async def test_a_closed_topic_answers_topic_closed(fake: FakeTelegram, bot: Bot) -> None:
    thread = fake.create_topic(FORUM, "arXiv")
    fake.close_topic(FORUM, thread)
    with pytest.raises(BadRequest, match="Topic_closed"):
        await bot.send_message(FORUM, "x", message_thread_id=thread)
    with pytest.raises(BadRequest, match="Topic_closed"):
        await bot.send_photo(FORUM, make_png(4, 4), message_thread_id=thread)
    await bot.send_message(FORUM, "General is open")
    fake.close_topic(FORUM, None)  # General
    with pytest.raises(BadRequest, match="Topic_closed"):
        await bot.send_message(FORUM, "x")
    fake.reopen_topic(FORUM, thread)
    fake.reopen_topic(FORUM, None)
    await bot.send_message(FORUM, "open again", message_thread_id=thread)
    await bot.send_message(FORUM, "General too")
    fake.delete_topic(FORUM, thread)
    with pytest.raises(BadRequest, match="thread not found"):
        await bot.send_message(FORUM, "x", message_thread_id=thread)
    assert [m.text for m in fake.messages_to(FORUM)] == [
        "General is open",
        "open again",
        "General too",
    ]
