"""What the second and third passes leave to the first: the tests that reach no server.

`scripts/test` runs the suite three times: on the embedded valkey, on memory:// and on
Debian's redis-server over TLS. What differs between the passes is the server behind
the fixtures (`server`, `server_url` and all built on them, `fresh_server`, the
certificates, the cluster, Spark) and the settings that name the pass (`SERVER_KIND`,
`MEMORY`, `SECURE`, ...). A test that asks for none of those fixtures and reads none of
those names (nor do its fixtures, nor the helpers of its module it calls) runs the same
in every pass: a pure function, a static check of the sources, the packaging, a CLI
parse, a server of its own that is valkey whatever the pass. Such a test is marked
`no_server`; the valkey pass runs it, the others leave it out (`-m "not no_server"`).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

NO_SERVER = "no_server"
PASS_FIXTURES = frozenset(
    {"server", "server_url", "fresh_server", "certificates", "cluster_server", "spark"}
)
"""Fixtures whose value depends on the pass (`server_url` looks `server` up by name, so
it is named itself; `client`, `channel`, `cli` and the like ask for it)."""
PASS_NAMES = frozenset(
    {"SERVER_KIND", "MEMORY", "SECURE", "CLIENT_KINDS", "server_binary", "secure", "MemoryStore"}
)
"""Names that read which pass runs (conftest.py, tests/secure.py, tests/servers.py)."""


def names_used(function: Any) -> set[str]:
    """The global names `function` uses, and those its module's own helpers that it calls use."""
    names = set(function.__code__.co_names)
    for name in list(names):
        helper = function.__globals__.get(name)
        if inspect.isfunction(helper) and helper.__module__ == function.__module__:
            names |= set(helper.__code__.co_names)
    return names


def reaches_the_pass(item: pytest.Item) -> bool:
    """Whether `item` may run differently from one pass to another (see the module)."""
    info = getattr(item, "_fixtureinfo", None)
    function = getattr(item, "function", None)
    if info is None or function is None:
        return True  # not a plain test function: run it in every pass
    if PASS_FIXTURES & set(info.names_closure):
        return True
    names = names_used(function)
    for definitions in info.name2fixturedefs.values():
        for definition in definitions:
            if inspect.isfunction(definition.func):
                names |= names_used(definition.func)
    return bool(PASS_NAMES & names)


def mark_no_server(items: list[pytest.Item]) -> None:
    """Mark `no_server` the tests that run the same in every pass."""
    for item in items:
        if not reaches_the_pass(item):
            item.add_marker(pytest.mark.no_server)
