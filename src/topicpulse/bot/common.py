"""What every handler shares: the bot's services, replying and editing, the admin check, and
the ``command`` wrapper (rate limit, chat registration, group admin rule, ``UserError`` → one
line)."""

from __future__ import annotations

import asyncio
import html
import re
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from telegram import (
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Message,
    Update,
)
from telegram.constants import ChatMemberStatus, ChatType, ParseMode
from telegram.error import BadRequest
from telegram.ext import ContextTypes

from topicpulse.bot.ticks import Ticks
from topicpulse.bot.views import Keyboard, View
from topicpulse.config import Settings
from topicpulse.delivery import packing
from topicpulse.delivery.chats import Lookup, UserError, clean_text
from topicpulse.delivery.formatting import esc
from topicpulse.insight.llm import AnswerWriter
from topicpulse.models import utcnow
from topicpulse.store import Store
from topicpulse.web import throttle

COMMAND_RATE = (20, 60.0)  # per sender: at most 20 commands per 60 seconds
RATE_MEMORY = 10_000  # senders remembered by the rate limit before idle ones are forgotten
EDITS_REMEMBERED = 2_000  # messages whose last edit is remembered (double taps)
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)
NOT_ADMIN = "Sorry — only this group's administrators can change its topics or settings."
_TAG = re.compile(r"<[^>]+>")

Handler = Callable[[Update, ContextTypes.DEFAULT_TYPE], Awaitable[None]]


@dataclass(slots=True)
class BotContext:
    """What the handlers need, kept in ``application.bot_data["topicpulse"]``."""

    store: Store
    settings: Settings
    clock: Callable[[], datetime] = utcnow
    wake_delivery: Callable[[], None] = lambda: None
    heard_from: Callable[[int], None] = lambda chat_id: None  # a command came from this chat
    on_rated: Callable[[int], None] = lambda chat_id: None  # a chat's ratings changed: retrain
    monotonic: Callable[[], float] = time.monotonic
    _recent: dict[int, list[float]] = field(default_factory=dict)
    _warned: dict[int, float] = field(default_factory=dict)
    # What each recently edited message says now: a second tap compares with this, not with
    # the (older) copy of the message its update carries.
    last_edit: OrderedDict[tuple[int, int], tuple[str, Keyboard]] = field(
        default_factory=OrderedDict
    )
    # Buttons of one chat are handled one at a time (a double tap never races itself).
    _button_locks: weakref.WeakValueDictionary[int, asyncio.Lock] = field(
        default_factory=weakref.WeakValueDictionary
    )
    topic_filters: OrderedDict[str, str] = field(default_factory=OrderedDict)
    ticks: Ticks = field(init=False)  # ratings' ticks on their messages' buttons
    answer_writer: AnswerWriter | None = None  # /ask's generated answer, when configured
    # fetches papers the store lacks from arXiv's search API (``Ingestor.lookup``)
    lookup: Lookup | None = None

    def __post_init__(self) -> None:
        self.ticks = Ticks(self.remember_edit)

    def allow(self, sender_id: int) -> bool:
        """Per-sender command rate limit (a sliding window, in memory); ``sender_id`` is
        ``sender_of``'s: a user's id, or a chat's (negative) when a message speaks for one."""
        limit, period = COMMAND_RATE
        now = self.monotonic()
        allowed = throttle.admit(self._recent, sender_id, now, limit, period, RATE_MEMORY)
        if len(self._warned) > RATE_MEMORY:
            self._warned = {u: t for u, t in self._warned.items() if now - t < period}
        return allowed

    def warn(self, sender_id: int) -> bool:
        """Whether to tell a sender who is over the limit (once per window, not per message)."""
        now = self.monotonic()
        if now - self._warned.get(sender_id, -COMMAND_RATE[1]) < COMMAND_RATE[1]:
            return False
        self._warned[sender_id] = now
        return True

    def button_lock(self, chat_id: int) -> asyncio.Lock:
        lock = self._button_locks.get(chat_id)
        if lock is None:
            lock = self._button_locks[chat_id] = asyncio.Lock()
        return lock

    def remember_edit(self, key: tuple[int, int], shown: tuple[str, Keyboard]) -> None:
        self.last_edit[key] = shown
        self.last_edit.move_to_end(key)
        while len(self.last_edit) > EDITS_REMEMBERED:
            self.last_edit.popitem(last=False)

    def remember_filter(self, key: str, words: str) -> None:
        self.topic_filters[key] = words
        self.topic_filters.move_to_end(key)
        while len(self.topic_filters) > EDITS_REMEMBERED:
            self.topic_filters.popitem(last=False)


def services(context: ContextTypes.DEFAULT_TYPE) -> BotContext:
    return context.bot_data["topicpulse"]  # type: ignore[no-any-return]


def inline_keyboard(keyboard: Keyboard) -> dict[str, list[list[dict[str, str]]]]:
    """``markup`` as the Bot API reads it (JSON), for requests sent without PTB's objects."""
    return {"inline_keyboard": [[_button(label, data) for label, data in row] for row in keyboard]}


def _button(label: str, data: str) -> dict[str, str]:
    link = data.startswith(("https://", "http://"))  # a link, not a callback
    return {"text": label, "url" if link else "callback_data": data}


def markup(keyboard: Keyboard) -> InlineKeyboardMarkup | None:
    if not keyboard:
        return None
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(label, url=data)
                if data.startswith(("https://", "http://"))  # a link, not a callback
                else InlineKeyboardButton(label, callback_data=data)
                for label, data in row
            ]
            for row in keyboard
        ]
    )


async def reply(update: Update, text: str, keyboard: Keyboard | None = None) -> Message:
    assert update.effective_message is not None
    return await update.effective_message.reply_text(
        text,
        parse_mode=ParseMode.HTML,
        reply_markup=markup(keyboard or []),
        link_preview_options=NO_PREVIEW,
        allow_sending_without_reply=True,  # in groups; the command may be deleted meanwhile
    )


async def reply_view(update: Update, view: View) -> Message:
    return await reply(update, view.text, view.keyboard)


async def reply_lines(update: Update, lines: list[str], keyboard: Keyboard | None = None) -> None:
    """Reply with lines of HTML, split between lines into as many messages as needed (the
    keyboard goes with the last one)."""
    messages = packing.pack(lines, separator="\n")
    for n, text in enumerate(messages, start=1):
        await reply(update, text, keyboard if n == len(messages) else None)


def visible(html_text: str) -> str:
    """What Telegram shows for our HTML (tags dropped, entities decoded, trimmed)."""
    return html.unescape(_TAG.sub("", html_text)).strip()


def showing(tp: BotContext, message: Message) -> tuple[str, Keyboard]:
    """What a message says and shows now, as far as the bot knows: what our last edit made it,
    else the copy the update carries (its keyboard as ``markup`` was given it)."""
    rows = message.reply_markup.inline_keyboard if message.reply_markup else ()
    return tp.last_edit.get((message.chat.id, message.message_id)) or (
        message.text or message.caption or "",
        [[(b.text, b.callback_data or b.url or "") for b in row] for row in rows],  # type: ignore[misc]
    )


async def edit_message(tp: BotContext, query: CallbackQuery, view: View) -> None:
    """Edit the message a button belongs to — unless it already says exactly that (a double
    tap), compared with what our last edit made it, else with the copy the update carries."""
    message = query.message
    if not isinstance(message, Message):
        return
    key = (message.chat.id, message.message_id)
    wanted = (visible(view.text), view.keyboard)
    if showing(tp, message) == wanted:
        return  # Telegram would answer 400 "message is not modified"
    tp.ticks.drop(key)  # (a rating's tick of the old keyboard must not follow)
    try:
        await query.edit_message_text(
            view.text,
            parse_mode=ParseMode.HTML,
            reply_markup=markup(view.keyboard),
            link_preview_options=NO_PREVIEW,
        )
    except BadRequest as exc:
        if "not modified" not in exc.message.lower():
            raise
    tp.remember_edit(key, wanted)


async def is_admin(update: Update, context: ContextTypes.DEFAULT_TYPE) -> bool:
    chat, user = update.effective_chat, update.effective_user
    if chat is None or user is None:
        return False
    if chat.type == ChatType.PRIVATE:
        return True
    message = update.effective_message
    if message is not None and message.sender_chat is not None:
        # An anonymous group administrator (posting as the group) or a linked channel.
        return message.sender_chat.id == chat.id
    member = await context.bot.get_chat_member(chat.id, user.id)
    return member.status in (ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER)


def sender_of(update: Update) -> int | None:
    """Who the command limit counts a command against: the chat a message is sent on behalf
    of (an anonymous group admin speaks as the group, a channel as itself; Telegram's ``from``
    is then one placeholder user for everyone), else the user (a button press always names
    its user). None: no sender."""
    message = None if update.callback_query else update.effective_message  # (or edited)
    if message is not None and message.sender_chat is not None:
        return message.sender_chat.id
    user = update.effective_user
    return user.id if user is not None else None


async def answer(update: Update, text: str, *, alert: bool = False) -> None:
    """One short line: a button's answer, or a reply to a command."""
    if update.callback_query:
        await update.callback_query.answer(text[:200], show_alert=alert)
    else:
        await reply(update, esc(text))


def command(*, changes: bool = False) -> Callable[[Handler], Handler]:
    """Common wrapper: rate limit, chat registration, group admin check for commands that change
    the chat's subscriptions or settings, and ``UserError`` → a one-line reply."""

    def decorate(handler: Handler) -> Handler:
        async def wrapped(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
            # the store serves this user's reads ahead of background work, and delivery starts
            # no new chat's messages until the reply is on its way
            with services(context).store.serving():
                await serve(update, context)

        async def serve(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
            tp = services(context)
            chat, sender = update.effective_chat, sender_of(update)
            if chat is None or update.effective_user is None or sender is None:
                return
            if not tp.allow(sender):
                if update.callback_query:
                    await update.callback_query.answer("Too many requests — wait a minute.")
                elif tp.warn(sender):
                    await reply(update, "You are sending commands too fast. Please wait a minute.")
                return
            # A chat that writes to the bot can be written to again (it had blocked the bot or
            # removed it from the group: that made it inactive).
            await tp.store.chat_wrote(chat.id, type=chat.type, title=chat.title)
            tp.heard_from(chat.id)  # (alerts held for a closed forum topic are tried again)
            if changes and not await is_admin(update, context):
                if update.callback_query:
                    await update.callback_query.answer(NOT_ADMIN, show_alert=True)
                else:
                    await reply(update, NOT_ADMIN)
                return
            try:
                await handler(update, context)
            except UserError as exc:
                await answer(update, str(exc), alert=True)

        wrapped.__name__ = handler.__name__
        wrapped.__doc__ = handler.__doc__
        return wrapped

    return decorate


def arg_text(context: ContextTypes.DEFAULT_TYPE) -> str:
    """The command's arguments as one line, without control or format characters."""
    return clean_text(" ".join(context.args or []))


def thread_of(update: Update) -> int | None:
    """The forum topic a command (or a button's message) is in; None in General, or in a chat
    without topics (a reply chain in a plain group has a thread id too, but is no topic)."""
    message = update.effective_message
    if message is None or not message.is_topic_message:
        return None
    return message.message_thread_id


def chat_id_of(update: Update) -> int:
    assert update.effective_chat is not None
    return update.effective_chat.id
