"""Refining a topic from 👎 in chat: the offer a 👎 can trigger ("Leave out papers about X
from T?"), and its buttons — ✂️ Leave out, No thanks, ↩️ Undo. The rules are the engine's
(``delivery.refine``); in a group the buttons are for its administrators, like /follow
(``handlers.on_button`` checks)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from telegram import Update
from telegram.constants import ParseMode
from telegram.ext import ContextTypes

from topicpulse.bot import callbacks, views
from topicpulse.bot.common import NO_PREVIEW, edit_message, markup, services, thread_of
from topicpulse.bot.views import View
from topicpulse.delivery import refine
from topicpulse.delivery.formatting import shorten
from topicpulse.models import StoredPaper
from topicpulse.store import Store

D = TypeVar("D")  # what the engine decided: a refinement, or one with its topic


async def offer_after_dislike(
    update: Update, context: ContextTypes.DEFAULT_TYPE, chat_id: int, paper: StoredPaper
) -> None:
    """After a 👎: the offer it triggers, if any, as a message of its own under the paper's."""
    offer = await refine.offer_after_dislike(services(context).store, chat_id, paper)
    if offer is None:
        return
    view = views.refine_offer(offer)
    await context.bot.send_message(
        chat_id,
        view.text,
        parse_mode=ParseMode.HTML,
        reply_markup=markup(view.keyboard),
        link_preview_options=NO_PREVIEW,
        message_thread_id=thread_of(update),
    )


async def _decide(
    update: Update,
    context: ContextTypes.DEFAULT_TYPE,
    refinement_id: int,
    decide: Callable[[Store, int, int], Awaitable[D | None]],
    answer: Callable[[D], str],
    view: Callable[[D], View],
) -> None:
    """One of the offer's buttons: the engine decides, the tap is answered, the message edited;
    a refinement that is gone or not this chat's gets "This button has expired."."""
    tp = services(context)
    query = update.callback_query
    assert query is not None and update.effective_chat is not None
    decided = await decide(tp.store, update.effective_chat.id, refinement_id)
    if decided is None:
        await query.answer(callbacks.EXPIRED)
        return
    await query.answer(answer(decided))
    await edit_message(tp, query, view(decided))


async def leave_out_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.LeaveOut
) -> None:
    """✂️ Leave out, under the offer."""
    await _decide(
        update,
        context,
        button.refinement_id,
        refine.accept,
        lambda decided: f"Left out: {shorten(decided.term, 60)}",
        views.left_out,
    )


async def no_thanks_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.NoThanks
) -> None:
    """No thanks, under the offer."""
    await _decide(
        update, context, button.refinement_id, refine.decline, lambda _: "OK", views.declined
    )


async def put_back_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.PutBack
) -> None:
    """↩️ Undo under "Left out …"."""
    await _decide(
        update,
        context,
        button.refinement_id,
        refine.restore,
        lambda decided: f"Back: {shorten(decided.term, 60)}",
        views.put_back,
    )
