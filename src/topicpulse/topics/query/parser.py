"""Parsing: query text → lexemes → the AST, with one clear ``QueryError`` for every
mistake (the grammar and the operator-case rule are in the package docstring)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from topicpulse.topics.query.syntax import (
    FIELD_LIST,
    FIELD_PREFIX,
    FIELDS,
    MAX_NESTING,
    MAX_QUERY_LENGTH,
    MIN_PREFIX_LENGTH,
    OPERATORS,
    QUOTES,
    Node,
    Or,
    QueryError,
    Term,
    conjunction,
    is_token_char,
    items_of,
    join_items,
    tokenize,
    with_field,
)


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
        elif field := FIELD_PREFIX.match(text, i):
            name = field.group(1).lower()
            if name not in FIELDS:
                raise QueryError(f'unknown field "{_show(field.group(0))}"', i, f"use {FIELD_LIST}")
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
    """Turn keyword words into operators, following the case rule in the package docstring."""
    marked = []
    for i, lexeme in enumerate(lexemes):
        keyword = lexeme.text.upper()
        if lexeme.kind == "word" and keyword in OPERATORS:
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
        items = list(items_of(Or, self._and_expr()))
        while self._is_op(self._peek(), "OR"):
            self._i += 1
            items.extend(items_of(Or, self._and_expr()))
        return join_items(Or, items)

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
        return conjunction(positives, negatives)

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
            return with_field(self._operand(), None, lexeme.value)
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
            prefix = stem != lexeme.text and stem != "" and is_token_char(stem[-1])
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
    lexemes = _mark_operators(_lex(text.translate(QUOTES)))
    _check_parentheses(lexemes)
    return _Parser(lexemes).parse()
