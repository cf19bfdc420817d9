"""/ask end to end: the running bot against the fake Bot API (and a fake language model)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot_harness import RL, USER, Bot, bot_session, check_traffic, links, paper, seed_papers
from fake_llm import FakeLLM

pytestmark = pytest.mark.timeout(60)

HACKING = (
    "Reinforcement learning makes a language model exploit its reward model. We stop reward"
    " hacking with verifier ensembles that must agree before a reward is paid."
)


def papers() -> list:
    return [
        *seed_papers(),
        paper(11, "Verifier ensembles for RL of language models", days_ago=1, abstract=HACKING),
    ]


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with bot_session(tmp_path, papers=papers()) as running:
        await running.poll()
        yield running
        check_traffic(running.fake)


async def test_ask_about_a_topic_quotes_its_papers(bot: Bot) -> None:
    answer = await bot.say(USER, f"/ask {RL}: how do people stop reward hacking?")
    assert answer.text is not None
    topic_papers = len(links(await bot.say(USER, f"/latest {RL} 20")))
    assert answer.text.startswith(f"💬 <b>From {topic_papers} papers on {RL}:</b>")
    assert links(answer)[0] == "2611.00011"
    assert "“We stop reward hacking with verifier ensembles" in answer.text
    assert "Written by a language model" not in answer.text  # none configured


async def test_ask_without_a_topic_searches_everything(bot: Bot) -> None:
    everything = await bot.say(USER, "/ask which papers segment images?")
    assert everything.text is not None
    assert everything.text.startswith("💬 <b>From 11 papers stored:</b>")
    assert links(everything) == ["2611.00010"]
    # Text before a colon that names no topic is part of the question.
    colon = await bot.say(USER, "/ask segmentation: which survey covers it?")
    assert colon.text is not None and "papers stored" in colon.text


async def test_ask_needs_a_question(bot: Bot) -> None:
    empty = await bot.say(USER, "/ask")
    assert empty.plain_text is not None and empty.plain_text.startswith("Ask what?")
    hollow = await bot.say(USER, f"/ask {RL}: what is it?")
    assert hollow.plain_text == (
        "Ask with at least one word about the subject, e.g. reward hacking."
    )


async def test_the_momentum_button_asks_for_a_question_and_answers_the_reply(bot: Bot) -> None:
    replies = await bot.ask(USER, f"/momentum {RL}")
    summary = replies[0]
    [(label, data)] = summary.buttons
    assert label == "❓ Ask about this topic" and data is not None
    sent, answered = await bot.press(USER, summary, data)
    assert answered.get("text") is None
    [prompt] = sent
    assert prompt.params["reply_markup"]["force_reply"] is True
    assert prompt.plain_text is not None and prompt.plain_text.startswith(f"❓ Ask about {RL}")
    answer = await bot.say(USER, "how to stop reward hacking", reply_to=prompt.message_id)
    assert answer.text is not None and answer.text.startswith("💬 <b>From")
    assert f"on {RL}:" in answer.text and links(answer)[0] == "2611.00011"
    # A plain message that replies to anything else gets the usual pointer.
    other = await bot.say(USER, "hello", reply_to=summary.message_id)
    assert other.plain_text is not None and other.plain_text.startswith("Send /follow")


async def test_a_configured_language_model_writes_a_cited_answer(tmp_path: Path) -> None:
    fake = FakeLLM(key="sk-live-abcdef", reply="Verifier ensembles stop it [1].")
    await fake.start()
    try:
        async with bot_session(
            tmp_path,
            papers=papers(),
            TOPICPULSE_LLM_URL=fake.url,
            TOPICPULSE_LLM_MODEL="small",
            TOPICPULSE_LLM_API_KEY="sk-live-abcdef",
        ) as bot:
            await bot.poll()
            answer = await bot.say(USER, f"/ask {RL}: how do people stop reward hacking?")
            assert answer.text is not None
            assert (
                'Verifier ensembles stop it <a href="https://arxiv.org/abs/2611.00011">[1]</a>.'
                in answer.text
            )
            assert "Written by a language model from the passages below." in answer.text
            fake.hang = True  # now it never answers: the passages come alone after the timeout
            bot.app.bot_data["topicpulse"].answer_writer.timeout = 0.2  # type: ignore[union-attr]
            alone = await bot.say(USER, f"/ask {RL}: how do people stop reward hacking?")
            assert alone.text is not None and "Written by a language model" not in alone.text
            assert links(alone)[0] == "2611.00011"
            check_traffic(bot.fake)
    finally:
        await fake.close()
    assert len(fake.requests) == 2
