"""The dispatcher's Lua evaluator agrees with the Python one, event by event.

Numbers are compared as doubles in Lua, so the generated integers stay within
2**31 (where both are exact); everything else is the parser tests' grammar.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durables
from durables.ops.base import Op, script
from durables.selector import parse

from .selector_strategies import NAMES, conditions

small_scalars = st.one_of(
    st.text(max_size=6),
    st.integers(-(2**31), 2**31),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
)
small_properties = st.dictionaries(st.sampled_from(NAMES), small_scalars, max_size=6)
EVENTS = 12


def lua_matches(channel: durables.Channel, expression: str, after: str) -> list[str]:
    tree = json.dumps(parse(expression).to_json())
    op: Op[Any] = script("count_matching", [channel.keys.stream], [tree, after, 1000, "ids"])
    ids: list[bytes] = channel.ctx.executor.run(op)[0]
    return [i.decode() for i in ids]


@pytest.fixture
def lua_channel(client: durables.Client) -> durables.Channel:
    return client.channel("selectors")


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    expression=conditions.filter(lambda e: _parses(e)),
    events=st.lists(
        st.tuples(st.none() | st.text(min_size=1, max_size=6), small_properties),
        min_size=EVENTS,
        max_size=EVENTS,
    ),
)
def test_lua_and_python_evaluators_agree(
    lua_channel: durables.Channel,
    expression: str,
    events: list[tuple[str | None, dict[str, str | int | float | bool]]],
) -> None:
    last = lua_channel.info().last_id or "0-0"
    ids = lua_channel.publish_many(durables.Message(b"x", key, props) for key, props in events)
    selector = parse(expression)
    expected = [
        i for i, (key, props) in zip(ids, events, strict=True) if selector.matches(key, props)
    ]
    assert lua_matches(lua_channel, expression, last) == expected


@pytest.mark.parametrize(
    ("expression", "props", "key", "matches"),
    [
        ("name LIKE 'é_x%'", {"name": "éyxz"}, None, True),
        ("name LIKE '_'", {"name": "ü"}, None, True),
        ("name LIKE '%!%' ESCAPE '!'", {"name": "50%"}, None, True),
        ("key = 'k' AND n BETWEEN 1 AND 3", {"n": 2}, "k", True),
        ("n / 0 = 1 OR TRUE", {"n": 1}, None, True),
        ("NOT (n > 1)", {}, None, False),
        ("flag = TRUE", {"flag": True}, None, True),
        ("flag = 1", {"flag": True}, None, False),
        ("n IN (1, 'a')", {"n": 2}, None, False),
        ("NOT n IN (1, 'a')", {"n": 2}, None, False),
        ("n IN (1, 2)", {"n": 2.0}, None, True),
    ],
)
def test_lua_evaluator_edge_cases(
    lua_channel: durables.Channel,
    expression: str,
    props: dict[str, str | int | float | bool],
    key: str | None,
    matches: bool,
) -> None:
    last = lua_channel.info().last_id or "0-0"
    (event_id,) = lua_channel.publish_many([durables.Message(b"x", key, props)])
    assert parse(expression).matches(key, props) is matches
    assert lua_matches(lua_channel, expression, last) == ([event_id] if matches else [])


def _parses(expression: str) -> bool:
    try:
        parse(expression)
    except ValueError:
        return False
    return True
