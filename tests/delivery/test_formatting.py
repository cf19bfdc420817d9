"""Message formatting: whatever papers and topics contain, every message is valid Telegram HTML
within Telegram's limits; long lists split between papers; digests group by topic."""

from __future__ import annotations

import dataclasses
import itertools
import re
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telegram_html import validate_telegram_html
from topicpulse.delivery import formatting
from topicpulse.delivery.formatting import (
    MAX_CAPTION,
    MAX_MESSAGE,
    Alert,
    alert_messages,
    digest_messages,
    momentum_line,
    momentum_text,
    pack_digest,
    paper_block,
    paper_card,
    paper_list,
    spike_caption,
    tg_len,
)
from topicpulse.insight.momentum import Momentum, check_spike, week_starts
from topicpulse.models import StoredPaper, Topic

PROPERTY = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                            HealthCheck.too_slow]
)  # fmt: skip
ALLOWED_TAGS = {"b", "i", "a", "code", "pre", "blockquote"}
AS_OF = datetime(2026, 5, 23, tzinfo=UTC)
_ids = itertools.count(1)

AWKWARD = [
    "<", "&", ">", '"', "'", "&amp;", "&lt;b&gt;", "<b>bold</b>", "</a>", "<a href='x'>",
    "$x<y$", "$$\\frac{a}{b}$$", "a & b < c > d", "🚀🔥👩‍🔬", "🇺🇦", "\u200b\u200d", "ﬁ ß Ω",
    "\x00", "\n\n\n", "   ", "", "\t", "&#0;", "&#x110000;", "<<<<>>>>", "&&&&",
]  # fmt: skip

texts = st.one_of(
    st.text(),
    st.sampled_from(AWKWARD),
    st.lists(st.sampled_from(AWKWARD), max_size=40).map("".join),
    st.builds(lambda piece, n: (piece * n)[:10_000], st.text(min_size=1, max_size=8),
              st.integers(min_value=1_000, max_value=10_000)),  # ~10 kB
)  # fmt: skip
authors = st.one_of(
    st.lists(texts, max_size=5),
    st.builds(  # collaborations: hundreds of names (drawn cheaply, from one name)
        lambda name, n: [f"{name} {i}" for i in range(n)],
        texts,
        st.integers(min_value=50, max_value=500),
    ),
)
categories = st.sampled_from(["cs.CL", "cs.AI", "cs.LG", "stat.ML", "hep-th", "q-bio.NC"])


@st.composite
def papers(draw: st.DrawFn) -> StoredPaper:
    n = next(_ids)
    stamp = f"2026-05-{n % 28 + 1:02d}T00:00:00Z"
    primary = draw(categories)
    return StoredPaper(
        id=n,
        arxiv_id=f"2605.{n:05d}",
        version=1,
        title=draw(texts),
        abstract=draw(texts),
        authors=tuple(draw(authors)),
        primary_category=primary,
        categories=(primary,),
        published=stamp,
        updated=stamp,
        stored_at=stamp,
    )


@st.composite
def topics(draw: st.DrawFn) -> Topic:
    n = next(_ids)
    return Topic(id=n, kind="custom", slug=None, name=draw(texts), description="",
                 query=draw(texts), fts='"x"')  # fmt: skip


alerts = st.builds(Alert, papers(), st.lists(topics(), max_size=5))


def _momentum(topic: str | None, query: str, counts: list[int]) -> Momentum:
    last, prev = sum(counts[-4:]), sum(counts[-8:-4])
    return Momentum(
        topic=topic, query=query, as_of=AS_OF, last_4w=last, prev_4w=prev,
        change_pct=(last - prev) / prev * 100 if prev else None,
        share_pct=last / (last + 1000) * 100, total=sum(counts),
        weekly=list(zip(week_starts(AS_OF), counts, strict=True)),
    )  # fmt: skip


momenta = st.builds(
    _momentum,
    st.one_of(st.none(), texts),
    texts,
    st.lists(st.integers(min_value=0, max_value=10**7), min_size=12, max_size=12),
)


def assert_valid(message: str, limit: int = MAX_MESSAGE) -> str:
    """A message Telegram accepts with parse_mode=HTML: parses, only simple tags, fits."""
    ok, error, visible = validate_telegram_html(message)
    assert ok, f"{error}: {message[:300]!r}"
    assert 0 < visible <= limit
    assert tg_len(message) <= limit
    tags = re.findall(r"<(/?)([A-Za-z][\w-]*)", message)
    assert {name for _, name in tags} <= ALLOWED_TAGS
    stack: list[str] = []
    for closing, name in tags:  # balanced and properly nested
        if closing:
            assert stack and stack.pop() == name
        else:
            stack.append(name)
    assert stack == []
    assert all(href.startswith("https://arxiv.org/") for href in re.findall(r'href="([^"]*)"',
                                                                           message))  # fmt: skip
    return message


def _abs_link(paper: StoredPaper) -> str:
    return f'href="https://arxiv.org/abs/{paper.arxiv_id}"'


def _each_once(messages: list[str], papers_: list[StoredPaper]) -> None:
    joined = "".join(messages)
    for paper in papers_:
        assert joined.count(_abs_link(paper)) == 1, paper.arxiv_id


# ---------------------------------------------------------------------------- properties
@PROPERTY
@given(st.lists(alerts, max_size=8))
def test_alert_messages_are_valid_and_carry_every_paper_once(batch: list[Alert]) -> None:
    messages = alert_messages(batch)
    assert (messages == []) == (batch == [])
    for message in messages:
        assert_valid(message)
    _each_once(messages, [a.paper for a in batch])
    if len(batch) == 1:
        assert messages == [paper_block(batch[0])]


@PROPERTY
@given(st.lists(alerts, max_size=8), st.sampled_from(["daily", "weekly", "<b>&"]))
def test_digest_messages_are_valid_and_carry_every_paper_once(
    batch: list[Alert], period: str
) -> None:
    messages = digest_messages(batch, period=period)
    assert (messages == []) == (batch == [])
    for message in messages:
        assert_valid(message)
    _each_once(messages, [a.paper for a in batch])


@PROPERTY
@given(st.lists(papers(), max_size=8), st.booleans(), st.lists(topics(), max_size=6))
def test_paper_list_is_valid(papers_: list[StoredPaper], tagged: bool, tags: list[Topic]) -> None:
    tag_map = {p.id: tags for p in papers_} if tagged else None
    messages = paper_list(papers_, header="🔎 <b>12 papers match</b> <i>your query</i>",
                          tags=tag_map)  # fmt: skip
    assert messages
    for message in messages:
        assert_valid(message)
    _each_once(messages, papers_)


@PROPERTY
@given(momenta, st.one_of(st.none(), texts))
def test_momentum_texts_are_valid(m: Momentum, name: str | None) -> None:
    text = assert_valid(momentum_text(m, name=name))
    assert text.startswith("📊 <b>")
    assert_valid(momentum_line(m))


@PROPERTY
@given(momenta)
def test_spike_captions_are_valid_captions(m: Momentum) -> None:
    check = check_spike(m)
    reason = check.reason or "last week 6 papers vs 0.6 ± 0.5 over the 8 weeks before"
    assert_valid(spike_caption(m, reason), MAX_CAPTION)


@PROPERTY
@given(momenta, texts)
def test_spike_captions_with_any_reason_stay_within_the_visible_limit(
    m: Momentum, reason: str
) -> None:
    ok, error, visible = validate_telegram_html(spike_caption(m, reason))
    assert ok, error
    assert visible <= MAX_CAPTION


# ---------------------------------------------------------------------------- examples
def _paper(n: int, title: str, *, authors: tuple[str, ...] = ("Ada Lovelace", "Alan Turing"),
           category: str = "cs.CL") -> StoredPaper:  # fmt: skip
    stamp = f"2026-05-{n % 28 + 1:02d}T00:00:00Z"
    return StoredPaper(
        id=n, arxiv_id=f"2605.{n:05d}", version=1, title=title, abstract="",
        authors=authors, primary_category=category, categories=(category,),
        published=stamp, updated=stamp, stored_at=stamp,
    )  # fmt: skip


def _topic(n: int, name: str) -> Topic:
    return Topic(id=n, kind="catalogue", slug=f"t{n}", name=name, description="", query="q",
                 fts='"q"')  # fmt: skip


def test_two_hundred_alerts_split_between_papers() -> None:
    rl, agents = _topic(1, "RL for Language Models"), _topic(2, "LLM <Agents> & Tools")
    batch = [
        Alert(_paper(n, f"Paper {n}: {'a long & <careful> title ' * 8}"), [rl, agents][: n % 3])
        for n in range(1, 201)
    ]
    messages = alert_messages(batch)
    assert len(messages) > 1
    for message in messages:
        assert_valid(message)
    _each_once(messages, [a.paper for a in batch])
    # split only between whole paper blocks, in order, header on the first message only
    assert messages[0].startswith("🆕 <b>200 new papers</b>\n\n")
    blocks = [paper_block(a, n) for n, a in enumerate(batch, start=1)]  # numbered like 👍 / 👎
    rebuilt = [m.removeprefix("🆕 <b>200 new papers</b>\n\n").split("\n\n") for m in messages]
    assert list(itertools.chain.from_iterable(rebuilt)) == blocks
    assert all(tg_len(m) > MAX_MESSAGE - 800 for m in messages[:-1])  # packed, not one per paper


def test_alert_block_content() -> None:
    paper = _paper(7, "Reward <Models> & “Hacking”", authors=("A", "B", "C", "D", "E"))
    block = paper_block(Alert(paper, [_topic(1, "RL"), _topic(2, "Safety & Alignment")]))
    assert block == (
        '<b><a href="https://arxiv.org/abs/2605.00007">Reward &lt;Models&gt; &amp; “Hacking”'
        "</a></b>\n"
        "A, B, C +2\n"
        'cs.CL · 2026-05-08 · <a href="https://arxiv.org/pdf/2605.00007">PDF</a>\n'
        "#RL · #Safety &amp; Alignment"
    )
    assert alert_messages([Alert(paper, [])]) == [block.rsplit("\n", 1)[0]]


def test_a_block_too_long_for_one_message_is_cut_between_lines() -> None:
    quotes = '"' * 400
    paper = _paper(1, quotes, authors=(quotes,) * 10)
    tags = [_topic(n, quotes) for n in range(6)]
    assert tg_len(paper_block(Alert(paper, tags))) > MAX_MESSAGE
    (message,) = alert_messages([Alert(paper, tags)])
    assert_valid(message)
    assert _abs_link(paper) in message
    assert message.endswith("\n…")


def test_an_abstract_of_quotes_is_shortened_to_fit_not_dropped() -> None:
    """Escaped, "'" is six characters: a 1,000-quote abstract made the card too long for a
    message, and the whole abstract was cut off (found by the property above)."""
    paper = dataclasses.replace(_paper(2, "Quotes"), abstract="'" * 1_000)
    (message,) = alert_messages([Alert(paper, [])])
    assert message == paper_block(Alert(paper, []))
    assert_valid(message)
    quote = re.search(r"<blockquote expandable>(.*)</blockquote>", message)
    assert quote is not None and quote.group(1).startswith("&#x27;" * 100)


def test_alert_messages_of_nothing_is_no_message() -> None:
    assert alert_messages([]) == []


def test_digest_groups_by_first_matching_topic() -> None:
    rl, agents, safety = _topic(1, "RL for Language Models"), _topic(2, "Agents"), _topic(3, "S&P")
    batch = [
        Alert(_paper(1, "One"), [rl, agents]),
        Alert(_paper(2, "Two"), [agents]),
        Alert(_paper(3, "Three"), [rl]),
        Alert(_paper(4, "Four <x>"), [safety, rl]),
        Alert(_paper(5, "Five"), []),
        Alert(_paper(6, "Six"), [rl]),
    ]
    (message,) = digest_messages(batch, period="daily")
    assert_valid(message)
    assert message.split("\n") == [
        "📬 <b>Your daily digest</b>: 6 new papers",
        "",
        "<b>3 new in RL for Language Models</b>",
        '1. <a href="https://arxiv.org/abs/2605.00001">One</a> — Ada Lovelace et al. · cs.CL',
        '2. <a href="https://arxiv.org/abs/2605.00003">Three</a> — Ada Lovelace et al. · cs.CL',
        '3. <a href="https://arxiv.org/abs/2605.00006">Six</a> — Ada Lovelace et al. · cs.CL',
        "",
        "<b>1 new in Agents</b>",
        '4. <a href="https://arxiv.org/abs/2605.00002">Two</a> — Ada Lovelace et al. · cs.CL',
        "",
        "<b>1 new in S&amp;P</b>",
        '5. <a href="https://arxiv.org/abs/2605.00004">Four &lt;x&gt;</a> — Ada Lovelace et al.'
        " · cs.CL",
        "",
        "<b>1 new in Other</b>",
        '6. <a href="https://arxiv.org/abs/2605.00005">Five</a> — Ada Lovelace et al. · cs.CL',
    ]


def test_digest_of_one_paper_and_of_none() -> None:
    (message,) = digest_messages([Alert(_paper(1, "Solo", authors=()), [])], period="weekly")
    assert message == (
        "📬 <b>Your weekly digest</b>: 1 new paper\n\n<b>1 new in Other</b>\n"
        '1. <a href="https://arxiv.org/abs/2605.00001">Solo</a> —  · cs.CL'
    )
    assert digest_messages([], period="daily") == []


def test_large_digest_splits_and_counts_every_group() -> None:
    named = [_topic(n, f"Topic {n} & more") for n in range(1, 6)]
    batch = [Alert(_paper(n, "t" * 250), [named[n % 5]]) for n in range(1, 301)]
    messages = digest_messages(batch, period="daily")
    assert len(messages) > 1
    for message in messages:
        assert_valid(message)
    _each_once(messages, [a.paper for a in batch])
    joined = "\n".join(messages)
    for topic in named:
        assert joined.count(f"<b>60 new in {topic.name.replace('&', '&amp;')}</b>") == 1
    for message in messages:  # a group heading is never left at the end of a message
        assert not message.rstrip().endswith("</b>"), message[-200:]


@pytest.mark.parametrize("most", [1, 2, 3])
def test_a_digest_asked_for_at_most_n_messages_stops_writing_at_the_overflow(most: int) -> None:
    named = [_topic(n, f"Topic {n}") for n in range(1, 6)]
    batch = [Alert(_paper(n, "t" * 250), [named[n % 5]]) for n in range(1, 301)]
    whole = pack_digest(batch, period="daily")
    assert len(whole) > most + 1
    written: list[int] = []
    real_line = formatting.digest_line

    def counting(alert: Alert, number: int | None = None) -> str:
        written.append(alert.paper.id)
        return real_line(alert, number)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(formatting, "digest_line", counting)
        short = pack_digest(batch, period="daily", most=most)
    assert short[:most] == whole[:most]  # the same messages as far as they go
    assert len(short) == most + 1  # … and one more, unfinished: it does not fit
    kept = sum(len(ids) for _, ids in whole[:most])
    assert len(written) == kept + 1  # no entry written past the first that overflows
    assert pack_digest(batch[:3], period="daily", most=most) == pack_digest(
        batch[:3], period="daily"
    )  # what fits comes back whole


@pytest.mark.parametrize("count", [0, 1, 25, 400])
def test_paper_list_numbers_every_paper(count: int) -> None:
    listed = [_paper(n, f"Title {n}") for n in range(1, count + 1)]
    messages = paper_list(listed, header="<b>Latest</b>")
    for message in messages:
        assert_valid(message)
    joined = "\n".join(messages)
    assert [int(n) for n in re.findall(r"^(\d+)\. ", joined, flags=re.M)] == list(
        range(1, count + 1)
    )
    assert messages[0].startswith("<b>Latest</b>")


def test_momentum_text_wording() -> None:
    counts = [0, 0, 0, 0, 5, 5, 5, 6, 9, 9, 9, 9]
    m = _momentum("RL <for> LMs", "rl", counts)
    assert momentum_text(m) == (
        "📊 <b>RL &lt;for&gt; LMs</b>\n36 papers in the last four weeks, up 71% on the four"
        " weeks before. 3.5% of all new papers.\n57 papers in all · 12 weeks: ▁▁▁▁▅▅▅▆████"
    )
    assert momentum_line(m) == "▁▁▁▁▅▅▅▆████ <b>RL &lt;for&gt; LMs</b>: 36 (+71%)"
    assert spike_caption(m, "4-week count up 71% (21 → 36)") == (
        "📈 <b>RL &lt;for&gt; LMs is spiking</b>\n36 papers in the last four weeks, up 71% on"
        " the four weeks before. 3.5% of all new papers.\n<i>4-week count up 71% (21 → 36)</i>"
    )


# ------------------------------------------------------------------------- the paper card
def _card_paper(n: int, abstract: str, **extra: str | None) -> StoredPaper:
    return dataclasses.replace(_paper(n, f"Card {n}"), abstract=abstract, **extra)


def test_a_card_carries_its_abstract_collapsed_its_note_and_every_tag_followed_first() -> None:
    paper = _card_paper(
        3, "We bound $x<y$ & show   <b>it</b>.", journal_ref=None, comment="Accepted at ICML 2026"
    )
    followed = [_topic(2, "RL for Language Models")]
    others = [_topic(5, "Knowledge Distillation"), _topic(2, "RL for Language Models")]
    block = paper_block(Alert(paper, followed, others))
    lines = block.split("\n")
    assert lines[3] == "<i>Accepted at ICML 2026</i>"
    assert lines[4] == (
        "<blockquote expandable>We bound $x&lt;y$ &amp; show &lt;b&gt;it&lt;/b&gt;.</blockquote>"
    )
    # followed tags first and marked (bold); a tag the chat follows is not repeated
    assert lines[5] == "<b>#RL for Language Models</b> · #Knowledge Distillation"
    # the authors' institutions, when arXiv gives them, under the authors
    places = ("Lab <A> & Co", "B", "C", "D")
    placed = paper_block(Alert(dataclasses.replace(paper, affiliations=places), followed))
    assert placed.split("\n")[2] == "🏛 Lab &lt;A&gt; &amp; Co · B · C +1"
    assert_valid(block)
    # a journal reference wins over the comment
    with_ref = dataclasses.replace(paper, journal_ref="Phys. Rev. D 1 & 2")
    assert "<i>Phys. Rev. D 1 &amp; 2</i>" in paper_block(Alert(with_ref, followed))


def test_a_long_abstract_is_shortened_inside_its_quote_and_every_message_stays_valid() -> None:
    hostile = "<&> $\\alpha$ " * 2_000  # ~26 kB of characters that all grow when escaped
    batch = [Alert(_card_paper(n, hostile), [_topic(1, "RL")]) for n in range(1, 30)]
    messages = alert_messages(batch)
    for message in messages:
        assert_valid(message)
        assert message.count("<blockquote expandable>") == message.count("</blockquote>")
    _each_once(messages, [a.paper for a in batch])
    quote = re.search(r"<blockquote expandable>(.*?)</blockquote>", messages[0])
    assert quote is not None and quote.group(1).endswith("…")
    # lists (digests, /latest, /search) carry a shorter abstract than an alert's card
    listed = paper_list([a.paper for a in batch[:3]], header="<b>Latest</b>")
    assert all(m.count("<blockquote expandable>") == m.count("</blockquote>") for m in listed)
    digest = digest_messages(batch[:3], period="daily")
    assert "<blockquote expandable>" in digest[0]
    shown = re.search(r"<blockquote expandable>(.*?)</blockquote>", listed[0])
    assert shown is not None and len(shown.group(1)) < len(quote.group(1))


def test_the_full_card_unfolds_as_much_abstract_as_one_message_holds() -> None:
    hostile = "<&> " * 5_000
    paper = dataclasses.replace(
        _card_paper(9, hostile, comment="c & d"),
        title="T <" * 200,
        affiliations=tuple(f"Place {n} &" for n in range(20)),
    )
    tags = [_topic(n, f"Topic {n} & <x>" * 6) for n in range(12)]
    card = paper_card(paper, tags[:2], tags)
    assert_valid(card)
    assert card.count("<blockquote>") == 1 and "<blockquote expandable>" not in card
    assert tg_len(card) > MAX_MESSAGE - 600  # as much of the abstract as fits
    assert card.endswith('">HTML</a>')
    short = paper_card(_card_paper(10, "Short & sweet."), [], [])
    assert "<blockquote>Short &amp; sweet.</blockquote>" in short
