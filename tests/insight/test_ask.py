"""/ask's engine: sentences, question words, stems that agree with the index, ranking within a
topic, the reply's text, and the optional language model against a local fake endpoint."""

from __future__ import annotations

import logging
import re
import statistics
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import ROOT, requires_listings
from fake_arxiv import make_paper
from fake_llm import FakeLLM
from telegram_html import utf16_len, validate_telegram_html
from topicpulse.delivery import formatting
from topicpulse.insight import ask, llm
from topicpulse.models import Paper, StoredPaper
from topicpulse.store import Store
from topicpulse.topics.catalogue import find_catalogue_topic, sync_catalogue
from topicpulse.topics.matching import match_new_papers
from topicpulse.topics.stemming import stem_texts

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
RL = "RL for Language Models"

# Our own abstracts: three RL-for-LLM papers (one about reward hacking), one reward-hacking
# paper outside the topic (robot control), and filler.
ABSTRACTS = {
    1: (
        "Reinforcement learning for language models with verifiable rewards",
        "We train a large language model with reinforcement learning. Policies learn to exploit"
        " flaws in the reward model, a failure known as reward hacking. We stop reward hacking"
        " with an ensemble of verifiers that must agree before a reward is paid.",
    ),
    2: (
        "Policy optimization for LLM reasoning",
        "We fine-tune a language model with reinforcement learning on math problems. Longer"
        " chains of thought emerge without supervision. Accuracy rises on five benchmarks.",
    ),
    3: (
        "Curriculum schedules for RL fine-tuning of language models",
        "Reinforcement learning fine-tuning of language models depends on the order of tasks."
        " A curriculum from easy to hard problems speeds up training twofold.",
    ),
    4: (
        "Reward hacking in legged robot control",
        "Simulated robots trained with reinforcement learning exploit physics glitches. This"
        " reward hacking disappears when contact forces are bounded.",
    ),
    5: (
        "Image segmentation with sparse attention",
        "Segmentation models attend to every pixel. Sparse attention cuts the cost by half.",
    ),
}


def paper(n: int, days_ago: float = 3) -> Paper:
    title, abstract = ABSTRACTS[n]
    return make_paper(
        f"2611.{n:05d}",
        NOW - timedelta(days=days_ago),
        categories=("cs.LG",) if n != 4 else ("cs.RO",),
        title=title,
        abstract=abstract,
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(tmp_path / "ask.db", clock=lambda: NOW) as opened:
        await opened.upsert_papers([paper(n, days_ago=n) for n in ABSTRACTS])
        await sync_catalogue(opened)
        await match_new_papers(opened, clock=lambda: NOW, alerts=False)
        yield opened


# ---------------------------------------------------------------------------------- pieces
def test_sentences_split_at_sentence_ends_and_keep_short_ones_with_the_next() -> None:
    text = (
        "We did X. It works. Results improve on 3 benchmarks (see Table 2). Code for all of"
        " the experiments is released under an open licence, e.g. MIT. Thanks."
    )
    assert ask.sentences(text) == [
        "We did X. It works. Results improve on 3 benchmarks (see Table 2).",
        "Code for all of the experiments is released under an open licence, e.g. MIT. Thanks.",
    ]
    assert ask.sentences("") == []
    assert ask.sentences("  One   line\n  wrapped.  ") == ["One line wrapped."]


def test_question_terms_drop_question_words_but_keep_short_acronyms() -> None:
    assert ask.question_terms("How do people stop reward hacking in RL?") == [
        "stop",
        "reward",
        "hacking",
        "rl",
    ]
    assert ask.question_terms("what is there?") == []


def test_stems_are_the_index_own() -> None:
    """SQLite's tokenizer, not a Python stemmer: "technology" → "technolog" as in the index."""
    assert stem_texts(["Technologies of réward HACKING", "", "GPT-4o"]) == [
        ["technolog", "of", "reward", "hack"],
        [],
        ["gpt", "4o"],
    ]


def test_shorten_cuts_at_a_word() -> None:
    cut = ask.shorten("word " * 200, 50)
    assert len(cut) <= 50 and cut.endswith("…") and "wor…" not in cut


# ---------------------------------------------------------------------------------- ranking
async def test_a_topic_question_quotes_the_sentence_that_answers_it(store: Store) -> None:
    topic = await find_catalogue_topic(store, RL)
    assert topic is not None
    answer = await ask.ask(store, "how do people stop reward hacking?", topic=topic)
    ids = [p.paper.arxiv_id for p in answer.passages]
    assert ids[0] == "2611.00001"
    assert "2611.00004" not in ids  # the robot paper is not in the topic
    assert answer.passages[0].text.startswith("We stop reward hacking")
    assert answer.papers_in_scope == await store.count_matches(topic_id=topic.id)
    # Without a topic, the robot paper's reward hacking counts too.
    everywhere = await ask.ask(store, "how do people stop reward hacking?")
    assert {"2611.00001", "2611.00004"} <= {p.paper.arxiv_id for p in everywhere.passages}
    assert everywhere.papers_in_scope == await store.count_papers()


async def test_every_passage_is_a_quote_from_its_own_paper(store: Store) -> None:
    for question in ("curriculum order of tasks", "chains of thought on math", "sparse attention"):
        for method in ("blend", "sentences", "papers", "newest"):
            answer = await ask.ask(store, question, method=method)  # type: ignore[arg-type]
            assert answer.passages
            for passage in answer.passages:
                assert passage.text in " ".join(passage.paper.abstract.split())
            ids = [p.paper.id for p in answer.passages]
            assert len(ids) == len(set(ids))  # one passage per paper


async def test_questions_without_substance_are_refused(store: Store) -> None:
    with pytest.raises(ask.QuestionError, match="at least one word"):
        await ask.ask(store, "what is there?")
    with pytest.raises(ask.QuestionError, match="under 300"):
        await ask.ask(store, "reward " * 60)
    nothing = await ask.ask(store, "quantum chromodynamics")
    assert nothing.passages == []


async def test_term_documents_reads_the_index_vocabulary(store: Store) -> None:
    counts = await store.term_documents(["hack", "reward", "nonexistentterm"])
    assert counts == {"hack": 2, "reward": 2}


# ---------------------------------------------------------------------------------- the reply
def _stored(n: int, title: str, abstract: str) -> StoredPaper:
    return StoredPaper(
        id=n,
        arxiv_id=f"2611.{n:05d}",
        version=1,
        title=title,
        abstract=abstract,
        authors=("A. Author",),
        primary_category="cs.LG",
        categories=("cs.LG",),
        published="2026-11-18T10:00:00Z",
        updated="2026-11-18T10:00:00Z",
        stored_at="2026-11-18T11:00:00Z",
    )


def test_the_reply_says_where_it_comes_from_escapes_and_fits() -> None:
    hostile = "<b>Loss</b> & $x<y$ " * 30
    passages = [
        ask.Passage(_stored(n, hostile, hostile), ask.shorten(hostile), 1.0) for n in range(1, 6)
    ]
    answer = ask.Answer("does x<y & why?", None, 1234, passages)
    generated = "It depends [1], and also [2] <script>."
    messages = formatting.answer_messages(answer, generated)
    assert messages[0].startswith("💬 <b>From 1234 papers stored:</b>")
    whole = "\n".join(messages)
    assert "does x&lt;y &amp; why?" in whole
    assert '<a href="https://arxiv.org/abs/2611.00001">[1]</a>' in whole
    assert "&lt;script&gt;" in whole
    for text in messages:
        ok, error, _ = validate_telegram_html(text)
        assert ok, error
        assert utf16_len(text) <= 4096
    empty = formatting.answer_messages(ask.Answer("why?", None, 10, []))
    assert len(empty) == 1 and "No stored paper speaks to that" in empty[0]


# ---------------------------------------------------------------------------------- the LLM
def test_a_generated_answer_must_cite_passages_that_exist() -> None:
    assert llm.grounded("Verifiers help [1][2].", 2) == "Verifiers help [1][2]."
    assert llm.grounded("Verifiers help.", 2) is None  # cites nothing
    assert llm.grounded("Verifiers help [3].", 2) is None  # cites a passage not given
    long = "A claim [1]. " * 200
    cut = llm.grounded(long, 1)
    assert cut is not None and len(cut) <= llm.MAX_ANSWER and cut.endswith("[1].")
    assert llm.endpoint("http://h/v1/") == "http://h/v1/chat/completions"
    assert llm.endpoint("http://h/v1/chat/completions") == "http://h/v1/chat/completions"


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    fake = FakeLLM(key="sk-test-secret-123")
    await fake.start()
    yield fake
    await fake.close()


def _passages() -> list[ask.Passage]:
    return [
        ask.Passage(_stored(1, "Verifier ensembles", "x"), "We stop reward hacking.", 1.0),
        ask.Passage(_stored(2, "Bounded contacts", "y"), "Bounding forces helps.", 0.5),
    ]


async def test_the_writer_sends_the_passages_and_returns_a_grounded_answer(
    fake_llm: FakeLLM,
) -> None:
    fake_llm.reply = "Use verifier ensembles [1] or bound the forces [2]."
    writer = llm.AnswerWriter(fake_llm.url, "tiny", api_key="sk-test-secret-123")
    try:
        text = await writer.write("how to stop reward hacking?", _passages())
    finally:
        await writer.close()
    assert text == "Use verifier ensembles [1] or bound the forces [2]."
    request = fake_llm.requests[0]
    assert request["headers"]["Authorization"] == "Bearer sk-test-secret-123"
    user = request["body"]["messages"][1]["content"]
    assert "[1] (Verifier ensembles, 2026-11-18) We stop reward hacking." in user
    assert "how to stop reward hacking?" in user
    assert request["body"]["model"] == "tiny"


@pytest.mark.parametrize("fault", ["status", "hang", "malformed", "uncited", "wrong key"])
async def test_any_failure_falls_back_to_the_passages_and_the_key_stays_out_of_logs(
    fake_llm: FakeLLM, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = "sk-test-secret-123"
    if fault == "status":
        fake_llm.status = 500
    elif fault == "hang":
        fake_llm.hang = True
    elif fault == "malformed":
        fake_llm.malformed = True
    elif fault == "uncited":
        fake_llm.reply = "Reward hacking is solved by being careful."
    else:
        key = "sk-wrong-key-456"
    writer = llm.AnswerWriter(fake_llm.url, "tiny", api_key=key, timeout=0.3)
    caplog.set_level(logging.DEBUG)
    try:
        assert await writer.write("how?", _passages()) is None
    finally:
        await writer.close()
    assert fake_llm.requests
    assert key not in caplog.text
    assert "sk-test-secret-123" not in caplog.text


async def test_an_unreachable_endpoint_is_a_fallback_too() -> None:
    writer = llm.AnswerWriter("http://127.0.0.1:9/v1", "tiny", timeout=1)
    try:
        assert await writer.write("how?", _passages()) is None
    finally:
        await writer.close()


# ---------------------------------------------------------------------------------- real data
def test_the_question_set_is_well_formed() -> None:
    """evaluation/ask/questions.jsonl: ≥ 30 held-out questions, ids only (never paper text)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_ask import read_questions

    questions = read_questions()
    assert len({q["id"] for q in questions}) == len(questions)
    assert sum(q["split"] == "test" for q in questions) >= 30
    for q in questions:
        assert set(q) == {"id", "topic", "question", "relevant", "split"}
        assert 1 <= len(q["relevant"]) <= 6
        assert all(re.fullmatch(r"\d{4}\.\d{4,5}", i) for i in q["relevant"])


@requires_listings
@pytest.mark.timeout(120)
async def test_held_out_retrieval_stays_above_its_measured_floor() -> None:
    """bench/bench_ask.py's held-out figures for the shipped ranking (recall@5 0.45, MRR 0.73
    when measured), and the baseline it must beat (the topic's newest papers)."""
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "evaluation"))
    from corpus import listings_store

    from bench_ask import evaluate, read_questions

    held_out = [q for q in read_questions() if q["split"] == "test"]
    async with listings_store() as store:
        await sync_catalogue(store)
        await match_new_papers(store, alerts=False)
        recalls, ranks, _ = await evaluate(store, held_out, "blend")
        newest, _, _ = await evaluate(store, held_out, "newest")
    assert statistics.fmean(recalls) >= 0.45
    assert statistics.fmean(ranks) >= 0.725
    assert statistics.fmean(recalls) > 3 * statistics.fmean(newest)
