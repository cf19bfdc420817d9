"""The reader's taste through the fake Bot API: 👍 / 👎 on every paper the bot shows (a second
tap undoes, the buttons show the rating, ratings survive a restart), forged and stale rating
buttons, /taste and its imports (ids, BibTeX, RIS; malformed, huge and non-UTF-8 files),
digests in the reader's order, holding back and its quiet list, /taste off, and "why?"."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot_harness import RL, USER, Bot, Clock, bot_session, check_traffic, paper, seed_papers
from fake_telegram import SentMessage
from topicpulse.bot import callbacks
from topicpulse.models import Paper
from topicpulse.sources import references
from waiting import wait_for

pytestmark = pytest.mark.timeout(90)

NOW = datetime(2026, 11, 10, 9, 0, tzinfo=UTC)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with bot_session(tmp_path, papers=seed_papers(NOW), clock=Clock(NOW)) as running:
        await running.poll()
        yield running
        check_traffic(running.fake)


def rate_buttons(message: SentMessage) -> list[tuple[str, str]]:
    return [(label, data or "") for label, data in message.buttons if (data or "").startswith("r:")]


async def paper_id(bot: Bot, arxiv_id: str) -> int:
    found = await bot.store.get_paper(arxiv_id)
    assert found is not None
    return found.id


async def trained(bot: Bot, chat_id: int) -> None:
    """Wait until the chat's taste is trained on its latest ratings (in the worker)."""

    async def done() -> bool:
        row = await bot.store.taste(chat_id)
        return row is not None and row.trained >= row.changed

    await wait_for(done, timeout=60, what="the taste to be trained")


# ---------------------------------------------------------------------------------- rating
async def test_rating_a_paper_is_stored_shown_undone_and_durable(bot: Bot) -> None:
    card = await bot.say(USER, "/paper 2611.00001")
    pid = await paper_id(bot, "2611.00001")
    assert rate_buttons(card) == [("👍", f"r:{pid}:+"), ("👎", f"r:{pid}:-")]
    _, answer = await bot.press(USER, card, f"r:{pid}:+")
    assert answer["text"].startswith("👍 Noted")
    [edit] = [c for c in bot.fake.calls_to("editMessageReplyMarkup")]
    assert edit.ok
    shown = bot.fake.message(USER, card.message_id)
    assert shown is not None
    labels = [b["text"] for row in shown["reply_markup"]["inline_keyboard"] for b in row]
    assert labels[:2] == ["👍 ✓", "👎"]  # the message shows the rating
    assert await bot.store.ratings_for(USER, [pid]) == {pid: 1}
    # 👎 replaces it; a second tap on 👎 undoes it
    await bot.press(USER, card, f"r:{pid}:-")
    assert await bot.store.ratings_for(USER, [pid]) == {pid: -1}
    _, answer = await bot.press(USER, card, f"r:{pid}:-")
    assert answer["text"] == "Rating removed."
    assert await bot.store.ratings_for(USER, [pid]) == {}
    shown = bot.fake.message(USER, card.message_id)
    assert shown is not None
    labels = [b["text"] for row in shown["reply_markup"]["inline_keyboard"] for b in row]
    assert labels[:2] == ["👍", "👎"]
    # durable: one per chat and paper, across a restart
    await bot.press(USER, card, f"r:{pid}:+")
    await bot.restart()
    assert await bot.store.ratings_for(USER, [pid]) == {pid: 1}
    assert await bot.store.rating_counts(USER) == (1, 0)


async def test_a_tick_telegram_refuses_is_left_out_and_the_rating_stays(bot: Bot) -> None:
    """A rating's tick is a low send: refused (a 429 for that chat) it is not retried, the
    tap's answer has acknowledged the rating already, and the next tick finds the chat closed
    and leaves itself out at once (the rate limiter's tests: it also waits at most
    ``low_max_wait`` for room)."""
    card = await bot.say(USER, "/paper 2611.00001")
    pid = await paper_id(bot, "2611.00001")
    bot.fake.fail_next(
        "editMessageReplyMarkup", status=429, description="Too Many Requests", retry_after=30
    )
    _, answer = await bot.press(USER, card, f"r:{pid}:+")
    assert answer["text"].startswith("👍 Noted")
    edits = bot.fake.calls_to("editMessageReplyMarkup")
    assert [c.error_code for c in edits] == [429]  # tried once, not retried
    _, answer = await bot.press(USER, card, f"r:{pid}:-")
    assert answer["text"].startswith("👎 Noted")
    assert len(bot.fake.calls_to("editMessageReplyMarkup")) == 1  # closed: left out at once
    assert await bot.store.ratings_for(USER, [pid]) == {pid: -1}


async def test_every_list_of_papers_has_a_numbered_row_per_paper(bot: Bot) -> None:
    for command in ("/latest RL for Language Models 3", "/search GRPO", "/similar 2611.00001"):
        [listed] = await bot.ask(USER, command)
        rows = rate_buttons(listed)
        assert rows and len(rows) % 2 == 0, command
        count = len(rows) // 2
        assert [label for label, _ in rows] == [
            f"{thumb} {n}" for n in range(1, count + 1) for thumb in ("👍", "👎")
        ], command
        assert all(f"{n}. <a href=" in (listed.text or "") for n in range(1, count + 1))
    # a rating from a list counts like any other
    _, data = rows[0]
    await bot.press(USER, listed, data)
    assert await bot.store.rating_counts(USER) == (1, 0)


async def test_alerts_carry_one_row_per_paper(bot: Bot) -> None:
    await bot.ask(USER, f"/follow {RL}")
    bot.arxiv.add(paper(501, "GRPO for language model alignment, the sequel", now=NOW))
    await bot.poll_and_deliver()
    single = bot.fake.messages_to(USER)[-1]
    pid = await paper_id(bot, "2611.00501")
    assert rate_buttons(single) == [("👍", f"r:{pid}:+"), ("👎", f"r:{pid}:-")]
    bot.arxiv.add(
        paper(502, "GRPO for language model alignment, again", now=NOW),
        paper(503, "GRPO for language model alignment, once more", now=NOW),
    )
    await bot.poll_and_deliver()
    grouped = bot.fake.messages_to(USER)[-1]
    assert [label for label, _ in rate_buttons(grouped)] == ["👍 1", "👎 1", "👍 2", "👎 2"]
    assert "1. <b><a href=" in (grouped.text or "") and "2. <b><a href=" in (grouped.text or "")
    _, answer = await bot.press(USER, grouped, rate_buttons(grouped)[3][1])
    assert answer["text"].startswith("👎")
    assert await bot.store.rating_counts(USER) == (0, 1)


async def test_quick_taps_are_answered_at_once_and_their_ticks_fold(bot: Bot) -> None:
    """A reader rating down a list faster than Telegram lets a chat be sent to: every tap is
    answered without waiting for the tick of the tap before (here the first tick's edit hangs,
    unanswered), and the ticks wanted meanwhile fold into one edit showing every rating."""
    [listed] = await bot.ask(USER, "/latest RL for Language Models 3")
    rows = rate_buttons(listed)
    assert len(rows) == 6
    bot.fake.hold_sends(methods={"editMessageReplyMarkup"})  # ticks get no answer till released
    taps = [rows[0][1], rows[3][1], rows[4][1], rows[0][1]]  # 👍 1, 👎 2, 👍 3, 👍 1 again

    def answered() -> list[str]:
        return [a.get("text", "").split(" —")[0] for a in bot.fake.callback_answers.values()]

    def edits() -> list[Any]:
        return bot.fake.calls_to("editMessageReplyMarkup")

    bot.fake.user_presses(USER, listed.message_id, taps[0])
    await wait_for(lambda: answered() and edits(), timeout=30, what="the first tap's tick")
    for data in taps[1:]:  # while its tick hangs
        bot.fake.user_presses(USER, listed.message_id, data)
    await wait_for(lambda: len(answered()) == len(taps), timeout=30, what="every tap answered")
    assert answered() == ["👍 Noted", "👎 Noted", "👍 Noted", "Rating removed."]
    assert len(edits()) == 1  # one edit in flight per message: the others wait, folded
    bot.fake.release_sends()
    await bot.idle()
    assert len(edits()) == 2 and all(e.ok for e in edits())  # the first, and the rest in one
    shown = bot.fake.message(USER, listed.message_id)
    assert shown is not None
    labels = [b["text"] for row in shown["reply_markup"]["inline_keyboard"] for b in row]
    assert labels[:6] == ["👍 1", "👎 1", "👍 2", "👎 2 ✓", "👍 3 ✓", "👎 3"]
    ids = [int(data.split(":")[1]) for _, data in rows[::2]]
    assert await bot.store.ratings_for(USER, ids) == {ids[1]: -1, ids[2]: 1}


async def test_forged_and_stale_rating_buttons_have_expired(bot: Bot) -> None:
    card = await bot.say(USER, "/paper 2611.00001")
    pid = await paper_id(bot, "2611.00001")
    for forged in (f"r:{pid + 1}:+", f"r:{pid}:x", "r:0:+", f"r:{pid}:+:1", "hb", "w:1"):
        _, answer = await bot.press(USER, card, forged, forged=True)
        assert answer["text"] == callbacks.EXPIRED, forged
    # stale: the message offers it, but the paper is no longer stored
    await bot.store.set_hold_back(USER, True)  # (any write; then the paper goes)
    async with bot.store._write() as conn:  # the daily prune would do this to an old paper
        await conn.execute("DELETE FROM papers WHERE id = ?", (pid,))
    _, answer = await bot.press(USER, card, f"r:{pid}:+")
    assert answer["text"] == callbacks.EXPIRED
    assert await bot.store.rating_counts(USER) == (0, 0)


# ---------------------------------------------------------------------------------- /taste
async def test_taste_explains_and_imports_ids(bot: Bot) -> None:
    empty = await bot.say(USER, "/taste")
    assert "nothing learned yet" in (empty.text or "") and "BibTeX" in (empty.text or "")
    bad = await bot.say(USER, "/taste 2611.00001 nonsense")
    assert "not an arXiv id" in (bad.text or "") and "nothing was imported" in (bad.text or "")
    assert await bot.store.rating_counts(USER) == (0, 0)
    done = await bot.say(USER, "/taste 2611.00001 https://arxiv.org/abs/2611.00002v1 2611.00001")
    assert "Imported 2 liked papers" in (done.text or "")
    await trained(bot, USER)
    summary = await bot.say(USER, "/taste")
    assert "2 👍 · 0 👎" in (summary.text or "") and "More of:" in (summary.text or "")


BIB = """@article{a, title = {GRPO for language model alignment, part 1},
  eprint = {2611.00001}, archivePrefix = {arXiv}}
@misc{b, title = {Graph neural networks for molecules},
  url = {https://arxiv.org/abs/2611.00008v2}}
@inproceedings{c, title = {Protein design with {Diffusion}},
  abstract = {We design proteins with diffusion models and check them in the lab.}}
@book{d, title = {A book without an abstract}}
"""
RIS = """TY  - JOUR
TI  - Sparse attention kernels
UR  - https://arxiv.org/abs/2611.00009
ER  -
TY  - JOUR
TI  - Weather forecasting with transformers
AB  - A transformer forecasts the weather a week ahead.
ER  -
""".replace("ER  -\n", "ER  - \n")  # RIS ends an entry with "ER  - "


async def send_file(bot: Bot, data: bytes, name: str, caption: str | None = "/taste") -> str:
    before = len(bot.fake.messages_to(USER))
    bot.fake.user_sends_document(USER, data, name, caption=caption)
    await bot.idle()
    [reply] = bot.fake.messages_to(USER)[before:]
    return reply.text or ""


async def test_bibtex_and_ris_imports(bot: Bot) -> None:
    text = await send_file(bot, BIB.encode(), "library.bib")
    assert "Imported 3 liked papers" in text, text
    assert "1 not stored here, learned from their abstracts" in text
    assert "1 skipped" in text
    ratings = {r.item: r for r in await bot.store.chat_ratings(USER)}
    assert set(ratings) >= {"2611.00001", "2611.00008"}
    [by_text] = [r for r in ratings.values() if r.item.startswith("text:")]
    assert by_text.title == "Protein design with Diffusion" and by_text.paper_id is None
    # RIS (no caption needed in a private chat for a .ris file)
    text = await send_file(bot, RIS.encode(), "export.ris", caption=None)
    assert "Imported 2 liked papers" in text, text
    assert await bot.store.rating_counts(USER) == (5, 0)
    # the same file again: nothing new, nothing changed
    text = await send_file(bot, BIB.encode(), "library.bib")
    assert "Imported 0 liked papers" in text and "3 already rated (kept)" in text


@pytest.mark.parametrize(
    ("data", "name", "says"),
    [
        (BIB.replace("part 1},", "part 1,").encode(), "broken.bib", "Could not read the BibTeX"),
        (b"\x00\x01binary", "x.bib", "not text"),
        (b"@comment{" + b"x" * (references.MAX_BYTES + 10) + b"}", "huge.bib", "kB"),
        (RIS.replace("ER  - \n", "", 1).encode(), "cut.ris", "cut short"),
        (b"just some words", "notes.bib", "no entries"),
    ],
)
async def test_a_bad_file_gets_one_line_and_imports_nothing(
    bot: Bot, data: bytes, name: str, says: str
) -> None:
    text = await send_file(bot, data, name)
    assert says in text and "\n" not in text, text
    assert await bot.store.rating_counts(USER) == (0, 0)


async def test_a_non_utf8_export_is_read(bot: Bot) -> None:
    bib = BIB.replace("Protein design", "Protéine design").encode("cp1252")
    text = await send_file(bot, bib, "mendeley.bib")
    assert "Imported 3 liked papers" in text
    titles = {r.title for r in await bot.store.chat_ratings(USER)}
    assert "Protéine design with Diffusion" in titles


# ---------------------------------------------------------------------------------- using it
LIKED = "protein folding with diffusion language models"
DISLIKED = "stock trading agents built on language models"


def themed(n: int, theme: str, days_ago: float = 1) -> Paper:
    return paper(
        n,
        f"{theme.capitalize()}, study {n}",
        days_ago=days_ago,
        abstract=f"We study {theme} in depth; {theme} matter. Variant {n}.",
        now=NOW,
    )


async def teach(bot: Bot, up: int, down: int) -> None:
    """``up`` protein papers liked (imported by id) and ``down`` trading papers 👎 (tapped
    in a /search list): few commands, for the per-sender command limit."""
    await bot.say(USER, "/taste " + " ".join(f"2611.{600 + n:05d}" for n in range(up)))
    [listed] = await bot.ask(USER, '/search "stock trading"')
    downs = [data for label, data in rate_buttons(listed) if label.startswith("👎")]
    for data in downs[:down]:
        await bot.press(USER, listed, data)
    assert await bot.store.rating_counts(USER) == (up, down)
    await trained(bot, USER)


@pytest.fixture
async def taught(tmp_path: Path) -> AsyncIterator[Bot]:
    history = [themed(600 + n, LIKED, 3) for n in range(6)]
    history += [themed(700 + n, DISLIKED, 3) for n in range(6)]
    async with bot_session(tmp_path, papers=seed_papers(NOW) + history, clock=Clock(NOW)) as b:
        await b.poll()
        yield b
        check_traffic(b.fake)


async def test_holding_back_the_quiet_list_why_and_taste_off(taught: Bot) -> None:
    bot = taught
    await bot.ask(USER, "/follow language models")
    await teach(bot, 5, 6)  # a reader who wants less than half of the topic
    trading = paper(
        802,
        "Stock trading agents built on language models",
        days_ago=0.2,
        abstract="Stock trading agents: language models trading stock, agents trading.",
        now=NOW,
    )
    bot.arxiv.add(themed(801, LIKED, 0.2), trading)
    await bot.poll_and_deliver()
    alert = bot.fake.messages_to(USER)[-1]
    assert "study 801" in (alert.text or "") and "2611.00802" not in (alert.text or "")
    assert "1 held back as probably not for you" in (alert.text or "")
    assert ("🔕 show", "hb") in alert.buttons
    assert await bot.store.outbox_counts() == {"sent": 1}  # the held one's row: kept to show
    assert len(await bot.store.waiting_held_back(USER)) == 1
    [quiet], _ = await bot.press(USER, alert, "hb")
    assert "2611.00802" in (quiet.text or "")
    held = await paper_id(bot, "2611.00802")
    assert ("why? 1", f"w:{held}") in quiet.buttons
    _, why = await bot.press(USER, quiet, f"w:{held}")
    assert why["show_alert"] and "for you — most like your 👎" in why["text"], why
    _, again = await bot.press(USER, alert, "hb")
    assert again["text"] == "Nothing is held back now."
    # /taste off: alerts hold nothing back any more
    await bot.say(USER, "/taste off")
    bot.arxiv.add(paper(803, trading.title + ", again", abstract=trading.abstract, now=NOW))
    await bot.poll_and_deliver()
    assert "2611.00803" in (bot.fake.messages_to(USER)[-1].text or "")


async def test_no_holding_back_before_enough_ratings(taught: Bot) -> None:
    bot = taught
    await bot.ask(USER, "/follow language models")
    await teach(bot, 5, 2)  # one 👎 short of holding back
    bot.arxiv.add(themed(811, DISLIKED, 0.2))
    await bot.poll_and_deliver()
    assert "study 811" in (bot.fake.messages_to(USER)[-1].text or "")
    assert await bot.store.waiting_held_back(USER) == []


async def test_a_digest_lists_papers_in_the_readers_order(taught: Bot) -> None:
    bot = taught
    await bot.ask(USER, "/follow language models")
    await bot.ask(USER, "/digest daily 10:00")
    await teach(bot, 3, 2)
    fresh = [themed(900 + n, DISLIKED, 0.3) for n in range(7)]
    fresh += [themed(920, LIKED, 0.4), themed(921, LIKED, 0.5)]  # the oldest two
    bot.arxiv.add(*fresh)
    await bot.poll()
    bot.clock.advance(hours=2)
    await bot.deliver()
    digest = bot.fake.messages_to(USER)[-1]
    text = digest.text or ""
    assert "in your order, best first" in text
    # the two liked papers first, though they are the oldest; the rest folded behind "N more"
    first, second = text.index("study 92"), text.rindex("study 92")
    assert first < text.index("study 90") and second < text.index("study 90")
    assert "<blockquote expandable>4 more:" in text
    assert len(rate_buttons(digest)) == 2 * 9  # every paper, folded or not, can be rated


async def test_for_you_finds_what_the_topics_miss(taught: Bot) -> None:
    bot = taught
    none = await bot.say(USER, "/foryou")
    assert "No taste yet" in (none.text or "")
    await bot.ask(USER, '/follow "stock trading"')
    await teach(bot, 5, 3)
    [listed] = await bot.ask(USER, "/foryou")
    text = listed.text or ""
    assert text.startswith("✨ <b>For you</b>")
    # the one liked-theme paper not rated yet comes first; nothing the topic matched is listed
    assert text.index("study 605") < text.index("2. <a href=")
    assert "Stock trading" not in text
    pid = await paper_id(bot, "2611.00605")
    assert ("why? 1", f"w:{pid}") in listed.buttons
    _, why = await bot.press(USER, listed, f"w:{pid}")
    assert "for you — most like your 👍" in why["text"], why


GROUP, ADMIN_ID, MEMBER_ID = -4001, 777, 888


async def test_in_a_group_every_member_rates_and_admins_import(bot: Bot) -> None:
    bot.fake.set_chat_admins(GROUP, {ADMIN_ID})
    [card] = await bot.ask(GROUP, "/paper 2611.00001", user_id=MEMBER_ID, username="bob")
    pid = await paper_id(bot, "2611.00001")
    _, answer = await bot.press(GROUP, card, f"r:{pid}:+", user_id=MEMBER_ID, username="bob")
    assert answer["text"].startswith("👍 Noted")
    assert await bot.store.ratings_for(GROUP, [pid]) == {pid: 1}  # the group's taste
    # another member's tap on the same button undoes it for the group (one rating per paper)
    await bot.press(GROUP, card, f"r:{pid}:+", user_id=ADMIN_ID, username="ann")
    assert await bot.store.ratings_for(GROUP, [pid]) == {}
    [refused] = await bot.ask(GROUP, "/taste 2611.00002", user_id=MEMBER_ID, username="bob")
    assert "only this group's administrators" in (refused.text or "")
    [done] = await bot.ask(GROUP, "/taste 2611.00002", user_id=ADMIN_ID, username="ann")
    assert "Imported 1 liked paper" in (done.text or "")
    [summary] = await bot.ask(GROUP, "/taste", user_id=MEMBER_ID, username="bob")
    assert "1 👍 · 0 👎" in (summary.text or "")


async def test_ratings_move_with_a_group_that_becomes_a_supergroup(bot: Bot) -> None:
    [card] = await bot.ask(GROUP, "/paper 2611.00001", user_id=MEMBER_ID, username="bob")
    pid = await paper_id(bot, "2611.00001")
    await bot.press(GROUP, card, f"r:{pid}:-", user_id=MEMBER_ID, username="bob")
    new = -1004001
    await bot.ask(new, "/taste", chat_type="supergroup", user_id=MEMBER_ID, username="bob")
    assert await bot.store.migrate_chat(GROUP, new)  # the new id had talked to the bot already
    assert await bot.store.ratings_for(new, [pid]) == {pid: -1}
    assert await bot.store.rating_counts(GROUP) == (0, 0)
