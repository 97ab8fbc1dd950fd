"""Selectors: JMS-style event filters parse safely, report faults by position and
evaluate in three-valued logic."""

from __future__ import annotations

import gc
import json
import pickle
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durables.errors import DurablesError, SelectorError
from durables.selector import Selector, compile_filter, parse

from .selector_strategies import TOKENS, conditions, deep_soup, keys, properties, token_soup

Scalar = str | int | float | bool

KEY = "order-1"
PROPERTIES: dict[str, Scalar] = {
    "region": "eu",
    "n": 5,
    "price": 9.5,
    "flag": True,
    "off": False,
    "name": "O'Brien",
    "code": "A_1%",
    "empty": "",
    "a.b": 1,
    "$x": 2,
    "key": "not-the-key",
}

# (expression, event key, expected) against PROPERTIES.
VALID: list[tuple[str, str | None, bool]] = [
    # comparisons on each kind
    ("region = 'eu'", KEY, True),
    ("region <> 'eu'", KEY, False),
    ("n = 5", KEY, True),
    ("n = 5.0", KEY, True),
    ("n <> 4", KEY, True),
    ("n < 6", KEY, True),
    ("n <= 5", KEY, True),
    ("n > 5", KEY, False),
    ("n >= 5", KEY, True),
    ("price > 9", KEY, True),
    ("price = 0.95e1", KEY, True),
    ("price < 1.5e3", KEY, True),
    ("flag = TRUE", KEY, True),
    ("off = FALSE", KEY, True),
    ("flag <> FALSE", KEY, True),
    ("empty = ''", KEY, True),
    ("name = 'O''Brien'", KEY, True),
    ("region = 'EU'", KEY, False),
    # kind mismatches and orderings JMS leaves undefined are unknown, never errors
    ("region = 5", KEY, False),
    ("NOT region = 5", KEY, False),
    ("n = '5'", KEY, False),
    ("flag = 1", KEY, False),
    ("flag > FALSE", KEY, False),
    ("region < 'fr'", KEY, False),
    ("NOT region < 'fr'", KEY, False),
    # NULL and three-valued logic
    ("missing = 1", KEY, False),
    ("NOT missing = 1", KEY, False),
    ("missing = 1 OR n = 5", KEY, True),
    ("missing = 1 AND n = 5", KEY, False),
    ("NOT (missing = 1 AND n = 4)", KEY, True),
    ("NOT (missing = 1 OR n = 5)", KEY, False),
    ("NOT (missing = 1 OR n = 4)", KEY, False),
    ("missing IS NULL", KEY, True),
    ("missing IS NOT NULL", KEY, False),
    ("region IS NOT NULL", KEY, True),
    # the identifier `key` is the event key, not the property named "key"
    ("key = 'order-1'", KEY, True),
    ("key LIKE 'order-%'", KEY, True),
    ("key IS NULL", None, True),
    ("key = 'not-the-key'", None, False),
    ("key <> 'x'", None, False),
    # IN / NOT IN
    ("region IN ('us', 'eu')", KEY, True),
    ("region NOT IN ('us', 'eu')", KEY, False),
    ("region NOT IN ('us', 'ap')", KEY, True),
    ("missing NOT IN ('us')", KEY, False),
    ("n IN (1, 5, 9)", KEY, True),
    ("n IN (-5, 5.0)", KEY, True),
    ("region IN (1, 2)", KEY, False),
    ("NOT region IN (1, 2)", KEY, False),
    ("region IN ('us', 1)", KEY, False),
    ("NOT region IN ('us', 1)", KEY, False),
    # LIKE with %, _ and ESCAPE
    ("region LIKE 'e%'", KEY, True),
    ("region LIKE 'e_'", KEY, True),
    ("region LIKE '_'", KEY, False),
    ("region LIKE '%'", KEY, True),
    ("region NOT LIKE 'u%'", KEY, True),
    ("name LIKE '%''%'", KEY, True),
    ("code LIKE 'A\\_1\\%' ESCAPE '\\'", KEY, True),
    ("code LIKE 'A!_%' ESCAPE '!'", KEY, True),
    ("region LIKE 'e!_' ESCAPE '!'", KEY, False),
    ("n LIKE '5'", KEY, False),
    ("NOT n LIKE '5'", KEY, False),
    # BETWEEN / NOT BETWEEN
    ("n BETWEEN 1 AND 5", KEY, True),
    ("n BETWEEN 6 AND 9", KEY, False),
    ("n NOT BETWEEN 6 AND 9", KEY, True),
    ("missing NOT BETWEEN 1 AND 9", KEY, False),
    ("price BETWEEN n AND n + 5", KEY, True),
    # arithmetic and its precedence
    ("n + 1 = 6", KEY, True),
    ("n * 2 - 1 = 9", KEY, True),
    ("n - 2 * 2 = 1", KEY, True),
    ("(n + 1) * 2 = 12", KEY, True),
    ("-n = -5", KEY, True),
    ("- -n = +5", KEY, True),
    ("n / 2 = 2.5", KEY, True),
    ("n / 0 = 1", KEY, False),
    ("NOT n / 0 = 1", KEY, False),
    ("region + 1 = 2", KEY, False),
    # logical precedence and keyword case
    ("region = 'eu' OR region = 'us' AND n = 0", KEY, True),
    ("(region = 'eu' OR region = 'us') AND n = 0", KEY, False),
    ("NOT region = 'us' AND n = 5", KEY, True),
    ("region = 'eu' and n = 5 Or FALSE", KEY, True),
    ("n in (5) and region like 'eu' and flag is not null", KEY, True),
    ("n not between 1 and 4 AND NoT off = TRUE", KEY, True),
    # identifiers are case-sensitive and may hold '.' and '$'
    ("Region = 'eu'", KEY, False),
    ("a.b = 1 AND $x = 2", KEY, True),
    # boolean literals are conditions on their own
    ("TRUE", KEY, True),
    ("FALSE", KEY, False),
    ("NOT FALSE", KEY, True),
    ("n = 5 AND TRUE", KEY, True),
]

# (expression, expected position of the fault)
INVALID: list[tuple[str, int]] = [
    ("", 0),
    ("   ", 3),
    ("region", 0),
    ("5", 0),
    ("'eu'", 0),
    ("region = ", 9),
    ("region = 'eu", 9),
    ("region # 'eu'", 7),
    ("(region = 'eu'", 14),
    ("region = 'eu')", 13),
    ("region == 'eu'", 7),
    ("region != 'eu'", 7),
    ('region = "eu"', 9),
    ("n = 5 AND", 9),
    ("n = 5 AND 7", 10),
    ("n = 5 6", 6),
    ("n IN ()", 6),
    ("n IN (1, )", 9),
    ("n IN 1", 5),
    ("n IN (1 2)", 8),
    ("n IN (a)", 6),
    ("region LIKE 5", 12),
    ("region LIKE 'a' ESCAPE 'ab'", 23),
    ("region LIKE 'a\\' ESCAPE '\\'", 12),
    ("n BETWEEN 1 5", 12),
    ("n BETWEEN 'a' AND 5", 10),
    ("n IS 5", 5),
    ("n IS NOT 5", 9),
    ("n = NULL", 4),
    ("n NOT 5", 6),
    ("NOT", 3),
    ("NOT n", 4),
    ("n = 1 = 2", 6),
    ("'a' + 1 = 2", 0),
    ("TRUE + 1 = 2", 0),
    ("n = 1.2.3", 4),
    ("n = 1e", 4),
    ("n = 99999999999999999999", 4),
    ("n > 1e999", 4),
    ("flag AND n = 1", 0),
    ("n = (1 = 1)", 4),
    ("@", 0),
    ("a < > b", 4),
    ("n = 1 AND (n = 2 OR)", 19),
    ("flag IS NULL = TRUE", 13),
    ("TRUE LIKE 'x'", 0),
]

PARSE_BUDGET_S = 0.050


def timed_parse(text: str) -> tuple[Selector | None, float]:
    """Parse, giving None for a SelectorError (anything else escapes) and the seconds taken."""
    start = time.perf_counter()
    try:
        result: Selector | None = parse(text)
    except SelectorError as exc:
        assert 0 <= exc.position <= len(text)
        assert exc.expression == text
        result = None
    return result, time.perf_counter() - start


def parse_or_none(text: str) -> Selector | None:
    """Parse within PARSE_BUDGET_S; a slow run is retried with the collector off,
    since a collection or a scheduler hiccup can land on any single run."""
    result, elapsed = timed_parse(text)
    if elapsed >= PARSE_BUDGET_S:
        gc.collect()
        gc.disable()
        try:
            elapsed = min(timed_parse(text)[1] for _ in range(2))
        finally:
            gc.enable()
        assert elapsed < PARSE_BUDGET_S, f"parsing {text[:60]!r} took {elapsed * 1000:.1f} ms"
    return result


# -- the language, as a table -------------------------------------------------


@pytest.mark.parametrize(("expression", "key", "expected"), VALID)
def test_valid_selector_evaluates_as_jms_says(
    expression: str, key: str | None, expected: bool
) -> None:
    assert parse(expression).matches(key, PROPERTIES) is expected


@pytest.mark.parametrize(("expression", "position"), INVALID)
def test_invalid_selector_raises_selector_error_at_the_fault(
    expression: str, position: int
) -> None:
    with pytest.raises(SelectorError) as caught:
        parse(expression)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, DurablesError)
    assert caught.value.position == position
    assert caught.value.expression == expression
    assert f"at position {position}" in str(caught.value)


def test_error_messages_say_what_was_expected() -> None:
    cases = {
        "(a = 1": "expected ')'",
        "a = 'x": "unterminated string",
        "a # 1": "unknown character '#'",
        "  ": "empty expression",
        "a != 1": "use '<>'",
        "flag": "flag = TRUE",
    }
    for expression, fragment in cases.items():
        with pytest.raises(SelectorError, match=re.escape(fragment)):
            parse(expression)


def test_string_and_boolean_values_of_the_same_text_are_different_kinds() -> None:
    assert not parse("v = 'true'").matches(None, {"v": True})
    assert not parse("v = 1").matches(None, {"v": True})
    assert parse("v = TRUE").matches(None, {"v": True})


def test_arithmetic_overflow_is_unknown_not_an_exception() -> None:
    selector = parse("v * 1.5 > 0")
    assert not selector.matches(None, {"v": 10**400})
    assert parse("v / 3 > 0").matches(None, {"v": 10**20})


# -- limits -------------------------------------------------------------------


def test_expressions_longer_than_4096_characters_are_refused() -> None:
    accepted = "n = 1" + " " * (4096 - 5)
    assert parse(accepted).matches(None, {"n": 1})
    with pytest.raises(SelectorError) as caught:
        parse(accepted + " ")
    assert caught.value.position == 4096


def test_nesting_deeper_than_64_levels_is_refused_without_recursion_error() -> None:
    assert parse("(" * 63 + "TRUE" + ")" * 63).matches(None, {})
    for depth in (64, 2000):
        with pytest.raises(SelectorError, match="nested deeper than 64") as caught:
            parse("(" * depth + "TRUE" + ")" * depth)
        assert caught.value.position == 63
    for prefix in ("NOT ", "-", "+"):
        with pytest.raises(SelectorError, match="nested deeper than 64"):
            parse(prefix * 1000 + "1 = 1")


def test_long_arithmetic_chains_are_refused_at_the_operator_that_goes_too_deep() -> None:
    assert parse(" + ".join(["n"] * 63) + " = 63").matches(None, {"n": 1})
    with pytest.raises(SelectorError) as caught:
        parse(" + ".join(["n"] * 80) + " = 80")
    assert caught.value.position == 4 * 63 + 2  # the 64th "+", which makes depth 65


def test_long_and_or_chains_stay_shallow() -> None:
    conjunction = parse(" AND ".join(["n = 1"] * 400))
    assert conjunction.matches(None, {"n": 1})
    assert not conjunction.matches(None, {"n": 2})
    assert parse(" OR ".join(["n = 2"] * 400 + ["n = 1"])).matches(None, {"n": 1})


def test_in_lists_longer_than_1000_items_are_refused_at_the_extra_item() -> None:
    items = ",".join(["1"] * 1000)
    assert parse(f"n IN ({items})").matches(None, {"n": 1})
    with pytest.raises(SelectorError, match="more than 1000") as caught:
        parse(f"n IN ({items},2)")
    assert caught.value.position == len(f"n IN ({items},")


def test_worst_case_inputs_parse_within_50_ms() -> None:
    worst = [
        " AND ".join(["n = 1"] * 409),
        "n IN (" + ",".join(["1"] * 1000) + ")",
        "v LIKE '" + "%a" * 2000 + "'",
        "(" * 62 + "n = 1" + ")" * 62,
        "v = '" + "''" * 2040 + "'",
        "(" * 4000,
    ]
    for text in worst:
        assert len(text) <= 4096
        parse_or_none(text)


def test_like_with_many_wildcards_does_not_backtrack() -> None:
    selector = parse("v LIKE '" + "%a" * 1000 + "%b'")
    start = time.perf_counter()
    assert not selector.matches(None, {"v": "a" * 4000})
    assert time.perf_counter() - start < PARSE_BUDGET_S


# -- the public API -------------------------------------------------------------


def test_compile_filter_treats_none_and_blank_text_as_no_filter() -> None:
    assert compile_filter(None) is None
    assert compile_filter(" \t\n") is None
    selector = compile_filter("region = 'eu'")
    assert selector is not None
    assert selector.expression == "region = 'eu'"
    with pytest.raises(SelectorError):
        compile_filter("region =")


def test_selectors_are_immutable_hashable_and_equal_by_meaning() -> None:
    one = parse("a = 1 and b <> 'x'")
    other = parse("a=1   AND   b<>'x'")
    assert one == other
    assert hash(one) == hash(other)
    assert len({one, other, parse("a = 1.0 AND b <> 'x'")}) == 2
    assert parse("a = 1") != parse("a = TRUE")
    with pytest.raises(AttributeError):
        one.expression = "a = 2"  # type: ignore[misc]


def test_selectors_survive_pickling() -> None:
    selector = parse("region LIKE 'e%' AND n > 1")
    copy = pickle.loads(pickle.dumps(selector))
    assert copy == selector
    assert copy.matches(None, PROPERTIES)


# -- JSON form ------------------------------------------------------------------

JSON_EXAMPLES: list[tuple[str, list[object]]] = [
    ("region = 'eu'", ["cmp", "=", ["prop", "region"], ["lit", "eu"]]),
    ("key IS NOT NULL", ["not", ["is_null", ["key"]]]),
    ("a = 1 AND b = 2 AND TRUE", ["and", ["cmp", "=", ["prop", "a"], ["lit", 1]],
                                  ["cmp", "=", ["prop", "b"], ["lit", 2]], ["lit", True]]),
    ("n BETWEEN -1 AND 2.5", ["and", ["cmp", ">=", ["prop", "n"], ["lit", -1]],
                              ["cmp", "<=", ["prop", "n"], ["lit", 2.5]]]),
    ("r NOT IN ('a', -2)", ["not", ["in", ["prop", "r"], ["a", -2]]]),
    ("r LIKE 'a!%' ESCAPE '!' OR r LIKE 'b'", ["or", ["like", ["prop", "r"], "a!%", "!"],
                                               ["like", ["prop", "r"], "b", None]]),
    ("-n * 2 > 1", ["cmp", ">", ["arith", "*", ["arith", "-", ["lit", 0], ["prop", "n"]],
                                 ["lit", 2]], ["lit", 1]]),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "expected"), JSON_EXAMPLES)
def test_to_json_gives_the_documented_nodes(expression: str, expected: list[object]) -> None:
    assert parse(expression).to_json() == expected


@pytest.mark.parametrize(("expression", "key", "expected"), VALID[::5])
def test_to_json_round_trips_through_json_and_is_stable(
    expression: str, key: str | None, expected: bool
) -> None:
    tree = parse(expression).to_json()
    assert json.loads(json.dumps(tree, allow_nan=False)) == tree
    assert parse(expression).to_json() == tree
    assert parse(f"( {expression} )").to_json() == tree


# -- fuzzing ----------------------------------------------------------------------


def mutate(text: str, at: int, insert: str, drop: int) -> str:
    """Insert a token into a valid selector and drop a few characters after it."""
    i = at % (len(text) + 1)
    return f"{text[:i]}{insert}{text[i + drop :]}"


mutants = st.builds(
    mutate, conditions, st.integers(0, 10**6), st.sampled_from(["", *TOKENS]), st.integers(0, 3)
)

FUZZ = settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_text(text: str, key: str | None, props: dict[str, Scalar]) -> Selector | None:
    selector = parse_or_none(text)
    if selector is not None:
        assert type(selector.matches(key, props)) is bool
        json.dumps(selector.to_json(), allow_nan=False)
    return selector


@FUZZ
@given(text=st.text(max_size=120), key=keys, props=properties)
def test_arbitrary_text_parses_or_raises_selector_error(
    text: str, key: str | None, props: dict[str, Scalar]
) -> None:
    check_text(text, key, props)


@FUZZ
@given(text=token_soup | deep_soup | mutants, key=keys, props=properties)
def test_token_soup_and_mutated_selectors_parse_or_raise_selector_error(
    text: str, key: str | None, props: dict[str, Scalar]
) -> None:
    check_text(text, key, props)


@FUZZ
@given(text=conditions, key=keys, props=properties)
def test_generated_selectors_parse_and_never_match_together_with_their_negation(
    text: str, key: str | None, props: dict[str, Scalar]
) -> None:
    selector = check_text(text, key, props)
    assert selector is not None, text
    negation = parse(f"NOT ({text})")
    assert not (selector.matches(key, props) and negation.matches(key, props))
    assert parse(f"({text})") == selector
