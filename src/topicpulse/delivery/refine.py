"""Refining a topic from 👎: after a 👎, whether several of the chat's 👎 within one of its
topics share a word none of its 👍 there use — then the bot offers, once, to leave papers about
it out of that topic — and what accepting, declining and undoing do.

"Several" (``shared_word``): at least ``MIN_DISLIKED`` 👎 of papers the topic matches use the
word (an index stem of their titles and abstracts, shown as its commonest spelling there), the
tapped paper among them; none of the chat's 👍 of the topic's papers uses it; it is none of the
topic's own query words (nor a word the chat was offered for it before); and it is at least
``MIN_LIFT`` times as common among those 👎 as among all the topic's papers — a word most of
the topic uses is what the topic is about, and leaving it out would be unfollowing it. Among
several, the one the most 👎 share wins, then the rarest in the store. One offer per
``MIN_DISLIKED`` 👎: after an offer (whatever the answer), the topic's next one waits until the
chat has that many more 👎 in it.

Accepting leaves the word out of the chat's view of the topic: for a custom query, the chat's
subscription moves to the query ``… NOT word`` (a custom topic like any other: matching,
/list, /latest and momentum follow it); for a catalogue topic, the chat keeps the topic and
every path that brings it the topic's papers leaves those with the word out (``rows.in_view``)
— a paper another of its topics matches still arrives. Both are undone by ``restore``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from topicpulse import offload
from topicpulse.insight import momentum
from topicpulse.insight.momentum import Momentum
from topicpulse.insight.similarity import HasText, content_words, paper_stems
from topicpulse.models import StoredPaper, Topic
from topicpulse.store import Move, Refinement, Store
from topicpulse.topics import query as ql
from topicpulse.topics.catalogue import custom_topic
from topicpulse.topics.query.syntax import conjunction, items_of
from topicpulse.topics.stemming import stem_texts

MIN_DISLIKED = 3  # 👎 within a topic that must share the word
MIN_LIFT = 3.0  # … and it that many times as common among them as among the topic's papers
TRIED = 5  # candidate words whose share of the topic is counted, at most, per tap


@dataclass(frozen=True, slots=True)
class Offer:
    """ "Leave out papers about ``term`` from ``topic``?" (``id``: the refinement's row)."""

    id: int
    term: str
    topic: str  # as the chat sees it
    disliked: int  # the 👎 that share the word


@dataclass(frozen=True, slots=True)
class Word:
    """A word several 👎 in a topic share (``shared_word``)."""

    term: str
    fts: str  # its FTS5 expression, as the query language compiles the word
    shared: int  # the 👎 that use it
    disliked: int  # the chat's 👎 in the topic


@dataclass(frozen=True, slots=True)
class Decided:
    """An offer accepted, or a word put back: what to tell the chat."""

    id: int
    term: str
    topic: str  # the topic's name, as the chat saw it before
    query: str | None = None  # a custom topic: the query the chat follows now


# ---------------------------------------------------------------------------------- the offer
async def offer_after_dislike(store: Store, chat_id: int, paper: StoredPaper) -> Offer | None:
    """After a 👎 on ``paper``: the offer it triggers in one of the chat's topics that match the
    paper (recorded: never made twice), or None."""
    topics = (await store.chat_topics_for_papers(chat_id, [paper.id])).get(paper.id, [])
    for topic in topics:
        word = await _shared_word_apart(store, chat_id, topic, paper)
        if word is None:
            continue
        made = await store.offer_refinement(chat_id, topic.id, word.term, word.fts, word.disliked)
        if made is not None:
            return Offer(made.id, word.term, topic.name, word.shared)
    return None


async def _shared_word_apart(
    store: Store, chat_id: int, topic: Topic, paper: StoredPaper
) -> Word | None:
    """``shared_word`` in the training worker process (in this one for an in-memory store).
    Its counts of the topic's papers that hold a word scan the word's postings in the index:
    ~0.7 s of a core for a common word. That is background work after a 👎; on a reader
    connection of the bot's it took CPU and a connection from the replies (a thousand readers
    tapping, ``bench/bench_replies.py --raters 1000``: 15% of a core)."""
    if not store.file_backed():
        return await shared_word(store, chat_id, topic, paper)
    return await offload.run(
        shared_word_in, store.path, chat_id, topic, paper, store.clock(), pool=offload.TRAINING
    )


def shared_word_in(
    path: str, chat_id: int, topic: Topic, paper: StoredPaper, now: datetime
) -> Word | None:
    """``shared_word`` on a connection of its own (a worker process's)."""

    async def work(store: Store) -> Word | None:
        return await shared_word(store, chat_id, topic, paper)

    return Store.run_apart(path, now, work)


async def shared_word(store: Store, chat_id: int, topic: Topic, paper: StoredPaper) -> Word | None:
    """The word several of the chat's 👎 in ``topic`` share (see the module's docstring), or
    None."""
    rated = await store.topic_ratings(chat_id, topic.id)
    down = [r for r in rated if r.value < 0]
    up = [r for r in rated if r.value > 0]
    if len(down) < MIN_DISLIKED or paper.id not in {r.paper_id for r in down}:
        return None
    before = await store.refinements(chat_id, topic.id)
    if before and len(down) < max(x.disliked for x in before) + MIN_DISLIKED:
        return None  # one offer per MIN_DISLIKED 👎
    stems = await asyncio.to_thread(paper_stems, [paper, *down, *up])
    shared = Counter(s for counted in stems[1 : len(down) + 1] for s in counted)
    liked = set().union(*stems[len(down) + 1 :])
    offered = [x.term for x in before]
    taken, prefixes = await asyncio.to_thread(_own_words, topic.query, offered)
    found = [s for s in stems[0] if shared[s] >= MIN_DISLIKED and s not in liked and s not in taken]
    if not found:
        return None
    documents = await store.term_documents(found)
    found.sort(key=lambda s: (-shared[s], documents.get(s, 0), s))
    words = await asyncio.to_thread(_spellings, down, set(found[:TRIED]))
    total = await store.count_matches(topic_id=topic.id)
    for stem in found[:TRIED]:
        word = words.get(stem)
        if word is None or word.startswith(prefixes) or stem.startswith(prefixes):
            continue
        fts = ql.to_fts(ql.Term((word,)))
        inside = await store.topic_papers_matching(topic.id, fts)
        if shared[stem] / len(down) >= MIN_LIFT * inside / max(total, 1):
            return Word(word, fts, shared[stem], len(down))
    return None


def _own_words(query: str, offered: Sequence[str]) -> tuple[set[str], tuple[str, ...]]:
    """The stems of a topic's own query words (excluded ones too) and of the words offered for
    it before; and the query's prefixes (``optim*``), whose words it has too."""
    try:
        terms = list(ql.terms(ql.parse(query, max_length=None)))
        tokens = [t for term in terms for t in term.tokens]
        prefixes = tuple(term.tokens[-1] for term in terms if term.prefix)
    except ql.QueryError:  # a stored query a stricter parser rejects: its words, roughly
        tokens, prefixes = ql.tokenize(query), ()
    return {s for found in stem_texts([*tokens, *offered]) for s in found}, prefixes


def _spellings(texts: Sequence[HasText], stems: set[str]) -> dict[str, str]:
    """A word for each stem: the commonest word of the texts that the index stems to it."""
    counts = Counter(w for t in texts for w in content_words(f"{t.title} {t.abstract}"))
    distinct = sorted(counts)
    best: dict[str, tuple[int, str]] = {}
    for word, found in zip(distinct, stem_texts(distinct), strict=True):
        if len(found) == 1 and found[0] in stems and counts[word] > best.get(found[0], (0,))[0]:
            best[found[0]] = (counts[word], word)
    return {s: w for s, (_, w) in best.items()}


# ---------------------------------------------------------------------------------- decisions
async def _mine(store: Store, chat_id: int, refinement_id: int, state: str) -> Refinement | None:
    found = await store.refinement(refinement_id)
    return (
        found if found is not None and found.chat_id == chat_id and found.state == state else None
    )


async def accept(store: Store, chat_id: int, refinement_id: int) -> Decided | None:
    """ "Leave out": the word leaves the chat's view of the topic (a custom query: the query
    the chat follows gains ``NOT word``). None: no such offer open for this chat (stale)."""
    offer = await _mine(store, chat_id, refinement_id, "offered")
    topic = await store.subscribed_topic(chat_id, offer.topic_id) if offer else None
    if offer is None or topic is None:
        return None
    if not topic.is_custom:
        done = await store.decide_refinement(offer.id, was="offered", now="left_out")
        return Decided(offer.id, offer.term, topic.name) if done else None
    try:
        node = ql.parse(topic.query, max_length=None)
    except ql.QueryError:
        return None
    refined = await custom_topic(
        store, ql.unparse(conjunction([node], [ql.Term((offer.term,))])), max_length=None
    )
    move = Move(topic.id, refined.id, _refined_label(topic, offer.term))
    done = await store.decide_refinement(
        offer.id, was="offered", now="left_out", in_query=True, move=move
    )
    return Decided(offer.id, offer.term, topic.name, refined.query) if done else None


async def decline(store: Store, chat_id: int, refinement_id: int) -> Refinement | None:
    """ "No thanks": the word is never offered again for that topic. None: stale."""
    offer = await _mine(store, chat_id, refinement_id, "offered")
    if offer is None or not await store.decide_refinement(offer.id, was="offered", now="declined"):
        return None
    return offer


async def restore(store: Store, chat_id: int, refinement_id: int) -> Decided | None:
    """Undo: papers about the word are back in the topic (a custom query loses its
    ``NOT word``). None: nothing of the kind is left out now (stale)."""
    done = await _mine(store, chat_id, refinement_id, "left_out")
    topic = await store.subscribed_topic(chat_id, done.topic_id) if done else None
    if done is None or topic is None:
        return None
    if not done.in_query:
        ok = await store.decide_refinement(done.id, was="left_out", now="restored")
        return Decided(done.id, done.term, topic.name) if ok else None
    try:
        without = _without(ql.parse(topic.query, max_length=None), done.term)
    except ql.QueryError:
        return None
    if without is None:
        return None
    back = await custom_topic(store, ql.unparse(without), max_length=None)
    suffix = f" (without {done.term})"
    label = topic.name.removesuffix(suffix) if topic.name.endswith(suffix) else None
    move = Move(topic.id, back.id, label)
    ok = await store.decide_refinement(done.id, was="left_out", now="restored", move=move)
    return Decided(done.id, done.term, topic.name, back.query) if ok else None


def _refined_label(topic: Topic, term: str) -> str | None:
    """How the chat sees its refined query: by the query itself (None), unless it called the
    topic something else than a spelling of its query ("papers like …"): that, without term."""
    try:
        spelling = ql.normalise(topic.name, max_length=None) == topic.query
    except ql.QueryError:
        spelling = False
    return None if spelling else f"{topic.name} (without {term})"


def _without(node: ql.Node, term: str) -> ql.Node | None:
    """The query without its ``NOT term`` (None: it has none)."""
    if not isinstance(node, ql.Not):
        return None
    excluded = items_of(ql.Or, node.negative)
    kept = [n for n in excluded if n != ql.Term((term,))]
    return None if len(kept) == len(excluded) else conjunction([node.positive], kept)


# ---------------------------------------------------------------------------------- views
async def left_out(store: Store, chat_id: int) -> list[tuple[Refinement, str]]:
    """The words the chat leaves out of the topics it follows, each with the topic's name."""
    found = []
    for refinement in await store.left_out(chat_id):
        topic = await store.subscribed_topic(chat_id, refinement.topic_id)
        if topic is not None:
            found.append((refinement, topic.name))
    return found


async def viewed_moments(
    store: Store,
    topics: Sequence[Topic],
    moments: Sequence[Momentum],
    left_out: Sequence[Refinement],
    now: datetime,
) -> list[Momentum]:
    """/list's momentum of each topic as the chat sees it: a catalogue topic it left words out
    of (``left_out``: the chat's, ``Store.following``) is counted without their papers, and
    named so."""
    views: dict[int, list[Refinement]] = {}
    for refinement in left_out:
        if not refinement.in_query:
            views.setdefault(refinement.topic_id, []).append(refinement)
    shown = list(moments)
    for n, topic in enumerate(topics):
        if topic.id not in views:
            continue
        words = views[topic.id]
        fts = f"({topic.fts}) NOT ({' OR '.join(x.fts for x in words)})"
        seen = await momentum.compute(store, fts=fts, query=topic.query, as_of=now)
        name = f"{topic.name} (without {', '.join(x.term for x in words)})"
        shown[n] = dataclasses.replace(seen, topic=name)
    return shown
