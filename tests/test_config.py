"""Settings: defaults, environment variables (comma lists), the ``.env`` file of the working
folder, and one readable ``ConfigError`` line naming the variable for every bad value."""

from __future__ import annotations

from ipaddress import ip_network
from pathlib import Path

import pytest

from topicpulse.config import DEFAULT_CATEGORIES, ConfigError, Settings, load_settings

REQUIRED_DEFAULT_CATEGORIES = (
    "cs.AI", "cs.CL", "cs.LG", "cs.CV", "cs.IR", "cs.RO", "cs.NE", "cs.MA",
    "cs.GT", "cs.HC", "cs.SD", "cs.SE", "cs.CR", "eess.AS", "stat.ML",
)  # fmt: skip


def test_defaults() -> None:
    settings = load_settings()
    assert settings.telegram_bot_token is None
    assert settings.db == Path("topicpulse.db")
    assert settings.arxiv_api_url == "https://export.arxiv.org/api/query"
    assert settings.telegram_api_url == "https://api.telegram.org/bot"
    assert (settings.poll_seconds, settings.arxiv_delay_seconds) == (None, 3.0)
    assert settings.backfill_weeks == 12 and settings.fresh_seconds == 80 * 3600
    assert settings.arxiv_oai_url == "https://oaipmh.arxiv.org/oai" and settings.contact is None
    assert (settings.overlap_days, settings.arxiv_timeout_seconds, settings.arxiv_retries) == (
        7,
        60,
        4,
    )
    assert settings.admin_ids == []
    assert settings.categories == list(DEFAULT_CATEGORIES)
    assert settings.trusted_proxies == []  # no forwarding header is believed


def test_default_categories_cover_ai_and_ml() -> None:
    assert set(REQUIRED_DEFAULT_CATEGORIES) <= set(DEFAULT_CATEGORIES)
    assert len(set(DEFAULT_CATEGORIES)) == len(DEFAULT_CATEGORIES)
    Settings(categories=list(DEFAULT_CATEGORIES))  # every default passes the validator


def test_environment_variables_and_comma_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOPICPULSE_CATEGORIES", " cs.CL , stat.ML,,q-bio.NC ,hep-th ")
    monkeypatch.setenv("TOPICPULSE_ADMIN_IDS", "12, 34,-1001234")
    monkeypatch.setenv("TOPICPULSE_POLL_SECONDS", "90.5")
    monkeypatch.setenv("TOPICPULSE_DB", "/data/pulse.db")
    monkeypatch.setenv("TOPICPULSE_ARXIV_API_URL", "http://127.0.0.1:8080/api/query")
    monkeypatch.setenv("TOPICPULSE_ARXIV_DELAY_SECONDS", "0")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:TEST")
    settings = load_settings()
    assert settings.categories == ["cs.CL", "stat.ML", "q-bio.NC", "hep-th"]
    assert settings.admin_ids == [12, 34, -1001234]
    assert settings.poll_seconds == 90.5
    assert settings.db == Path("/data/pulse.db")
    assert settings.arxiv_api_url == "http://127.0.0.1:8080/api/query"
    assert settings.arxiv_delay_seconds == 0
    assert settings.telegram_bot_token == "123:TEST"


def test_trusted_proxies_are_addresses_and_networks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOPICPULSE_TRUSTED_PROXIES", " 10.0.0.0/8, 192.0.2.7 ,,2001:db8::/32 ")
    assert load_settings().trusted_proxies == [
        ip_network("10.0.0.0/8"),
        ip_network("192.0.2.7/32"),
        ip_network("2001:db8::/32"),
    ]
    monkeypatch.setenv("TOPICPULSE_TRUSTED_PROXIES", " ")
    assert load_settings().trusted_proxies == []
    overridden = load_settings(trusted_proxies=["fd00::/8", ip_network("172.16.0.0/12")])
    assert overridden.trusted_proxies == [ip_network("fd00::/8"), ip_network("172.16.0.0/12")]


def test_dotenv_in_the_working_folder_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Path.cwd() == tmp_path  # conftest runs every test in its own tmp_path
    (tmp_path / ".env").write_text(
        "# topicpulse settings\n"
        "TELEGRAM_BOT_TOKEN=42:FROM-DOTENV\n"
        'TOPICPULSE_CATEGORIES="cs.RO,cs.CV"\n'
        "TOPICPULSE_POLL_SECONDS=60\n"
        "TOPICPULSE_BACKFILL_WEEKS=2\n"
        "SOMETHING_ELSE=ignored\n",
        encoding="utf-8",
    )
    settings = load_settings()
    assert settings.telegram_bot_token == "42:FROM-DOTENV"
    assert settings.categories == ["cs.RO", "cs.CV"]
    assert (settings.poll_seconds, settings.backfill_weeks) == (60, 2)

    monkeypatch.setenv("TOPICPULSE_POLL_SECONDS", "120")  # the environment wins over .env
    assert load_settings().poll_seconds == 120

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # only the working folder's .env counts
    assert load_settings().telegram_bot_token is None


@pytest.mark.parametrize(
    ("name", "value", "detail"),
    [
        ("TOPICPULSE_POLL_SECONDS", "abc", "valid number"),
        ("TOPICPULSE_POLL_SECONDS", "0", "greater than 0"),
        ("TOPICPULSE_ARXIV_DELAY_SECONDS", "-1", "greater than or equal to 0"),
        ("TOPICPULSE_BACKFILL_WEEKS", "1.5", "valid integer"),
        ("TOPICPULSE_ARXIV_HOLIDAYS", "2026-12-24,christmas", "valid date"),
        ("TOPICPULSE_ARXIV_OAI_URL", "oaipmh.arxiv.org/oai", "must start with http"),
        ("TOPICPULSE_ARXIV_RETRIES", "many", "valid integer"),
        ("TOPICPULSE_OVERLAP_DAYS", "0", "greater than 0"),
        ("TOPICPULSE_CATEGORIES", "cs.CL,Not A Category", "'Not A Category' is not an arXiv"),
        ("TOPICPULSE_CATEGORIES", " , ", "at least one arXiv category"),
        ("TOPICPULSE_ADMIN_IDS", "12,alice", "valid integer"),
        ("TOPICPULSE_ARXIV_API_URL", "ftp://export.arxiv.org", "must start with http"),
        ("TOPICPULSE_TELEGRAM_API_URL", "api.telegram.org", "must start with http"),
        ("TOPICPULSE_TRUSTED_PROXIES", "10.0.0.0/8,router.internal", "'router.internal' is not"),
        ("TOPICPULSE_TRUSTED_PROXIES", "10.0.0.1/8", "10.0.0.1/8 has host bits set"),
        ("TOPICPULSE_TRUSTED_PROXIES", "10.0.0.0/33", "'10.0.0.0/33' is not an IP address"),
    ],
)
def test_invalid_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, detail: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as failure:
        load_settings()
    message = str(failure.value)
    assert message.startswith(f"invalid {name}: ")
    assert detail in message and "\n" not in message


def test_invalid_value_in_dotenv_names_the_variable(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("TOPICPULSE_ARXIV_TIMEOUT_SECONDS=soon\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^invalid TOPICPULSE_ARXIV_TIMEOUT_SECONDS: "):
        load_settings()


def test_overrides_by_field_name() -> None:
    settings = load_settings(categories=["cs.CL"], arxiv_delay_seconds=0)
    assert (settings.categories, settings.arxiv_delay_seconds) == (["cs.CL"], 0)
    with pytest.raises(ConfigError, match=r"^invalid TOPICPULSE_POLL_SECONDS: "):
        load_settings(poll_seconds=-5)
