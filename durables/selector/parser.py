"""A Pratt parser for selectors: text in, checked syntax tree out.

Kinds are checked here (a condition where a condition belongs, numbers in
arithmetic), so evaluation never meets a malformed tree; and length, nesting
and IN lists are bounded, so a hostile filter can exhaust neither the stack
nor the CPU. Every fault raises `SelectorError` at the offending token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from ..errors import SelectorError
from .lexer import MAX_LENGTH, Lexer, Token
from .tree import Arith, Compare, In, IsNull, Key, Like, Lit, Logic, Node, Not, Prop, like_matcher

MAX_DEPTH: Final = 64
"""Deepest nesting accepted; each operator and each pair of parentheses is a level."""

MAX_IN_ITEMS: Final = 1000
"""Longest IN list accepted."""

Kind = Literal["cond", "bool", "str", "num", "any"]
"""Static kind of a parsed expression; `any` is a property or the key."""

_KIND_NAMES: Final[dict[Kind, str]] = {
    "cond": "a condition",
    "bool": "TRUE or FALSE",
    "str": "a string",
    "num": "a number",
    "any": "a property",
}
_CONDITION: Final[frozenset[Kind]] = frozenset({"cond", "bool"})
_VALUE: Final[frozenset[Kind]] = frozenset({"bool", "str", "num", "any"})
_NUMBER: Final[frozenset[Kind]] = frozenset({"num", "any"})
_TEXT: Final[frozenset[Kind]] = frozenset({"str", "any"})
_LISTABLE: Final[frozenset[Kind]] = frozenset({"str", "num", "any"})
_LEAF_KINDS: Final[dict[str, Kind]] = {"ident": "any", "string": "str", "number": "num"}

# Binding powers, loosest first.
_OR, _AND, _NOT, _PREDICATE, _ADDITIVE, _MULTIPLICATIVE, _SIGN = range(1, 8)
_INFIX: Final[dict[str, int]] = {
    "OR": _OR,
    "AND": _AND,
    **dict.fromkeys(("=", "<>", "<", "<=", ">", ">="), _PREDICATE),
    **dict.fromkeys(("IN", "LIKE", "BETWEEN", "IS", "NOT"), _PREDICATE),
    "+": _ADDITIVE,
    "-": _ADDITIVE,
    "*": _MULTIPLICATIVE,
    "/": _MULTIPLICATIVE,
}
_TOO_DEEP: Final = f"expression is nested deeper than {MAX_DEPTH} levels"


@dataclass(frozen=True, slots=True)
class _Expr:
    """A parsed expression with what the parser checks: kind, start and depth."""

    node: Node
    kind: Kind
    pos: int
    depth: int


def parse_tree(expression: str) -> Node:
    """Parse a whole selector into a checked tree; raises SelectorError."""
    if len(expression) > MAX_LENGTH:
        raise SelectorError(
            f"expression is longer than {MAX_LENGTH} characters", MAX_LENGTH, expression
        )
    return _Parser(expression).parse()


class _Parser:
    """One parse: the lexer, one token of lookahead and the current nesting."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lexer = Lexer(text)
        self.tok = self.lexer.next()
        self.nesting = 0

    def parse(self) -> Node:
        if self.tok.kind == "end":
            raise self.error("empty expression", self.tok.pos)
        result = self.expr(0)
        tok = self.tok  # a fresh name: mypy still believes the check above holds
        if tok.kind != "end":
            expected = "AND, OR" if result.kind in _CONDITION else "an operator"
            raise self.error(
                f"expected {expected} or end of expression, found {tok.describe()}", tok.pos
            )
        self.require(result, _CONDITION, "a condition such as x = 1")
        return result.node

    # -- plumbing -------------------------------------------------------------

    def error(self, message: str, pos: int) -> SelectorError:
        return SelectorError(message, pos, self.text)

    def advance(self) -> Token:
        tok = self.tok
        self.tok = self.lexer.next()
        return tok

    def expect(self, text: str, expected: str = "") -> Token:
        if not self.tok.is_symbol(text):
            shown = expected or (text if text.isalpha() else f"'{text}'")
            raise self.error(f"expected {shown}, found {self.tok.describe()}", self.tok.pos)
        return self.advance()

    def require(self, expr: _Expr, kinds: frozenset[Kind], expected: str) -> None:
        if expr.kind in kinds:
            return
        found = _KIND_NAMES[expr.kind]
        if kinds is _CONDITION and expr.kind == "any":
            found += " alone (write flag = TRUE to test a boolean property)"
        raise self.error(f"expected {expected}, found {found}", expr.pos)

    def make(self, node: Node, kind: Kind, start: int, depth: int, at: int) -> _Expr:
        if depth > MAX_DEPTH:
            raise self.error(_TOO_DEEP, at)
        return _Expr(node, kind, start, depth)

    def operand(self, power: int, opener: Token) -> _Expr:
        """Parse a nested operand; every recursion passes here, which bounds the stack.

        Each active level ends up wrapping its result at least once, so the
        finished tree would be too deep anyway: refusing now is exact, not early.
        """
        self.nesting += 1
        if self.nesting >= MAX_DEPTH:
            raise self.error(_TOO_DEEP, opener.pos)
        result = self.expr(power)
        self.nesting -= 1
        return result

    # -- Pratt loop -----------------------------------------------------------

    def expr(self, min_power: int) -> _Expr:
        left = self.prefix()
        while (power := self.infix_power()) > min_power:
            left = self.infix(left, power)
        return left

    def infix_power(self) -> int:
        if self.tok.kind not in ("op", "keyword"):
            return 0
        return _INFIX.get(self.tok.text, 0)

    def prefix(self) -> _Expr:
        tok = self.tok
        kind = _LEAF_KINDS.get(tok.kind)
        if kind is not None:
            self.advance()
            return _Expr(_leaf(tok), kind, tok.pos, 1)
        if tok.is_symbol("TRUE") or tok.is_symbol("FALSE"):
            self.advance()
            return _Expr(Lit(tok.text == "TRUE"), "bool", tok.pos, 1)
        handler = _PREFIX.get(tok.text) if tok.kind in ("op", "keyword") else None
        if handler is None:
            raise self.error(f"expected a value or condition, found {tok.describe()}", tok.pos)
        return handler(self)

    def infix(self, left: _Expr, power: int) -> _Expr:
        tok = self.advance()
        if power == _PREDICATE:
            return self.predicate(left, tok)
        if power <= _AND:
            return self.logic(left, tok, power)
        return self.arithmetic(left, tok, power)

    # -- prefix forms ---------------------------------------------------------

    def group(self) -> _Expr:
        opener = self.advance()
        inner = self.operand(0, opener)
        self.expect(")")
        return self.make(inner.node, inner.kind, opener.pos, inner.depth + 1, opener.pos)

    def negation(self) -> _Expr:
        tok = self.advance()
        operand = self.operand(_NOT, tok)
        self.require(operand, _CONDITION, "a condition after NOT")
        return self.make(Not(operand.node), "cond", tok.pos, operand.depth + 1, tok.pos)

    def sign(self) -> _Expr:
        tok = self.advance()
        operand = self.operand(_SIGN, tok)
        self.require(operand, _NUMBER, f"a number after '{tok.text}'")
        node = _negate(operand.node) if tok.text == "-" else operand.node
        return self.make(node, "num", tok.pos, operand.depth + 1, tok.pos)

    def null(self) -> _Expr:
        raise self.error("NULL is not a value; test with 'x IS NULL'", self.tok.pos)

    # -- infix forms ----------------------------------------------------------

    def logic(self, left: _Expr, tok: Token, power: int) -> _Expr:
        self.require(left, _CONDITION, f"a condition before {tok.text}")
        right = self.operand(power, tok)
        self.require(right, _CONDITION, f"a condition after {tok.text}")
        op: Literal["and", "or"] = "and" if tok.text == "AND" else "or"
        if isinstance(left.node, Logic) and left.node.op == op:
            node = Logic(op, (*left.node.parts, right.node))
            depth = max(left.depth, right.depth + 1)
        else:
            node = Logic(op, (left.node, right.node))
            depth = max(left.depth, right.depth) + 1
        return self.make(node, "cond", left.pos, depth, tok.pos)

    def arithmetic(self, left: _Expr, tok: Token, power: int) -> _Expr:
        self.require(left, _NUMBER, f"a number before '{tok.text}'")
        right = self.operand(power, tok)
        self.require(right, _NUMBER, f"a number after '{tok.text}'")
        node = Arith(tok.text, left.node, right.node)
        return self.make(node, "num", left.pos, max(left.depth, right.depth) + 1, tok.pos)

    def predicate(self, left: _Expr, tok: Token) -> _Expr:
        if left.kind == "cond":
            raise self.error(
                f"{tok.describe()} cannot follow a condition; join conditions with AND or OR",
                tok.pos,
            )
        negated = tok.is_symbol("NOT")
        if negated:
            if not any(self.tok.is_symbol(word) for word in ("IN", "LIKE", "BETWEEN")):
                raise self.error(
                    f"expected IN, LIKE or BETWEEN after NOT, found {self.tok.describe()}",
                    self.tok.pos,
                )
            tok = self.advance()
        handler = _PREDICATES.get(tok.text, _Parser.compare)
        result = handler(self, left, tok)
        if not negated:
            return result
        return self.make(Not(result.node), "cond", result.pos, result.depth + 1, tok.pos)

    def compare(self, left: _Expr, tok: Token) -> _Expr:
        right = self.operand(_PREDICATE, tok)
        self.require(right, _VALUE, f"a value after '{tok.text}'")
        node = Compare(tok.text, left.node, right.node)
        return self.make(node, "cond", left.pos, max(left.depth, right.depth) + 1, tok.pos)

    def in_list(self, left: _Expr, tok: Token) -> _Expr:
        self.require(left, _LISTABLE, "a string, number or property before IN")
        self.expect("(", "'(' after IN")
        items = [self.list_item()]
        while self.tok.is_symbol(","):
            self.advance()
            if len(items) >= MAX_IN_ITEMS:
                raise self.error(f"IN list has more than {MAX_IN_ITEMS} items", self.tok.pos)
            items.append(self.list_item())
        self.expect(")", "',' or ')'")
        node = In(left.node, tuple(items))
        return self.make(node, "cond", left.pos, left.depth + 1, tok.pos)

    def list_item(self) -> str | int | float:
        signed = self.tok.is_symbol("-") or self.tok.is_symbol("+")
        negative = signed and self.advance().text == "-"
        tok, value = self.tok, self.tok.value
        if tok.kind == "string" and isinstance(value, str) and not signed:
            self.advance()
            return value
        if tok.kind == "number" and not isinstance(value, str):
            self.advance()
            return -value if negative else value
        raise self.error(
            f"expected a string or number in the IN list, found {tok.describe()}", tok.pos
        )

    def like(self, left: _Expr, tok: Token) -> _Expr:
        self.require(left, _TEXT, "a string or property before LIKE")
        pattern, at = self.string("a pattern in single quotes after LIKE")
        escape = None
        if self.tok.is_symbol("ESCAPE"):
            self.advance()
            escape, escape_at = self.string("one character in single quotes after ESCAPE")
            if len(escape) != 1:
                raise self.error("ESCAPE takes exactly one character", escape_at)
        try:
            like_matcher(pattern, escape)
        except ValueError as exc:
            raise self.error(str(exc), at) from None
        node = Like(left.node, pattern, escape)
        return self.make(node, "cond", left.pos, left.depth + 1, tok.pos)

    def string(self, expected: str) -> tuple[str, int]:
        tok = self.tok
        if tok.kind != "string" or not isinstance(tok.value, str):
            raise self.error(f"expected {expected}, found {tok.describe()}", tok.pos)
        self.advance()
        return tok.value, tok.pos

    def between(self, left: _Expr, tok: Token) -> _Expr:
        self.require(left, _NUMBER, "a number or property before BETWEEN")
        low = self.operand(_PREDICATE, tok)
        self.require(low, _NUMBER, "a number after BETWEEN")
        self.expect("AND", "AND between the bounds of BETWEEN")
        high = self.operand(_PREDICATE, tok)
        self.require(high, _NUMBER, "a number after AND")
        # a BETWEEN b AND c means a >= b AND a <= c, unknowns included.
        node = Logic(
            "and", (Compare(">=", left.node, low.node), Compare("<=", left.node, high.node))
        )
        depth = max(left.depth, low.depth, high.depth) + 2
        return self.make(node, "cond", left.pos, depth, tok.pos)

    def is_null(self, left: _Expr, tok: Token) -> _Expr:
        negated = self.tok.is_symbol("NOT")
        if negated:
            self.advance()
        self.expect("NULL", "NULL after IS" + (" NOT" if negated else ""))
        node: Node = IsNull(left.node)
        depth = left.depth + 1
        if negated:
            node, depth = Not(node), depth + 1
        return self.make(node, "cond", left.pos, depth, tok.pos)


def _leaf(tok: Token) -> Node:
    if tok.kind != "ident" or not isinstance(tok.value, str):
        return Lit(tok.value)
    return Key() if tok.value == "key" else Prop(tok.value)


def _negate(node: Node) -> Node:
    """Fold `-literal` into a literal; otherwise `0 - x`, so JSON needs no unary node."""
    if isinstance(node, Lit) and not isinstance(node.value, str | bool):
        return Lit(-node.value)
    return Arith("-", Lit(0), node)


_PREFIX: Final[dict[str, Callable[[_Parser], _Expr]]] = {
    "(": _Parser.group,
    "NOT": _Parser.negation,
    "-": _Parser.sign,
    "+": _Parser.sign,
    "NULL": _Parser.null,
}
_PREDICATES: Final[dict[str, Callable[[_Parser, _Expr, Token], _Expr]]] = {
    "IN": _Parser.in_list,
    "LIKE": _Parser.like,
    "BETWEEN": _Parser.between,
    "IS": _Parser.is_null,
}
