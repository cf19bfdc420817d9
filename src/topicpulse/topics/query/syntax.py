"""The query language's vocabulary: limits, fields, tokens as FTS5 splits them, the AST
(``Term``, ``And``, ``Or``, ``Not``) and the error a user must fix."""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata
from dataclasses import dataclass

MAX_QUERY_LENGTH = 300
MAX_NESTING = 8
MIN_PREFIX_LENGTH = 3

FIELDS: dict[str, str] = {
    "ti": "title",
    "abs": "abstract",
    "au": "authors",
    "cat": "categories",
}
"""Query-language field prefix → FTS5 column."""
COLUMNS: tuple[str, ...] = tuple(FIELDS.values())
PREFIX_OF = {column: name for name, column in FIELDS.items()}
FIELD_LIST = "ti: (title), abs: (abstract), au: (authors) or cat: (categories)"

OPERATORS = frozenset({"AND", "OR", "NOT", "ANDNOT"})
QUOTES = str.maketrans(dict.fromkeys("“”„‟＂", '"'))
FIELD_PREFIX = re.compile(r"([A-Za-z]+):")
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


class QueryError(ValueError):
    """A query the user must fix. ``message`` (also ``str(err)``) is one line fit to show the
    user; ``position`` is the 0-based character offset of the problem in the query."""

    def __init__(self, problem: str, position: int, fix: str) -> None:
        super().__init__(problem, position, fix)
        self.message = f"{problem} at position {position}: {fix}"
        self.position = position

    def __str__(self) -> str:
        return self.message


# --- tokens ---------------------------------------------------------------------------------


def is_token_char(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] in "LN" or category == "Co"


@functools.lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    folded = char.casefold()
    if len(folded) != 1:  # "ß" → "ss", "ﬁ" → "fi": unicode61 keeps these single characters
        folded = char.lower()
    decomposed = unicodedata.normalize("NFD", folded)
    if any(unicodedata.category(c) == "Mn" for c in decomposed):
        return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    return folded


def tokenize(text: str) -> list[str]:
    """Split text into tokens roughly as FTS5's ``unicode61 remove_diacritics 2`` does.

    Runs of letters, digits and private-use characters are tokens; everything else separates.
    Tokens are case-folded with diacritics removed: ``"Café GPT-4o"`` → ``["cafe", "gpt", "4o"]``.
    """
    if text.isascii():
        return _ASCII_TOKEN.findall(text.lower())
    tokens: list[str] = []
    current: list[str] = []
    for char in unicodedata.normalize("NFC", text):
        if is_token_char(char):
            current.append(_fold(char))
        elif current:
            tokens.append("".join(current))
            current = []
    if current:
        tokens.append("".join(current))
    return tokens


# --- AST ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Term:
    """A word (one token) or phrase (several), optionally a prefix and limited to one column.

    ``tokens`` are normalised as ``tokenize`` makes them; ``field`` is a column name from
    ``COLUMNS`` or None for all columns; with ``prefix`` the last token is a prefix.
    """

    tokens: tuple[str, ...]
    field: str | None = None
    prefix: bool = False

    def __post_init__(self) -> None:
        if not self.tokens or tokenize(" ".join(self.tokens)) != list(self.tokens):
            raise ValueError(f"tokens must be non-empty and normalised: {self.tokens!r}")
        if self.field is not None and self.field not in COLUMNS:
            raise ValueError(f"unknown column {self.field!r}")
        if self.prefix and len(self.tokens[-1]) < MIN_PREFIX_LENGTH:
            raise ValueError(f"prefix {self.tokens[-1]!r} is shorter than {MIN_PREFIX_LENGTH}")


@dataclass(frozen=True, slots=True)
class And:
    """All of ``items`` (at least two; none is an And or a Not — those are flattened)."""

    items: tuple[Node, ...]

    def __post_init__(self) -> None:
        if len(self.items) < 2 or any(isinstance(i, And | Not) for i in self.items):
            raise ValueError("And needs two or more items, none of them And or Not")


@dataclass(frozen=True, slots=True)
class Or:
    """Any of ``items`` (at least two; none is an Or — those are flattened)."""

    items: tuple[Node, ...]

    def __post_init__(self) -> None:
        if len(self.items) < 2 or any(isinstance(i, Or) for i in self.items):
            raise ValueError("Or needs two or more items, none of them Or")


@dataclass(frozen=True, slots=True)
class Not:
    """``positive`` and not ``negative``. Several exclusions are one Or; positive is no Not."""

    positive: Node
    negative: Node

    def __post_init__(self) -> None:
        if isinstance(self.positive, Not):
            raise ValueError("the positive side of Not cannot be a Not")


Node = Term | And | Or | Not


def items_of(kind: type[And] | type[Or], node: Node) -> tuple[Node, ...]:
    return node.items if isinstance(node, kind) else (node,)


def join_items(kind: type[And] | type[Or], items: list[Node]) -> Node:
    return items[0] if len(items) == 1 else kind(tuple(items))


def conjunction(positives: list[Node], negatives: list[Node]) -> Node:
    """``p1 AND p2 … NOT n1 NOT n2 …`` in canonical form: Not(And(p…), Or(n…))."""
    wanted: list[Node] = []
    unwanted: list[Node] = []
    for node in positives:
        if isinstance(node, Not):
            wanted.extend(items_of(And, node.positive))
            unwanted.extend(items_of(Or, node.negative))
        else:
            wanted.extend(items_of(And, node))
    for node in negatives:
        unwanted.extend(items_of(Or, node))
    positive = join_items(And, wanted)
    return Not(positive, join_items(Or, unwanted)) if unwanted else positive


def with_field(node: Node, old: str | None, new: str | None) -> Node:
    """Set ``new`` as the field of every term whose field is ``old``."""
    match node:
        case Term():
            return dataclasses.replace(node, field=new) if node.field == old else node
        case And() | Or():
            return type(node)(tuple(with_field(i, old, new) for i in node.items))
        case Not():
            return Not(with_field(node.positive, old, new), with_field(node.negative, old, new))


def _fields(node: Node) -> set[str | None]:
    match node:
        case Term():
            return {node.field}
        case And() | Or():
            return set().union(*(_fields(i) for i in node.items))
        case Not():
            return _fields(node.positive) | _fields(node.negative)


def common_field(node: Node) -> str | None:
    """The one field every term of a group has, if there is one."""
    fields = _fields(node)
    return next(iter(fields)) if len(fields) == 1 else None
