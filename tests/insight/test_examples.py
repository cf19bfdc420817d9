"""Topics defined by example papers: the rule's pieces, and /follow like end to end."""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot_harness import USER, Bot, bot_session, check_traffic, links, paper, seed_papers
from topicpulse.insight import examples
from topicpulse.topics import query as ql

pytestmark = pytest.mark.timeout(60)

# Our own abstracts: three papers on watermarking text from language models, and others.
WATERMARK = [
    (
        "Robust watermarks for generated text",
        "We embed a watermark in text sampled from a language model by biasing the vocabulary."
        " The watermark survives paraphrasing, and a detector finds it with a statistical test.",
    ),
    (
        "Detecting watermarks after paraphrasing attacks",
        "Paraphrasing attacks remove many text watermarks. Our detector restores the statistical"
        " test and keeps the watermark detectable in generated text.",
    ),
    (
        "Unbiased watermarking of model outputs",
        "A watermark that leaves the sampling distribution unbiased: the detector needs only the"
        " key, and the watermark is robust to paraphrasing of the text.",
    ),
]
OTHERS = [
    ("Protein folding with diffusion", "Diffusion models fold proteins from sequence alone."),
    ("Graph networks for traffic", "Graph neural networks forecast traffic on road networks."),
    ("Sparse attention kernels", "Sparse attention cuts memory in long-context transformers."),
]


def test_parse_ids_reads_ids_and_links_in_order_once() -> None:
    assert examples.parse_ids("2605.01234 https://arxiv.org/abs/2604.00001v2 2605.01234") == [
        "2605.01234",
        "2604.00001",
    ]
    with pytest.raises(examples.ExampleError, match="not an arXiv id"):
        examples.parse_ids("2605.01234 watermarks")
    with pytest.raises(examples.ExampleError, match="At most 5"):
        examples.parse_ids(" ".join(f"2605.0000{n}" for n in range(1, 7)))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_at_least_k_means_at_least_k(k: int) -> None:
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    node = ql.parse(examples.at_least(words, k), max_length=None)
    for size in range(len(words) + 1):
        for held in itertools.combinations(words, size):
            text = " ".join(held)
            assert ql.matches(node, {"title": text, "abstract": ""}) == (size >= k), held


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    papers = seed_papers()
    for n, (title, abstract) in enumerate(WATERMARK + OTHERS, start=20):
        papers.append(paper(n, title, abstract=abstract, days_ago=n - 15))
    async with bot_session(tmp_path, papers=papers) as running:
        await running.poll()
        yield running
        check_traffic(running.fake)


async def test_the_words_are_what_the_examples_share_and_few_others_use(bot: Bot) -> None:
    papers = [await bot.store.get_paper(f"2611.{n:05d}") for n in (20, 21, 22)]
    words = await examples.describing_words(bot.store, [p for p in papers if p is not None])
    assert words[0] in ("watermark", "watermarks")
    assert {"paraphrasing", "detector"} <= set(words)
    assert not {"model", "language"} & set(words[:3])  # common words do not lead


async def test_follow_like_makes_a_first_class_topic_that_alerts(bot: Bot) -> None:
    confirmed = await bot.say(USER, "/follow like 2611.00020 2611.00021")
    text = confirmed.plain_text or ""
    assert text.startswith("✅ Now following papers like 2611.00020, 2611.00021")
    # 2 of the words would match most of this small store: 3 of them are required
    assert re.search(r"Papers that use at least 3 of: watermarks?, ", text), text
    assert "3 papers in the last 4 weeks" in text  # the three examples' kind
    listed = await bot.say(USER, "/list")
    assert "papers like 2611.00020, 2611.00021" in (listed.plain_text or "")
    latest = await bot.say(USER, "/latest papers like 2611.00020, 2611.00021")
    assert sorted(links(latest)) == ["2611.00020", "2611.00021", "2611.00022"]

    bot.arxiv.add(
        paper(
            40,
            "Watermark detection for code models",
            abstract="A detector for the watermark in generated code survives paraphrasing.",
        ),
        paper(41, "Traffic forecasting with transformers", abstract="Roads and traffic."),
    )
    await bot.poll_and_deliver()
    [alert] = bot.fake.messages_to(USER)[-1:]
    assert links(alert) == ["2611.00040"]
    assert "#papers like 2611.00020, 2611.00021" in (alert.text or "")


async def test_follow_like_refuses_what_it_cannot_use_and_changes_nothing(bot: Bot) -> None:
    unknown = await bot.say(USER, "/follow like 2611.00020 2699.99999")
    assert unknown.plain_text == (
        "2699.99999 is not stored (yet): examples must be papers I have; /search finds them."
    )
    not_id = await bot.say(USER, "/follow like watermarks")
    assert (not_id.plain_text or "").startswith("“watermarks” is not an arXiv id or link")
    assert await bot.subscriptions(USER) == []
