"""Following topics: /start (and its follow_<slug> deep link), /follow, /unfollow, /list,
/topics, and their buttons."""

from __future__ import annotations

from telegram import CallbackQuery, Update
from telegram.constants import ParseMode
from telegram.ext import ContextTypes

from topicpulse.bot import callbacks, views
from topicpulse.bot.common import (
    NO_PREVIEW,
    NOT_ADMIN,
    BotContext,
    arg_text,
    chat_id_of,
    command,
    edit_message,
    is_admin,
    markup,
    reply,
    reply_lines,
    reply_view,
    services,
    thread_of,
)
from topicpulse.delivery import chats, refine
from topicpulse.delivery.formatting import MAX_MESSAGE, esc, shorten, tg_len
from topicpulse.insight import momentum
from topicpulse.topics.catalogue import find_catalogue_topic
from topicpulse.web import deeplinks


@command()
async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/start [follow_<slug> | q_<code>] — welcome; reactivates a chat that had blocked the
    bot. A deep link follows a catalogue topic; a query's link (from a web page) only shows the
    query with a button: a link must never follow an arbitrary query silently."""
    tp = services(context)
    wanted = deeplinks.parse(arg_text(context))
    if isinstance(wanted, deeplinks.SharedQuery):
        query = await chats.shared_query(tp.store, wanted.code)
        if query is None:
            await reply(update, "That link is not valid (any more). Follow a query with /follow.")
            return
        await reply_view(update, views.confirm_shared(query, wanted.code))
        return
    if wanted is None:
        await reply(update, "👋 " + views.HELP)
        return
    slug = wanted.slug
    topic = await find_catalogue_topic(tp.store, slug)
    if topic is None or topic.slug != slug:
        await reply(
            update,
            "That link is not for a topic in the catalogue (any more). Browse them with /topics.",
        )
        return
    if not await is_admin(update, context):
        await reply(update, NOT_ADMIN)
        return
    await _follow_and_reply(update, tp, slug)


@command()
async def help_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await reply(update, views.HELP)


async def _follow_and_reply(update: Update, tp: BotContext, text: str) -> None:
    result = await chats.follow(
        tp.store,
        chat_id_of(update),
        text,
        now=tp.clock(),
        thread_id=thread_of(update),
        lookup=tp.lookup,
    )
    await reply_view(update, views.follow_result(result))


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
        lines, keyboard = await _list_view(services(context), chat_id_of(update))
        await reply_lines(update, lines, keyboard)
        return
    topic = await chats.unfollow(services(context).store, chat_id_of(update), text)
    await reply(update, f"Unfollowed <b>{esc(shorten(topic.name, 100))}</b>.")


async def _list_view(tp: BotContext, chat_id: int) -> tuple[list[str], views.Keyboard]:
    chat, subscriptions, left_out = await tp.store.following(chat_id)
    assert chat is not None
    now = tp.clock()
    topics = [s.topic for s in subscriptions]
    moments = await momentum.compute_many(tp.store, topics, as_of=now)
    moments = await refine.viewed_moments(tp.store, topics, moments, left_out, now)
    return views.followed_list(chat, list(zip(topics, moments, strict=True)))


@command()
async def list_topics(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/list — followed topics, delivery mode and sparklines, with Unfollow buttons."""
    lines, keyboard = await _list_view(services(context), chat_id_of(update))
    await reply_lines(update, lines, keyboard)


async def _topics_page(tp: BotContext, words: str, page: int) -> views.View:
    catalogue = await tp.store.topics(kind="catalogue")
    view = views.topics_page(views.filter_catalogue(catalogue, words), words, page)
    if words:  # a filter too long for the buttons' data is looked up by its digest
        tp.remember_filter(callbacks.filter_key(words), words)
    return view


@command()
async def topics(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/topics [words] — browse or filter the catalogue."""
    words = chats.check_argument(arg_text(context), "filter") if context.args else ""
    await reply_view(update, await _topics_page(services(context), words, 0))


# ---------------------------------------------------------------------------------- buttons
async def page_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.TopicsPage
) -> None:
    tp = services(context)
    query = update.callback_query
    assert query is not None
    words = button.words
    if button.key:
        found = tp.topic_filters.get(button.key)
        if found is None:
            await query.answer(callbacks.EXPIRED)
            return
        words = found
    await query.answer()
    await edit_message(tp, query, await _topics_page(tp, words, button.page))


async def follow_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.FollowTopic
) -> None:
    """➕ on a /topics page: catalogue topics only (the pages list nothing else)."""
    tp = services(context)
    query = update.callback_query
    assert query is not None and query.message is not None
    topic = await tp.store.topic(button.topic_id)
    if topic is None or topic.is_custom or not topic.active or topic.slug is None:
        await query.answer("That topic is no longer available.", show_alert=True)
        return
    result = await chats.follow(
        tp.store, chat_id_of(update), topic.slug, now=tp.clock(), thread_id=thread_of(update)
    )
    await _answer_followed(context, query, result, thread_of(update))


async def follow_shared_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.FollowShared
) -> None:
    """✅ under a web page's follow link: the query its code stands for."""
    tp = services(context)
    query = update.callback_query
    assert query is not None
    text = await chats.shared_query(tp.store, button.code)
    if text is None:
        await query.answer(callbacks.EXPIRED)
        return
    try:
        result = await chats.follow(
            tp.store,
            chat_id_of(update),
            text,
            now=tp.clock(),
            query_only=True,
            thread_id=thread_of(update),
        )
    except chats.UserError as exc:  # e.g. the chat follows the most topics allowed
        await query.answer(shorten(str(exc), 200), show_alert=True)
        return
    await _answer_followed(context, query, result, thread_of(update))


async def _answer_followed(
    context: ContextTypes.DEFAULT_TYPE,
    query: CallbackQuery,
    result: chats.FollowResult,
    thread_id: int | None,
) -> None:
    """A follow button's answer, then the follow's confirmation as a new message (in the
    button's forum topic)."""
    assert query.message is not None
    name = shorten(result.topic.name, 60)
    await query.answer(f"Following {name}" if result.added else "Already following")
    view = views.follow_result(result)
    await context.bot.send_message(
        query.message.chat.id,
        view.text,
        parse_mode=ParseMode.HTML,
        reply_markup=markup(view.keyboard),
        link_preview_options=NO_PREVIEW,
        message_thread_id=thread_id,
    )


async def unfollow_button(
    update: Update,
    context: ContextTypes.DEFAULT_TYPE,
    button: callbacks.Undo | callbacks.UnfollowFromList,
) -> None:
    """↩️ Undo under a follow, or ✖ in /list (which then redraws the list)."""
    tp = services(context)
    query = update.callback_query
    assert query is not None
    chat_id = chat_id_of(update)
    topic = await tp.store.subscribed_topic(chat_id, button.topic_id)
    removed = topic is not None and await tp.store.unsubscribe(chat_id, button.topic_id)
    await query.answer(
        f"Unfollowed {shorten(topic.name, 60)}" if removed and topic else "Was not followed"
    )
    if isinstance(button, callbacks.UnfollowFromList):
        lines, keyboard = await _list_view(tp, chat_id)
        view = views.View("\n".join(lines), keyboard)
        if len(lines) <= 1 or _fits(view.text):
            await edit_message(tp, query, view)
            return
    if topic is not None:  # the confirmation names only a topic this chat had followed
        await edit_message(tp, query, views.View(views.unfollowed(topic.name, removed)))


def _fits(text: str) -> bool:
    return tg_len(text) <= MAX_MESSAGE
