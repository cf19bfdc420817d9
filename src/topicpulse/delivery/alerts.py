"""Instant alerts assembled from the matches, as digests are: a round marks the instant chats
its matches owe an alert (``chats.alerts_due``) instead of queueing a row per chat and paper,
and the delivery pass sends each one what its topics matched since its watermark — a digest
due at once, packed as alerts (``formatting.pack_alerts``), in at most ``fold_after``
messages or one catch-up over all of it.

Papers its taste rates very unlikely go to the chat's quiet list (never dropped, never before
enough ratings; ``tastes.to_hold_back``), and the last message says how many wait there.
Exactly once as a digest is (``store.digests``): the last message accepted moves the
watermark and clears the rounds' mark through it.
"""

from __future__ import annotations

from datetime import datetime

from topicpulse.delivery import buttons, digests, formatting, tastes
from topicpulse.delivery.digests import Digest, DigestPaper
from topicpulse.delivery.messages import FOLD_PROBES, Outgoing
from topicpulse.models import Chat
from topicpulse.store import Store


async def assemble(
    store: Store, chat: Chat, now: datetime, *, fold_after: int | None
) -> list[Outgoing]:
    """The chat's instant alerts due at ``now``: its topics' matches since its watermark and
    any rows pending for it. Nothing to send (or everything held back) settles at once."""
    digest = await digests.digest_papers(store, chat, now)
    found = await messages(store, digest, fold_after)
    if not found:
        await settle_nothing(store, chat, digest.through)
    return found


async def settle_nothing(store: Store, chat: Chat, through: int) -> None:
    """Nothing to send (or everything held back): the watermark moves to ``through`` and the
    rounds' mark clears all the same."""
    await store.settle_digest(chat, outbox_ids=[], paper_ids=[], through=through)


async def messages(store: Store, digest: Digest, fold_after: int | None) -> list[Outgoing]:
    """The digest's papers as alert messages; for a chat without a taste, reads only."""
    chat_id = digest.chat.chat_id
    if not digest.papers:
        return []
    rated = digest.read.taste is not None
    # (holding back may shrink a rated chat's alert until it fits: the probe before it only
    # takes the largest size)
    if fold_after is not None and await digests.must_fold(
        digest.papers,
        fold_after,
        lambda part: _pack(store, digest, part, most=fold_after),
        FOLD_PROBES[-1:] if rated else FOLD_PROBES,
    ):
        return [await digests.catch_up(store, digest)]
    if rated:
        found = await store.papers_by_ids([p.paper_id for p in digest.papers])
        held = await tastes.to_hold_back(store, chat_id, found)
        if held:  # never dropped: into the quiet list (a paper there is settled for the chat)
            await store.hold_back_papers(
                chat_id,
                [(p.outbox_id, p.paper_id, held[p.paper_id]) for p in digest.papers
                 if p.paper_id in held],
            )  # fmt: skip
            digest.papers = [p for p in digest.papers if p.paper_id not in held]
            if not digest.papers:
                return []
    packed = await _pack(store, digest, digest.papers, most=fold_after)
    if fold_after is not None and len(packed) > fold_after:
        return [await digests.catch_up(store, digest)]
    out = digests.packed_messages(digest, packed)
    for message, (_, _, paper_ids) in zip(out, packed, strict=True):
        message.preview = len(paper_ids) == 1
    if rated and (waiting := len(await store.waiting_held_back(chat_id))):
        last_message = out[-1]
        last_message.html += f"\n\n{buttons.held_back_line(waiting)}"
        last_message.buttons = [*(last_message.buttons or []), buttons.SHOW_HELD]
    return out


async def _pack(
    store: Store, digest: Digest, papers: list[DigestPaper], *, most: int | None
) -> digests.Packed:
    """The papers packed as alerts, newest first, each to its forum thread; with ``most``,
    written only until they take more than that many messages."""
    alerts = await digests.alerts_of(store, papers)
    return digests.packed_by_thread(
        alerts,
        digest.read.threads,
        lambda group, left: formatting.pack_alerts(group, most=left),
        most,
    )
