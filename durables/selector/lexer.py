"""Tokens of the selector language.

The lexer is pulled one token at a time by the parser, so the leftmost fault in
an expression is the one reported, whether it is lexical or grammatical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from ..errors import SelectorError

MAX_LENGTH: Final = 4096
"""Longest expression accepted, in characters."""

MAX_INTEGER: Final = 2**63 - 1
"""Integer literals are 64-bit, as in JMS, so the Lua side reads them exactly enough."""

KEYWORDS: Final = frozenset(
    {"AND", "OR", "NOT", "IN", "LIKE", "ESCAPE", "BETWEEN", "IS", "NULL", "TRUE", "FALSE"}
)

TokenKind = Literal["ident", "keyword", "string", "number", "op", "end"]

_TOKEN: Final = re.compile(
    r"""
      (?P<number>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
    | (?P<ident>[A-Za-z_$][A-Za-z0-9_$.]*)
    | (?P<string>'[^']*(?:''[^']*)*')
    | (?P<op><>|<=|>=|[=<>+\-*/(),])
    """,
    re.VERBOSE,
)
_SPACE: Final = re.compile(r"\s+")
_WORD_TAIL: Final = re.compile(r"[A-Za-z0-9_$.]+")

# Operators people bring from other languages, with what to write instead.
_HINTS: Final = (
    ("!=", "unknown operator '!='; use '<>' for not equal"),
    ("==", "unknown operator '=='; use '=' for equal"),
    ("&&", "unknown operator '&&'; use AND"),
    ("||", "unknown operator '||'; use OR"),
    ('"', "unknown character '\"'; strings use single quotes"),
)
_HINT_STARTS: Final = frozenset(bad[0] for bad, _ in _HINTS)


@dataclass(frozen=True, slots=True)
class Token:
    """One token; `pos` is its 0-based offset in the expression."""

    kind: TokenKind
    text: str
    """The source text; keywords are upper-cased, strings keep their quotes."""
    pos: int
    value: str | int | float
    """An identifier's name, a string's content, a number's value, else the text."""

    def is_symbol(self, text: str) -> bool:
        """True when this is the operator or keyword `text` (never an identifier or literal)."""
        return self.text == text and self.kind in ("op", "keyword")

    def describe(self) -> str:
        """Name the token for an error message."""
        if self.kind == "end":
            return "end of expression"
        if self.kind == "keyword":
            return self.text
        if self.kind == "op":
            return f"'{self.text}'"
        shown = self.text if len(self.text) <= 24 else self.text[:20] + "..."
        noun = {"ident": "property", "string": "string", "number": "number"}[self.kind]
        return f"{noun} {shown}"


class Lexer:
    """Reads tokens from an expression on demand; raises SelectorError at the first bad one."""

    __slots__ = ("_pos", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def next(self) -> Token:
        """Return the next token, or an `end` token positioned at the end of input."""
        text = self._text
        space = _SPACE.match(text, self._pos)
        start = space.end() if space else self._pos
        if start >= len(text):
            self._pos = len(text)
            return Token("end", "", len(text), "")
        if text[start] in _HINT_STARTS:
            self._refuse_foreign(start)
        match = _TOKEN.match(text, start)
        if match is None:
            raise self._unknown(start)
        self._pos = match.end()
        source = match.group()
        if match.lastgroup == "number":
            return self._number(source, start)
        if match.lastgroup == "ident":
            word = source.upper()
            if word in KEYWORDS:
                return Token("keyword", word, start, word)
            return Token("ident", source, start, source)
        if match.lastgroup == "string":
            return Token("string", source, start, source[1:-1].replace("''", "'"))
        return Token("op", source, start, source)

    def _number(self, source: str, start: int) -> Token:
        tail = _WORD_TAIL.match(self._text, start + len(source))
        if tail is not None:
            shown = self._text[start : tail.end()]
            raise SelectorError(f"malformed number {shown!r}", start, self._text)
        value: int | float
        if any(c in source for c in ".eE"):
            value = float(source)
            in_range = value != float("inf")
        else:
            value = int(source)
            in_range = value <= MAX_INTEGER
        if not in_range:
            raise SelectorError(f"number {source[:24]} is out of range", start, self._text)
        return Token("number", source, start, value)

    def _refuse_foreign(self, start: int) -> None:
        for bad, message in _HINTS:
            if self._text.startswith(bad, start):
                raise SelectorError(message, start, self._text)

    def _unknown(self, start: int) -> SelectorError:
        text = self._text
        if text[start] == "'":
            return SelectorError("unterminated string; close it with '", start, text)
        return SelectorError(f"unknown character {text[start]!r}", start, text)
