"""The web pages over generated data (always) and the real listings (when ``../shared`` is
there): a real server on 127.0.0.1, checked against the CLI's JSON and the chat's wording."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from bot_harness import USER, bot_session, check_traffic, free_port, seed_papers
from browser import Browser, find_chromium
from conftest import requires_listings
from fake_arxiv import LISTINGS
from topicpulse.delivery.chats import share_query
from topicpulse.insight import momentum
from topicpulse.models import RunStats, iso, parse_iso
from topicpulse.sources.ingest import import_files
from topicpulse.store import Store
from topicpulse.synthetic import generate_papers
from topicpulse.topics.catalogue import sync_catalogue
from topicpulse.topics.matching import match_new_papers
from topicpulse.web.server import WebContext, build_web_app

pytestmark = pytest.mark.timeout(120)

NOW = momentum.as_of_day(date(2026, 11, 20))  # the end of that day, as --as-of means
SLUG = "rl-for-language-models"
RL_NAME = "RL for Language Models"


async def serve(store: Store, now: datetime, **extra: object) -> TestClient:
    context = WebContext(store, poll_seconds=1800, bot_username="topicpulse_bot", **extra)  # type: ignore[arg-type]
    context.clock = lambda: now
    client = TestClient(TestServer(build_web_app(context), host="127.0.0.1"))
    await client.start_server()
    return client


@pytest.fixture
async def generated(tmp_path: Path) -> AsyncIterator[tuple[Path, TestClient]]:
    db = tmp_path / "web.db"
    async with await Store.open(db, clock=lambda: NOW) as store:
        papers = generate_papers(start=(NOW - timedelta(weeks=13)).date(), days=91, per_weekday=60)
        await store.upsert_papers([p for p in papers if parse_iso(p.published) < NOW])
        await sync_catalogue(store)
        await match_new_papers(store, clock=lambda: NOW, alerts=False)
        client = await serve(store, NOW)
        try:
            yield db, client
        finally:
            await client.close()


async def cli_json(db: Path, *argv: str) -> dict:
    """What ``topicpulse <argv> --json`` prints, run as a user would (its own process)."""
    env = {**os.environ, "TOPICPULSE_DB": str(db)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "topicpulse", *argv, "--json", env=env, stdout=PIPE, stderr=PIPE
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return json.loads(out)  # type: ignore[no-any-return]


async def test_the_topic_page_agrees_with_the_cli_and_the_chat(
    generated: tuple[Path, TestClient],
) -> None:
    db, client = generated
    data = await (await client.get(f"/api/topics/{SLUG}")).json()
    day = (NOW - timedelta(days=1)).date().isoformat()  # NOW is the end of that day
    cli_m = await cli_json(db, "momentum", "--topic", SLUG, "--as-of", day)
    preview = await cli_json(db, "preview", "--topic", SLUG, "--as-of", day)
    assert data["momentum"] == cli_m
    assert data["latest"]["count"] == preview["count"] > 20
    async with await Store.open(db) as store:
        [topic] = [t for t in await store.topics(kind="catalogue") if t.slug == SLUG]
        m = await momentum.compute(store, topic=topic, as_of=NOW)
        since = iso(NOW - timedelta(days=28))
        latest = await store.matching_papers(topic_id=topic.id, since=since, until=iso(NOW))
    assert data["headline"] == momentum.headline(m)
    html = await (await client.get(f"/topics/{SLUG}")).text()
    assert f'<p class="headline">{momentum.headline(m)}</p>' in html
    counts = [int(c) for c in re.findall(r'data-count="(\d+)"', html)]
    assert counts == [c for _, c in m.weekly]
    assert f'Latest papers <span class="latest-count">{len(latest)}</span>' in html
    assert 'href="https://t.me/topicpulse_bot?start=follow_rl_for_language_models"' in html
    shown = re.findall(r'<h3><a href="https://arxiv.org/abs/([^"]+)">', html)
    assert shown == [p.arxiv_id for p in latest[:20]]
    second = await (await client.get(f"/topics/{SLUG}?page=2")).text()
    assert re.findall(r'<h3><a href="https://arxiv.org/abs/([^"]+)">', second) == [
        p.arxiv_id for p in latest[20:40]
    ]


async def test_catalogue_paper_and_query_pages(generated: tuple[Path, TestClient]) -> None:
    _, client = generated
    rows = await (await client.get("/api/topics")).json()
    assert len(rows) >= 50 and {"name", "slug", "last_4w", "weekly"} <= set(rows[0])
    html = await (await client.get("/")).text()
    assert f'<a href="/topics/{SLUG}">' in html
    data = await (await client.get(f"/api/topics/{SLUG}")).json()
    first = data["latest"]["papers"][0]["arxiv_id"]
    paper = await client.get(f"/papers/{first}")
    assert paper.status == 200 and "More like this" in await paper.text()
    query = await client.get("/q", params={"query": "grpo AND reasoning"})
    assert query.status == 200
    assert "<h1>grpo AND reasoning</h1>" in await query.text()


async def test_pages_are_cached_for_the_poll_interval(tmp_path: Path) -> None:
    clock = [0.0]
    async with await Store.open(tmp_path / "c.db") as store:
        await sync_catalogue(store)
        client = await serve(store, NOW, monotonic=lambda: clock[0])
        try:
            first = await client.get(f"/api/topics/{SLUG}")
            again = await client.get(f"/api/topics/{SLUG}")  # from the cache: sent again
            assert first.status == again.status == 200
            assert await first.json() == await again.json()
            assert again.content_type == "application/json"
            assert (await again.json())["latest"]["count"] == 0
            await store.upsert_papers(
                [p for p in generate_papers(start=NOW.date() - timedelta(days=3), days=2)]
            )
            await match_new_papers(store, clock=lambda: NOW, alerts=False)
            cached = await (await client.get(f"/api/topics/{SLUG}")).json()
            assert cached["latest"]["count"] == 0  # within the poll interval: the cached page
            clock[0] += 1801
            fresh = await (await client.get(f"/api/topics/{SLUG}")).json()
            assert fresh["latest"]["count"] > 0
        finally:
            await client.close()


async def test_the_ask_form_answers_from_the_topic(generated: tuple[Path, TestClient]) -> None:
    _, client = generated
    html = await (await client.get(f"/topics/{SLUG}", params={"question": "reward model"})).text()
    assert re.search(r"From \d+ papers on RL for Language Models:", html)
    assert html.count('<li class="passage">') >= 1
    hollow = await (await client.get(f"/topics/{SLUG}", params={"question": "what is it?"})).text()
    assert "Ask with at least one word about the subject" in hollow


CHROMIUM = find_chromium()
SCREENSHOT = os.environ.get("TOPICPULSE_SCREENSHOT")  # read before conftest clears TOPICPULSE_*


@pytest.mark.skipif(
    CHROMIUM is None, reason="no headless Chromium installed (apt install chromium)"
)
async def test_the_topic_page_in_headless_chromium(
    generated: tuple[Path, TestClient], tmp_path: Path
) -> None:
    """A real browser: no console errors, the chart drawn, the Ask form usable by keyboard and
    answered, nothing wider than a phone. The screenshot goes to ``TOPICPULSE_SCREENSHOT``
    when set (README's picture: docs/topic-page.png), else to a temporary folder."""
    _, client = generated
    assert CHROMIUM is not None
    async with Browser.launch(CHROMIUM) as browser:
        await browser.viewport(1000, 1500)
        await browser.open(str(client.make_url(f"/topics/{SLUG}")))
        assert await browser.evaluate("document.querySelector('h1').textContent") == RL_NAME
        chart = await browser.evaluate(
            """(() => { const s = document.querySelector('svg.chart');
                const r = s.getBoundingClientRect();
                return {width: r.width, height: r.height, bars: s.querySelectorAll('.bar').length,
                        label: s.getAttribute('aria-label'),
                        visible: getComputedStyle(s).visibility === 'visible'}; })()"""
        )
        assert chart["visible"] and chart["width"] > 300 and chart["height"] > 100
        assert chart["bars"] >= 10 and chart["label"]
        shot = await browser.screenshot()
        assert shot.startswith(b"\x89PNG")
        Path(SCREENSHOT or tmp_path / "topic-page.png").write_bytes(shot)

        # The Ask form, as a keyboard user fills it: focus the field, type, press Enter.
        await browser.evaluate("document.getElementById('question').focus()")
        await browser.type_text("reward model")
        await browser.loading(browser.press_enter)
        assert "question=reward+model" in await browser.evaluate("location.href")
        passages = await browser.evaluate("document.querySelectorAll('li.passage').length")
        assert passages >= 1

        await browser.viewport(390, 844)  # a phone: nothing sticks out sideways
        width = await browser.evaluate("document.documentElement.scrollWidth")
        assert width <= 390
        assert browser.errors == []


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("/q", {"query": "<script>alert(1)</script>"}, 200),
        ("/q", {"query": '"unclosed AND (x'}, 400),
        ("/q", {"query": "x" * 10_000}, 400),
        ("/q", {"query": "a" * 299 + "'"}, 200),
        ("/q", {}, 400),
        (f"/topics/{SLUG}", {"page": "-1"}, 400),
        (f"/topics/{SLUG}", {"page": "99999999"}, 400),
        (f"/topics/{SLUG}", {"question": "<img src=x onerror=alert(1)>"}, 200),
        ("/topics/no-such-topic", {}, 404),
        ("/papers/not-an-id", {}, 404),
        ("/api/q", {"query": "NOT"}, 400),
    ],
)
async def test_hostile_input_gets_an_escaped_page_or_a_clear_error(
    generated: tuple[Path, TestClient], path: str, params: dict[str, str], status: int
) -> None:
    _, client = generated
    response = await client.get(path, params=params)
    assert response.status == status
    body = await response.text()
    assert "<script>" not in body and "<img src=x" not in body
    if status >= 400 and not path.startswith("/api/") and len(params.get("query", "")) < 8_000:
        assert re.search(r'<p class="error">[^<]+</p>', body)  # ours; a 10 KB line is aiohttp's


async def test_health_is_liveness_and_freshness_is_asked_apart(tmp_path: Path) -> None:
    """/healthz (the platform's check) answers 200 from the first second, before any poll (a
    first deploy's long backfill); /healthz/fresh says whether arXiv was read recently
    (issue 23 §1: before, /healthz was 503 until a poll had succeeded)."""
    clock = [NOW]
    async with await Store.open(tmp_path / "h.db", clock=lambda: clock[0]) as store:
        client = await serve(store, NOW)
        try:
            live = await client.get("/healthz")
            body = await live.json()
            assert live.status == 200 and body["status"] == "ok" and body["fresh"] is False
            assert body["last_successful_poll"] is None
            fresh = await client.get("/healthz/fresh")
            assert fresh.status == 503  # nothing polled yet
            assert (await fresh.json())["status"] == "stale"
            clock[0] = NOW - timedelta(minutes=10)
            await store.finish_run(await store.start_run("poll"), RunStats(kind="poll"))
            ok = await client.get("/healthz/fresh")
            body = await ok.json()
            assert ok.status == 200 and body["status"] == "ok" and body["fresh"] is True
            assert body["seconds_since_poll"] == 600 and body["outbox_pending"] == 0
            assert body["alerts_due_chats"] == 0
        finally:
            await client.close()
        stale = await serve(store, NOW + timedelta(hours=2))  # 3 poll intervals = 1.5 h
        try:
            assert (await stale.get("/healthz/fresh")).status == 503
            assert (await stale.get("/healthz")).status == 200
        finally:
            await stale.close()


@requires_listings
async def test_the_topic_page_over_the_real_listings(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "real.db") as store:
        await import_files(store, [LISTINGS])
        await sync_catalogue(store)
        await match_new_papers(store, alerts=False)
        _, newest = await store.published_range()
        assert newest is not None
        now = datetime.combine(
            parse_iso(newest).date() + timedelta(days=1), datetime.min.time(), UTC
        )
        client = await serve(store, now)
        try:
            data = await (await client.get(f"/api/topics/{SLUG}")).json()
            [topic] = [t for t in await store.topics(kind="catalogue") if t.slug == SLUG]
            m = await momentum.compute(store, topic=topic, as_of=now)
            assert data["momentum"] == m.to_json() and m.last_4w > 20
            html = await (await client.get(f"/topics/{SLUG}")).text()
            assert f'Latest papers <span class="latest-count">{m.last_4w}</span>' in html
        finally:
            await client.close()


async def test_the_bot_serves_the_pages_beside_itself_when_a_port_is_set(tmp_path: Path) -> None:
    port = free_port()
    async with bot_session(
        tmp_path, papers=seed_papers(), TOPICPULSE_WEB_HOST="127.0.0.1", TOPICPULSE_WEB_PORT=port
    ) as bot:
        await bot.poll()
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            async with http.get("/healthz") as health:
                body = await health.json()
                assert health.status == 200 and body["delivery"] == "running"
            async with http.get(f"/topics/{SLUG}") as page:
                html = await page.text()
        username = bot.app.bot.username  # type: ignore[union-attr]
        assert f'href="https://t.me/{username}?start=follow_rl_for_language_models"' in html
        # The deep link is what /start understands.
        linked = await bot.say(USER, "/start follow_rl_for_language_models")
        assert (linked.plain_text or "").startswith("✅ Now following RL for Language Models")


async def test_a_query_page_links_a_code_and_the_bot_asks_before_following(
    tmp_path: Path,
) -> None:
    port = free_port()
    query = "grpo AND (reasoning OR alignment) AND NOT " + " AND NOT ".join(
        f"unrelatedword{n}" for n in range(6)
    )  # longer than a deep link's 64 characters
    async with bot_session(
        tmp_path, papers=seed_papers(), TOPICPULSE_WEB_HOST="127.0.0.1", TOPICPULSE_WEB_PORT=port
    ) as bot:
        await bot.poll()
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            pages = []
            for _ in range(2):  # the same query: the same code (the second from the cache)
                async with http.get("/q", params={"query": query}) as page:
                    assert page.status == 200
                    pages.append(await page.text())
        username = bot.app.bot.username  # type: ignore[union-attr]
        links = re.findall(rf'href="https://t\.me/{username}\?start=(q_[a-z2-7]+)"', pages[0])
        assert len(links) == 1 and len(links[0]) <= 64
        assert ">Follow this query<" in pages[0]
        assert links == re.findall(r"start=(q_[a-z2-7]+)", pages[1])
        assert await bot.store.shared_query(links[0][2:]) == query

        # The link shows the query and a button; nothing is followed until the tap.
        asked = await bot.say(USER, f"/start {links[0]}")
        assert query in (asked.plain_text or "")
        assert [label for label, _ in asked.buttons] == ["✅ Follow this query"]
        assert await bot.subscriptions(USER) == []
        sent, answer = await bot.press(USER, asked, asked.buttons[0][1])
        assert answer["text"].startswith("Following")
        assert [(m.plain_text or "").startswith("✅ Now following") for m in sent] == [True]
        assert await bot.subscriptions(USER) == [query]
        _, answer = await bot.press(USER, asked, asked.buttons[0][1])
        assert answer["text"] == "Already following"

        # A code the server never issued, a malformed one, a forged button: nothing followed.
        for payload in ("q_aaaaaaaaaa", "q_<b>x</b>", "q_"):
            unknown = await bot.say(2002, f"/start {payload}")
            assert (unknown.plain_text or "").startswith("That link is not valid")
        forged, answer = await bot.press(2002, asked, "fq:aaaaaaaaaa", forged=True)
        assert forged == [] and answer["text"] == "This button has expired."
        assert await bot.subscriptions(2002) == []

        # A query that reads like a catalogue name is followed as the query the page showed.
        code = await share_query(bot.store, "rl for language models")
        shown = await bot.say(3003, f"/start q_{code}")
        await bot.press(3003, shown, shown.buttons[0][1])
        [topic] = [s.topic for s in await bot.store.subscriptions(3003)]
        assert topic.is_custom and topic.query == "rl for language models"
        check_traffic(bot.fake)


async def test_a_polling_bot_opens_no_port_by_default(tmp_path: Path) -> None:
    async with bot_session(tmp_path) as bot:
        assert bot.pipeline.web_runner is None


async def test_replies_link_the_topic_page_when_the_pages_are_public(tmp_path: Path) -> None:
    async with bot_session(
        tmp_path, papers=seed_papers(), TOPICPULSE_PUBLIC_URL="https://pulse.example.org/"
    ) as bot:
        await bot.poll()
        page = f"https://pulse.example.org/topics/{SLUG}"
        [summary, _chart] = await bot.ask(USER, "/momentum RL for Language Models")
        assert ("🌐 Open topic page", page) in summary.buttons
        assert summary.buttons[0][0] == "❓ Ask about this topic"
        latest = await bot.say(USER, "/latest RL for Language Models")
        assert latest.buttons[-1] == ("🌐 Open topic page", page)  # after each paper's 👍 / 👎
        assert {label[0] for label, _ in latest.buttons[:-1]} == {"👍", "👎"}
        custom = await bot.ask(USER, "/follow grpo AND reasoning")
        assert custom
        [mine, _] = await bot.ask(USER, "/momentum grpo AND reasoning")
        assert [label for label, _ in mine.buttons] == ["❓ Ask about this topic"]  # no page
