"""Webhook mode: the bot registers its address with a secret token, Telegram (the fake) POSTs
updates to the pages' server, a request without the right secret gets 403 and changes
nothing, and updates sent while the bot was down arrive once it is back.

The end-to-end tests of ``test_bot_e2e`` run over both transports (its ``bot`` fixture)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from telegram.error import BadRequest

from bot_harness import RL, USER, Bot, bot_session, check_traffic, free_port, seed_papers
from bot_process import BotProcess
from fake_arxiv import FakeArxiv
from fake_telegram import FakeTelegram
from topicpulse.bot.app import Pipeline
from topicpulse.bot.serving import register_webhook
from topicpulse.config import ConfigError, load_settings
from waiting import wait_for

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def _address(bot: Bot) -> str:
    assert bot.settings.webhook_url
    return bot.settings.webhook_url + "/telegram"


def _update(update_id: int, text: str, chat_id: int = USER) -> dict[str, Any]:
    user = {"id": chat_id, "is_bot": False, "first_name": "Eve"}
    return {
        "update_id": update_id,
        "message": {
            "message_id": 1,
            "date": 1_790_000_000,
            "chat": {"id": chat_id, "type": "private", "first_name": "Eve"},
            "from": user,
            "text": text,
            "entities": [{"type": "bot_command", "offset": 0, "length": text.find(" ")}],
        },
    }


async def _raw_post(bot: Bot, secret: bytes) -> int:
    """POST an update with a secret header of raw bytes (a client library would refuse)."""
    url = urlsplit(_address(bot))
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    body = b'{"update_id": 1}'
    writer.write(
        b"POST /telegram HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + SECRET_HEADER.encode()
        + b": "
        + secret
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\nConnection: close\r\n\r\n"
        + body
    )
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    writer.close()
    return status


async def test_updates_arrive_by_webhook_with_the_registered_secret(tmp_path: Path) -> None:
    async with bot_session(tmp_path, papers=seed_papers(), transport="webhook") as bot:
        registered = bot.fake.calls_to("setWebhook")
        assert len(registered) == 1
        assert registered[0].params["url"] == _address(bot)
        assert len(registered[0].params["secret_token"]) >= 32
        await bot.poll()
        followed = await bot.say(USER, f"/follow {RL}")
        assert (followed.plain_text or "").startswith(f"✅ Now following {RL}")
        assert bot.fake.calls_to("getUpdates") == []  # no long polling beside the webhook
        assert bot.fake.webhook_posts and {status for _, status in bot.fake.webhook_posts} == {200}
        check_traffic(bot.fake)


async def test_a_request_without_the_right_secret_gets_403_and_changes_nothing(
    tmp_path: Path,
) -> None:
    async with bot_session(tmp_path, papers=seed_papers(), transport="webhook") as bot:
        secret = bot.fake.calls_to("setWebhook")[0].params["secret_token"]
        forged = _update(900_001, f"/follow {RL}")
        async with aiohttp.ClientSession() as http:
            for headers in ({}, {SECRET_HEADER: "wrong"}, {SECRET_HEADER: secret[:-1]}):
                async with http.post(_address(bot), json=forged, headers=headers) as answer:
                    assert answer.status == 403
            good = {SECRET_HEADER: secret}
            assert await _raw_post(bot, b"\xff\xfe") == 403  # bytes that are not text: not a 500
            async with http.post(_address(bot), data=b"{not json", headers=good) as answer:
                assert answer.status == 400
            async with http.post(_address(bot), json={"message": {}}, headers=good) as answer:
                assert answer.status == 400  # no update_id: not an update
            # Unreadable although it has an id: dropped with a log line, not resent forever.
            broken = {"update_id": 799_999, "message": "not an object"}
            async with http.post(_address(bot), json=broken, headers=good) as answer:
                assert answer.status == 200
            # Telegram's own requests are not limited like a browser's pages (60 a minute).
            for n in range(70):
                async with http.post(
                    _address(bot), json={"update_id": 800_000 + n}, headers=good
                ) as answer:
                    assert answer.status == 200
        await bot.idle()
        assert await bot.subscriptions(USER) == []
        assert bot.fake.messages_to(USER) == []
        # The real path still works after all that.
        followed = await bot.say(USER, f"/follow {RL}")
        assert (followed.plain_text or "").startswith(f"✅ Now following {RL}")
        assert await bot.subscriptions(USER) == [RL]


async def test_updates_sent_while_the_bot_is_down_arrive_once_it_is_back_and_polling_resumes(
    tmp_path: Path,
) -> None:
    async with bot_session(tmp_path, papers=seed_papers(), transport="webhook") as bot:
        await bot.poll()
        await bot.stop()
        bot.fake.user_sends(USER, f"/follow {RL}")
        await wait_for(
            lambda: any(status == 0 for _, status in bot.fake.webhook_posts),
            timeout=10,
            what="a refused delivery",
        )
        assert bot.fake.pending_updates == 1  # kept by "Telegram" until the bot answers
        await bot.start()
        await bot.idle()
        answers = [m for m in bot.fake.messages_to(USER) if m.text]
        assert len(answers) == 1 and "Now following" in (answers[0].plain_text or "")
        assert await bot.subscriptions(USER) == [RL]
        assert len(bot.fake.calls_to("setWebhook")) == 2  # registered again at the start
        # Back to long polling: nothing to undo by hand, polling removes the webhook.
        await bot.stop()
        bot.settings = bot.settings.model_copy(update={"webhook_url": None, "web_port": None})
        await bot.start()
        listed = await bot.say(USER, "/list")
        assert RL in (listed.plain_text or "")
        assert bot.fake.calls_to("deleteWebhook") and bot.fake.calls_to("getUpdates")
        check_traffic(bot.fake)


async def test_an_update_sent_while_the_bot_stops_is_refused_then_arrives_after_the_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the Application stops it no longer reads its queue: an update taken then would be
    lost, so it gets 503 and Telegram (the fake) sends it again later."""
    async with bot_session(tmp_path, papers=seed_papers(), transport="webhook") as bot:
        await bot.poll()
        release = asyncio.Event()
        stop_delivery = Pipeline.stop_delivery

        async def slow_stop(self: Pipeline, grace: float = 3.0) -> None:
            await release.wait()  # the server still runs; the Application has stopped
            await stop_delivery(self, grace)

        monkeypatch.setattr(Pipeline, "stop_delivery", slow_stop)
        app = bot.app
        assert app is not None
        stopping = asyncio.create_task(bot.stop())
        await wait_for(lambda: not app.running, timeout=10, what="the Application to stop")
        bot.fake.user_sends(USER, f"/follow {RL}")
        await wait_for(
            lambda: any(status == 503 for _, status in bot.fake.webhook_posts),
            timeout=10,
            what="a 503 for the update",
        )
        release.set()
        await stopping
        monkeypatch.undo()
        await bot.start()
        await bot.idle()
        assert await bot.subscriptions(USER) == [RL]
        check_traffic(bot.fake)


async def test_registration_is_retried_over_telegram_errors_and_a_refusal_is_final(
    tmp_path: Path,
) -> None:
    async with bot_session(tmp_path, papers=seed_papers(), transport="webhook") as bot:
        await bot.stop()
        bot.fake.fail_next("setWebhook", status=502, description="Bad Gateway", count=2)
        await bot.start()  # the third try is accepted
        assert [c.result for c in bot.fake.calls_to("setWebhook")] == ["ok", 502, 502, "ok"]
        followed = await bot.say(USER, f"/follow {RL}")
        assert (followed.plain_text or "").startswith(f"✅ Now following {RL}")
        assert bot.app is not None
        bot.fake.fail_next(
            "setWebhook", status=400, description="Bad Request: bad webhook: Failed to resolve host"
        )
        with pytest.raises(BadRequest, match=r"(?i)failed to resolve host"):
            await register_webhook(bot.app.bot, _address(bot), "s" * 32, backoff=0.01)
        assert len(bot.fake.calls_to("setWebhook")) == 5  # a refusal is not retried

        # Refused at a start: the start fails with Telegram's reason and undoes itself (the
        # database closed, the port free), rather than leaving a half-started bot.
        await bot.stop()
        bot.fake.fail_next("setWebhook", status=400, description="Bad Request: bad webhook")
        with pytest.raises(BadRequest, match=r"(?i)bad webhook"):
            await bot.start()
        assert bot.app is None
        port = bot.settings.web_port
        assert port is not None
        with socket.socket() as probe:  # no server listens there any more
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", port))
            probe.listen()
        await bot.start()  # and the next start works
        listed = await bot.say(USER, "/list")
        assert RL in (listed.plain_text or "")


def test_webhook_settings_are_checked() -> None:
    settings = load_settings(
        telegram_bot_token="1:x", TOPICPULSE_WEBHOOK_URL="https://pulse.example.org"
    )
    assert settings.listen_port == 8080  # a webhook needs the server even without a port
    assert load_settings(telegram_bot_token="1:x").listen_port is None  # polling: no port
    assert load_settings(TOPICPULSE_WEBHOOK_SECRET="s" * 32).webhook_secret == "s" * 32
    for secret in ("has spaces" * 4, "short"):
        with pytest.raises(ConfigError, match="TOPICPULSE_WEBHOOK_SECRET"):
            load_settings(TOPICPULSE_WEBHOOK_SECRET=secret)
    for url in (
        "pulse.example.org",
        "http://pulse.example.org",  # Telegram posts to HTTPS only
        "https://pulse.example.org/bot",  # the server answers at /telegram, not under a path
        "https://pulse.example.org/?x=1",
    ):
        with pytest.raises(ConfigError, match="TOPICPULSE_WEBHOOK_URL"):
            load_settings(TOPICPULSE_WEBHOOK_URL=url)
    assert load_settings(TOPICPULSE_WEBHOOK_URL="https://pulse.example.org/").webhook_url


async def test_topicpulse_run_in_webhook_mode_answers_and_stops_cleanly_on_sigterm(
    tmp_path: Path,
) -> None:
    """The real command (``python -m topicpulse run``) in webhook mode: it registers, answers
    an update Telegram POSTs, and on SIGTERM shuts down and exits 0."""
    port = free_port()
    async with FakeTelegram() as fake, FakeArxiv() as arxiv:
        bot = BotProcess(
            {
                "TELEGRAM_BOT_TOKEN": fake.token,
                "TOPICPULSE_TELEGRAM_API_URL": fake.base_url,
                "TOPICPULSE_ARXIV_API_URL": arxiv.url,
                "TOPICPULSE_ARXIV_OAI_URL": arxiv.oai_url,
                "TOPICPULSE_DB": str(tmp_path / "bot.db"),
                "TOPICPULSE_BACKFILL_WEEKS": "0",
                "TOPICPULSE_ARXIV_DELAY_SECONDS": "0",
                "TOPICPULSE_WEBHOOK_URL": f"http://127.0.0.1:{port}",
                "TOPICPULSE_WEB_HOST": "127.0.0.1",
                "TOPICPULSE_WEB_PORT": str(port),
            },
            tmp_path / "bot.log",
        )
        await bot.start()
        try:
            await wait_for(lambda: fake.calls_to("setWebhook"), timeout=60, what="setWebhook")
            fake.user_sends(USER, "/start")
            await wait_for(lambda: fake.messages_to(USER), timeout=30, what="the welcome")
        finally:
            code = await bot.stop()
        assert fake.calls_to("getUpdates") == []
    log = (tmp_path / "bot.log").read_text()
    assert code == 0, log
    assert "topicpulse stopped; database closed" in log
    assert fake.token not in log


async def test_a_rating_tap_arrives_by_webhook(tmp_path: Path) -> None:
    """A tap comes with the whole message under the button (its entities dropped before it is
    read: ``intake``); the rating is stored and ticked as over long polling."""
    async with bot_session(tmp_path, papers=seed_papers(), transport="webhook") as bot:
        await bot.poll()
        card = await bot.say(USER, "/paper 2611.00001")
        assert bot.fake.message(USER, card.message_id)["entities"]  # type: ignore[index]
        found = await bot.store.get_paper("2611.00001")
        assert found is not None
        _, answer = await bot.press(USER, card, f"r:{found.id}:+")
        assert answer["text"].startswith("👍 Noted")
        assert await bot.store.ratings_for(USER, [found.id]) == {found.id: 1}
        assert [c.ok for c in bot.fake.calls_to("editMessageReplyMarkup")] == [True]
        check_traffic(bot.fake)
