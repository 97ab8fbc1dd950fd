"""Bad input gets a clear DurablesError subclass and changes nothing already stored."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import durables
from durables import (
    ConfigError,
    ConnectionLostError,
    DurablesError,
    InvalidNameError,
    InvalidStartError,
    PayloadError,
    SelectorError,
)
from durables.ops.server_info import check_version
from durables.reply_parsers import text

from .conftest import FAST, Connect
from .helpers import publish
from .servers import free_port

BAD_NAMES = [
    "",
    "x" * 201,
    "a{b",
    "a}b",
    "{orders}",
    "star*",
    "what?",
    "[abc]",
    "tab\there",
    "nl\nx",
    "nul\x00",
    "bell\x07",
    "sp ace",
    "é-accent",
]


def snapshot(client: durables.Client) -> dict[str, object]:
    """Every key of the namespace with its type and content: what 'nothing changed' means."""
    r = client.redis
    out: dict[str, object] = {}
    for key in sorted(text(k) for k in r.keys(f"{client.namespace}:*")):
        kind = text(r.type(key)).encode()
        size = {
            b"stream": r.xlen,
            b"hash": r.hgetall,
            b"set": r.smembers,
            b"string": r.get,
        }[kind](key)
        out[key] = (kind, size)
    return out


@pytest.fixture
def stored(client: durables.Client) -> dict[str, object]:
    ch = client.channel("orders")
    ch.durable("audit")
    publish(ch, 3)
    return snapshot(client)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_channel_names_are_refused(
    client: durables.Client, stored: dict[str, object], name: str
) -> None:
    with pytest.raises(InvalidNameError):
        client.channel(name)
    with pytest.raises(InvalidNameError):
        client.get_channel(name)
    assert snapshot(client) == stored


@pytest.mark.parametrize("name", [n for n in BAD_NAMES if len(n) < 101] + ["d" * 101])
def test_bad_durable_names_are_refused(
    client: durables.Client, stored: dict[str, object], name: str
) -> None:
    ch = client.channel("orders")
    with pytest.raises(InvalidNameError):
        ch.durable(name)
    with pytest.raises(InvalidNameError):
        ch.get_durable(name)
    assert snapshot(client) == stored


def test_non_str_names_are_refused(client: durables.Client) -> None:
    with pytest.raises(InvalidNameError, match="must be a str"):
        client.channel(42)  # type: ignore[arg-type]


def test_payload_over_the_limit_is_refused_and_the_batch_is_not_half_stored(
    server_url: str, namespace: str
) -> None:
    with durables.connect(server_url, namespace=namespace, max_payload_bytes=1000) as client:
        ch = client.channel("orders")
        ch.publish(b"x" * 1000)
        with pytest.raises(PayloadError, match="limit is 1000"):
            ch.publish(b"x" * 1001)
        with pytest.raises(PayloadError):
            ch.publish_many([durables.Message(b"ok"), durables.Message(b"y" * 2000)])
        assert ch.info().length == 1


def test_the_key_and_the_properties_count_in_the_payload_limit(
    server_url: str, namespace: str
) -> None:
    with durables.connect(server_url, namespace=namespace, max_payload_bytes=1000) as client:
        ch = client.channel("orders")
        with pytest.raises(PayloadError, match="with its key and properties"):
            ch.publish(b"x", key="k" * 1000)
        with pytest.raises(PayloadError):
            ch.publish_many([durables.Message(b"x" * 500, key="k" * 501)])
        ch.publish(b"x" * 500, key="k" * 400, properties={"p": "v" * 50})
        assert ch.info().length == 1


def test_default_payload_limit_is_one_mebibyte(client: durables.Client) -> None:
    ch = client.channel("orders")
    ch.publish(b"x" * (1 << 20))
    with pytest.raises(PayloadError):
        ch.publish(b"x" * ((1 << 20) + 1))


@pytest.mark.parametrize(
    "properties",
    [
        {"a": None},
        {"a": [1]},
        {"a": {"b": 1}},
        {"a": b"bytes"},
        {1: "x"},
        {"": "x"},
        {"a": float("nan")},
        {"a": float("inf")},
    ],
)
def test_properties_must_be_str_int_float_or_bool(
    client: durables.Client, stored: dict[str, object], properties: dict[object, object]
) -> None:
    with pytest.raises(PayloadError):
        client.channel("orders").publish(b"x", properties=properties)  # type: ignore[arg-type]
    assert snapshot(client) == stored


def test_payloads_that_are_not_json_able_and_bad_keys_are_refused(
    client: durables.Client, stored: dict[str, object]
) -> None:
    ch = client.channel("orders")
    with pytest.raises(PayloadError, match="JSON"):
        ch.publish(object())
    with pytest.raises(PayloadError, match="key"):
        ch.publish(b"x", key="")
    with pytest.raises(PayloadError, match="key"):
        ch.publish(b"x", key=5)  # type: ignore[arg-type]
    with pytest.raises(PayloadError):
        ch.publish_many([b"not a Message"])  # type: ignore[list-item]
    assert snapshot(client) == stored


def test_unknown_durable_kind_is_refused(
    client: durables.Client, stored: dict[str, object]
) -> None:
    with pytest.raises(ConfigError, match="kind"):
        client.channel("orders").durable("x", kind="fanout")  # type: ignore[arg-type]
    assert snapshot(client) == stored


@pytest.mark.parametrize("start", ["0-1", "99999999999999-0", "12-34"])
def test_start_id_that_does_not_exist_is_refused(
    client: durables.Client, stored: dict[str, object], start: str
) -> None:
    with pytest.raises(InvalidStartError, match="does not exist"):
        client.channel("orders").durable("x", start=start)
    assert snapshot(client) == stored


@pytest.mark.parametrize("start", ["yesterday", "1-2-3", "-5", ""])
def test_malformed_start_is_refused(
    client: durables.Client, stored: dict[str, object], start: str
) -> None:
    with pytest.raises(InvalidStartError):
        client.channel("orders").durable("x", start=start)
    assert snapshot(client) == stored


def test_bad_filter_is_refused_with_its_position(
    client: durables.Client, stored: dict[str, object]
) -> None:
    with pytest.raises(SelectorError) as err:
        client.channel("orders").durable("x", filter="region = ")
    assert err.value.position == 9
    assert snapshot(client) == stored


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:6379", "redis://", "redis://host:port", "127.0.0.1:6379", "nats://x"]
)
def test_malformed_url_is_refused(url: str) -> None:
    with pytest.raises(ConfigError):
        durables.connect(url)


def test_unreachable_url_is_refused_quickly() -> None:
    with pytest.raises(ConnectionLostError, match="cannot reach"):
        durables.connect(f"redis://127.0.0.1:{free_port()}/0", connect_timeout_s=1)


@pytest.mark.parametrize(
    "setting",
    [
        {"lease_timeout_s": 0},
        {"read_batch": 0},
        {"max_payload_bytes": -1},
        {"namespace": "a b"},
        {"fsync": "never"},
        {"nonsense": 1},
        {"socket_timeout_s": 1.0},  # not above block_s (1.0): idle reads would time out
        {"socket_timeout_s": 5.0, "block_s": 5.0},
        {"lease_timeout_s": 0.5},  # below block_s (1.0): a blocked read outlives the lease
        {"lease_timeout_s": 2.0, "block_s": 3.0},
    ],
)
def test_bad_settings_are_refused(setting: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        durables.connect("redis://127.0.0.1:1/0", **setting)


def test_every_error_is_a_durables_error() -> None:
    for name in durables.__all__:
        obj = getattr(durables, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, DurablesError), name


@pytest.mark.parametrize(
    ("info", "accepted"),
    [
        ({"redis_version": "6.2.14"}, False),
        ({"redis_version": "7.0.0"}, True),
        ({"redis_version": "7.2.4", "valkey_version": "7.0.1"}, False),
        ({"redis_version": "7.2.4", "valkey_version": "7.2.5"}, True),
        ({"redis_version": "7.2.4", "valkey_version": "9.1.2"}, True),
    ],
)
def test_servers_older_than_redis_7_or_valkey_7_2_are_refused(
    info: dict[str, object], accepted: bool
) -> None:
    if accepted:
        assert check_version(info).split()[0] in ("redis", "valkey")
    else:
        with pytest.raises(durables.ServerVersionError, match="too old"):
            check_version(info)


def test_the_real_server_version_is_accepted_and_reported(client: durables.Client) -> None:
    assert client.server_version.split()[0] in ("redis", "valkey")


@pytest.mark.both_clients
def test_a_closed_client_refuses_every_call_and_opens_no_connection(
    connect: Connect, server_url: str, namespace: str
) -> None:
    with connect(server_url, namespace=namespace, **FAST) as client:
        channel = client.channel("orders")
        channel.publish(b"kept")
        client.close()
        calls: list[Callable[[], object]] = [
            lambda: channel.publish(b"lost"), lambda: client.channel("other"),
            lambda: channel.info(), lambda: client.housekeep(),
        ]  # fmt: skip
        for call in calls:
            with pytest.raises(durables.ClientClosedError, match="closed"):
                call()
        client.close()  # closing again is harmless
    with connect(server_url, namespace=namespace, **FAST) as again:
        assert again.channel("orders").info().length == 1


@pytest.mark.both_clients
@pytest.mark.parametrize("size", [10**9, 100_001])
def test_a_window_or_prefetch_past_the_bound_is_a_config_error(
    channel: durables.Channel, size: int
) -> None:
    dur = channel.durable("workers", kind="shared")
    with pytest.raises(durables.ConfigError, match="up to 100,000"):
        dur.consumer(prefetch=size)
    with pytest.raises(durables.ConfigError, match="up to 100,000"):
        dur.subscribe(lambda event: None, window=size)
    with dur.consumer(prefetch=100_000) as consumer:  # the bound itself is taken
        assert consumer.fetch(timeout=0) == []


@pytest.mark.both_clients
@pytest.mark.parametrize("timeout", [-1, -0.001, float("nan"), 86_401, "1", True])
def test_a_fetch_timeout_that_is_no_number_of_seconds_is_a_config_error(
    channel: durables.Channel, timeout: object
) -> None:
    channel.publish(b"kept")
    dur = channel.durable("reader")
    with dur.consumer() as consumer:
        with pytest.raises(durables.ConfigError, match="fetch timeout"):
            consumer.fetch(timeout=timeout)  # type: ignore[arg-type]
        assert [e.text for e in consumer.fetch(timeout=1)] == ["kept"]  # nothing lost
