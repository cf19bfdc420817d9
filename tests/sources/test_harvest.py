"""Harvesting OAI-PMH from the fake arXiv: resumption tokens, flow control, expired tokens,
empty harvests and error documents, over the one connection the API lookups use."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta

import pytest

from fake_arxiv import FakeArxiv, html_page, make_paper, unavailable
from topicpulse.models import Paper
from topicpulse.sources import harvest as harvest_module
from topicpulse.sources.arxiv import ArxivClient, ArxivUnavailable
from topicpulse.sources.harvest import Harvest, OaiHarvester, oai_set
from topicpulse.sources.oai import OaiError

DAY = datetime(2026, 5, 20, 12, tzinfo=UTC)


def papers(count: int, *, category: str = "cs.CL") -> list[Paper]:
    return [
        make_paper(
            f"2605.{n:05d}", DAY - timedelta(hours=n), categories=(category,), title=f"Paper {n}"
        )
        for n in range(1, count + 1)
    ]


async def harvest_all(
    fake: FakeArxiv, set_spec: str = "cs", since: date | None = date(2026, 5, 1), **kwargs: float
) -> tuple[list[str], Harvest]:
    client = ArxivClient(fake.url, delay=kwargs.get("delay", 0.0), backoff=0.01)
    harvest = Harvest()
    ids: list[str] = []
    try:
        async for page in OaiHarvester(client, fake.oai_url).pages(set_spec, since, harvest):
            ids += [p.arxiv_id for p in page.papers]
    finally:
        await client.aclose()
    return ids, harvest


def test_sets_of_categories() -> None:
    assert oai_set("cs.AI") == "cs:cs:AI"
    assert oai_set("stat.ML") == "stat:stat:ML"
    assert oai_set("hep-th") == "physics:hep-th"
    assert oai_set("physics.optics") == "physics:physics:optics"
    assert oai_set("astro-ph.CO") == "physics:astro-ph:CO"


async def test_tokens_are_followed_to_the_last_page() -> None:
    async with FakeArxiv(papers(7)) as fake:
        fake.oai.page_size = 3
        ids, harvest = await harvest_all(fake)
        assert sorted(ids) == [f"2605.{n:05d}" for n in range(1, 8)]
        assert (harvest.pages, harvest.records, harvest.restarts) == (3, 7, 0)
        assert harvest.watermark == "2026-05-20T23:59:59Z"  # past the latest datestamp
        first, *rest = [r.params for r in fake.requests]
        assert first == {"verb": "ListRecords", "metadataPrefix": "arXiv", "set": "cs",
                         "from": "2026-05-01"}  # fmt: skip
        assert all(set(p) == {"verb", "resumptionToken"} for p in rest) and len(rest) == 2


async def test_only_the_set_and_the_days_asked_for() -> None:
    mixed = [*papers(3), make_paper("2605.09999", DAY, categories=("math.CO",))]
    async with FakeArxiv(mixed) as fake:
        fake.oai.datestamps["2605.00003"] = "2026-04-01"  # changed before the watermark
        ids, _ = await harvest_all(fake, "cs")
        assert sorted(ids) == ["2605.00001", "2605.00002"]
        ids, _ = await harvest_all(fake, "math:math:CO", since=None)
        assert ids == ["2605.09999"]


async def test_flow_control_is_waited_out_and_paced() -> None:
    async with FakeArxiv(papers(4)) as fake:
        fake.oai.page_size = 2
        fake.script(unavailable(retry_after="0"), html_page())
        with pytest.raises(OaiError):  # an HTML page in place of OAI-PMH is an error, not "none"
            await harvest_all(fake)
        fake.reset_requests()
        fake.script(unavailable(retry_after="0"))
        ids, harvest = await harvest_all(fake, delay=0.05)
        assert len(ids) == 4 and harvest.pages == 2
        assert [r.status for r in fake.requests] == [503, 200, 200]
        assert fake.max_in_flight == 1 and min(fake.start_gaps()) >= 0.05


async def test_an_expired_token_starts_the_harvest_again() -> None:
    async with FakeArxiv(papers(6)) as fake:
        fake.oai.page_size = 2
        client = ArxivClient(fake.url, delay=0.0, backoff=0.01)
        harvest = Harvest()
        seen: list[str] = []
        try:
            async for page in OaiHarvester(client, fake.oai_url).pages("cs", None, harvest):
                seen += [p.arxiv_id for p in page.papers]
                if harvest.pages == 2 and harvest.restarts == 0:
                    fake.oai.expire_tokens()  # a day passes between two pages
        finally:
            await client.aclose()
        assert harvest.restarts == 1
        assert sorted(set(seen)) == [f"2605.{n:05d}" for n in range(1, 7)]  # nothing lost
        assert len(seen) == 6 + 4  # the two pages before the expiry came again


async def test_tokens_that_keep_expiring_give_up() -> None:
    async with FakeArxiv(papers(6)) as fake:
        fake.oai.page_size = 2
        client = ArxivClient(fake.url, delay=0.0, backoff=0.01)
        try:
            with pytest.raises(ArxivUnavailable, match="expired 3 times"):
                async for _ in OaiHarvester(client, fake.oai_url).pages("cs", None):
                    fake.oai.expire_tokens()
        finally:
            await client.aclose()


async def test_nothing_changed_is_one_empty_page_and_errors_raise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with FakeArxiv(papers(2)) as fake:
        ids, harvest = await harvest_all(fake, since=date(2026, 6, 1))  # noRecordsMatch
        assert ids == [] and harvest.pages == 1 and len(fake.requests) == 1
        monkeypatch.setattr(harvest_module, "METADATA", "oai_dc")
        with pytest.raises(OaiError) as caught:
            await harvest_all(fake)
        assert caught.value.code == "cannotDisseminateFormat"


async def test_lookups_and_harvests_share_one_connection_and_the_delay() -> None:
    async with FakeArxiv(papers(6)) as fake:
        fake.oai.page_size = 2
        client = ArxivClient(fake.url, delay=0.05, backoff=0.01)

        async def harvest() -> int:
            return sum(
                [len(p.records) async for p in OaiHarvester(client, fake.oai_url).pages("cs", None)]
            )

        async def lookups() -> None:
            for _ in range(3):
                await client.search("cat:cs.CL", start=0, max_results=2)

        try:
            records, _ = await asyncio.gather(harvest(), lookups())
        finally:
            await client.aclose()
        assert records == 6
        assert len(fake.requests) == 6 and fake.max_in_flight == 1
        assert min(fake.start_gaps()) >= 0.05
