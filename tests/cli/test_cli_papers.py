"""The command line mirrors the chat's topic page: ``paper``, ``similar``, ``ask`` and
``preview --like`` answer what the bot answers for the same paper, question or examples.

Each test runs the real bot against the fake Bot API, asks it in chat, then runs
``python -m topicpulse`` as a subprocess on the bot's own database and compares: the same
tags, the same papers in the same order, the same passages, the same count. Once on the
generated papers the bot harness polls from the fake arXiv, and once on the 5,861 real
listings (when ../shared has them), imported first and read as of their last day.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot_harness import RL, USER, Bot, Clock, bot_session, check_traffic, links, paper, seed_papers
from conftest import LISTINGS, ROOT, requires_listings
from fake_llm import FakeLLM
from topicpulse.delivery.formatting import topic_tags
from topicpulse.models import Topic

pytestmark = pytest.mark.timeout(120)

QUESTION = "how do people stop reward hacking?"
PAPER_KEYS = ["arxiv_id", "title", "abstract", "authors", "affiliations", "categories",
              "published", "url", "pdf_url", "tags"]  # fmt: skip
WATERMARK = [  # three papers on one subject, for /follow like
    (
        "Watermarks that survive paraphrasing",
        "A watermark hidden in sampled text by biasing the vocabulary survives paraphrasing;"
        " a detector recovers it with a statistical test on the generated text.",
    ),
    (
        "Paraphrasing attacks on text watermarks",
        "Paraphrasing strips many watermarks from generated text. A new detector restores the"
        " statistical test, so the watermark stays detectable after paraphrasing.",
    ),
    (
        "Keyed watermark detection without bias",
        "The detector needs only a secret key; the watermark leaves sampling unbiased and is"
        " robust to paraphrasing of the generated text.",
    ),
]


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self.stderr
        return json.loads(self.stdout)


async def cli(db: Path, *args: str, **settings: str) -> Run:
    """``python -m topicpulse ARGS`` on ``db``, without blocking the running bot's loop;
    ``settings``: more environment variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPICPULSE_", "TELEGRAM_"))}
    env |= settings
    env["TOPICPULSE_DB"] = str(db)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "topicpulse", *args, env=env, cwd=db.parent,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


def db_of(bot: Bot) -> Path:
    return Path(bot.settings.db)


async def catalogue_topics(bot: Bot) -> dict[str, Topic]:
    return {t.name: t for t in await bot.store.topics(kind="catalogue")}


async def check_paper(bot: Bot, arxiv_id: str) -> dict[str, Any]:
    """``paper --json`` holds the paper the bot's /paper card shows, with the same tags."""
    shown = await bot.say(USER, f"/paper {arxiv_id}")
    printed = (await cli(db_of(bot), "paper", arxiv_id, "--json")).json()
    assert list(printed) == PAPER_KEYS
    stored = await bot.store.get_paper(arxiv_id)
    assert stored is not None
    assert printed["arxiv_id"] == stored.arxiv_id and printed["title"] == stored.title
    assert printed["abstract"] == stored.abstract
    assert printed["authors"] == list(stored.authors)
    assert printed["affiliations"] == list(stored.affiliations)
    assert printed["url"] == f"https://arxiv.org/abs/{arxiv_id}"
    assert printed["pdf_url"] == f"https://arxiv.org/pdf/{arxiv_id}"
    by_name = await catalogue_topics(bot)
    tags = [by_name[name] for name in printed["tags"]]
    text = shown.text or ""
    assert html.escape(stored.title, quote=False) in text or stored.title[:40] in text
    if tags:  # the card's tag line is exactly these topics, in this order
        assert topic_tags((), tags) in text, (printed["tags"], text)
    return printed


async def check_similar(bot: Bot, arxiv_id: str) -> list[str]:
    """``similar`` lists /similar's papers, in its order."""
    answer = await bot.ask(USER, f"/similar {arxiv_id}")
    in_chat = [i for message in answer for i in links(message)]
    printed = (await cli(db_of(bot), "similar", arxiv_id, "--json")).json()
    assert printed["arxiv_id"] == arxiv_id
    ids = [p["arxiv_id"] for p in printed["papers"]]
    assert ids == in_chat and arxiv_id not in ids
    scores = [p["score"] for p in printed["papers"]]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    two = (await cli(db_of(bot), "similar", arxiv_id, "--limit", "2", "--json")).json()
    assert [p["arxiv_id"] for p in two["papers"]] == ids[:2]
    return ids


async def check_ask(bot: Bot) -> dict[str, Any]:
    """``ask --topic`` quotes the passages /ask quotes, from the same papers, in order."""
    answer = await bot.ask(USER, f"/ask {RL}: {QUESTION}")
    in_chat = [i for message in answer for i in links(message)]
    chat_text = "\n".join(m.text or "" for m in answer)
    printed = (await cli(db_of(bot), "ask", "--topic", RL, QUESTION, "--json")).json()
    assert list(printed) == ["topic", "question", "passages"]  # no model configured: no answer
    assert printed["topic"] == RL and printed["question"] == QUESTION
    assert [p["arxiv_id"] for p in printed["passages"]] == in_chat
    for passage in printed["passages"]:
        assert f"“{html.escape(passage['text'], quote=False)}”" in chat_text
        stored = await bot.store.get_paper(passage["arxiv_id"])
        assert stored is not None and passage["url"] == stored.url
        assert passage["text"].rstrip("…")[:40] in " ".join(stored.abstract.split())
    return printed


async def check_like(bot: Bot, ids: list[str], *args: str) -> dict[str, Any]:
    """``preview --like`` finds the papers /follow like's confirmation counts and lists."""
    confirmed = await bot.say(USER, f"/follow like {' '.join(ids)}")
    printed = (await cli(db_of(bot), "preview", "--like", ",".join(ids), "--json", *args)).json()
    assert list(printed) == ["query", "count", "papers"]
    assert printed["count"] == len(printed["papers"])
    text = confirmed.plain_text or ""
    assert f"{printed['count']} paper" in text, text
    assert links(confirmed) == [p["arxiv_id"] for p in printed["papers"][:3]]
    followed = [s.topic for s in await bot.store.subscriptions(USER) if s.topic.is_custom]
    assert printed["query"] in [t.query for t in followed]
    return printed


# ---------------------------------------------------------------------------------- generated
async def test_the_command_line_answers_what_the_chat_answers(tmp_path: Path) -> None:
    papers = seed_papers()
    for n, (title, abstract) in enumerate(WATERMARK, start=20):
        papers.append(paper(n, title, abstract=abstract, days_ago=n - 15))
    papers.append(
        paper(30, "Reward hacking in RLHF for LLMs", abstract="We stop reward hacking in RLHF.")
    )
    async with bot_session(tmp_path, papers=papers) as bot:
        await bot.poll()
        printed = await check_paper(bot, "2611.00001")
        assert RL in printed["tags"]
        assert await check_similar(bot, "2611.00001")
        asked = await check_ask(bot)
        assert asked["passages"][0]["arxiv_id"] == "2611.00030"
        like = await check_like(bot, ["2611.00020", "2611.00021"])
        assert sorted(p["arxiv_id"] for p in like["papers"]) == [
            "2611.00020", "2611.00021", "2611.00022",
        ]  # fmt: skip
        check_traffic(bot.fake)


async def test_text_output_and_one_line_failures(tmp_path: Path) -> None:
    async with bot_session(tmp_path, papers=seed_papers()) as bot:
        await bot.poll()
        db = db_of(bot)
        shown = await cli(db, "paper", "https://arxiv.org/abs/2611.00001v1")
        assert shown.code == 0 and shown.stdout.startswith("2611.00001  ")
        [topics_line] = [line for line in shown.stdout.splitlines() if line.startswith("topics:")]
        assert RL in topics_line
        assert "https://arxiv.org/pdf/2611.00001" in shown.stdout
        assert (await cli(db, "similar", "2611.00001")).stdout.startswith("papers like 2611.00001")
        answered = await cli(db, "ask", QUESTION)
        assert answered.code == 0 and "all stored papers" in answered.stdout
        failures = {
            ("paper", "2699.99999"): "paper 2699.99999 is not stored",
            ("paper", "not-an-id"): "is not an arXiv id or link",
            ("similar", "2699.99999"): "paper 2699.99999 is not stored",
            ("similar", "2611.00001", "--limit", "0"): "--limit 0",
            ("ask", "--topic", "No Such Topic", QUESTION): "No Such Topic",
            ("ask", "the of and"): "at least one word",
            ("preview", "--like", "2611.00001,2699.99999"): "2699.99999 is not stored",
            ("preview", "--like", "watermarks"): "not an arXiv id",
        }
        for args, reason in failures.items():
            run = await cli(db, *args)
            lines = run.stderr.strip().splitlines()
            assert run.code == 1 and len(lines) == 1 and reason in lines[0], (args, run)
            assert run.stdout == ""
        for args in (("preview", "--like", "2611.00001", "--topic", RL), ("paper",), ("ask",)):
            assert (await cli(db, *args)).code == 2, args
        check_traffic(bot.fake)


async def test_ask_adds_the_language_models_answer_when_one_is_configured(tmp_path: Path) -> None:
    llm = FakeLLM(key="sk-test-cli-key", reply="Verifiers stop it [1].")
    await llm.start()
    try:
        async with bot_session(
            tmp_path,
            papers=[*seed_papers(), paper(30, "Reward hacking in RLHF", abstract="We stop it.")],
        ) as bot:
            await bot.poll()
            model = {
                "TOPICPULSE_LLM_URL": llm.url,
                "TOPICPULSE_LLM_MODEL": "small",
                "TOPICPULSE_LLM_API_KEY": "sk-test-cli-key",
            }
            printed = (await cli(db_of(bot), "ask", "reward hacking", "--json", **model)).json()
            assert printed["answer"] == "Verifiers stop it [1]."
            assert "2611.00030" in [p["arxiv_id"] for p in printed["passages"]]
            text = await cli(db_of(bot), "-v", "ask", "reward hacking", **model)
            assert "Verifiers stop it [1]." in text.stdout
            assert "sk-test-cli-key" not in text.stdout + text.stderr
            assert len(llm.requests) == 2
            check_traffic(bot.fake)
    finally:
        await llm.close()


# ---------------------------------------------------------------------------------- real
@pytest.fixture(scope="module")
def real_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not LISTINGS.is_file():
        pytest.skip("no listings")
    db = tmp_path_factory.mktemp("real") / "bot.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPICPULSE_")}
    env |= {"TOPICPULSE_DB": str(db), "PYTHONPATH": str(ROOT / "src")}
    subprocess.run(
        [sys.executable, "-m", "topicpulse", "import", str(LISTINGS)], env=env, check=True,
        capture_output=True,
    )  # fmt: skip
    return db


@requires_listings
async def test_on_the_real_listings_the_command_line_answers_what_the_chat_answers(
    real_db: Path,
) -> None:
    end = datetime(2026, 5, 23, tzinfo=UTC)  # the listings' last day ends here
    async with bot_session(real_db.parent, name=real_db.name, clock=Clock(end)) as bot:
        rows = [json.loads(line) for line in LISTINGS.read_text("utf-8").splitlines()[-400:]]
        stored = [await bot.store.get_paper(r["arxiv_id"]) for r in rows]
        tagged: list[str] = []
        for found in stored:
            assert found is not None
            tags = (await bot.store.paper_topics([found.id], kind="catalogue")).get(found.id, [])
            if len(tags) >= 2:
                tagged.append(found.arxiv_id)
        assert len(tagged) >= 3
        for arxiv_id in tagged[:3]:
            printed = await check_paper(bot, arxiv_id)
            assert len(printed["tags"]) >= 2
            assert len(await check_similar(bot, arxiv_id)) == 5
        asked = await check_ask(bot)
        assert len(asked["passages"]) == 5
        like = await check_like(bot, tagged[:2], "--as-of", "2026-05-22")
        assert like["count"] >= 2
        check_traffic(bot.fake)
