"""A user limited by an ACL to `~<namespace>:*` can do everything durables does; a key
outside it gives `AccessDeniedError` naming NOPERM, never a raw redis-py error."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

import durables
from durables import scripts

from . import secure
from .cli_support import Cli, exits
from .conftest import FAST, Connect
from .helpers import wait_for
from .servers import RedisProcess

ACL_RULES = [
    "on",
    "resetchannels",
    "+@all",
    "-flushall",
    "-flushdb",
    "-config",
    "-shutdown",
    "-acl",
    "-debug",
]
"""The ACL line the README documents, for namespace `<ns>`: `~<ns>:*` plus these."""


@pytest.fixture
def limited_url(server: RedisProcess, namespace: str) -> Iterator[str]:
    user, password = f"u{secrets.token_hex(4)}", secrets.token_hex(8)
    with server.client() as admin:
        admin.execute_command("ACL", "SETUSER", user, f">{password}", f"~{namespace}:*", *ACL_RULES)
    yield f"redis://{user}:{password}@127.0.0.1:{server.port}/0"
    with server.client() as admin:
        admin.execute_command("ACL", "DELUSER", user)


def test_a_user_limited_to_the_namespace_can_do_everything(
    limited_url: str, namespace: str
) -> None:
    with durables.connect(limited_url, namespace=namespace, **FAST) as client:
        ch = client.channel("orders", keyed=True)
        ch.publish("a", key="k1", message_id="m1", ack_required=True, ack_timeout=5)
        for kind in ("exclusive", "shared", "serial"):
            dur = ch.durable(f"d-{kind}", kind=kind)
            with dur.consumer() as c:
                assert [e.text for e in c.fetch(timeout=1)] == ["a"]
            assert dur.depth() == 0 and dur.transaction_depth() == 0
        s = client.session("phone", timeout=30, max_depth=10)
        s.register_interest("orders")
        s.put("orders", "k2", b"b")
        assert s.info().depth >= 1
        s.close(keepalive=False)
        client.housekeep()
        assert [c.name for c in client.channels()] == ["orders"]
        assert ch.purge() >= 1 and ch.delete()


def test_a_key_outside_the_namespace_is_access_denied_naming_noperm(
    limited_url: str, namespace: str
) -> None:
    with durables.connect(limited_url, namespace=f"{namespace}x", **FAST) as client:
        with pytest.raises(durables.AccessDeniedError, match="NOPERM") as caught:
            client.channel("orders")
        assert isinstance(caught.value, durables.DurablesError)
        with pytest.raises(durables.AccessDeniedError, match="NOPERM"):
            client.channels()


@pytest.mark.both_clients
def test_a_session_the_server_refuses_ends_closed_with_the_error(
    server: RedisProcess, limited_url: str, namespace: str, connect: Connect
) -> None:
    """The ACL narrowed under a live session: it ends "closed" with the refusal in
    `session.error`, said through `on_state`, as a subscription ends with `sub.error`;
    the client's connection stays up (the server answers)."""
    with connect(limited_url, namespace=namespace, **FAST) as client:
        client.channel("orders")
        s = client.session("phone", timeout=30)
        states: list[tuple[str, str]] = []
        s.on_state(lambda old, new: states.append((old, new)))
        s.register_interest("orders")
        s.ready_for_events()
        idle = client.session("tablet", timeout=30)  # no delivery: its heartbeat finds it
        assert s.error is None and idle.error is None
        with server.client() as admin:
            admin.execute_command("ACL", "SETUSER", urlparse(limited_url).username, "resetkeys")
        assert wait_for(lambda: s.state == "closed", timeout=10), (s.state, states)
        assert isinstance(s.error, durables.AccessDeniedError)
        assert "NOPERM" in str(s.error)
        assert states[-1][1] == "closed"
        assert wait_for(lambda: idle.state == "closed", timeout=10), idle.state
        assert isinstance(idle.error, durables.AccessDeniedError)
        with pytest.raises(durables.UnconnectedError, match="NOPERM"):
            idle.put("orders", "k", b"v")
        assert client.state == "connected"
        s.close()
        idle.close()


@pytest.fixture
def user_without(server: RedisProcess, namespace: str) -> Iterator[Callable[[str], str]]:
    """A URL for a user of the namespace with the README's rules less one more rule."""
    made: list[str] = []

    def url(rule: str) -> str:
        user, password = f"u{secrets.token_hex(4)}", secrets.token_hex(8)
        with server.client() as admin:
            admin.execute_command(
                "ACL", "SETUSER", user, f">{password}", f"~{namespace}:*", *ACL_RULES, rule
            )
        made.append(user)
        return f"redis://{user}:{password}@127.0.0.1:{server.port}/0"

    yield url
    with server.client() as admin:
        for user in made:
            admin.execute_command("ACL", "DELUSER", user)


@pytest.mark.both_clients
def test_a_durable_refused_xgroup_is_access_denied_naming_it_and_leaves_nothing(
    user_without: Callable[[str], str], server: RedisProcess, namespace: str, connect: Connect
) -> None:
    url = user_without("-xgroup")
    with connect(url, namespace=namespace, **FAST) as client:
        orders = client.channel("orders")
        with pytest.raises(durables.AccessDeniedError, match="xgroup") as caught:
            orders.durable("billing", kind="shared")
        assert "+xgroup" in str(caught.value) and caught.value.__cause__ is None
        assert orders.durables() == []
    with server.client() as admin:  # no spec, no group: nothing half made
        assert [k for k in admin.keys(f"{namespace}:*") if b"durables" in k] == []
    result = Cli(url, namespace)("create", "orders", "audit", "--kind", "shared")
    assert result.exit_code == exits.ACCESS_DENIED, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.both_clients
@pytest.mark.parametrize(("rule", "named"), [("-info", "info"), ("-@scripting", "script|load")])
def test_a_user_refused_what_connect_needs_is_access_denied_naming_it(
    user_without: Callable[[str], str], namespace: str, connect: Connect, rule: str, named: str
) -> None:
    url = user_without(rule)
    with pytest.raises(durables.AccessDeniedError) as caught:
        connect(url, namespace=namespace, **FAST)
    assert named in str(caught.value) and caught.value.command == named
    assert not isinstance(caught.value, durables.ConnectionLostError)
    result = Cli(url, namespace)("channels")
    assert result.exit_code == exits.ACCESS_DENIED, result.output
    assert named in result.output and len(result.output.strip().splitlines()) == 1


def test_a_channel_refused_midway_leaves_nothing(
    user_without: Callable[[str], str], server: RedisProcess, namespace: str
) -> None:
    url = user_without("-sadd")
    with (
        durables.connect(url, namespace=namespace, **FAST) as client,
        pytest.raises(durables.AccessDeniedError, match="sadd"),
    ):
        client.channel("orders")
    with server.client() as admin:
        assert admin.keys(f"{namespace}:*") == []


def test_the_documented_least_privilege_line_is_the_one_the_tls_pass_runs_as() -> None:
    """docs/operations.md prints `permissions.acl_rules`; the TLS pass (tests/secure.py)
    runs as a user with exactly these rules, so a command durables needs and the list
    lacks fails that pass."""
    text = (Path(__file__).parent.parent / "docs" / "operations.md").read_text()
    block = text.split("ACL SETUSER app on >secret ~orders-app:* ", 1)[1].split("```", 1)[0]
    assert block.split() == durables.permissions.acl_rules("orders-app").split()[1:]
    rules = durables.permissions.acl_rules().split()[2:]
    assert secure.RULES.split() == [*rules, *secure.INSPECTION.split()]


def test_the_one_list_covers_the_spark_connectors_scripts_too() -> None:
    """Spark's scripts are loaded by the connector, not at connect, but a user running
    Spark queries needs no second list: what they run is in `acl_rules()`."""
    spark = scripts.names_in("spark")
    assert spark and not set(spark) & set(scripts.NAMES)
    needed = {command for name in spark for command in scripts.commands_of(name)}
    assert needed <= set(durables.permissions.commands())
