"""Digests assembled from the matches: a digest is the list of papers the chat's topics matched
since its watermark (``Chat.digest_through``), with any paper rows still pending for it, packed
into at most ``DIGEST_MESSAGES`` messages or folded into one catch-up over all of them.

No outbox row per paper and chat is needed (``store.digests`` says why and how it stays exactly
once). ``digest_papers`` is the list; ``assemble`` turns it into messages, each of which knows
what it settles (``Settles``): the last moves the watermark and sets the next digest time.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter

from topicpulse.delivery import buttons, formatting, tastes
from topicpulse.delivery.chats import next_digest_at, published_since
from topicpulse.delivery.messages import (
    CATCH_UP_BEST,
    CATCH_UP_CANDIDATES,
    FOLD_PROBES,
    Outgoing,
    catch_up_view,
)
from topicpulse.insight import taste as taste_model
from topicpulse.models import Chat, Topic, iso
from topicpulse.store import Store
from topicpulse.store.digests import ChatMatches

DIGEST_MESSAGES = 2  # a longer digest is one message: counts, the best papers, /latest buttons


@dataclass(slots=True)
class DigestPaper:
    paper_id: int
    published: str
    topics: list[Topic]  # the chat's topics that match it, in the order it followed them
    outbox_id: int | None = None  # a pending row it comes from (else from the matches)


@dataclass(slots=True)
class Digest:
    """What a digest due now holds, and where it leaves the chat."""

    chat: Chat
    read: ChatMatches  # what it is assembled from (the chat's topics, threads, taste)
    papers: list[DigestPaper]
    through: int  # the watermark after it
    next_at: str | None  # the next digest time after it
    messages: list[Outgoing] = field(default_factory=list)

    def taste(self) -> tuple[taste_model.Taste | None, bool]:
        """The chat's taste as read with the digest's papers (and whether it holds back)."""
        return taste_model.from_row(self.read.taste)


@dataclass(slots=True)
class Settles:
    """What an accepted digest message settles (``Outgoing.digest``)."""

    chat: Chat
    paper_ids: list[int]  # papers without a pending row (from the matches)
    through: int | None  # None: more messages of this digest follow
    next_at: str | None = None


def due(chat: Chat, now: datetime) -> bool:
    """Whether the chat's digest is due at ``now`` (never for an instant chat)."""
    return (
        chat.mode != "instant"
        and chat.next_digest_at is not None
        and chat.next_digest_at <= iso(now)
    )


async def digest_papers(store: Store, chat: Chat, now: datetime) -> Digest:
    """The papers of the chat's digest due at ``now``, oldest first: its topics' matches since
    its watermark, up to what the rounds have fanned out, and its pending paper rows (read in
    one trip to the store, ``Store.chat_matches``)."""
    read = await store.chat_matches(
        chat.chat_id,
        after=chat.digest_through,
        published_since=chat.alerts_since
        if chat.mode == "instant" and chat.alerts_since
        else published_since(chat.mode, now),
    )
    due = next_digest_at(chat, now)
    digest = Digest(
        chat, read, [], max(read.through, chat.digest_through), iso(due) if due else None
    )
    rows = {i.paper_id: i.id for i in read.pending if i.paper_id is not None}
    found = {p.id: p for p in await store.papers_by_ids(list(rows))}
    papers = [
        DigestPaper(pid, found[pid].published, read.pending_tags.get(pid, []), rows[pid])
        for pid in rows
        if pid in found
    ]
    # (a digest holds hundreds of papers on a few combinations of the chat's topics: each
    # combination's list is made once and shared, read-only; most papers match one topic)
    known = read.topics
    combinations: dict[tuple[int, ...], list[Topic]] = {
        (tid,): [topic] for tid, topic in known.items()
    }
    last: DigestPaper | None = None
    ids: tuple[int, ...] = ()
    for pid, published, tid in read.matches:  # (in paper order, a row per topic)
        if last is not None and last.paper_id == pid:
            ids = (*ids, tid)
            topics = combinations.get(ids)
            if topics is None:
                topics = combinations[ids] = [known[t] for t in ids if t in known]
            last.topics = topics
            continue
        if pid in rows:
            continue
        ids = (tid,)
        topics = combinations.get(ids)
        if topics is None:  # (a topic the chat no longer follows as it was read)
            topics = combinations[ids] = []
        last = DigestPaper(pid, published, topics)
        papers.append(last)
    if rows:  # (the matches come in paper order; pending rows go among them)
        papers.sort(key=lambda p: p.paper_id)
    digest.papers = papers
    return digest


async def assemble(store: Store, chat: Chat, now: datetime) -> Digest:
    """``digest_papers`` and its messages: the digest in at most ``DIGEST_MESSAGES``, or one
    catch-up over all of it (none when it is empty). Each topic's papers come in the chat's
    order when it has a taste (best first, the rest folded); in a forum, each paper goes to
    the topic its first-followed matching topic was followed from; every entry has 👍 / 👎."""
    digest = await digest_papers(store, chat, now)
    await write_messages(store, digest)
    return digest


async def write_messages(store: Store, digest: Digest) -> None:
    """The digest's messages (none when it is empty): ``assemble``'s second half."""
    if not digest.papers:
        return
    most = DIGEST_MESSAGES
    packed: Packed = []
    if (
        await must_fold(digest.papers, most, lambda part: _pack(store, digest, part, most=most))
        or len(packed := await _pack(store, digest, digest.papers, most=most)) > most
    ):
        digest.messages = [await catch_up(store, digest)]
    else:
        digest.messages = packed_messages(digest, packed)


Packed = list[tuple[int | None, str, list[int]]]  # (forum thread, text, paper ids) per message


async def must_fold(
    papers: list[DigestPaper],
    most: int,
    pack: Callable[[list[DigestPaper]], Awaitable[Packed]],
    sizes: tuple[int, ...] = FOLD_PROBES,
) -> bool:
    """Whether a backlog must fold into a catch-up, learned before reading all of it: its first
    ``sizes`` papers, fewest first, already take more than ``most`` messages (packing more
    never takes fewer). False: it may still, once packed whole."""
    for size in sizes:
        if len(papers) <= size:
            return False
        if len(await pack(papers[:size])) > most:
            return True
    return False


def packed_messages(digest: Digest, packed: Packed) -> list[Outgoing]:
    """The packed texts as the digest's (or alert's) messages, each to its forum thread with
    its 👍 / 👎 rows; the last also settles whatever the packing left out (nothing, usually)."""
    by_id = {p.paper_id: p for p in digest.papers}
    rows = buttons.rating_rows([(t, ids) for _, t, ids in packed], numbered=len(by_id) > 1)
    messages = []
    for n, ((thread, text, paper_ids), mine) in enumerate(zip(packed, rows, strict=True), 1):
        last = n == len(packed)
        parts = [by_id[pid] for pid in paper_ids]
        if last:
            shown = {pid for _, _, ids in packed for pid in ids}
            parts += [p for p in digest.papers if p.paper_id not in shown]
        message = outgoing(digest, parts, text, last=last)
        message.thread_id = thread
        message.buttons = list(mine) or None
        messages.append(message)
    return messages


def by_thread(
    alerts: list[formatting.Alert], threads: dict[int, int | None]
) -> dict[int | None, list[formatting.Alert]]:
    """The alerts by forum thread: each paper goes to the topic its first-followed matching
    topic was followed from (``threads``: the chat's topics' forum topics; None: General, or
    not a forum)."""
    grouped: dict[int | None, list[formatting.Alert]] = {}
    for alert in alerts:
        thread = threads.get(alert.topics[0].id) if alert.topics else None
        grouped.setdefault(thread, []).append(alert)
    return grouped


_NEWEST = attrgetter("published", "paper_id")  # (newest first among equals, as a key)


def _on_most_topics(
    papers: list[DigestPaper], combinations: dict[int, list[Topic]], k: int
) -> list[DigestPaper]:
    """The ``k`` papers on the most of the chat's topics, newest first among equals (as
    ``heapq.nlargest`` by (topics, published, id), without a key tuple per paper: taken from
    the combinations with the most topics down, usually one or two)."""
    best: list[DigestPaper] = []
    sizes = {key: len(topics) for key, topics in combinations.items()}
    for size in sorted(set(sizes.values()), reverse=True):
        if len(best) >= k:
            break
        if all(n == size for n in sizes.values()):
            level = papers
        else:
            keys = {key for key, n in sizes.items() if n == size}
            level = [p for p in papers if id(p.topics) in keys]
        best += heapq.nlargest(k - len(best), level, key=_NEWEST)
    return best


async def _pack(store: Store, digest: Digest, papers: list[DigestPaper], *, most: int) -> Packed:
    """The papers packed as digest messages, in the reader's order; written only until they
    take more than ``most`` messages (then the answer is just longer than ``most``)."""
    chat = digest.chat
    alerts = await alerts_of(store, papers)
    taste, _ = digest.taste()
    _, scores = await tastes.in_order(store, taste, [a.paper for a in alerts])
    return packed_by_thread(
        alerts,
        digest.read.threads,
        lambda group, left: formatting.pack_digest(
            group, period=chat.mode, scores=scores, most=left
        ),
        most,
    )


def packed_by_thread(
    alerts: list[formatting.Alert],
    threads: dict[int, int | None],
    pack: Callable[[list[formatting.Alert], int | None], list[tuple[str, list[int]]]],
    most: int | None,
) -> Packed:
    """The alerts packed (``pack``: a group and the messages it may still take) for each forum
    thread in turn (``by_thread``); with ``most``, only until they take more than that many
    messages (then the answer is just longer than ``most``)."""
    packed: Packed = []
    for thread, group in by_thread(alerts, threads).items():
        left = None if most is None else most - len(packed)
        packed.extend((thread, text, ids) for text, ids in pack(group, left))
        if most is not None and len(packed) > most:
            break
    return packed


def outgoing(digest: Digest, parts: list[DigestPaper], text: str, *, last: bool) -> Outgoing:
    """One message of the digest with ``parts``: the last settles the watermark."""
    message = Outgoing(
        digest.chat.chat_id,
        [p.outbox_id for p in parts if p.outbox_id is not None],
        text,
        preview=len(parts) == 1,
    )
    message.digest = Settles(
        digest.chat,
        [p.paper_id for p in parts if p.outbox_id is None],
        digest.through if last else None,
        digest.next_at if last else None,
    )
    return message


async def alerts_of(store: Store, papers: list[DigestPaper]) -> list[formatting.Alert]:
    """The papers as alerts: the chat's topics that match each, and every catalogue tag."""
    ids = [p.paper_id for p in papers]
    found = {p.id: p for p in await store.papers_by_ids(ids)}
    catalogue = await store.paper_topics(ids, kind="catalogue")
    return [
        formatting.Alert(found[p.paper_id], p.topics, catalogue.get(p.paper_id, []))
        for p in papers
        if p.paper_id in found
    ]


async def catch_up(store: Store, digest: Digest) -> Outgoing:
    """The digest (or an instant chat's alerts, ``delivery.alerts``) folded into one message:
    counts per topic, the best few (the papers on the most of the chat's topics, newest first
    among equals; with a taste, its best among more of them), each with 👍 / 👎, and
    ``/latest`` buttons for the rest."""
    papers = digest.papers
    # (counted per combination of topics: the papers share a list per combination)
    combinations = {id(p.topics): p.topics for p in papers}  # (in order of first appearance)
    per_combination = Counter(id(p.topics) for p in papers)
    counts: Counter[int] = Counter()
    named: dict[int, Topic] = {}
    for key, topics in combinations.items():
        for topic in topics:
            counts[topic.id] += per_combination[key]
            named.setdefault(topic.id, topic)
    order = {tid: n for n, tid in enumerate(named)}  # first followed first among equals
    ranked = sorted(counts, key=lambda tid: (-counts[tid], order[tid]))
    taste, _ = digest.taste()
    best = _on_most_topics(papers, combinations, CATCH_UP_CANDIDATES if taste else CATCH_UP_BEST)
    found = {p.id: p for p in await store.papers_by_ids([p.paper_id for p in best])}
    text, rows, thread = await catch_up_view(
        store,
        total=len(papers),
        counts=[(named[tid], counts[tid]) for tid in ranked],
        candidates=[
            formatting.Alert(found[p.paper_id], p.topics) for p in best if p.paper_id in found
        ],
        taste=taste,
        period=None if digest.chat.mode == "instant" else digest.chat.mode,
        threads=digest.read.threads,
    )
    message = outgoing(digest, papers, text, last=True)
    message.folded = True
    message.buttons = rows
    message.thread_id = thread
    return message
