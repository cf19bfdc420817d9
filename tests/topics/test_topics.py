"""Topics: catalogue sync (insert, change, removal), name/slug resolution, custom topics."""

from __future__ import annotations

from pathlib import Path

import pytest

from topicpulse.models import Paper
from topicpulse.store import Store
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import (
    CatalogueEntry,
    UnknownTopic,
    custom_topic,
    find_catalogue_topic,
    load_catalogue,
    resolve_topic,
    sync_catalogue,
    topic_for,
)

RL = CatalogueEntry(
    slug="rl-lm",
    name="RL for Language Models",
    description="Reinforcement learning applied to LLMs.",
    query='("reinforcement learning" OR rlhf OR grpo) AND (llm OR "language model")',
)
DIFFUSION = CatalogueEntry(
    slug="diffusion",
    name="Diffusion Models",
    description="Denoising diffusion.",
    query='"diffusion model" OR ddpm',
)
AGENTS = CatalogueEntry(
    slug="llm-agents",
    name="LLM Agents",
    description="Language-model agents.",
    query="agent AND (llm OR tool)",
)
SAFETY = CatalogueEntry(
    slug="ai-safety",
    name="AI Safety",
    description="Alignment and safety.",
    query="safety OR alignment",
)
CATALOGUE = [RL, DIFFUSION, AGENTS, SAFETY]


def _paper(n: int, title: str, abstract: str = "") -> Paper:
    stamp = f"2026-05-{n % 28 + 1:02d}T00:00:00Z"
    return Paper(
        arxiv_id=f"2605.{n:05d}",
        version=1,
        title=title,
        abstract=abstract,
        authors=("Ada Lovelace",),
        primary_category="cs.CL",
        categories=("cs.CL",),
        published=stamp,
        updated=stamp,
    )


PAPERS = [
    _paper(1, "GRPO for LLM reasoning", "Reinforcement learning with verifiable rewards."),
    _paper(2, "A diffusion model for text", "We train a diffusion model on language."),
    _paper(3, "Tool-using agents", "An LLM agent calls tools."),
    _paper(4, "Safety of reward models", "Alignment via RLHF for a language model."),
    _paper(5, "Quantum codes", "Nothing about any topic here."),
]


async def _ids_by_fts(store: Store, fts: str) -> set[int]:
    return {p.id for p in await store.matching_papers(fts=fts)}


async def _topic_paper_ids(store: Store, topic_id: int) -> set[int]:
    return {p.id for p in await store.matching_papers(topic_id=topic_id)}


async def _arxiv_ids(store: Store, topic_id: int) -> list[str]:
    return sorted(p.arxiv_id for p in await store.matching_papers(topic_id=topic_id))


# ------------------------------------------------------------------------------ sync_catalogue
async def test_sync_catalogue_inserts_topics_and_matches_stored_papers(store: Store) -> None:
    await store.upsert_papers(PAPERS)
    assert await sync_catalogue(store, CATALOGUE) == 4

    topics = {t.slug: t for t in await store.topics(kind="catalogue")}
    assert sorted(topics) == ["ai-safety", "diffusion", "llm-agents", "rl-lm"]
    rl = topics["rl-lm"]
    assert (rl.kind, rl.name, rl.description, rl.query) == (
        "catalogue",
        RL.name,
        RL.description,
        RL.query,
    )
    assert rl.fts == ql.compile_query(RL.query)
    assert rl.active
    assert rl.matched_through == await store.max_paper_id()
    assert await _arxiv_ids(store, rl.id) == ["2605.00001", "2605.00004"]
    assert await _arxiv_ids(store, topics["diffusion"].id) == ["2605.00002"]
    assert await _arxiv_ids(store, topics["llm-agents"].id) == ["2605.00003"]
    assert await _arxiv_ids(store, topics["ai-safety"].id) == ["2605.00004"]


async def test_sync_catalogue_is_idempotent(store: Store) -> None:
    await store.upsert_papers(PAPERS)
    await sync_catalogue(store, CATALOGUE)
    before = await store.topics(active_only=False)
    await sync_catalogue(store, CATALOGUE)
    assert await store.topics(active_only=False) == before


async def test_changed_query_rematches_the_topic_and_keeps_its_id(store: Store) -> None:
    await store.upsert_papers(PAPERS)
    await sync_catalogue(store, CATALOGUE)
    old = await find_catalogue_topic(store, "diffusion")
    assert old is not None
    assert await _arxiv_ids(store, old.id) == ["2605.00002"]

    changed = CatalogueEntry(DIFFUSION.slug, "Diffusion & Codes", "Renamed.", "diffusion OR codes")
    await sync_catalogue(store, [RL, changed, AGENTS, SAFETY])

    new = await find_catalogue_topic(store, "diffusion")
    assert new is not None
    assert new.id == old.id
    assert (new.name, new.description, new.query) == (
        "Diffusion & Codes",
        "Renamed.",
        "diffusion OR codes",
    )
    assert new.fts == ql.compile_query("diffusion OR codes")
    assert await _arxiv_ids(store, new.id) == ["2605.00002", "2605.00005"]
    assert await _topic_paper_ids(store, new.id) == await _ids_by_fts(store, new.fts)


async def test_renaming_without_query_change_does_not_lose_matches(store: Store) -> None:
    await store.upsert_papers(PAPERS)
    await sync_catalogue(store, CATALOGUE)
    renamed = CatalogueEntry(RL.slug, "Reinforcement Learning for LLMs", RL.description, RL.query)
    await sync_catalogue(store, [renamed, DIFFUSION, AGENTS, SAFETY])
    topic = await resolve_topic(store, "reinforcement learning for llms")
    assert topic.slug == "rl-lm"
    assert await _arxiv_ids(store, topic.id) == ["2605.00001", "2605.00004"]


async def test_removed_slug_becomes_inactive_and_comes_back(store: Store) -> None:
    await store.upsert_papers(PAPERS)
    await sync_catalogue(store, CATALOGUE)
    assert await sync_catalogue(store, [RL, AGENTS, SAFETY]) == 3

    active = [t.slug for t in await store.topics(kind="catalogue")]
    assert sorted(active) == ["ai-safety", "llm-agents", "rl-lm"]
    every = {t.slug: t.active for t in await store.topics(kind="catalogue", active_only=False)}
    assert every == {"ai-safety": True, "diffusion": False, "llm-agents": True, "rl-lm": True}
    assert "diffusion" not in [t.slug for t in await store.live_topics()]
    assert await find_catalogue_topic(store, "diffusion") is None
    with pytest.raises(UnknownTopic):
        await resolve_topic(store, "Diffusion Models")

    await sync_catalogue(store, CATALOGUE)
    back = await find_catalogue_topic(store, "Diffusion Models")
    assert back is not None and back.active


async def test_empty_catalogue_deactivates_everything(store: Store) -> None:
    await sync_catalogue(store, CATALOGUE)
    assert await sync_catalogue(store, []) == 0
    assert await store.topics(kind="catalogue") == []
    assert len(await store.topics(kind="catalogue", active_only=False)) == 4


async def test_sync_catalogue_reads_a_toml_file(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "catalogue.toml"
    path.write_text(
        '[[topic]]\nslug = "rl-lm"\nname = "RL for Language Models"\n'
        "description = \"RL and LLMs.\"\nquery = 'grpo AND llm'\n\n"
        '[[topic]]\nslug = "diffusion"\nname = "Diffusion Models"\n'
        'description = "Diffusion."\nquery = \'"diffusion model"\'\n',
        encoding="utf-8",
    )
    entries = load_catalogue(path)
    assert entries == [
        CatalogueEntry("rl-lm", "RL for Language Models", "RL and LLMs.", "grpo AND llm"),
        CatalogueEntry("diffusion", "Diffusion Models", "Diffusion.", '"diffusion model"'),
    ]
    await store.upsert_papers(PAPERS)
    await sync_catalogue(store, entries)
    topic = await resolve_topic(store, "rl-lm")
    assert await _arxiv_ids(store, topic.id) == ["2605.00001"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('slug = "Bad Slug"\nname = "X"\ndescription = ""\nquery = "x"', "catalogue slug"),
        ('slug = "x"\nname = "X"\ndescription = ""\nquery = "x AND"', "catalogue topic 'X'"),
    ],
)
def test_load_catalogue_rejects_invalid_entries(tmp_path: Path, body: str, error: str) -> None:
    path = tmp_path / "catalogue.toml"
    path.write_text(f"[[topic]]\n{body}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=error):
        load_catalogue(path)


def test_load_catalogue_rejects_duplicate_names(tmp_path: Path) -> None:
    path = tmp_path / "catalogue.toml"
    one = '[[topic]]\nslug = "{slug}"\nname = "{name}"\ndescription = ""\nquery = "x"\n'
    path.write_text(
        one.format(slug="a", name="Same Name") + one.format(slug="b", name="same name"),
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"duplicate catalogue names: \['same name'\]"):
        load_catalogue(path)


# ------------------------------------------------------------------------------ resolve_topic
@pytest.mark.parametrize(
    "text",
    [
        "RL for Language Models",
        "rl for language models",
        "RL  FOR  language   MODELS",
        " rl for language models ",
        "rl-lm",
        "RL-LM",
        "rl_lm",
    ],
)
async def test_resolve_topic_by_name_or_slug_case_insensitively(store: Store, text: str) -> None:
    await sync_catalogue(store, CATALOGUE)
    topic = await resolve_topic(store, text)
    assert (topic.slug, topic.name) == ("rl-lm", "RL for Language Models")


async def test_resolve_topic_finds_extra_topics_by_name_or_query(store: Store) -> None:
    await sync_catalogue(store, CATALOGUE)
    mine = await custom_topic(store, "Reward  Model")
    assert (await resolve_topic(store, "reward model", extra=[mine])).id == mine.id
    assert (await resolve_topic(store, "REWARD MODEL", extra=[mine])).id == mine.id


@pytest.mark.parametrize(
    ("text", "suggestions"),
    [
        ("RL for Languag Models", ["RL for Language Models"]),
        ("difusion model", ["Diffusion Models", "RL for Language Models"]),
        ("llm agent", ["LLM Agents"]),
        ("safety", ["AI Safety"]),  # no close match: falls back to names containing a word
    ],
)
async def test_unknown_topic_suggests_close_names(
    store: Store, text: str, suggestions: list[str]
) -> None:
    await sync_catalogue(store, CATALOGUE)
    with pytest.raises(UnknownTopic) as caught:
        await resolve_topic(store, text)
    assert caught.value.text == text
    assert caught.value.suggestions == suggestions
    hint = ", ".join(suggestions)
    assert str(caught.value) == f"No topic called “{text}”. Did you mean: {hint}?"


async def test_unknown_topic_without_anything_close_has_no_suggestions(store: Store) -> None:
    await sync_catalogue(store, CATALOGUE)
    with pytest.raises(UnknownTopic) as caught:
        await resolve_topic(store, "zz")
    assert caught.value.suggestions == []
    assert str(caught.value) == "No topic called “zz”."


# ------------------------------------------------------------------------------ custom topics
@pytest.mark.parametrize(
    "spelling", ["reward model", "Reward  Model", "REWARD AND MODEL", "reward and model",
                 "(reward model)", "“Reward” model"],
)  # fmt: skip
async def test_custom_topics_are_shared_by_normalised_query(store: Store, spelling: str) -> None:
    first = await custom_topic(store, "Reward  Model")
    again = await custom_topic(store, spelling)
    assert again.id == first.id
    assert again.name == "reward model"  # the canonical query: no chat's spelling
    assert again.query == "reward model"
    assert again.kind == "custom" and again.slug is None
    assert len(await store.topics(kind="custom", active_only=False)) == 1


async def test_different_custom_queries_are_different_topics(store: Store) -> None:
    a = await custom_topic(store, "reward model")
    b = await custom_topic(store, '"reward model"')
    c = await custom_topic(store, "reward OR model")
    assert len({a.id, b.id, c.id}) == 3


async def test_custom_topic_is_matched_against_stored_papers(store: Store) -> None:
    await store.upsert_papers(PAPERS)
    topic = await custom_topic(store, "ti:safety OR ti:codes")
    assert topic.fts == ql.compile_query("ti:safety OR ti:codes")
    assert topic.matched_through == await store.max_paper_id()
    assert await _arxiv_ids(store, topic.id) == ["2605.00004", "2605.00005"]


@pytest.mark.parametrize("bad", ["reward AND", "NOT reward", '"unclosed', "(a OR b", "xx:foo",
                                 "", "   ", "a*", "x" * 301])  # fmt: skip
async def test_malformed_custom_query_raises_and_stores_nothing(store: Store, bad: str) -> None:
    await store.upsert_papers(PAPERS)
    with pytest.raises(ql.QueryError):
        await custom_topic(store, bad)
    with pytest.raises(ql.QueryError):
        await topic_for(store, bad)
    assert await store.topics(active_only=False) == []
    assert await store.paper_topics([p.id for p in await store.papers_after(0)]) == {
        p.id: [] for p in await store.papers_after(0)
    }


async def test_topic_for_prefers_the_catalogue(store: Store) -> None:
    await sync_catalogue(store, CATALOGUE)
    assert (await topic_for(store, "llm agents")).slug == "llm-agents"
    assert (await topic_for(store, "ai-safety")).slug == "ai-safety"
    custom = await topic_for(store, "agents NOT robotics")
    assert custom.kind == "custom"
    assert custom.query == "agents NOT robotics"


async def test_sync_stores_what_queries_compile_to_now(store: Store) -> None:
    """A query stored when the compiler wrote a weaker expression (here: a prefix the stemmed
    index could not see) is compiled anew at the next start and re-matched — catalogue and
    custom topics alike."""
    await store.upsert_papers([_paper(1, "Evaluation of sycophancy in assistants")])
    stale = {"evaluat*": '"evaluat" *', "ti:sycophan*": 'title : "sycophan" *'}
    custom_id = await store.custom_topic(
        name="evaluat*", query="evaluat*", normalised="evaluat*", fts=stale["evaluat*"]
    )
    entry = CatalogueEntry(slug="syc", name="Sycophancy", description="", query="ti:sycophan*")
    await store.upsert_catalogue_topic(
        slug="syc",
        name=entry.name,
        description="",
        query=entry.query,
        normalised=entry.query,
        fts=stale["ti:sycophan*"],
    )
    followed_id = await store.custom_topic(
        name="mitigat*", query="mitigat*", normalised="mitigat*", fts='"mitigat" *'
    )
    stale["mitigat*"] = '"mitigat" *'
    await store.upsert_papers([_paper(2, "Mitigation of reward hacking")])
    await store.ensure_chat(5)
    await store.subscribe(5, followed_id)
    for topic in await store.topics():
        assert await store.matching_papers(topic_id=topic.id) == []  # the old expressions
    await sync_catalogue(store, [entry])
    # A live topic (followed, or in the catalogue) is re-matched at once; one nobody follows
    # when it is next read.
    assert [p.arxiv_id for p in await store.matching_papers(topic_id=followed_id)] == ["2605.00002"]
    assert await store.matching_papers(topic_id=custom_id) == []
    for topic in await store.topics():
        assert topic.fts == ql.compile_query(topic.query) != stale[topic.query]
        if topic.id == followed_id:
            continue
        await store.refresh_topic_matches(topic)  # what reading a topic nobody follows does
        found = await store.matching_papers(topic_id=topic.id)
        assert [p.arxiv_id for p in found] == ["2605.00001"], topic.query
    assert custom_id in {t.id for t in await store.topics(kind="custom")}
