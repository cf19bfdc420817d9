"""Webhook mode: the bot registers its address with a secret token, Telegram (the fake) POSTs
updates to the pages' server, a request without the right secret gets 403 and changes
nothing, and updates sent while the bot was down arrive once it is back.

The end-to-end tests of ``test_bot_e2e`` run over both transports (its ``bot`` fixture)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from test_bot_e2e import RL, USER, Bot, bot_session, check_traffic, seed_papers
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


def test_webhook_settings_are_checked() -> None:
    settings = load_settings(
        telegram_bot_token="1:x", TOPICPULSE_WEBHOOK_URL="https://pulse.example.org"
    )
    assert settings.listen_port == 8080  # a webhook needs the server even without a port
    assert load_settings(telegram_bot_token="1:x").listen_port is None  # polling: no port
    with pytest.raises(ConfigError, match="TOPICPULSE_WEBHOOK_SECRET"):
        load_settings(TOPICPULSE_WEBHOOK_SECRET="has spaces")
    with pytest.raises(ConfigError, match="TOPICPULSE_WEBHOOK_URL"):
        load_settings(TOPICPULSE_WEBHOOK_URL="pulse.example.org")
