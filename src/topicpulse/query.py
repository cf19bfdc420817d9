"""The topic query language: parse, validate, normalise and compile to SQLite FTS5.

This module owns the boolean queries researchers write to describe a topic. A query is parsed
into a small immutable AST, which is compiled to an FTS5 MATCH expression (every token is
emitted as a quoted FTS5 string, so user text never reaches FTS5 raw), rendered back to
canonical text (``normalise``, used to share identical custom topics), or evaluated in pure
Python (``matches``).

Grammar (EBNF)::

    query    = or_expr ;
    or_expr  = and_expr , { "OR" , and_expr } ;
    and_expr = operand , { [ "AND" ] , operand | ( "NOT" | "ANDNOT" | "AND" "NOT" ) , operand } ;
    operand  = [ field ] , ( word | phrase | "(" , or_expr , ")" ) ;
    field    = ( "ti" | "abs" | "au" | "cat" ) , ":" ;     (* directly before its operand *)
    phrase   = '"' , { character - '"' } , '"' , [ "*" ] ;
    word     = wordchar , { wordchar } ;       (* wordchar: not a space, '"', "(" or ")" *)

* NOT and ANDNOT are binary "and not"; NOT and AND bind tighter than OR (``a b OR c`` is
  ``(a AND b) OR c``). There is no unary NOT: a query must say what it wants, not only what it
  excludes.
* Words are split into tokens like FTS5's unicode61 tokenizer (letters and digits; everything
  else separates), so ``GPT-4o`` is the phrase "gpt 4o" and ``cat:cs.LG`` the phrase "cs lg".
* A word ending in ``*`` right after a letter or digit is a prefix (``optim*``); its last token
  needs at least 3 characters. Elsewhere ``*`` just separates (``cat:cs.*`` is ``cat:cs``).
  The index is Porter-stemmed and FTS5 stems a prefix as if it were a word, so on its own a
  prefix would miss every word whose stem is shorter than the prefix (``evaluat*``: the index
  holds "evaluation" as "evalu"). The compiled expression therefore also ORs in one word for
  each such stem (``evaluat*`` → ``"evaluat" * OR "evaluate"``), and a prefix finds the words
  that begin with it, as typed.
* A field applies to every term of a group (``ti:(a OR b)``); a field inside overrides it.
* Curly quotes (“ ” „) count as straight ones: phones type them.

Operator case: ``AND``, ``OR``, ``NOT`` and ``ANDNOT`` in upper case are always operators. In
lower or mixed case (``or``, ``And``) they are operators too, except where no operator can
stand: as the first or last word of the query or of a parenthesised group, or right after a
field (``ti:not``); there they are searched as ordinary words. Quote them (``"or"``) to search
them anywhere.

Limits: at most ``MAX_QUERY_LENGTH`` characters and ``MAX_NESTING`` levels of parentheses
(which keeps the compiled expression within FTS5's parser stack).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from topicpulse.stemming import stem_texts

__all__ = [
    "COLUMNS",
    "FIELDS",
    "MAX_NESTING",
    "MAX_QUERY_LENGTH",
    "MIN_PREFIX_LENGTH",
    "And",
    "Node",
    "Not",
    "Or",
    "QueryError",
    "Term",
    "compile_query",
    "matches",
    "normalise",
    "parse",
    "to_fts",
    "tokenize",
    "unparse",
]

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
_PREFIX_OF = {column: name for name, column in FIELDS.items()}
_FIELD_LIST = "ti: (title), abs: (abstract), au: (authors) or cat: (categories)"

_OPERATORS = frozenset({"AND", "OR", "NOT", "ANDNOT"})
_QUOTES = str.maketrans(dict.fromkeys("“”„‟＂", '"'))
_FIELD = re.compile(r"([A-Za-z]+):")
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


def _is_token_char(char: str) -> bool:
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
        if _is_token_char(char):
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


def _items(kind: type[And] | type[Or], node: Node) -> tuple[Node, ...]:
    return node.items if isinstance(node, kind) else (node,)


def _join(kind: type[And] | type[Or], items: list[Node]) -> Node:
    return items[0] if len(items) == 1 else kind(tuple(items))


def _conjunction(positives: list[Node], negatives: list[Node]) -> Node:
    """``p1 AND p2 … NOT n1 NOT n2 …`` in canonical form: Not(And(p…), Or(n…))."""
    wanted: list[Node] = []
    unwanted: list[Node] = []
    for node in positives:
        if isinstance(node, Not):
            wanted.extend(_items(And, node.positive))
            unwanted.extend(_items(Or, node.negative))
        else:
            wanted.extend(_items(And, node))
    for node in negatives:
        unwanted.extend(_items(Or, node))
    positive = _join(And, wanted)
    return Not(positive, _join(Or, unwanted)) if unwanted else positive


def _replace_field(node: Node, old: str | None, new: str | None) -> Node:
    """Set ``new`` as the field of every term whose field is ``old``."""
    match node:
        case Term():
            return dataclasses.replace(node, field=new) if node.field == old else node
        case And() | Or():
            return type(node)(tuple(_replace_field(i, old, new) for i in node.items))
        case Not():
            return Not(
                _replace_field(node.positive, old, new), _replace_field(node.negative, old, new)
            )


def _fields(node: Node) -> set[str | None]:
    match node:
        case Term():
            return {node.field}
        case And() | Or():
            return set().union(*(_fields(i) for i in node.items))
        case Not():
            return _fields(node.positive) | _fields(node.negative)


def _common_field(node: Node) -> str | None:
    """The one field every term of a group has, if there is one."""
    fields = _fields(node)
    return next(iter(fields)) if len(fields) == 1 else None


# --- lexing ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Lexeme:
    kind: str  # "word", "phrase", "field", "op", "(" or ")"
    pos: int
    end: int
    text: str  # as typed (a phrase without its quotes)
    value: str = ""  # "op": the operator; "field": the column
    prefix: bool = False  # "phrase": followed by "*"


def _show(text: str, limit: int = 24) -> str:
    """User text, on one line and short, for an error message."""
    shown = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _lex(text: str) -> list[_Lexeme]:
    lexemes: list[_Lexeme] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
        elif char in "()":
            lexemes.append(_Lexeme(char, i, i + 1, char))
            i += 1
        elif char == '"':
            close = text.find('"', i + 1)
            if close < 0:
                raise QueryError("unclosed quote", i, 'add a closing " or remove this one')
            prefix = text.startswith("*", close + 1)
            end = close + 1 + prefix
            inside = text[i + 1 : close]
            if inside.rstrip().endswith("*"):  # "group polic*" means the prefix form too
                inside, prefix = inside.rstrip()[:-1], True
            lexemes.append(_Lexeme("phrase", i, end, inside, prefix=prefix))
            i = end
        elif field := _FIELD.match(text, i):
            name = field.group(1).lower()
            if name not in FIELDS:
                raise QueryError(
                    f'unknown field "{_show(field.group(0))}"', i, f"use {_FIELD_LIST}"
                )
            lexemes.append(_Lexeme("field", i, field.end(), field.group(0), FIELDS[name]))
            i = field.end()
        else:
            end = i
            while end < len(text) and not text[end].isspace() and text[end] not in '()"':
                end += 1
            lexemes.append(_Lexeme("word", i, end, text[i:end]))
            i = end
    return lexemes


def _mark_operators(lexemes: list[_Lexeme]) -> list[_Lexeme]:
    """Turn keyword words into operators, following the case rule in the module docstring."""
    marked = []
    for i, lexeme in enumerate(lexemes):
        keyword = lexeme.text.upper()
        if lexeme.kind == "word" and keyword in _OPERATORS:
            before = lexemes[i - 1] if i > 0 else None
            after = lexemes[i + 1] if i + 1 < len(lexemes) else None
            fielded = before is not None and before.kind == "field" and before.end == lexeme.pos
            between = before is not None and after is not None
            between = between and before.kind != "(" and after.kind != ")"
            if not fielded and (lexeme.text == keyword or between):
                lexeme = dataclasses.replace(lexeme, kind="op", value=keyword)
        marked.append(lexeme)
    return marked


def _check_parentheses(lexemes: list[_Lexeme]) -> None:
    open_: list[_Lexeme] = []
    for lexeme in lexemes:
        if lexeme.kind == "(":
            open_.append(lexeme)
            if len(open_) > MAX_NESTING:
                raise QueryError(
                    "too many nested parentheses",
                    lexeme.pos,
                    f"use at most {MAX_NESTING} levels of parentheses",
                )
        elif lexeme.kind == ")":
            if not open_:
                raise QueryError(
                    "unbalanced parenthesis", lexeme.pos, 'remove the ")" or add a "(" before it'
                )
            open_.pop()
    if open_:
        raise QueryError("unbalanced parenthesis", open_[-1].pos, 'add a ")" or remove the "("')


# --- parsing --------------------------------------------------------------------------------


class _Parser:
    """Recursive descent over lexemes whose parentheses are balanced."""

    def __init__(self, lexemes: list[_Lexeme]) -> None:
        self._lexemes = lexemes
        self._i = 0

    def _peek(self) -> _Lexeme | None:
        return self._lexemes[self._i] if self._i < len(self._lexemes) else None

    def _previous(self) -> _Lexeme | None:
        return self._lexemes[self._i - 1] if self._i > 0 else None

    def _is_op(self, lexeme: _Lexeme | None, *ops: str) -> bool:
        return lexeme is not None and lexeme.kind == "op" and lexeme.value in ops

    def parse(self) -> Node:
        return self._or_expr()  # balanced parentheses: the top level only stops at the end

    def _or_expr(self) -> Node:
        items = list(_items(Or, self._and_expr()))
        while self._is_op(self._peek(), "OR"):
            self._i += 1
            items.extend(_items(Or, self._and_expr()))
        return _join(Or, items)

    def _and_expr(self) -> Node:
        positives = [self._operand()]
        negatives: list[Node] = []
        while (lexeme := self._peek()) is not None and lexeme.kind != ")":
            if self._is_op(lexeme, "OR"):
                break
            if lexeme.kind == "op":
                self._i += 1
                negate = lexeme.value != "AND"
                if not negate and self._is_op(self._peek(), "NOT"):  # "AND NOT"
                    self._i += 1
                    negate = True
                (negatives if negate else positives).append(self._operand())
            else:
                positives.append(self._operand())
        return _conjunction(positives, negatives)

    def _operand(self) -> Node:
        lexeme = self._peek()
        previous = self._previous()
        if lexeme is None or lexeme.kind == ")":
            if previous is not None and previous.kind == "(":
                raise QueryError(
                    "empty parentheses", previous.pos, "put a term inside or remove them"
                )
            assert previous is not None and previous.kind == "op"  # anything else ends an operand
            raise QueryError(
                f'"{previous.text}" has no term after it',
                previous.pos,
                "remove it or add a term after it",
            )
        if lexeme.kind == "op":
            if lexeme.value in ("NOT", "ANDNOT"):
                raise QueryError(
                    f'"{lexeme.text}" has nothing to exclude from',
                    lexeme.pos,
                    "start with what you want, e.g. agents NOT robotics",
                )
            if previous is not None and previous.kind == "op":
                raise QueryError(
                    f'"{lexeme.text}" follows "{previous.text}"',
                    lexeme.pos,
                    "remove one of the two operators",
                )
            raise QueryError(
                f'"{lexeme.text}" has no term before it',
                lexeme.pos,
                "remove it or add a term before it",
            )
        self._i += 1
        if lexeme.kind == "field":
            target = self._peek()
            if (
                target is None
                or target.pos != lexeme.end
                or target.kind not in ("word", "phrase", "(")
            ):
                name = lexeme.text.lower()
                raise QueryError(
                    f'"{_show(lexeme.text)}" is not followed by a term',
                    lexeme.pos,
                    f'write e.g. {name}transformer or {name}(a OR b), no space after ":"',
                )
            return _replace_field(self._operand(), None, lexeme.value)
        if lexeme.kind == "(":
            node = self._or_expr()
            self._i += 1  # the matching ")"
            return node
        return self._term(lexeme)

    def _term(self, lexeme: _Lexeme) -> Term:
        tokens = tokenize(lexeme.text)
        shown = f'"{_show(lexeme.text)}"'
        if lexeme.kind == "phrase":
            prefix = lexeme.prefix
            shown = f"{shown}*" if prefix else shown
        else:  # a word: "*" right after a letter or digit makes it a prefix
            stem = lexeme.text.rstrip("*")
            prefix = stem != lexeme.text and stem != "" and _is_token_char(stem[-1])
        if not tokens:
            fix = (
                'put "*" right after a word, e.g. optim*'
                if lexeme.kind == "word" and set(lexeme.text) == {"*"}
                else "use words with letters or digits"
            )
            raise QueryError(f"no letters or digits in {shown}", lexeme.pos, fix)
        if prefix and len(tokens[-1]) < MIN_PREFIX_LENGTH:
            raise QueryError(
                f"prefix {shown} is too broad",
                lexeme.pos,
                f'use at least {MIN_PREFIX_LENGTH} letters or digits before "*"',
            )
        return Term(tuple(tokens), prefix=prefix)


def parse(text: str, *, max_length: int | None = MAX_QUERY_LENGTH) -> Node:
    """Parse a query into its AST. Raises QueryError (and nothing else) if it is invalid.

    ``max_length=None`` lifts the length limit, for stored canonical queries (``unparse`` may
    write a valid query longer than the text a user typed)."""
    if max_length is not None and len(text) > max_length:
        raise QueryError(
            "query too long",
            MAX_QUERY_LENGTH,
            f"use at most {MAX_QUERY_LENGTH} characters (it has {len(text)})",
        )
    if not text.strip():
        raise QueryError("empty query", 0, "type some words, e.g. reward model")
    lexemes = _mark_operators(_lex(text.translate(_QUOTES)))
    _check_parentheses(lexemes)
    return _Parser(lexemes).parse()


# --- output ---------------------------------------------------------------------------------


def terms(node: Node) -> Iterator[Term]:
    """Every term of a query, left to right (negated ones too)."""
    if isinstance(node, Term):
        yield node
    elif isinstance(node, And | Or):
        for item in node.items:
            yield from terms(item)
    else:
        yield from terms(node.positive)
        yield from terms(node.negative)


# Endings tried after a prefix to find the words FTS5's prefix search cannot see (see the module
# docstring); Porter's steps 2–5 strip these or reduce them to a shorter stem.
# fmt: off
_ENDINGS = (
    "e", "es", "ed", "ing", "ion", "ions", "ive", "or", "ors", "y", "ies", "ce", "cy", "t", "ts",
    "te", "tion", "ation", "ization", "isation", "ity", "al", "ment", "ness", "ant", "ance",
    "ancy", "ent", "ence", "ency", "ous", "ic", "ical", "ism", "ist", "ize", "ise", "able",
    "ible", "er", "ers", "ly", "s", "ze", "zed", "zation", "se", "sed", "sation", "ess", "ities",
)
# fmt: on


@functools.lru_cache(maxsize=4096)
def hidden_completions(prefix: str) -> tuple[str, ...]:
    """Words that begin with ``prefix`` but that an FTS5 prefix search for it misses, one per
    index stem: their Porter stem does not begin with the prefix's own stem."""
    words = [prefix + ending for ending in _ENDINGS]
    searched, *stems = stem_texts([prefix, *words])
    head = searched[0] if len(searched) == 1 else prefix
    found: dict[str, str] = {}
    for word, stem in zip(words, stems, strict=True):
        if len(stem) == 1 and not stem[0].startswith(head):
            found.setdefault(stem[0], word)
    return tuple(found.values())


def _phrase(tokens: Iterable[str]) -> str:
    return '"' + " ".join(t.replace('"', '""') for t in tokens) + '"'


def _fts_term(term: Term) -> str:
    phrase = _phrase(term.tokens)
    if term.prefix:
        *head, last = term.tokens
        hidden = [_phrase([*head, word]) for word in hidden_completions(last)]
        phrase = " OR ".join([f"{phrase} *", *hidden])
        if hidden:
            phrase = f"({phrase})"
    return f"{term.field} : {phrase}" if term.field else phrase


def to_fts(node: Node) -> str:
    """Compile an AST to an FTS5 MATCH expression: quoted tokens, every group parenthesised."""
    if isinstance(node, Term):
        return _fts_term(node)
    field = _common_field(node)
    if field is not None:
        return f"{field} : {to_fts(_replace_field(node, field, None))}"
    match node:
        case And() | Or():
            operator = " AND " if isinstance(node, And) else " OR "
            return "(" + operator.join(to_fts(i) for i in node.items) + ")"
        case Not():
            return f"({to_fts(node.positive)} NOT {to_fts(node.negative)})"


def compile_query(text: str) -> str:
    """``to_fts(parse(text))``."""
    return to_fts(parse(text))


def _unparse_term(term: Term) -> str:
    if len(term.tokens) > 1 or term.tokens[0].upper() in _OPERATORS:
        text = '"' + " ".join(term.tokens) + '"'
    else:
        text = term.tokens[0]
    if term.prefix:
        text += "*"
    return f"{_PREFIX_OF[term.field]}:{text}" if term.field else text


def _unparse(node: Node, level: Literal["or", "and", "atom"]) -> str:
    """Render ``node`` where an operand binding at least as tight as ``level`` is needed:
    "or" (anything), "and" (no bare OR) or "atom" (a term or a parenthesised group)."""
    if isinstance(node, Term):
        return _unparse_term(node)
    field = _common_field(node)
    if field is not None:
        return f"{_PREFIX_OF[field]}:({_unparse(_replace_field(node, field, None), 'or')})"
    match node:
        case Or():
            text = " OR ".join(_unparse(i, "and") for i in node.items)
        case And():
            text = " ".join(_unparse(i, "atom") for i in node.items)
        case Not():
            excluded = (_unparse(i, "atom") for i in _items(Or, node.negative))
            text = " NOT ".join([_unparse(node.positive, "and"), *excluded])
    fits = level == "or" or (level == "and" and not isinstance(node, Or))
    return text if fits else f"({text})"


def unparse(node: Node) -> str:
    """Render an AST in the query language, canonically: ``parse(unparse(n)) == n``."""
    return _unparse(node, "or")


def normalise(text: str, *, max_length: int | None = MAX_QUERY_LENGTH) -> str:
    """The canonical text of a query (``unparse(parse(text))``): equal for equivalent spellings
    such as ``Reward  Model`` and ``reward AND model``. Raises QueryError if invalid."""
    return unparse(parse(text, max_length=max_length))


# --- pure-Python evaluation -----------------------------------------------------------------

# Tried in this order: longer endings first.
# fmt: off
_SUFFIXES = (
    "ational", "ization", "isation", "ations", "ation", "ments", "ment", "ness", "izing", "ising",
    "izers", "izer", "ized", "ised", "izes", "ises", "ize", "ise", "ings", "ing", "ies", "ied",
    "ers", "er", "ed", "es", "ly", "al", "s", "e", "y",
)
# fmt: on


def _stem(token: str) -> str:
    """A crude suffix-stripping stemmer (not Porter's): enough to equate simple inflections."""
    for suffix in _SUFFIXES:
        if (
            token.endswith(suffix)
            and len(token) - len(suffix) >= 3
            and not (suffix == "s" and token.endswith("ss"))
        ):
            return token[: -len(suffix)]
    return token


@dataclass(frozen=True, slots=True)
class _Column:
    tokens: list[str]
    stems: list[str]

    def has(self, term: Term) -> bool:
        wanted = [_stem(t) for t in term.tokens]
        last = len(wanted) - 1
        for start in range(len(self.tokens) - last):
            if self.stems[start : start + last] != wanted[:last]:
                continue
            if term.prefix and self.tokens[start + last].startswith(term.tokens[last]):
                return True
            if not term.prefix and self.stems[start + last] == wanted[last]:
                return True
        return False


def _evaluate(node: Node, columns: dict[str, _Column]) -> bool:
    match node:
        case Term():
            names = [node.field] if node.field else COLUMNS
            return any(columns[name].has(node) for name in names)
        case And():
            return all(_evaluate(i, columns) for i in node.items)
        case Or():
            return any(_evaluate(i, columns) for i in node.items)
        case Not():
            return _evaluate(node.positive, columns) and not _evaluate(node.negative, columns)


def matches(node: Node, paper: Mapping[str, object]) -> bool:
    """Evaluate a query against a paper in pure Python (a naive baseline and a cross-check).

    ``paper`` has ``title`` and ``abstract`` (str) and ``authors`` and ``categories`` (lists of
    str, or one str). Tokens are compared after a crude stemming, which only approximates the
    Porter stemmer FTS5 uses; a prefix matches the start of an unstemmed word.
    """
    columns = {}
    for name in COLUMNS:
        tokens = tokenize(_column_text(paper.get(name)))
        columns[name] = _Column(tokens, [_stem(t) for t in tokens])
    return _evaluate(node, columns)


def _column_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Iterable):
        return " ".join(str(v) for v in value)
    return ""
