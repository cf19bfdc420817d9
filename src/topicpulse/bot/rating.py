"""The reader's taste: 👍 / 👎 under every paper (a second tap undoes), /taste (what was
learned, importing liked papers by id or as a BibTeX/RIS file, holding back on or off), the
quiet list of held-back papers, and "why?".

In a group every member's 👍 / 👎 counts for the group's taste (the last tap on a paper wins):
rating changes nothing but the order and the quiet list. Importing and turning holding back
on or off change the group's settings, so they are for its administrators.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from telegram import Message, Update
from telegram.constants import ChatType
from telegram.error import BadRequest, RetryAfter
from telegram.ext import ContextTypes

from topicpulse.bot import callbacks, refining, views
from topicpulse.bot.buckets import Priority
from topicpulse.bot.common import (
    NOT_ADMIN,
    BotContext,
    arg_text,
    chat_id_of,
    command,
    edit_message,
    inline_keyboard,
    is_admin,
    reply,
    reply_view,
    services,
    showing,
)
from topicpulse.bot.views import Keyboard
from topicpulse.delivery import formatting, refine, tastes, weekly
from topicpulse.delivery.chats import UserError
from topicpulse.models import StoredPaper
from topicpulse.sources import references

HELD_SHOWN = 20  # held-back papers "show" lists at once


# ---------------------------------------------------------------------------------- 👍 / 👎
async def rate_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.Rate
) -> None:
    """👍 / 👎: stored at once (with the other taps of the moment: ``Store.tap``) and
    acknowledged; then the message's buttons show the rating (``ticks``: in the background, a
    low send for the rate limiter: when a thousand readers rate at once, more ticks are due
    than Telegram lets a bot send, and they must not hold up replies, alerts or the chat's
    next tap); the taste is retrained afterwards, in the worker process. A 👎 may bring the
    offer to leave a word out of a topic (``refining``)."""
    tp = services(context)
    query = update.callback_query
    assert query is not None and update.effective_user is not None
    chat_id = chat_id_of(update)
    message = query.message if isinstance(query.message, Message) else None
    shown = [
        b.paper_id
        for row in (showing(tp, message)[1] if message else [])
        for _, data in row
        if isinstance(b := callbacks.decode(data), callbacks.Rate)
    ]
    # one batched write: the rating, and the chat's ratings of the papers beside it
    tapped = await tp.store.tap(
        chat_id, button.paper_id, button.value, rated_by=update.effective_user.id, shown=shown
    )
    if tapped is None:  # a paper no longer stored
        await query.answer(callbacks.EXPIRED)
        return
    await query.answer(views.rated(tapped.value))
    tp.on_rated(chat_id)
    if message is not None:  # the tick follows, in the background (``ticks``)
        key = (message.chat.id, message.message_id)
        text, keyboard = showing(tp, message)  # (read again: a tick may have landed meanwhile)
        wanted = views.relabel(keyboard, tapped.shown)
        spawn = functools.partial(context.application.create_task, update=update)
        tp.ticks.want(key, text, wanted, keyboard, functools.partial(_tick, context, key), spawn)
    if tapped.value < 0:  # several 👎 in a topic that share a word: offer to leave it out, once
        with tp.store.answered():  # (after the answer: replies' reads go first)
            found = await tp.store.papers_by_ids([button.paper_id])
            if found:
                await refining.offer_after_dislike(update, context, chat_id, found[0])


async def _tick(context: ContextTypes.DEFAULT_TYPE, key: tuple[int, int], wanted: Keyboard) -> bool:
    """Tick the ratings (only the keyboard changes), after replies and alerts: False when left
    out (the bot sends all Telegram lets it; the tap's answer has acknowledged the rating)."""
    chat_id, message_id = key
    edit = {"chat_id": chat_id, "message_id": message_id, "reply_markup": inline_keyboard(wanted)}
    try:  # (the edited message that comes back is not parsed: only whether it was accepted)
        await context.bot.do_api_request(
            "editMessageReplyMarkup", api_kwargs=edit, rate_limit_args=Priority.LOW
        )
    except RetryAfter:  # (NoRoom, or a 429)
        return False
    except BadRequest as exc:
        if "not modified" not in exc.message.lower():
            raise
    return True


async def list_keyboard(
    tp: BotContext, chat_id: int, papers: Sequence[StoredPaper], ids: Sequence[int]
) -> Keyboard:
    """The 👍 / 👎 rows of a numbered list's message that holds the papers ``ids``."""
    numbers = {p.id: n for n, p in enumerate(papers, start=1)}
    return views.rating_rows(ids, await tp.store.ratings_for(chat_id, ids), numbers)


async def reply_papers(
    update: Update,
    context: ContextTypes.DEFAULT_TYPE,
    papers: Sequence[StoredPaper],
    header: str,
    last: Keyboard | None = None,
    *,
    why: bool = False,
) -> None:
    """A numbered paper list (/latest, /search, /similar), each message with a 👍 / 👎 row per
    paper it lists (and a "why?" with ``why``); ``last``: more buttons under the last one."""
    tp = services(context)
    chat_id = chat_id_of(update)
    tags = await tp.store.paper_topics([p.id for p in papers], kind="catalogue")
    messages = formatting.paper_list_keyed(papers, header=header, tags=tags)
    numbers = {p.id: n for n, p in enumerate(papers, start=1)}
    for n, (text, ids) in enumerate(messages, start=1):
        keyboard = await list_keyboard(tp, chat_id, papers, ids)
        if why:
            keyboard = [
                [*row, (f"why? {numbers[pid]}", callbacks.encode(callbacks.Why(pid)))]
                for row, pid in zip(keyboard, ids, strict=True)
            ]
        await reply(update, text, keyboard + ((last or []) if n == len(messages) else []))


# ---------------------------------------------------------------------------------- /taste
@command()
async def taste_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/taste [on | off | arXiv ids or links] — what the bot learned from this chat's ratings;
    holding back on or off; papers to count as liked."""
    tp = services(context)
    chat_id = chat_id_of(update)
    text = arg_text(context)
    if not text:
        await reply_view(update, await taste_page(tp, chat_id))
        return
    if not await is_admin(update, context):
        await reply(update, NOT_ADMIN)
        return
    word = text.casefold()
    if word in ("on", "off"):
        await tp.store.set_hold_back(chat_id, word == "on")
        await reply(
            update,
            "Holding back is on: once your taste knows enough, unlikely papers wait in a quiet "
            "list."
            if word == "on"
            else "Holding back is off: every alert arrives as before.",
        )
        return
    result = await tastes.import_ids(tp.store, chat_id, text)
    tp.on_rated(chat_id)
    await reply(update, views.imported(result))


async def taste_page(tp: BotContext, chat_id: int) -> views.View:
    """/taste's summary, the words the chat left out of its topics, the weekly /foryou."""
    summary = await tastes.summary(tp.store, chat_id)
    left = await refine.left_out(tp.store, chat_id)
    line = weekly.describe(await tp.store.chat(chat_id), await tp.store.taste(chat_id))
    return views.taste_summary(summary, left, line)


async def put_back_listed_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.PutBackListed
) -> None:
    """✖ beside a left-out word in /taste: put it back, redraw /taste."""
    tp = services(context)
    query = update.callback_query
    assert query is not None
    chat_id = chat_id_of(update)
    decided = await refine.restore(tp.store, chat_id, button.refinement_id)
    if decided is None:
        await query.answer(callbacks.EXPIRED)
        return
    await query.answer(f"Back: {formatting.shorten(decided.term, 60)}")
    await edit_message(tp, query, await taste_page(tp, chat_id))


def is_import(update: Update) -> bool:
    """A document for /taste: captioned /taste, or a .bib/.ris file sent in a private chat."""
    message, chat = update.effective_message, update.effective_chat
    if message is None or message.document is None or chat is None:
        return False
    caption = (message.caption or "").split()
    if caption and caption[0].partition("@")[0].casefold() == "/taste":
        return True
    name = (message.document.file_name or "").casefold()
    return chat.type == ChatType.PRIVATE and name.endswith((".bib", ".ris", ".bibtex"))


@command()
async def import_document(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A BibTeX or RIS export sent as a file: its papers become likes, all or nothing."""
    tp = services(context)
    message = update.effective_message
    assert message is not None and message.document is not None
    if not await is_admin(update, context):
        await reply(update, NOT_ADMIN)
        return
    document = message.document
    if document.file_size and document.file_size > references.MAX_BYTES:
        raise UserError(
            f"That file is {document.file_size // 1000:,} kB; I read exports up to "
            f"{references.MAX_BYTES // 1000:,} kB — export a collection instead."
        )
    data = bytes(await (await document.get_file()).download_as_bytearray())
    chat_id = chat_id_of(update)
    result = await tastes.import_file(tp.store, chat_id, data, document.file_name or "")
    tp.on_rated(chat_id)
    await reply(update, views.imported(result))


# ---------------------------------------------------------------------------------- quiet list
async def show_held_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.ShowHeld
) -> None:
    """ "show" under "N held back": the quiet list, best first, each with 👍 / 👎 and why?."""
    tp = services(context)
    query = update.callback_query
    assert query is not None
    chat_id = chat_id_of(update)
    waiting = await tp.store.waiting_held_back(chat_id)
    if not waiting:
        await query.answer("Nothing is held back now.")
        return
    await query.answer()
    papers = await tp.store.papers_by_ids(waiting[:HELD_SHOWN])
    order = {pid: n for n, pid in enumerate(waiting)}
    papers.sort(key=lambda p: order[p.id])
    more = len(waiting) - len(papers)
    header = f"🔕 <b>Held back as probably not for you</b>{f' ({more} more)' if more else ''}:"
    await reply_papers(update, context, papers, header, why=True)
    await tp.store.mark_held_shown(chat_id, [p.id for p in papers])


@command()
async def for_you_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/foryou [weekly | off] — the last 7 days' papers your taste rates highest that your
    topics missed; ``weekly``: the same as a message once a week (``off``: no more)."""
    tp = services(context)
    word = arg_text(context).casefold()
    if word:
        await _weekly_setting(update, context, word)
        return
    found = await tastes.for_you(tp.store, chat_id_of(update), tp.clock())
    if found is None:
        await reply(update, "No taste yet: rate a few papers with 👍 / 👎, or see /taste.")
    elif not found:
        await reply(update, "Nothing new outside your topics in the last 7 days.")
    else:
        header = "✨ <b>For you</b> — outside your topics, the last 7 days, best first:"
        await reply_papers(update, context, [p for p, _ in found], header, why=True)


async def _weekly_setting(update: Update, context: ContextTypes.DEFAULT_TYPE, word: str) -> None:
    """``/foryou weekly`` (or ``on``) and ``/foryou off``: a setting, for a group's admins."""
    if word not in ("weekly", "on", "off"):
        raise UserError("Use /foryou, /foryou weekly or /foryou off.")
    if not await is_admin(update, context):
        await reply(update, NOT_ADMIN)
        return
    tp = services(context)
    chat = await tp.store.chat(chat_id_of(update))
    assert chat is not None  # (the command registered it)
    due = await weekly.set_weekly(tp.store, chat, word != "off", tp.clock())
    up, _ = await tp.store.rating_counts(chat.chat_id)
    await reply(update, views.weekly_set(chat, due, up))


async def why_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.Why
) -> None:
    """ "why?": one line — the score, the ratings most like the paper, the words that weighed."""
    tp = services(context)
    query = update.callback_query
    assert query is not None
    found = await tp.store.papers_by_ids([button.paper_id])
    if not found:
        await query.answer(callbacks.EXPIRED)
        return
    line = await tastes.why(tp.store, chat_id_of(update), found[0])
    await query.answer(formatting.shorten(line, 200), show_alert=True)
