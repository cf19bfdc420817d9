"""OAI-PMH ListRecords pages read into papers: arXiv's recorded responses (when ../shared has
them) and pages we write for each case the recordings do not show; a page parsed in a worker
process comes back whole, in parts, and its errors too."""

from __future__ import annotations

import pickle

import pytest

from conftest import NO_REAL_DATA, SHARED
from topicpulse import offload
from topicpulse.sources import oai
from topicpulse.sources.oai import BAD_TOKEN, OaiError, parse_list_records

OAI_DIR = SHARED / "arxiv-oai"
requires_oai = pytest.mark.skipif(not (OAI_DIR / "oai_1.xml").is_file(), reason=NO_REAL_DATA)

HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
    "<responseDate>2026-05-23T03:01:02Z</responseDate>"
    '<request verb="ListRecords" metadataPrefix="arXiv" set="cs">http://127.0.0.1/oai</request>'
)


def record(arxiv_id: str, body: str, *, status: str = "", day: str = "2026-05-22") -> str:
    status_attr = f' status="{status}"' if status else ""
    metadata = (
        f'<metadata><arXiv xmlns="http://arxiv.org/OAI/arXiv/"><id>{arxiv_id}</id>{body}'
        "</arXiv></metadata>"
        if not status
        else ""
    )
    return (
        f"<record><header{status_attr}><identifier>oai:arXiv.org:{arxiv_id}</identifier>"
        f"<datestamp>{day}</datestamp><setSpec>cs:cs:CL</setSpec></header>{metadata}</record>"
    )


def page(*records: str, token: str = "") -> bytes:
    return (HEAD + "<ListRecords>" + "".join(records) + token + "</ListRecords></OAI-PMH>").encode()


FULL = (
    "<created>2026-04-30</created><updated>2026-05-22</updated>"
    "<authors><author><keyname>Lovelace</keyname><forenames>Ada</forenames>"
    "<affiliation>Analytical Engines Ltd</affiliation></author>"
    "<author><keyname>Turing</keyname><forenames>Alan M.</forenames><suffix>Jr</suffix></author>"
    "</authors><title>Reward  models\n  &amp; &lt;b&gt; $\\alpha$</title>"
    "<categories>cs.CL cs.LG cs.CL</categories><comments>9 pages</comments>"
    "<doi>10.1/x</doi><abstract>  We study\n rewards. </abstract>"
)


def test_a_record_becomes_a_paper() -> None:
    parsed = parse_list_records(page(record("2604.00001", FULL)))
    assert parsed.response_date == "2026-05-23T03:01:02Z" and parsed.token is None
    [one] = parsed.records
    assert one.datestamp == "2026-05-22" and one.sets == ("cs:cs:CL",) and one.revised
    paper = one.paper
    assert paper is not None
    assert paper.title == "Reward models & <b> $\\alpha$"
    assert paper.authors == ("Ada Lovelace", "Alan M. Turing Jr")
    assert paper.affiliations == ("Analytical Engines Ltd",)
    assert paper.categories == ("cs.CL", "cs.LG") and paper.primary_category == "cs.CL"
    assert paper.published == "2026-04-30T00:00:00Z"
    assert paper.updated == "2026-05-22T00:00:00Z"
    assert paper.version == 2  # at least: the arXiv format has no version numbers
    assert (paper.comment, paper.doi, paper.abstract) == ("9 pages", "10.1/x", "We study rewards.")


def test_a_first_version_deleted_records_and_incomplete_ones() -> None:
    first = "<created>2026-05-21</created><title>T</title><categories>cs.AI</categories>"
    no_title = "<created>2026-05-21</created><categories>cs.AI</categories>"
    parsed = parse_list_records(
        page(
            record("2605.00002", first),
            record("2605.00003", "", status="deleted"),
            record("2605.00004", no_title),
        )
    )
    assert [r.arxiv_id for r in parsed.records] == ["2605.00002", "2605.00003"]
    fresh, gone = parsed.records
    assert fresh.paper is not None and fresh.paper.version == 1 and not fresh.revised
    assert fresh.paper.updated == fresh.paper.published
    assert gone.deleted and gone.paper is None
    assert parsed.skipped == 1 and [p.arxiv_id for p in parsed.papers] == ["2605.00002"]


def test_resumption_tokens_and_the_last_page() -> None:
    token = (
        '<resumptionToken cursor="2000" completeListSize="3120"'
        ' expirationDate="2026-05-24T03:01:02Z">abc|2001</resumptionToken>'
    )
    parsed = parse_list_records(page(token=token))
    assert parsed.token is not None
    assert parsed.token.value == "abc|2001" and parsed.token.cursor == 2000
    assert parsed.token.complete_list_size == 3120
    assert parsed.token.expires == "2026-05-24T03:01:02Z"
    last = parse_list_records(
        page(token='<resumptionToken cursor="3000" completeListSize="3120"/>')
    )
    assert last.token is None


def test_no_records_is_an_empty_last_page_and_other_errors_raise() -> None:
    empty = HEAD + '<error code="noRecordsMatch">Nothing matches.</error></OAI-PMH>'
    parsed = parse_list_records(empty.encode())
    assert parsed.records == [] and parsed.token is None
    expired = HEAD + f'<error code="{BAD_TOKEN}">The token has  expired</error></OAI-PMH>'
    with pytest.raises(OaiError) as caught:
        parse_list_records(expired.encode())
    assert caught.value.code == BAD_TOKEN and "The token has expired" in str(caught.value)
    for body in (b"<html>503 first byte timeout</html>", b"<OAI-PMH", b""):
        with pytest.raises(OaiError) as bad:
            parse_list_records(body)
        assert bad.value.code == "malformed"


async def test_a_page_parsed_in_a_worker_comes_back_in_parts_and_so_do_its_errors() -> None:
    many = [record(f"2605.{n:05d}", FULL) for n in range(oai.PACKED_RECORDS * 2 + 7)]
    body = page(*many)
    whole = parse_list_records(body)
    packed, parts = await offload.run(oai.parse_packed, body)
    assert len(parts) == 3 and packed.records == []
    assert [r for part in parts for r in pickle.loads(part)] == whole.records
    assert (packed.response_date, packed.token, packed.skipped) == (
        whole.response_date,
        whole.token,
        whole.skipped,
    )
    expired = HEAD + f'<error code="{BAD_TOKEN}">The token has expired</error></OAI-PMH>'
    with pytest.raises(OaiError) as caught:  # raised in the worker, the same error here
        await offload.run(oai.parse_packed, expired.encode())
    assert caught.value.code == BAD_TOKEN and "The token has expired" in str(caught.value)


@requires_oai
def test_arxivs_recorded_pages() -> None:
    new_server = parse_list_records((OAI_DIR / "oai_1.xml").read_bytes())
    assert new_server.token is None and new_server.skipped == 0
    first = new_server.records[0]
    assert first.arxiv_id == "2504.11237" and first.datestamp == "2026-01-05"
    assert first.paper is not None and first.paper.title == "Periodic table for highly charged ions"
    assert first.paper.authors[0] == "Chunhai Lyu"
    assert first.paper.categories[0] == "physics.atom-ph"
    assert first.paper.published == "2025-04-15T00:00:00Z" and first.revised
    assert first.paper.abstract.startswith("Mendeleev's periodic table")
    old_server = parse_list_records((OAI_DIR / "oai_3.xml").read_bytes())
    assert all(r.paper is not None for r in old_server.records)
    with_ref = [r.paper for r in old_server.records if r.paper and r.paper.journal_ref]
    assert with_ref and all("\n" not in p.title for p in with_ref)
    # oai_dc carries no arXiv metadata: every record is skipped, the token still read
    dublin_core = parse_list_records((OAI_DIR / "oai_4.xml").read_bytes())
    assert dublin_core.records == [] and dublin_core.skipped == 5
    assert dublin_core.token is not None and dublin_core.token.complete_list_size == 1162
