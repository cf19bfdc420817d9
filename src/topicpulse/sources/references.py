"""A reader's own library as liked examples: BibTeX or RIS exports (Zotero, Mendeley, a .bib
file), read by maintained parsers (``bibtexparser`` 2, ``rispy``).

Each entry's arXiv id is found where exports put it — BibTeX ``eprint`` (with
``archivePrefix = arXiv``), a ``url`` or ``doi`` (10.48550/arXiv.…), a journal or note such as
"arXiv preprint arXiv:2401.01234", RIS ``UR``/``DO``/``N1``/``JO`` lines —, and its title and
abstract are kept for the entries that are not arXiv papers or not in the store. A file that
cannot be read is refused whole (``ReferenceError``, one line saying what and where): nothing
is ever half-imported.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_BYTES = 2_000_000  # a 2 MB export holds thousands of entries
MAX_ENTRIES = 5_000

_NEW_ID = r"\d{4}\.\d{4,5}"
_OLD_ID = r"[a-z-]+(?:\.[A-Z]{2})?/\d{7}"
_ARXIV = re.compile(
    rf"(?:arxiv(?:\.org/(?:abs|pdf)/|[:\s.]\s*)|10\.48550/arxiv\.)({_NEW_ID}|{_OLD_ID})",
    re.IGNORECASE,
)
_BARE = re.compile(rf"({_NEW_ID}|{_OLD_ID})(?:v\d+)?")
_RIS_TAG = re.compile(r"^[A-Z][A-Z0-9]  -", re.MULTILINE)
_BRACES = re.compile(r"[{}]")


class ReferenceError(ValueError):
    """A file that cannot be imported; the message is the one line the reader sees."""


@dataclass(frozen=True, slots=True)
class Reference:
    """One entry: its arXiv id (None: not an arXiv paper), title and abstract."""

    arxiv_id: str | None
    title: str
    abstract: str

    @property
    def item(self) -> str:
        """The rating key: the arXiv id, else "text:" and a digest of the title."""
        if self.arxiv_id:
            return self.arxiv_id
        digest = hashlib.blake2s(" ".join(self.title.casefold().split()).encode(), digest_size=8)
        return f"text:{digest.hexdigest()}"


def decode(data: bytes) -> str:
    """The file's text: UTF-8 (with or without a BOM), UTF-16 with a BOM, else Windows-1252
    (older Mendeley and JabRef exports); a file with NUL bytes is not text."""
    if len(data) > MAX_BYTES:
        raise ReferenceError(
            f"That file is {len(data) // 1000:,} kB; I read exports up to {MAX_BYTES // 1000:,} kB"
            " — export a collection instead of the whole library."
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    if b"\x00" in data:
        raise ReferenceError("That file is not text: send a BibTeX (.bib) or RIS (.ris) export.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def arxiv_id_in(values: Iterable[str]) -> str | None:
    """The first arXiv id any of these field values names (without version)."""
    for value in values:
        if match := _ARXIV.search(value):
            return match.group(1)
    return None


def _clean(text: str) -> str:
    return " ".join(_BRACES.sub("", text).split())


def parse_bibtex(text: str) -> list[Reference]:
    import bibtexparser

    library = bibtexparser.parse_string(text)
    if library.failed_blocks:
        block = library.failed_blocks[0]
        raise ReferenceError(
            f"Could not read the BibTeX entry that starts on line {block.start_line + 1}"
            " (an unclosed brace or quote?): fix it or export again; nothing was imported."
        )
    found = []
    for entry in library.entries:
        fields = {k.casefold(): str(f.value) for k, f in entry.fields_dict.items()}
        arxiv_id = None
        eprint = fields.get("eprint", "")
        prefix = fields.get("archiveprefix", fields.get("eprinttype", "arxiv"))
        if prefix.casefold() == "arxiv" and (bare := _BARE.fullmatch(eprint.strip())):
            arxiv_id = bare.group(1)
        places = ("url", "doi", "journal", "journaltitle", "note", "howpublished", "eprint")
        arxiv_id = arxiv_id or arxiv_id_in(fields.get(k, "") for k in places)
        found.append(
            Reference(arxiv_id, _clean(fields.get("title", "")), _clean(fields.get("abstract", "")))
        )
    return found


def parse_ris(text: str) -> list[Reference]:
    import rispy

    starts = len(re.findall(r"^TY  -", text, re.MULTILINE))
    ends = len(re.findall(r"^ER  -", text, re.MULTILINE))
    if starts != ends:
        raise ReferenceError(
            f"That RIS file has {starts} entries (TY lines) but {ends} ends (ER lines): is it"
            " cut short? Export it again; nothing was imported."
        )
    try:
        entries = rispy.loads(text)
    except Exception as exc:  # rispy raises bare IOError/ValueError/KeyError on bad input
        raise ReferenceError(
            f"Could not read that RIS file ({exc}); nothing was imported."
        ) from None
    found = []
    for entry in entries:
        places: list[str] = []
        for key in ("urls", "doi", "notes", "journal_name", "secondary_title", "url"):
            value = entry.get(key)
            places += value if isinstance(value, list) else [str(value)] if value else []
        title = entry.get("title") or entry.get("primary_title") or ""
        found.append(
            Reference(arxiv_id_in(places), _clean(title), _clean(entry.get("abstract", "")))
        )
    return found


def parse(data: bytes, name: str = "") -> tuple[list[Reference], int]:
    """The usable entries of a BibTeX or RIS export (told apart by name, else by content),
    each once, and how many entries were neither an arXiv paper nor had an abstract."""
    text = decode(data)
    ris = name.casefold().endswith((".ris", ".txt")) and bool(_RIS_TAG.search(text))
    ris = ris or (not name.casefold().endswith(".bib") and bool(re.search(r"^TY  -", text, re.M)))
    entries = parse_ris(text) if ris else parse_bibtex(text)
    if not entries:
        raise ReferenceError(
            "I found no entries in that file: send a BibTeX (.bib) or RIS (.ris) export, e.g."
            " Zotero's File → Export Library."
        )
    if len(entries) > MAX_ENTRIES:
        raise ReferenceError(
            f"That file has {len(entries):,} entries; I import up to {MAX_ENTRIES:,} at once."
        )
    usable = [e for e in entries if e.arxiv_id or e.abstract]
    if not usable:
        raise ReferenceError(
            "None of those entries is an arXiv paper or has an abstract, so there is nothing to"
            " learn from: export with abstracts, or send arXiv ids."
        )
    unique = list({e.item: e for e in reversed(usable)}.values())[::-1]
    return unique, len(entries) - len(usable)
