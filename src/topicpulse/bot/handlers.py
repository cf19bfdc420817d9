"""Command and button handlers. Each one parses what the user sent, calls the engine
(``chats``, ``topics``, ``momentum``, the store's read queries) and formats the reply — no SQL
and no business rules here."""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from telegram import (
    BotCommand,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Message,
    Update,
)
from telegram.constants import ChatMemberStatus, ChatType, ParseMode
from telegram.error import BadRequest, TelegramError
from telegram.ext import (
    Application,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from topicpulse import chats, formatting, momentum
from topicpulse import query as ql
from topicpulse.charts import render_chart
from topicpulse.chats import UserError
from topicpulse.config import Settings
from topicpulse.formatting import esc, shorten
from topicpulse.models import Topic, iso, parse_iso, utcnow
from topicpulse.store import Store

log = logging.getLogger(__name__)

TOPICS_PER_PAGE = 8
COMMAND_RATE = (20, 60.0)  # per user: at most 20 commands per 60 seconds
RATE_MEMORY = 10_000  # users remembered by the rate limit before idle ones are forgotten
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)
_TAG = re.compile(r"<[^>]+>")

COMMANDS: list[tuple[str, str]] = [
    ("follow", "Follow a topic or your own query"),
    ("list", "Topics this chat follows"),
    ("topics", "Browse the topic catalogue"),
    ("momentum", "How a topic is moving, with a chart"),
    ("latest", "Newest papers of a topic"),
    ("search", "Search all stored papers"),
    ("trending", "Rising topics"),
    ("unfollow", "Stop following a topic"),
    ("digest", "instant, daily or weekly delivery"),
    ("timezone", "Your time zone for digests"),
    ("settings", "This chat's settings"),
    ("pause", "Pause alerts"),
    ("resume", "Resume alerts"),
    ("spikes", "Spike alerts on or off"),
    ("help", "What this bot does"),
]

HELP = (
    "<b>topicpulse</b> follows research topics on arXiv for you: each new paper on a topic you "
    "follow arrives once — instantly or in a daily/weekly digest — and you can ask how a topic "
    "is moving.\n\n"
    "Try:\n"
    "• <code>/follow RL for Language Models</code>\n"
    "• <code>/follow grpo AND (math OR reasoning)</code>\n"
    "• <code>/momentum Reward Modeling</code>\n\n"
    '<b>Queries</b>: words, "phrases", AND, OR, NOT, (…), prefix*, and fields '
    'ti: abs: au: cat: — e.g. <code>ti:"reward model" NOT cat:cs.RO</code>\n\n'
    "<b>Commands</b>: /topics /follow /unfollow /list /momentum /trending /latest /search "
    "/digest /timezone /pause /resume /spikes /settings"
)


@dataclass(slots=True)
class BotContext:
    """What the handlers need, kept in ``application.bot_data["topicpulse"]``."""

    store: Store
    settings: Settings
    clock: Callable[[], datetime] = utcnow
    wake_delivery: Callable[[], None] = lambda: None
    _recent: dict[int, list[float]] = field(default_factory=dict)
    _warned: dict[int, float] = field(default_factory=dict)

    def allow(self, user_id: int) -> bool:
        """Per-user command rate limit (a sliding window, in memory)."""
        limit, period = COMMAND_RATE
        now = time.monotonic()
        stamps = [t for t in self._recent.get(user_id, []) if now - t < period]
        allowed = len(stamps) < limit
        if allowed:
            stamps.append(now)
        self._recent[user_id] = stamps
        if len(self._recent) > RATE_MEMORY:
            self._recent = {u: ts for u, ts in self._recent.items() if ts and now - ts[-1] < period}
            self._warned = {u: t for u, t in self._warned.items() if now - t < period}
        return allowed

    def warn(self, user_id: int) -> bool:
        """Whether to tell a user who is over the limit (once per window, not per message)."""
        now = time.monotonic()
        if now - self._warned.get(user_id, -COMMAND_RATE[1]) < COMMAND_RATE[1]:
            return False
        self._warned[user_id] = now
        return True


def services(context: ContextTypes.DEFAULT_TYPE) -> BotContext:
    return context.bot_data["topicpulse"]  # type: ignore[no-any-return]


Handler = Callable[[Update, ContextTypes.DEFAULT_TYPE], Awaitable[None]]


async def reply(update: Update, text: str, markup: InlineKeyboardMarkup | None = None) -> None:
    assert update.effective_message is not None
    await update.effective_message.reply_text(
        text,
        parse_mode=ParseMode.HTML,
        reply_markup=markup,
        link_preview_options=NO_PREVIEW,
        allow_sending_without_reply=True,  # in groups; the command may be deleted meanwhile
    )


def _visible(html_text: str) -> str:
    """What Telegram shows for our HTML (tags dropped, entities decoded, trimmed)."""
    return html.unescape(_TAG.sub("", html_text)).strip()


async def edit_message(
    query: CallbackQuery, text: str, markup: InlineKeyboardMarkup | None = None
) -> None:
    """Edit the message a button belongs to; a double tap (nothing changes) is no error."""
    shown = query.message
    if isinstance(shown, Message) and shown.text == _visible(text) and shown.reply_markup == markup:
        return  # Telegram would answer 400 "message is not modified"
    try:
        await query.edit_message_text(
            text, parse_mode=ParseMode.HTML, reply_markup=markup, link_preview_options=NO_PREVIEW
        )
    except BadRequest as exc:
        if "not modified" not in exc.message.lower():
            raise


async def reply_lines(
    update: Update, lines: list[str], markup: InlineKeyboardMarkup | None = None
) -> None:
    """Reply with lines of HTML, split between lines into as many messages as needed (the
    keyboard goes with the last one)."""
    messages = formatting.pack(lines, separator="\n")
    for n, text in enumerate(messages, start=1):
        await reply(update, text, markup if n == len(messages) else None)


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


def command(*, changes: bool = False) -> Callable[[Handler], Handler]:
    """Common wrapper: rate limit, chat registration, group admin check for commands that change
    the chat's subscriptions or settings, and ``UserError`` → a one-line reply."""

    def decorate(handler: Handler) -> Handler:
        async def wrapped(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
            tp = services(context)
            chat, user = update.effective_chat, update.effective_user
            if chat is None or user is None:
                return
            if not tp.allow(user.id):
                if update.callback_query:
                    await update.callback_query.answer("Too many requests — wait a minute.")
                elif tp.warn(user.id):
                    await reply(update, "You are sending commands too fast. Please wait a minute.")
                return
            # A chat that writes to the bot can be written to again (it had blocked the bot or
            # removed it from the group: that made it inactive).
            await tp.store.ensure_chat(chat.id, type=chat.type, title=chat.title, reactivate=True)
            if changes and not await is_admin(update, context):
                text = "Sorry — only this group's administrators can change its topics or settings."
                if update.callback_query:
                    await update.callback_query.answer(text, show_alert=True)
                else:
                    await reply(update, text)
                return
            try:
                await handler(update, context)
            except UserError as exc:
                if update.callback_query:
                    await update.callback_query.answer(str(exc)[:200], show_alert=True)
                else:
                    await reply(update, esc(str(exc)))

        wrapped.__name__ = handler.__name__
        wrapped.__doc__ = handler.__doc__
        return wrapped

    return decorate


def arg_text(context: ContextTypes.DEFAULT_TYPE) -> str:
    return " ".join(context.args or [])


def chat_id_of(update: Update) -> int:
    assert update.effective_chat is not None
    return update.effective_chat.id


# ---------------------------------------------------------------------------------- start, help
@command()
async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/start [follow_<slug>] — welcome; reactivates a chat that had blocked the bot."""
    tp = services(context)
    payload = arg_text(context)
    if payload.startswith("follow_"):
        if not await is_admin(update, context):
            await reply(update, "Sorry — only this group's administrators can change its topics.")
            return
        await _follow_and_reply(update, tp, payload.removeprefix("follow_").replace("_", "-"))
        return
    await reply(update, "👋 " + HELP)


@command()
async def help_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await reply(update, HELP)


# ---------------------------------------------------------------------------------- follow
def _follow_reply(result: chats.FollowResult) -> tuple[str, InlineKeyboardMarkup | None]:
    t = result.topic
    verb = "Now following" if result.added else "Already following"
    lines = [f"✅ {verb} <b>{esc(shorten(t.name, 100))}</b>"]
    if t.is_custom and t.query != t.name:
        lines.append(f"Query: <code>{esc(t.query)}</code>")
    if result.last_4w == 0:
        lines.append("No stored paper matched in the last 4 weeks — is the query too narrow?")
    else:
        lines.append(f"{result.last_4w} papers in the last 4 weeks. Latest:")
        lines += [
            f'• <a href="{esc(p.url)}">{esc(shorten(p.title, 150))}</a> ({p.published[:10]})'
            for p in result.latest
        ]
    lines.append("New papers will reach this chat once each.")
    undo = InlineKeyboardMarkup([[InlineKeyboardButton("↩️ Undo", callback_data=f"u:{t.id}")]])
    return "\n".join(lines), undo if result.added else None  # nothing to undo otherwise


async def _follow_and_reply(update: Update, tp: BotContext, text: str) -> None:
    result = await chats.follow(tp.store, chat_id_of(update), text, now=tp.clock())
    message, markup = _follow_reply(result)
    await reply(update, message, markup)


@command(changes=True)
async def follow(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/follow <catalogue name or slug | query>"""
    text = arg_text(context)
    if not text:
        await reply(
            update,
            "Follow what? E.g. <code>/follow RL for Language Models</code> or "
            "<code>/follow grpo AND reasoning</code>. Browse with /topics.",
        )
        return
    await _follow_and_reply(update, services(context), text)


@command(changes=True)
async def unfollow(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/unfollow <name>; without a name, the list with buttons."""
    text = arg_text(context)
    if not text:
        lines, markup = await _list_view(services(context), chat_id_of(update))
        await reply_lines(update, lines, markup)
        return
    topic = await chats.unfollow(services(context).store, chat_id_of(update), text)
    await reply(update, f"Unfollowed <b>{esc(shorten(topic.name, 100))}</b>.")


async def _list_view(tp: BotContext, chat_id: int) -> tuple[list[str], InlineKeyboardMarkup | None]:
    """The lines of /list and its Unfollow buttons."""
    subs = await tp.store.subscriptions(chat_id)
    chat = await tp.store.chat(chat_id)
    assert chat is not None
    if not subs:
        return [
            "This chat follows no topics yet. Try /topics or "
            "<code>/follow RL for Language Models</code>."
        ], None
    now = tp.clock()
    lines = [
        f"<b>Following {len(subs)} topic{'s' * (len(subs) != 1)}</b> · "
        f"{esc(chats.describe_schedule(chat))}{' · ⏸ paused' if chat.paused else ''}"
    ]
    buttons = []
    for sub in subs:
        m = await momentum.compute(tp.store, topic=sub.topic, as_of=now)
        lines.append(formatting.momentum_line(m))
        label = f"✖ {shorten(sub.topic.name, 40)}"
        buttons.append([InlineKeyboardButton(label, callback_data=f"ul:{sub.topic.id}")])
    return lines, InlineKeyboardMarkup(buttons)


@command()
async def list_topics(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/list — followed topics, delivery mode and sparklines, with Unfollow buttons."""
    lines, markup = await _list_view(services(context), chat_id_of(update))
    await reply_lines(update, lines, markup)


# ---------------------------------------------------------------------------------- catalogue
async def _topics_page(
    tp: BotContext, words: str, page: int
) -> tuple[str, InlineKeyboardMarkup | None]:
    topics = await tp.store.topics(kind="catalogue")
    if words:
        needles = words.casefold().split()
        topics = [
            t
            for t in topics
            if all(n in f"{t.name} {t.description} {t.slug}".casefold() for n in needles)
        ]
    pages = max(1, -(-len(topics) // TOPICS_PER_PAGE))
    page = min(max(page, 0), pages - 1)
    shown = topics[page * TOPICS_PER_PAGE : (page + 1) * TOPICS_PER_PAGE]
    if not shown:
        return (
            f"No catalogue topic matches “{esc(words)}”. Try /topics without words.",
            None,
        )
    lines = [f"<b>Topics</b> (page {page + 1}/{pages}) — tap to follow:"]
    lines += [f"• <b>{esc(t.name)}</b> — {esc(t.description)}" for t in shown]
    rows = [[InlineKeyboardButton(f"➕ {t.name}", callback_data=f"f:{t.id}")] for t in shown]
    nav = []
    if page > 0:
        nav.append(InlineKeyboardButton("◀ Prev", callback_data=f"tp:{page - 1}"))
    if page < pages - 1:
        nav.append(InlineKeyboardButton("Next ▶", callback_data=f"tp:{page + 1}"))
    if nav:
        rows.append(nav)
    return "\n".join(lines), InlineKeyboardMarkup(rows)


@command()
async def topics(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/topics [words] — browse or filter the catalogue."""
    words = chats.check_argument(arg_text(context), "filter") if context.args else ""
    context.chat_data["topics_filter"] = words  # type: ignore[index]
    text, markup = await _topics_page(services(context), words, 0)
    await reply(update, text, markup)


# ---------------------------------------------------------------------------------- momentum
@command()
async def momentum_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/momentum [name] — one topic with its chart, or all followed topics ranked."""
    tp = services(context)
    chat_id = chat_id_of(update)
    now = tp.clock()
    text = arg_text(context)
    if not text:
        subs = await tp.store.subscriptions(chat_id)
        if not subs:
            await reply(
                update,
                "Follow a topic first, or ask about one: "
                "<code>/momentum RL for Language Models</code>.",
            )
            return
        ms = [await momentum.compute(tp.store, topic=s.topic, as_of=now) for s in subs]
        ms.sort(
            key=lambda m: (m.change_pct if m.change_pct is not None else -1e9, m.last_4w),
            reverse=True,
        )
        lines = ["<b>Your topics, rising first</b> (papers in 4 weeks, change):"]
        lines += [formatting.momentum_line(m) for m in ms]
        await reply_lines(update, lines)
        return
    topic = await chats.any_topic(tp.store, chat_id, text)
    m = await momentum.compute(tp.store, topic=topic, as_of=now)
    await reply(update, formatting.momentum_text(m))
    png = await asyncio.to_thread(render_chart, m)
    assert update.effective_message is not None
    await update.effective_message.reply_photo(
        png,
        caption=f"{esc(shorten(topic.name, 100))} — 12 weeks",
        parse_mode=ParseMode.HTML,
        allow_sending_without_reply=True,
    )


@command()
async def trending(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/trending — rising catalogue topics."""
    tp = services(context)
    ranked = await momentum.trending(tp.store, as_of=tp.clock(), limit=10)
    if not ranked:
        await reply(update, "Nothing is trending yet: too few papers stored in the last 4 weeks.")
        return
    lines = ["📈 <b>Trending topics</b> (papers in 4 weeks, change):"]
    lines += [formatting.momentum_line(m) for m in ranked]
    await reply(update, "\n".join(lines))


@command()
async def latest(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/latest <name> [n] — newest papers of a topic (n ≤ 20)."""
    tp = services(context)
    args = list(context.args or [])
    count = 5
    if len(args) > 1 and args[-1].isdigit():
        count = min(max(int(args.pop()), 1), 20)
    if not args:
        await reply(update, "Which topic? E.g. <code>/latest Reward Modeling 5</code>.")
        return
    topic = await chats.any_topic(tp.store, chat_id_of(update), " ".join(args))
    await tp.store.refresh_topic_matches(topic)
    papers = await tp.store.matching_papers(topic_id=topic.id, limit=count)
    if not papers:
        await reply(update, f"No stored paper matches <b>{esc(topic.name)}</b> yet.")
        return
    tags = await tp.store.paper_topics([p.id for p in papers], kind="catalogue")
    header = f"🗞 <b>Latest in {esc(shorten(topic.name, 100))}</b>"
    for text in formatting.paper_list(papers, header=header, tags=tags):
        await reply(update, text)


@command()
async def search(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/search <query> — best-matching stored papers (BM25)."""
    tp = services(context)
    text = arg_text(context)
    if not text:
        await reply(
            update, 'Search for what? E.g. <code>/search "reward model" AND ti:math</code>.'
        )
        return
    text = chats.check_argument(text, "query")
    try:
        fts = ql.compile_query(text)
    except ql.QueryError as exc:
        raise UserError(f"Could not read that query: {exc}") from None
    papers = await tp.store.matching_papers(fts=fts, limit=10, order="relevance")
    if not papers:
        await reply(update, f"No stored paper matches <code>{esc(text)}</code>.")
        return
    count = await tp.store.count_matches(fts=fts)
    header = f"🔎 <b>{count} papers</b> match <code>{esc(text)}</code>; best {len(papers)}:"
    for message in formatting.paper_list(papers, header=header):
        await reply(update, message)


# ---------------------------------------------------------------------------------- settings
@command(changes=True)
async def digest(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/digest instant|daily|weekly [HH:MM] [weekday]"""
    tp = services(context)
    chat = await chats.set_digest(
        tp.store, chat_id_of(update), list(context.args or []), now=tp.clock()
    )
    await reply(update, f"Delivery: <b>{esc(chats.describe_schedule(chat))}</b>.")


@command(changes=True)
async def timezone(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/timezone <Area/City>"""
    tp = services(context)
    if not context.args:
        await reply(update, "Which time zone? E.g. <code>/timezone Europe/Berlin</code>.")
        return
    chat = await chats.set_timezone(tp.store, chat_id_of(update), arg_text(context), now=tp.clock())
    await reply(
        update,
        f"Time zone set to <b>{esc(chat.timezone)}</b> ({esc(chats.describe_schedule(chat))}).",
    )


@command(changes=True)
async def pause(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await services(context).store.update_chat(chat_id_of(update), paused=1)
    await reply(update, "⏸ Paused: no alerts until /resume.")


@command(changes=True)
async def resume(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await services(context).store.update_chat(chat_id_of(update), paused=0)
    services(context).wake_delivery()
    await reply(update, "▶️ Resumed: new papers will arrive again.")


@command(changes=True)
async def spikes(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/spikes on|off"""
    value = arg_text(context).lower()
    if value not in ("on", "off"):
        raise UserError("Use /spikes on or /spikes off.")
    await services(context).store.update_chat(chat_id_of(update), spikes=int(value == "on"))
    await reply(update, f"Spike alerts <b>{value}</b>.")


@command()
async def settings_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    tp = services(context)
    chat = await tp.store.chat(chat_id_of(update))
    assert chat is not None
    count = await tp.store.count_subscriptions(chat.chat_id)
    next_digest = ""
    if chat.next_digest_at:  # in the chat's own time, which is what it chose
        due = parse_iso(chat.next_digest_at).astimezone(ZoneInfo(chat.timezone))
        next_digest = f"\nNext digest: {due:%a %d %b %H:%M} ({chat.timezone})"
    await reply(
        update,
        "<b>Settings</b>\n"
        f"Delivery: {esc(chats.describe_schedule(chat))}{next_digest}\n"
        f"Time zone: {esc(chat.timezone)}\n"
        f"Alerts: {'paused' if chat.paused else 'on'}"
        f" · Spike alerts: {'on' if chat.spikes else 'off'}\n"
        f"Topics followed: {count}/{chats.MAX_FOLLOWS}",
    )


@command()
async def stats(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/stats — admins (TOPICPULSE_ADMIN_IDS) only."""
    tp = services(context)
    user = update.effective_user
    if user is None or user.id not in tp.settings.admin_ids:
        await reply(update, "Sorry — /stats is for the bot's administrators.")
        return
    s = tp.store
    papers, topic_rows = await s.count_papers(), await s.topics()
    chat_counts, outbox = await s.chat_counts(), await s.outbox_counts()
    last_poll = await s.last_run("poll")
    day_ago = iso(tp.clock() - timedelta(days=1))
    errors = await s.recent_run_errors(day_ago)
    poll_line = "never"
    if last_poll:
        poll_line = (
            f"{last_poll['started_at']} ({'ok' if last_poll['ok'] else 'failed'}, "
            f"{last_poll['new']} new)"
        )
    await reply(
        update,
        "<b>topicpulse stats</b>\n"
        f"Papers: {papers}\nTopics: {len(topic_rows)} "
        f"({sum(t.is_custom for t in topic_rows)} custom)\n"
        f"Chats: {chat_counts['active']} active, {chat_counts['inactive']} inactive · "
        f"{chat_counts['subscriptions']} subscriptions\n"
        f"Queue: {outbox.get('pending', 0)} pending, {outbox.get('sent', 0)} sent, "
        f"{outbox.get('dropped', 0)} dropped\n"
        f"Last poll: {esc(poll_line)}\nIngest errors (24 h): {errors}",
    )


# ---------------------------------------------------------------------------------- buttons
@command()
async def page_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    query = update.callback_query
    assert query is not None and query.data is not None
    words = context.chat_data.get("topics_filter", "") if context.chat_data else ""
    text, markup = await _topics_page(services(context), words, int(query.data.split(":")[1]))
    await query.answer()
    await edit_message(query, text, markup)


@command(changes=True)
async def follow_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    tp = services(context)
    query = update.callback_query
    assert query is not None and query.data is not None
    topic = await _button_topic(tp, query.data)
    result = await chats.follow(
        tp.store, chat_id_of(update), topic.slug or topic.query, now=tp.clock()
    )
    await query.answer(
        f"Following {shorten(topic.name, 60)}" if result.added else "Already following"
    )
    text, markup = _follow_reply(result)
    assert query.message is not None
    await context.bot.send_message(
        query.message.chat.id,
        text,
        parse_mode=ParseMode.HTML,
        reply_markup=markup,
        link_preview_options=NO_PREVIEW,
    )


@command(changes=True)
async def unfollow_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    tp = services(context)
    query = update.callback_query
    assert query is not None and query.data is not None
    topic = await _button_topic(tp, query.data)
    removed = await tp.store.unsubscribe(chat_id_of(update), topic.id)
    name = shorten(topic.name, 100)
    await query.answer(f"Unfollowed {shorten(name, 60)}" if removed else "Was not followed")
    if query.data.startswith("ul:"):  # a /list button: show the list without the topic
        lines, markup = await _list_view(tp, chat_id_of(update))
        text = "\n".join(lines)
        if formatting.tg_len(text) <= formatting.MAX_MESSAGE:
            await edit_message(query, text, markup)
            return
    await edit_message(query, f"{'Unfollowed' if removed else 'Not following'} <b>{esc(name)}</b>.")


async def _button_topic(tp: BotContext, data: str) -> Topic:
    try:
        topic = await tp.store.topic(int(data.split(":", 1)[1]))
    except ValueError:
        topic = None
    if topic is None:
        raise UserError("That topic no longer exists.")
    return topic


# ---------------------------------------------------------------------------------- fallbacks
async def unknown_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    message = update.effective_message
    assert message is not None
    word = (message.text or "").split(maxsplit=1)[0]
    addressee = word.partition("@")[2]
    if addressee and addressee.casefold() != (context.bot.username or "").casefold():
        return  # "/start@other_bot" in a group is not for us
    await _unknown(update, context)


@command()
async def _unknown(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await reply(update, "I don't know that command. /help lists what I can do.")


@command()
async def plain_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await reply(
        update,
        "Send /follow followed by a topic or a query, e.g. "
        "<code>/follow RL for Language Models</code>. /help shows everything.",
    )


async def chat_migrated(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A group became a supergroup: its subscriptions and settings move to the new id."""
    message = update.effective_message
    if message is None:
        return
    if message.migrate_to_chat_id:
        old, new = message.chat.id, message.migrate_to_chat_id
    elif message.migrate_from_chat_id:
        old, new = message.migrate_from_chat_id, message.chat.id
    else:
        return
    store = services(context).store
    if await store.chat(old) is not None:
        await store.migrate_chat(old, new)
        log.info("chat %s migrated to %s", old, new)


async def on_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Log and carry on: one bad update never stops the bot."""
    log.error("error while handling an update", exc_info=context.error)
    if not isinstance(update, Update) or isinstance(context.error, TelegramError):
        return
    sorry = "Something went wrong on my side; please try again."
    with contextlib.suppress(TelegramError):
        if update.callback_query:
            await update.callback_query.answer(sorry)
        elif update.effective_message:
            await update.effective_message.reply_text(sorry, allow_sending_without_reply=True)


def register(app: Application) -> None:  # type: ignore[type-arg]
    table: list[tuple[str, Handler]] = [
        ("start", start),
        ("help", help_command),
        ("follow", follow),
        ("unfollow", unfollow),
        ("list", list_topics),
        ("topics", topics),
        ("momentum", momentum_command),
        ("trending", trending),
        ("latest", latest),
        ("search", search),
        ("digest", digest),
        ("timezone", timezone),
        ("pause", pause),
        ("resume", resume),
        ("spikes", spikes),
        ("settings", settings_command),
        ("stats", stats),
    ]
    for name, handler in table:
        app.add_handler(CommandHandler(name, handler))
    app.add_handler(CallbackQueryHandler(page_button, pattern=r"^tp:\d+$"))
    app.add_handler(CallbackQueryHandler(follow_button, pattern=r"^f:\d+$"))
    app.add_handler(CallbackQueryHandler(unfollow_button, pattern=r"^ul?:\d+$"))
    app.add_handler(MessageHandler(filters.StatusUpdate.MIGRATE, chat_migrated))
    app.add_handler(MessageHandler(filters.COMMAND, unknown_command))
    app.add_handler(MessageHandler(filters.TEXT & filters.ChatType.PRIVATE, plain_text))
    app.add_error_handler(on_error)


def bot_commands() -> list[BotCommand]:
    return [BotCommand(name, description) for name, description in COMMANDS]
