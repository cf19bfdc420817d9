"""Harvesting arXiv's OAI-PMH interface: every record of a set changed since a day, page by
page (the intake rounds of ``ingest`` drive it).

Requests go through the ``ArxivClient`` the API lookups use, so the two interfaces share one
connection and arXiv's delay between any two requests; its retries handle flow control (503
with Retry-After), other 5xx answers and dropped connections. A harvest follows resumption
tokens to the last page. An expired token (``badResumptionToken``) starts the harvest again
from its first request, at most ``max_restarts`` times: pages already handed out come again,
and the store's upsert reads them as unchanged, so nothing is lost and nothing is stored
twice. The caller advances its watermark (the next harvest's ``from``) only after the last
page; ``Harvest.watermark`` keeps the first page's ``responseDate``, which arXiv's
documentation suggests, though the intake uses the newest datestamp it read (a day whose
update had not loaded yet is then read again).

Pages are parsed in a worker process (``offload``). With a ``keep`` (the intake's: store the
page's papers), each page is also kept there, and only its records' headers come back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pickle
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import date

from topicpulse import offload
from topicpulse.sources.arxiv import ArxivClient, ArxivUnavailable
from topicpulse.sources.oai import (
    BAD_TOKEN,
    OaiError,
    OaiPage,
    list_headers,
    parse_list_records,
    parse_packed,
)

log = logging.getLogger(__name__)
METADATA = "arXiv"
MAX_RESTARTS = 2
MAX_PAGES = 10_000  # a bound on one harvest: a server that never ends its list is an error
# Run on each page where it was parsed (a worker process: so it must pickle, e.g. a frozen
# dataclass of a module's); what it returns comes back as the page's ``kept``.
Keep = Callable[[OaiPage], object]


def oai_set(category: str) -> str:
    """The OAI-PMH set of an arXiv category: ``cs.AI`` → ``cs:cs:AI``, ``hep-th`` →
    ``physics:hep-th``, ``stat.ML`` → ``stat:stat:ML`` (the new server's group:archive:cat)."""
    archive, _, sub = category.partition(".")
    group = archive if archive in GROUPS else "physics"
    return f"{group}:{archive}:{sub}" if sub else f"{group}:{archive}"


GROUPS = frozenset({"cs", "econ", "eess", "math", "q-bio", "q-fin", "stat"})


@dataclass(slots=True)
class Harvest:
    """What one harvest did: pages read, requests it took, times it started again."""

    pages: int = 0
    records: int = 0
    restarts: int = 0
    watermark: str = ""  # the first page's responseDate: the next harvest's from


class OaiHarvester:
    def __init__(self, client: ArxivClient, url: str, *, max_restarts: int = MAX_RESTARTS):
        self.client = client
        self.url = url
        self.max_restarts = max_restarts

    async def _page(self, params: dict[str, str | int], keep: Keep | None = None) -> OaiPage:
        body = await self.client.get_body(params, self.url)
        if keep is not None:
            return await offload.run(parse_and_keep, body, keep)
        # Parsed in a worker process, not a thread: parsing a page of 2,000 records holds the
        # GIL for ~100 ms at a time (one C call), and every reply would wait for it. The
        # records come back in pickled parts, unpickled one at a time between other work.
        page, parts = await offload.run(parse_packed, body)
        for part in parts:
            page.records.extend(pickle.loads(part))  # (from our own worker process)
            await asyncio.sleep(0)
        return page

    async def header_pages(self, set_spec: str, day: date) -> AsyncIterator[list[tuple[str, str]]]:
        """The headers, (id, datestamp), of the records of the set changed on or after
        ``day``, a page at a time (small requests: no metadata). The caller stops reading
        once it has seen what it looks for."""
        params: dict[str, str | int] = {
            "verb": "ListIdentifiers", "metadataPrefix": METADATA, "from": day.isoformat(),
        }  # fmt: skip
        if set_spec:
            params["set"] = set_spec
        for _ in range(MAX_PAGES):
            body = await self.client.get_body(params, self.url)
            # (in a worker process too: a day's headers are thousands, ~50 ms of parsing)
            headers, token = await offload.run(list_headers, body)
            yield headers
            if token is None:
                return
            params = {"verb": "ListIdentifiers", "resumptionToken": token}

    async def pages(
        self,
        set_spec: str,
        since: date | None,
        harvest: Harvest | None = None,
        *,
        resume: str | None = None,
        keep: Keep | None = None,
    ) -> AsyncIterator[OaiPage]:
        """Every page of ``ListRecords`` for ``set_spec`` from ``since`` (inclusive; None:
        everything), in order; with ``resume``, from that resumption token on (an interrupted
        harvest; if it has expired, from the first page again). ``harvest`` collects the
        figures as it goes; ``keep`` is run on each page in the worker process that parsed it
        (the page's records then come without their papers). Raises ``ArxivUnavailable`` when
        arXiv does not answer, ``OaiError`` for an error document."""
        harvest = harvest if harvest is not None else Harvest()
        first: dict[str, str | int] = {"verb": "ListRecords", "metadataPrefix": METADATA}
        if set_spec:
            first["set"] = set_spec
        if since is not None:
            first["from"] = since.isoformat()
        params = first
        if resume:
            params = {"verb": "ListRecords", "resumptionToken": resume}
        while True:
            try:
                page = await self._page(params, keep)
            except OaiError as exc:
                if exc.code != BAD_TOKEN or params is first:
                    raise
                if harvest.restarts >= self.max_restarts:
                    raise ArxivUnavailable(
                        f"OAI-PMH resumption tokens expired {harvest.restarts + 1} times"
                    ) from None
                harvest.restarts += 1
                log.warning("OAI-PMH token expired after %d pages: harvesting again", harvest.pages)
                params = first
                continue
            if params is first or not harvest.watermark:
                harvest.watermark = page.response_date
            harvest.pages += 1
            harvest.records += len(page.records)
            yield page
            if page.token is None:
                return
            if harvest.pages >= MAX_PAGES:
                raise ArxivUnavailable(f"OAI-PMH harvest did not end after {MAX_PAGES} pages")
            params = {"verb": "ListRecords", "resumptionToken": page.token.value}


def parse_and_keep(data: bytes, keep: Keep) -> OaiPage:
    """In a worker process: parse a ``ListRecords`` page and ``keep`` it there. The page goes
    back with its records' headers only: the papers were kept where they were parsed."""
    page = parse_list_records(data)
    page.kept = keep(page)
    page.records = [dataclasses.replace(r, paper=None) for r in page.records]
    return page
