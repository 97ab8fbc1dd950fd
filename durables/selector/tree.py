"""The selector syntax tree: each node gives its JSON form and compiles to a closure.

Compiling once at parse time keeps `Selector.matches` to a handful of Python
calls per event. Closures of conditions return True, False or None (unknown);
closures of values return the value or None. None of them raises: a missing
property, a kind mismatch or an arithmetic fault is unknown, as in JMS.
"""

from __future__ import annotations

import operator
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, TypeGuard

Scalar: TypeAlias = str | int | float | bool
Value: TypeAlias = Scalar | None
Properties: TypeAlias = Mapping[str, Scalar]
Evaluator: TypeAlias = Callable[[str | None, Properties], Value]
"""Takes the event's key and properties; returns a value, or True/False/None for a condition."""

_ORDERINGS: Final[dict[str, Callable[[float, float], bool]]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ARITHMETIC: Final[dict[str, Callable[[float, float], float]]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}


def _kind(value: object) -> str | None:
    """The JMS kind of a runtime value; bool is checked first because it is an int."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "num"
    if isinstance(value, str):
        return "str"
    return None


def _is_number(value: Value) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


class Node(ABC):
    """A node of the checked syntax tree."""

    __slots__ = ()

    @abstractmethod
    def to_json(self) -> list[object]:
        """The node as nested JSON-able lists (see `durables.selector`)."""

    @abstractmethod
    def compile(self) -> Evaluator:
        """A closure that evaluates the node for one event."""


@dataclass(frozen=True, slots=True)
class Lit(Node):
    """A string, number or boolean literal."""

    value: Scalar

    def to_json(self) -> list[object]:
        return ["lit", self.value]

    def compile(self) -> Evaluator:
        value = self.value

        def literal(key: str | None, props: Properties) -> Value:
            return value

        return literal


@dataclass(frozen=True, slots=True)
class Prop(Node):
    """An event property; missing means unknown."""

    name: str

    def to_json(self) -> list[object]:
        return ["prop", self.name]

    def compile(self) -> Evaluator:
        name = self.name

        def prop(key: str | None, props: Properties) -> Value:
            return props.get(name)

        return prop


@dataclass(frozen=True, slots=True)
class Key(Node):
    """The event's key (the identifier `key`); an event without one has a NULL key."""

    def to_json(self) -> list[object]:
        return ["key"]

    def compile(self) -> Evaluator:
        def event_key(key: str | None, props: Properties) -> Value:
            return key

        return event_key


@dataclass(frozen=True, slots=True)
class Logic(Node):
    """AND or OR over two or more conditions, flattened so long chains stay shallow."""

    op: Literal["and", "or"]
    parts: tuple[Node, ...]

    def to_json(self) -> list[object]:
        return [self.op, *(part.to_json() for part in self.parts)]

    def compile(self) -> Evaluator:
        parts = tuple(part.compile() for part in self.parts)
        return _all(parts) if self.op == "and" else _any(parts)


def _all(parts: tuple[Evaluator, ...]) -> Evaluator:
    def conjunction(key: str | None, props: Properties) -> Value:
        result: Value = True
        for part in parts:
            value = part(key, props)
            if value is False:
                return False
            if value is None:
                result = None
        return result

    return conjunction


def _any(parts: tuple[Evaluator, ...]) -> Evaluator:
    def disjunction(key: str | None, props: Properties) -> Value:
        result: Value = False
        for part in parts:
            value = part(key, props)
            if value is True:
                return True
            if value is None:
                result = None
        return result

    return disjunction


@dataclass(frozen=True, slots=True)
class Not(Node):
    """Negation; NOT unknown is unknown."""

    operand: Node

    def to_json(self) -> list[object]:
        return ["not", self.operand.to_json()]

    def compile(self) -> Evaluator:
        operand = self.operand.compile()

        def negation(key: str | None, props: Properties) -> Value:
            value = operand(key, props)
            return None if value is None else not value

        return negation


@dataclass(frozen=True, slots=True)
class Compare(Node):
    """`= <> < <= > >=`; operands of different kinds, or ordered non-numbers, are unknown."""

    op: str
    left: Node
    right: Node

    def to_json(self) -> list[object]:
        return ["cmp", self.op, self.left.to_json(), self.right.to_json()]

    def compile(self) -> Evaluator:
        left, right = self.left.compile(), self.right.compile()
        if self.op in ("=", "<>"):
            return _equality(left, right, equal=self.op == "=")
        return _ordering(left, right, _ORDERINGS[self.op])


def _equality(left: Evaluator, right: Evaluator, *, equal: bool) -> Evaluator:
    def equality(key: str | None, props: Properties) -> Value:
        a = left(key, props)
        kind = _kind(a)
        if kind is None:
            return None
        b = right(key, props)
        if _kind(b) != kind:
            return None
        return a == b if equal else a != b

    return equality


def _ordering(left: Evaluator, right: Evaluator, test: Callable[[float, float], bool]) -> Evaluator:
    def ordering(key: str | None, props: Properties) -> Value:
        a = left(key, props)
        if not _is_number(a):
            return None
        b = right(key, props)
        return test(a, b) if _is_number(b) else None

    return ordering


@dataclass(frozen=True, slots=True)
class Arith(Node):
    """`+ - * /` on numbers; `/` is true division (as in Lua), and x/0 is unknown."""

    op: str
    left: Node
    right: Node

    def to_json(self) -> list[object]:
        return ["arith", self.op, self.left.to_json(), self.right.to_json()]

    def compile(self) -> Evaluator:
        left, right = self.left.compile(), self.right.compile()
        apply = _ARITHMETIC[self.op]

        def arithmetic(key: str | None, props: Properties) -> Value:
            a = left(key, props)
            b = right(key, props)
            if _is_number(a) and _is_number(b):
                try:
                    return apply(a, b)
                except ArithmeticError:  # x/0, or an int too large to become a float
                    return None
            return None

        return arithmetic


@dataclass(frozen=True, slots=True)
class In(Node):
    """`x IN (literals)`, which means `x = item1 OR x = item2 ...` in three-valued logic."""

    operand: Node
    items: tuple[str | int | float, ...]

    def to_json(self) -> list[object]:
        return ["in", self.operand.to_json(), list(self.items)]

    def compile(self) -> Evaluator:
        operand = self.operand.compile()
        texts = frozenset(item for item in self.items if isinstance(item, str))
        numbers = frozenset(item for item in self.items if not isinstance(item, str))

        def membership(key: str | None, props: Properties) -> Value:
            value = operand(key, props)
            kind = _kind(value)
            if kind == "str":
                found, mixed = value in texts, bool(numbers)
            elif kind == "num":
                found, mixed = value in numbers, bool(texts)
            else:
                return None
            if found:
                return True
            # An item of another kind compares as unknown, so a miss is unknown too.
            return None if mixed else False

        return membership


@dataclass(frozen=True, slots=True)
class Like(Node):
    """`x LIKE pattern [ESCAPE c]`; a non-string operand is unknown."""

    operand: Node
    pattern: str
    escape: str | None

    def to_json(self) -> list[object]:
        return ["like", self.operand.to_json(), self.pattern, self.escape]

    def compile(self) -> Evaluator:
        operand = self.operand.compile()
        test = like_matcher(self.pattern, self.escape)

        def like(key: str | None, props: Properties) -> Value:
            value = operand(key, props)
            return test(value) if isinstance(value, str) else None

        return like


@dataclass(frozen=True, slots=True)
class IsNull(Node):
    """`x IS NULL`: true for a missing property or key, never unknown."""

    operand: Node

    def to_json(self) -> list[object]:
        return ["is_null", self.operand.to_json()]

    def compile(self) -> Evaluator:
        operand = self.operand.compile()

        def is_null(key: str | None, props: Properties) -> Value:
            return operand(key, props) is None

        return is_null


@dataclass(frozen=True, slots=True)
class _Segment:
    """A run of a LIKE pattern between two `%`: fixed length, `_` matches any character."""

    regex: re.Pattern[str]
    length: int


def like_matcher(pattern: str, escape: str | None) -> Callable[[str], bool]:
    """Compile a LIKE pattern; raises ValueError when it ends with its escape character.

    The pattern is split at each `%` into fixed-length segments and the middle ones
    are found leftmost-first, which is exact and takes O(len(value) * len(pattern)),
    where a single backtracking regex could take exponential time on `%a%a%a...`.
    """
    segments = [
        _Segment(re.compile("".join(atoms), re.DOTALL), len(atoms))
        for atoms in _split_pattern(pattern, escape)
    ]
    if len(segments) == 1:
        whole = segments[0].regex
        return lambda value: whole.fullmatch(value) is not None
    first, last = segments[0], segments[-1]
    middle = [segment for segment in segments[1:-1] if segment.length]

    def test(value: str) -> bool:
        end = len(value) - last.length
        if end < first.length or not first.regex.match(value):
            return False
        if not last.regex.fullmatch(value, end):
            return False
        pos = first.length
        for segment in middle:
            found = segment.regex.search(value, pos, end)
            if found is None:
                return False
            pos = found.end()
        return True

    return test


def _split_pattern(pattern: str, escape: str | None) -> list[list[str]]:
    """Regex atoms of each `%`-separated segment, one atom per character matched."""
    segments: list[list[str]] = [[]]
    chars = iter(pattern)
    for char in chars:
        if char == escape:
            escaped = next(chars, None)
            if escaped is None:
                raise ValueError("LIKE pattern ends with its escape character")
            segments[-1].append(re.escape(escaped))
        elif char == "%":
            segments.append([])
        else:
            segments[-1].append("." if char == "_" else re.escape(char))
    return segments
