"""The bot's handlers, registered in one place: commands by what they serve (``following``,
``reading``, ``chat_settings``), every inline button through one dispatcher, and the fallbacks
(unknown commands, plain text, group migrations, errors).

Handlers are thin: parse, call the engine (``chats``, ``topics``, ``momentum``, the store's
queries), render a view (``views``) — no SQL and no business rules here.
"""

from __future__ import annotations

import contextlib
import logging

from telegram import BotCommand, Message, Update
from telegram.constants import ChatType
from telegram.error import TelegramError
from telegram.ext import (
    Application,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from topicpulse.bot import (
    asking,
    callbacks,
    chat_settings,
    following,
    rating,
    reading,
    refining,
)
from topicpulse.bot.common import (
    COMMAND_RATE,
    NOT_ADMIN,
    BotContext,
    Handler,
    command,
    is_admin,
    reply,
    services,
)
from topicpulse.bot.views import HELP, TOPICS_PER_PAGE
from topicpulse.insight import momentum  # noqa: F401  (tests patch handlers.momentum)

__all__ = ["COMMAND_RATE", "HELP", "TOPICS_PER_PAGE", "BotContext", "bot_commands", "register"]

log = logging.getLogger(__name__)

COMMANDS: list[tuple[str, str, Handler]] = [
    ("follow", "Follow a topic or your own query", following.follow),
    ("list", "Topics this chat follows", following.list_topics),
    ("topics", "Browse the topic catalogue", following.topics),
    ("momentum", "How a topic is moving, with a chart", reading.momentum_command),
    ("latest", "Newest papers of a topic", reading.latest),
    ("search", "Search all stored papers", reading.search),
    ("paper", "One paper in full, by arXiv id or link", reading.paper),
    ("similar", "Stored papers most like one paper", reading.similar),
    ("ask", "Ask about a topic: quotes from its papers", asking.ask_command),
    ("taste", "What your 👍/👎 taught me; import liked papers", rating.taste_command),
    ("foryou", "Papers for you that your topics missed", rating.for_you_command),
    ("trending", "Rising topics", reading.trending),
    ("unfollow", "Stop following a topic", following.unfollow),
    ("digest", "instant, daily or weekly delivery", chat_settings.digest),
    ("timezone", "Your time zone for digests", chat_settings.timezone),
    ("settings", "This chat's settings", chat_settings.settings_command),
    ("pause", "Pause alerts", chat_settings.pause),
    ("resume", "Resume alerts", chat_settings.resume),
    ("spikes", "Spike alerts on or off", chat_settings.spikes),
    ("help", "What this bot does", following.help_command),
]
UNLISTED: list[tuple[str, Handler]] = [("start", following.start), ("stats", chat_settings.stats)]


# ---------------------------------------------------------------------------------- buttons
@command()
async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Every button press: decoded strictly, acted on only if the message really offered that
    button, one press per chat at a time; anything else is answered as expired."""
    query = update.callback_query
    assert query is not None and update.effective_chat is not None
    button = callbacks.decode(query.data)
    message = query.message
    markup = message.reply_markup if isinstance(message, Message) else None
    keyboard = markup.inline_keyboard if markup else None
    if (
        button is None
        or not isinstance(message, Message)
        or not callbacks.offered(query.data or "", keyboard)
    ):
        await query.answer(callbacks.EXPIRED)
        return
    changes = isinstance(
        button,
        callbacks.FollowTopic
        | callbacks.Undo
        | callbacks.UnfollowFromList
        | callbacks.FollowShared
        | callbacks.Refining,  # (refining a topic changes what the chat follows)
    )
    if changes and not await is_admin(update, context):
        await query.answer(NOT_ADMIN, show_alert=True)
        return
    async with services(context).button_lock(update.effective_chat.id):
        match button:
            case callbacks.TopicsPage():
                await following.page_button(update, context, button)
            case callbacks.FollowTopic():
                await following.follow_button(update, context, button)
            case callbacks.FollowShared():
                await following.follow_shared_button(update, context, button)
            case callbacks.Undo() | callbacks.UnfollowFromList():
                await following.unfollow_button(update, context, button)
            case callbacks.LatestOf():
                await reading.latest_button(update, context, button)
            case callbacks.MoreLike():
                await reading.more_like_button(update, context, button)
            case callbacks.AskAbout():
                await asking.ask_button(update, context, button)
            case callbacks.Rate():
                await rating.rate_button(update, context, button)
            case callbacks.ShowHeld():
                await rating.show_held_button(update, context, button)
            case callbacks.Why():
                await rating.why_button(update, context, button)
            case callbacks.LeaveOut():
                await refining.leave_out_button(update, context, button)
            case callbacks.NoThanks():
                await refining.no_thanks_button(update, context, button)
            case callbacks.PutBack():
                await refining.put_back_button(update, context, button)
            case callbacks.PutBackListed():
                await rating.put_back_listed_button(update, context, button)


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


async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Text that is not a command: a question (a reply to an "Ask about" prompt), or in a
    private chat a pointer to the commands; in a group, nothing (it was not for the bot)."""
    if asking.is_question(update, context):
        await asking.question_reply(update, context)
    elif update.effective_chat is not None and update.effective_chat.type == ChatType.PRIVATE:
        await plain_text(update, context)


async def on_document(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A file: a BibTeX/RIS export for /taste; anything else is not for the bot."""
    if rating.is_import(update):
        await rating.import_document(update, context)


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
    # Both updates come (one per chat), perhaps at once: the store moves the chat only once.
    if await services(context).store.migrate_chat(old, new):
        log.info("chat %s migrated to %s", old, new)


async def on_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Log and carry on: one bad update never stops the bot."""
    log.error("error while handling an update", exc_info=context.error)
    if not isinstance(update, Update):
        return
    sorry = "Something went wrong on my side; please try again."
    with contextlib.suppress(TelegramError):
        if update.callback_query:  # never leave a button spinning, whatever failed
            await update.callback_query.answer(sorry)
        elif isinstance(context.error, TelegramError):
            return  # Telegram itself failed: a reply would most likely fail too
        elif update.effective_message:
            await update.effective_message.reply_text(sorry, allow_sending_without_reply=True)


def register(app: Application) -> None:  # type: ignore[type-arg]
    for name, _, handler in COMMANDS:
        app.add_handler(CommandHandler(name, handler))
    for name, handler in UNLISTED:
        app.add_handler(CommandHandler(name, handler))
    app.add_handler(CallbackQueryHandler(on_button))  # every button, ours or forged
    app.add_handler(MessageHandler(filters.StatusUpdate.MIGRATE, chat_migrated))
    app.add_handler(MessageHandler(filters.Document.ALL, on_document))
    app.add_handler(MessageHandler(filters.COMMAND, unknown_command))
    app.add_handler(MessageHandler(filters.TEXT, on_text))
    app.add_error_handler(on_error)


def bot_commands() -> list[BotCommand]:
    return [BotCommand(name, description) for name, description, _ in COMMANDS]
