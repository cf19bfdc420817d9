"""Asking: /ask, the "Ask about this topic" button and the replies to its prompt.

The answer comes from ``topicpulse.insight.ask`` (passages quoted from stored abstracts); when the
operator configured a language model (``topicpulse.insight.llm``), a short answer written from those
passages only goes on top, and any failure of it leaves the passages alone.
"""

from __future__ import annotations

from telegram import ForceReply, Update
from telegram.constants import ParseMode
from telegram.ext import ContextTypes

from topicpulse.bot import callbacks, views
from topicpulse.bot.common import arg_text, chat_id_of, command, reply, services
from topicpulse.bot.views import ASK_PROMPT
from topicpulse.delivery import chats, formatting
from topicpulse.insight.ask import Answer


@command()
async def ask_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/ask [<topic>:] <question> — passages from the topic's papers that answer it."""
    text = arg_text(context)
    if not text:
        await reply(
            update,
            "Ask what? E.g. <code>/ask RL for Language Models: how do people stop reward"
            " hacking?</code> (without a topic, all stored papers are searched).",
        )
        return
    answer = await chats.ask_question(services(context).store, chat_id_of(update), text)
    await _send_answer(update, context, answer)


async def ask_button(
    update: Update, context: ContextTypes.DEFAULT_TYPE, button: callbacks.AskAbout
) -> None:
    """ "Ask about this topic": a prompt that the question replies to."""
    query = update.callback_query
    assert query is not None and update.effective_message is not None
    topic = await services(context).store.topic(button.topic_id)
    if topic is None:
        await query.answer(callbacks.EXPIRED)
        return
    await query.answer()
    await update.effective_message.reply_text(
        views.ask_prompt(topic),
        parse_mode=ParseMode.HTML,
        reply_markup=ForceReply(selective=True, input_field_placeholder="Your question"),
        allow_sending_without_reply=True,
    )


def _prompted_topic(update: Update, context: ContextTypes.DEFAULT_TYPE) -> str | None:
    """The topic name of the ask prompt this message replies to (None: not a reply to one)."""
    message = update.effective_message
    replied = message.reply_to_message if message else None
    if replied is None or replied.from_user is None or replied.from_user.id != context.bot.id:
        return None
    first_line = (replied.text or "").split("\n", 1)[0]
    if not first_line.startswith(ASK_PROMPT):
        return None
    return first_line.removeprefix(ASK_PROMPT).strip() or None


def is_question(update: Update, context: ContextTypes.DEFAULT_TYPE) -> bool:
    return _prompted_topic(update, context) is not None


@command()
async def question_reply(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A reply to an ask prompt: the question about the topic the prompt names."""
    name = _prompted_topic(update, context)
    message = update.effective_message
    assert name is not None and message is not None
    answer = await chats.ask_about(
        services(context).store, chat_id_of(update), name, message.text or ""
    )
    await _send_answer(update, context, answer)


async def _send_answer(update: Update, context: ContextTypes.DEFAULT_TYPE, answer: Answer) -> None:
    writer = services(context).answer_writer
    generated = None
    if writer is not None and answer.passages:
        generated = await writer.write(answer.question, answer.passages)
    for text in formatting.answer_messages(answer, generated):
        await reply(update, text)
