"""A stored query the parser now rejects costs only its own topic.

A custom topic keeps the expression its query compiled to when it was followed, however much
stricter the parser has grown since (``sync_catalogue``). A matching round then matches it from
that compiled form; one whose compiled form fails too is skipped. Either way the other topics'
matches and alerts are queued, one log line names it, and ``/stats`` counts it.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from owed import owed
from topicpulse.models import Paper, Topic, iso, parse_iso, utcnow
from topicpulse.store import Store
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import custom_topic, sync_catalogue
from topicpulse.topics.matching import match_new_papers

OLD_QUERY = "ab*"  # a prefix this short was accepted once; the parser now rejects it
OLD_FTS = '"ab" *'  # what an older compiler made of it (FTS5 still accepts it)


def _paper(n: int, title: str) -> Paper:
    stamp = iso(utcnow() - timedelta(hours=n))
    return Paper(
        arxiv_id=f"2605.{n:05d}",
        version=1,
        title=title,
        abstract="",
        authors=("Ada Lovelace",),
        primary_category="cs.CL",
        categories=("cs.CL",),
        published=stamp,
        updated=iso(parse_iso(stamp) + timedelta(minutes=1)),
    )


async def _pending(store: Store, chat_id: int) -> list[str]:
    return sorted(await owed(store, chat_id))


async def _follow(store: Store, chat_id: int, topic_id: int) -> None:
    await store.ensure_chat(chat_id)
    assert await store.subscribe(chat_id, topic_id)


async def _topic(store: Store, topic_id: int) -> Topic:
    topic = await store.topic(topic_id)
    assert topic is not None
    return topic


def _warnings(caplog: pytest.LogCaptureFixture, topic_id: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and f"topic {topic_id} " in r.getMessage()
    ]


def test_the_old_query_is_one_the_parser_now_rejects() -> None:
    with pytest.raises(ql.QueryError):
        ql.parse(OLD_QUERY, max_length=None)


@pytest.mark.parametrize("in_process", [False, True])
async def test_a_query_the_parser_now_rejects_is_matched_from_its_compiled_form(
    store: Store, caplog: pytest.LogCaptureFixture, in_process: bool
) -> None:
    alpha = await custom_topic(store, "alpha")
    # the row as an older version left it: its query no longer parses, its expression works
    old = await store.custom_topic(name=OLD_QUERY, query=OLD_QUERY, normalised=OLD_QUERY,
                                   fts=OLD_FTS)  # fmt: skip
    await sync_catalogue(store, [])  # a start: the old row keeps what it compiled to
    assert (await _topic(store, old)).fts == OLD_FTS
    await _follow(store, 1, alpha.id)
    await _follow(store, 2, old)
    await store.upsert_papers(
        [_paper(1, "alpha abacus"), _paper(2, "abstract thoughts"), _paper(3, "gamma")]
    )

    with caplog.at_level(logging.INFO, logger="topicpulse"):
        result = await match_new_papers(store, in_process=in_process)

    assert (result.papers, result.topics, result.matches, result.chats_marked) == (3, 2, 3, 2)
    assert (result.from_compiled, result.skipped) == (1, 0)
    assert await _pending(store, 1) == ["2605.00001"]
    assert await _pending(store, 2) == ["2605.00001", "2605.00002"]
    (warning,) = _warnings(caplog, old)
    assert "matched from its compiled expression" in warning
    assert await store.unparsed_topics() == (1, 0)
    through = await store.max_paper_id()
    assert (await _topic(store, old)).matched_through == through

    await store.upsert_papers([_paper(4, "abc and alpha")])
    again = await match_new_papers(store, in_process=in_process)
    assert (again.papers, again.chats_marked, again.from_compiled) == (1, 2, 1)
    assert await _pending(store, 2) == ["2605.00001", "2605.00002", "2605.00004"]


async def test_a_topic_whose_compiled_form_fails_too_is_skipped_alone(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    alpha = await custom_topic(store, "alpha")
    await _follow(store, 1, alpha.id)
    await store.upsert_papers([_paper(1, "alpha one")])
    assert (await match_new_papers(store)).chats_marked == 1  # the rounds have fanned out
    async with store._write() as conn:  # a row no current version could write
        cur = await conn.execute(
            "INSERT INTO topics (kind, name, query, normalised, fts, created_at)"
            " VALUES ('custom', ?, ?, ?, ?, '')",
            (OLD_QUERY, OLD_QUERY, OLD_QUERY, f"{OLD_FTS} AND"),
        )
        broken = int(cur.lastrowid or 0)
    await _follow(store, 2, broken)  # lagging: the round would catch it up first
    await store.upsert_papers([_paper(2, "alpha abacus"), _paper(3, "abstract")])

    with caplog.at_level(logging.INFO, logger="topicpulse"):
        result = await match_new_papers(store)

    # its catch-up failed, so the round read from its watermark: paper 1 as well, not alerted
    assert (result.papers, result.matches, result.chats_marked) == (3, 1, 1)
    assert (result.from_compiled, result.skipped) == (0, 1)
    assert await _pending(store, 1) == ["2605.00001", "2605.00002"]
    assert await _pending(store, 2) == []
    (warning,) = _warnings(caplog, broken)
    assert "skipped" in warning
    assert await store.unparsed_topics() == (0, 1)
    # recorded as matching nothing: the rounds move past it instead of reading it again
    assert (await _topic(store, broken)).matched_through == await store.max_paper_id()


async def test_the_count_is_for_the_last_round_that_matched_papers(store: Store) -> None:
    old = await store.custom_topic(name=OLD_QUERY, query=OLD_QUERY, normalised=OLD_QUERY,
                                   fts=OLD_FTS)  # fmt: skip
    await _follow(store, 1, old)
    assert await store.unparsed_topics() == (0, 0)
    await store.upsert_papers([_paper(1, "abacus")])
    await match_new_papers(store)
    assert await store.unparsed_topics() == (1, 0)
    await match_new_papers(store)  # nothing new: the figure stands
    assert await store.unparsed_topics() == (1, 0)
    await store.unsubscribe(1, old)
    await _follow(store, 1, (await custom_topic(store, "alpha")).id)
    await store.upsert_papers([_paper(2, "alpha")])
    await match_new_papers(store)
    assert await store.unparsed_topics() == (0, 0)
