"""Hypothesis strategies for selectors: token soup for the fuzzers, and a grammar that
builds only valid selectors (shared by the parser tests and the Lua evaluator tests)."""

from __future__ import annotations

from hypothesis import strategies as st

NAMES = ["a", "b", "n", "flag", "region", "key", "x.y"]
scalars = st.one_of(st.text(max_size=8), st.integers(), st.floats(), st.booleans())
properties = st.dictionaries(st.sampled_from(NAMES), scalars, max_size=6)
keys = st.none() | st.text(max_size=8)

TOKENS = [
    *NAMES, "'eu'", "'it''s'", "'%_'", "'\\'", "''", "0", "7", "2.5", "1e3", ".5", "-",
    "TRUE", "FALSE", "NULL", "AND", "OR", "NOT", "IN", "LIKE", "ESCAPE", "BETWEEN", "IS",
    "and", "Not", "=", "<>", "<", "<=", ">", ">=", "+", "*", "/", "(", "(", ")", ")", ",",
    "'", "#", "!=",
]  # fmt: skip
token_soup = st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join)
deep_soup = st.tuples(st.integers(0, 90), token_soup).map(lambda t: "(" * t[0] + t[1])


def quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


numbers = st.one_of(
    st.integers(-(2**63) + 1, 2**63 - 1).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
strings = st.text(max_size=6).map(quoted)
names = st.sampled_from(NAMES)
numeric = st.recursive(
    names | numbers,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from("+-*/"), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda e: f"-{e}"),
    ),
    max_leaves=4,
)
values = numeric | strings | st.sampled_from(["TRUE", "false"])
comparison = st.tuples(values, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), values)
in_list = st.tuples(
    names | strings | numeric,
    st.sampled_from(["IN", "NOT IN", "not in"]),
    st.lists(strings | numbers, min_size=1, max_size=5).map(", ".join),
).map(lambda t: f"{t[0]} {t[1]} ({t[2]})")
patterns = st.lists(st.sampled_from(["a", "b", "%", "_", "!%", "!_", "!!", "'"]), max_size=6)
like = st.tuples(
    names | strings,
    st.sampled_from(["LIKE", "NOT LIKE"]),
    patterns.map("".join).map(quoted),
    st.sampled_from(["", " ESCAPE '!'"]),
).map(lambda t: f"{t[0]} {t[1]} {t[2]}{t[3]}")
between = st.tuples(numeric, st.sampled_from(["BETWEEN", "NOT BETWEEN"]), numeric, numeric).map(
    lambda t: f"{t[0]} {t[1]} {t[2]} AND {t[3]}"
)
is_null = st.tuples(names, st.sampled_from(["IS NULL", "IS NOT NULL", "is not null"]))
conditions = st.recursive(
    st.one_of(
        comparison.map(" ".join),
        in_list,
        like,
        between,
        is_null.map(" ".join),
        st.sampled_from(["TRUE", "FALSE"]),
    ),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR", "and", "or"]), inner).map(" ".join),
        inner.map(lambda c: f"NOT {c}"),
        inner.map(lambda c: f"({c})"),
    ),
    max_leaves=8,
)
