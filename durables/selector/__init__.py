"""Event filters: a safe subset of JMS message selectors, parsed by our own parser.

A selector is a condition over an event's properties and its key, such as
``region = 'eu' AND qty > 5``. It is parsed once (never with ``eval``), checked,
and compiled to Python closures, so `Selector.matches` is cheap per event.

Language
    Identifiers ``[A-Za-z_$][A-Za-z0-9_$.]*`` name properties, case-sensitively;
    ``key`` is the event's key, not a property. Keywords are case-insensitive:
    AND OR NOT IN LIKE ESCAPE BETWEEN IS NULL TRUE FALSE. Literals: strings in
    single quotes (``''`` is a quote), integers (64-bit), decimals (``1.5e3``),
    TRUE and FALSE. Operators, loosest first: OR; AND; NOT; ``= <> < <= > >=``,
    ``[NOT] IN (literals)``, ``[NOT] LIKE 'p%_' [ESCAPE 'c']``,
    ``[NOT] BETWEEN a AND b``, ``IS [NOT] NULL``; ``+ -``; ``* /``; unary ``- +``.

Semantics (JMS three-valued logic)
    A missing property (or key) is NULL, and any comparison with NULL is unknown;
    NOT unknown is unknown, unknown AND FALSE is FALSE, unknown OR TRUE is TRUE.
    An event matches only when the whole selector is TRUE. Operands of different
    kinds (string, number, boolean) compare as unknown, never as an error;
    strings and booleans support only ``=`` and ``<>``, so ``'a' < 'b'`` is
    unknown. ``/`` is true division (``5 / 2 = 2.5``, as in Lua) and ``x / 0`` is
    unknown. The whole selector must be a condition: a bare property such as
    ``flag`` is refused rather than read as ``flag = TRUE``, because a filter
    that silently matches nothing is worse than an error; TRUE alone is fine.

Limits
    Expressions over 4,096 characters, nesting over 64 levels (each operator and
    each pair of parentheses is a level; AND/OR chains count once) and IN lists
    over 1,000 items raise `SelectorError`, whose ``position`` is the 0-based
    offset of the offending token or of the end of input.

JSON form (`Selector.to_json`, for the Lua evaluator)
    Every node is a list whose first element names its kind:

    ``["lit", v]``               string, number or boolean literal
    ``["prop", name]``           event property (NULL when missing)
    ``["key"]``                  event key (NULL when the event has none)
    ``["and", c1, c2, ...]``     two or more conditions; ``["or", ...]`` likewise
    ``["not", c]``               negation
    ``["cmp", op, a, b]``        op is one of ``= <> < <= > >=``
    ``["arith", op, a, b]``      op is one of ``+ - * /``
    ``["in", a, [v1, v2, ...]]`` items are plain strings and numbers
    ``["like", a, pattern, escape]``  escape is a one-character string or null
    ``["is_null", a]``           TRUE or FALSE, never unknown

    Sugar is expanded so the evaluator needs nothing else: ``x NOT IN (...)``,
    ``NOT LIKE``, ``NOT BETWEEN`` and ``IS NOT NULL`` wrap their positive form in
    ``not``; ``x BETWEEN a AND b`` is ``["and", ["cmp", ">=", x, a],
    ["cmp", "<=", x, b]]``; ``-5`` is ``["lit", -5]`` and ``-x`` is
    ``["arith", "-", ["lit", 0], x]``. Example: ``region = 'eu'`` is
    ``["cmp", "=", ["prop", "region"], ["lit", "eu"]]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .parser import parse_tree
from .tree import Evaluator, Node, Properties

__all__ = ["Selector", "compile_filter", "parse"]


@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed, compiled selector; construct with `parse` or ``Selector(text)``.

    Two selectors are equal when they parse to the same tree, so whitespace and
    keyword case do not matter; `expression` keeps the text as given.
    """

    expression: str = field(compare=False)
    """The text given."""
    _tree: Node = field(init=False, repr=False, compare=False)
    _canonical: str = field(init=False, repr=False)
    _evaluate: Evaluator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tree = parse_tree(self.expression)
        object.__setattr__(self, "_tree", tree)
        object.__setattr__(self, "_canonical", json.dumps(tree.to_json()))
        object.__setattr__(self, "_evaluate", tree.compile())

    def __reduce__(self) -> tuple[type[Selector], tuple[str]]:
        # The compiled closures do not pickle; the text rebuilds them.
        return (Selector, (self.expression,))

    def matches(self, key: str | None, properties: Properties) -> bool:
        """True only when the selector is TRUE for this event (unknown does not match)."""
        return self._evaluate(key, properties) is True

    def to_json(self) -> list[object]:
        """The checked tree as nested JSON-able lists; a fresh copy on each call."""
        return self._tree.to_json()


def parse(expression: str) -> Selector:
    """Parse and compile a selector; raises SelectorError naming the fault's position."""
    return Selector(expression)


def compile_filter(expression: str | None) -> Selector | None:
    """The selector for a durable's filter; None or blank text means no filter."""
    if expression is None or not expression.strip():
        return None
    return parse(expression)
