"""The `durables` command: it lists, inspects and changes what the library sees, and fails
with `error: ...` and a named exit code, never a traceback."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from click.testing import CliRunner

import durables

from .cli_support import (
    CLI,
    Cli,
    describe,
    exits,
    library_json,
    property_value,
)
from .helpers import fetch_all, publish
from .servers import free_port

# -- listing and inspecting -------------------------------------------------------------


def test_channels_lists_what_the_library_lists(cli: Cli, client: durables.Client) -> None:
    orders = client.channel("orders")
    orders.durable("billing")
    orders.publish(b"a")
    client.channel("prices", ttl=60, capacity=10)
    assert cli.json("channels") == library_json(client.channels())
    table = cli.ok("channels")
    assert "orders" in table and "prices" in table and "60" in table and "10" in table


def test_channels_says_so_when_the_namespace_is_empty(cli: Cli, namespace: str) -> None:
    assert cli.json("channels") == []
    assert f"no channels in namespace {namespace!r}" in cli.ok("channels")


def test_channel_creates_a_channel_with_the_options_given(
    cli: Cli, client: durables.Client
) -> None:
    shown = cli.json(
        "channel", "prices", "--ttl", "30", "--capacity", "5", "--full", "drop_oldest", "--keyed"
    )
    info = client.get_channel("prices").info()
    assert shown == library_json(info)
    assert (info.ttl_s, info.capacity, info.full, info.keyed) == (30, 5, "drop_oldest", True)
    cli.ok("channel", "prices", "--not-keyed")
    assert client.get_channel("prices").info().keyed is False
    assert client.get_channel("prices").info().capacity == 5  # left out, so kept


def test_durables_lists_depths_as_the_library_sees_them(
    cli: Cli, channel: durables.Channel
) -> None:
    channel.durable("audit")
    channel.durable("eu", kind="shared", filter="region = 'eu'")
    channel.publish(b"1", properties={"region": "eu"})
    channel.publish(b"2", properties={"region": "us"})
    listed = cli.json("durables", "orders")
    assert listed == library_json(channel.durables())
    assert [(d["name"], d["depth"]) for d in listed] == [("audit", 2), ("eu", 1)]
    table = cli.ok("durables", "orders")
    assert "region = 'eu'" in table and "shared" in table and "transaction depth" in table


def test_durables_says_so_when_a_channel_has_none(cli: Cli, channel: durables.Channel) -> None:
    assert cli.json("durables", "orders") == []
    assert "no durables on channel 'orders'" in cli.ok("durables", "orders")


def test_inspect_shows_every_field_of_a_durable(cli: Cli, channel: durables.Channel) -> None:
    durable = channel.durable("billing", filter="qty > 5")
    channel.publish(b"x", properties={"qty": 9})
    found = cli.json("inspect", "orders", "billing")
    assert {k: found[k] for k in library_json(durable.info())} == library_json(durable.info())
    table = cli.ok("inspect", "orders", "billing")
    for field in dataclasses.fields(durables.DurableInfo):
        assert field.name in table
    assert "qty > 5" in table


def test_inspect_json_carries_every_figure_the_console_shows(
    cli: Cli, client: durables.Client, channel: durables.Channel
) -> None:
    billing = channel.durable("billing", kind="shared", start="earliest", max_deliveries=3)
    channel.publish_many([durables.Message(b"%d" % i) for i in range(4)])
    with billing.consumer("w1", prefetch=2) as worker:
        assert len(fetch_all(worker, 2)) == 2
        found = cli.json("inspect", "orders", "billing")
    (shown,) = client.figures(channel="orders").channels[0].durables
    assert found["max_deliveries"] == 3
    assert (found["lag"], found["dead_letters"], found["delivered"]) == (2, 0, 2)
    assert found["oldest_unacked_age_s"] >= 0 and found["acknowledged"] == 0
    assert found["redelivered"] == 0 and found["dead_lettered"] == 0
    assert [w.split("#")[0] for w in found["windows"]] == ["w1"]
    (consumer,) = found["consumer_details"]
    assert (consumer["name"], consumer["window"], consumer["held"]) == ("w1", 2, 2)
    assert consumer["pid"] == os.getpid() and consumer["lease_left_s"] > 0
    assert shown.lag == 2


# -- creating ---------------------------------------------------------------------------


def test_create_makes_a_durable_of_the_kind_filter_and_start_asked(
    cli: Cli, client: durables.Client
) -> None:
    out = cli.ok("create", "orders", "billing", "--kind", "shared", "--filter", "region = 'eu'")
    assert "durable 'billing' on channel 'orders': shared where region = 'eu'" in out
    durable = client.get_channel("orders").get_durable("billing")
    assert (durable.kind, durable.spec.filter, durable.spec.start) == (
        "shared",
        "region = 'eu'",
        "earliest",
    )
    shown = cli.json("create", "orders", "audit", "--start", "latest")
    assert shown == library_json(client.get_channel("orders").get_durable("audit").info())
    assert shown["kind"] == "exclusive" and shown["start"] == "latest"


def test_create_again_with_the_same_spec_keeps_the_durable(
    cli: Cli, channel: durables.Channel
) -> None:
    channel.durable("billing", kind="serial")
    cli.ok("create", "orders", "billing", "--kind", "serial")
    assert channel.get_durable("billing").kind == "serial"


def test_create_refuses_an_unknown_kind_as_a_usage_error(cli: Cli) -> None:
    result = cli("create", "orders", "billing", "--kind", "bogus")
    assert result.exit_code == exits.USAGE == 2, describe(result)
    assert "'bogus' is not one of 'exclusive', 'shared', 'serial'" in result.stderr


def test_create_refuses_a_durable_that_exists_with_another_kind(
    cli: Cli, channel: durables.Channel
) -> None:
    channel.durable("billing", kind="shared")
    cli.fails(
        exits.CONFLICT,
        "error: durable 'billing' on 'orders' exists as kind='shared'",
        "create",
        "orders",
        "billing",
        "--kind",
        "serial",
    )


def test_create_refuses_a_bad_filter_and_names_the_position(cli: Cli) -> None:
    cli.fails(exits.INVALID, "at position", "create", "orders", "b", "--filter", "qty >")


def test_create_refuses_a_bad_name(cli: Cli) -> None:
    cli.fails(exits.INVALID, "error: durable name 'a b' contains ' '", "create", "orders", "a b")


# -- publishing -------------------------------------------------------------------------


def test_publish_prints_the_id_and_types_property_values(
    cli: Cli, channel: durables.Channel
) -> None:
    durable = channel.durable("reader")
    out = cli.ok(
        "publish",
        "orders",
        "hello",
        "-k",
        "k1",
        "-p",
        "qty=5",
        "-p",
        "price=1.5",
        "-p",
        "vip=true",
        "-p",
        "region=eu",
        "-p",
        "code=007",
        "-p",
        'label="42"',
        "-p",
        "note=a=b",
    )
    with durable.consumer() as consumer:
        (event,) = fetch_all(consumer, 1)
    assert out.strip() == event.id
    assert event.text == "hello" and event.key == "k1"
    assert event.properties == {
        "qty": 5,
        "price": 1.5,
        "vip": True,
        "region": "eu",
        "code": "007",
        "label": "42",
        "note": "a=b",
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("5", 5),
        ("-12", -12),
        ("1.5", 1.5),
        ("2e3", 2000.0),
        ("true", True),
        ("FALSE", False),
        ("eu", "eu"),
        ("007", "007"),
        ("nan", "nan"),
        ("inf", "inf"),
        ('"5"', "5"),
        ("'true'", "true"),
        ("", ""),
    ],
)
def test_property_values_are_typed_the_way_a_person_means_them(text: str, value: object) -> None:
    parsed = property_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_publish_reads_the_payload_from_stdin_given_a_dash(
    cli: Cli, channel: durables.Channel
) -> None:
    durable = channel.durable("reader")
    cli.ok("publish", "orders", "-", input=b"\x00\xffbinary")
    with durable.consumer() as consumer:
        (event,) = fetch_all(consumer, 1)
    assert event.data == b"\x00\xffbinary"


def test_publish_refuses_a_property_without_an_equals_sign(
    cli: Cli, channel: durables.Channel
) -> None:
    result = cli("publish", "orders", "x", "-p", "region")
    assert result.exit_code == exits.USAGE, describe(result)
    assert "'region' is not NAME=VALUE" in result.stderr
    assert channel.info().length == 0


def test_publish_to_a_full_channel_ends_with_full(cli: Cli, client: durables.Client) -> None:
    channel = client.channel("small", capacity=1)
    channel.durable("slow")
    channel.publish(b"1")
    cli.fails(exits.FULL, "error: ", "publish", "small", "2")


# -- destructive commands ---------------------------------------------------------------


def test_purge_asks_first_and_changes_nothing_when_refused(
    cli: Cli, channel: durables.Channel
) -> None:
    channel.publish_many([durables.Message(b"a"), durables.Message(b"b")])
    result = cli.fails(exits.ABORTED, "aborted: nothing purged", "purge", "orders", input="n\n")
    assert "Remove all 2 events of channel 'orders'" in result.stdout
    assert channel.info().length == 2


def test_purge_with_yes_removes_every_event_and_says_how_many(
    cli: Cli, channel: durables.Channel
) -> None:
    durable = channel.durable("billing")
    channel.publish_many([durables.Message(b"a"), durables.Message(b"b")])
    assert "purged 2 events from channel 'orders'" in cli.ok("purge", "orders", "--yes")
    assert channel.info().length == 0 and durable.depth() == 0


def test_purge_of_nothing_asks_nothing_and_says_so(cli: Cli, channel: durables.Channel) -> None:
    out = cli.ok("purge", "orders")  # no input: a question would abort
    assert "nothing to purge: channel 'orders' holds no events" in out
    ids = channel.publish_many([durables.Message(b"a"), durables.Message(b"b")])
    channel.purge(up_to=ids[0])
    out = cli.ok("purge", "orders", "--up-to", ids[0])
    assert f"holds no events up to id {ids[0]}" in out
    assert channel.info().length == 1


def test_purge_up_to_removes_only_events_up_to_the_id(cli: Cli, channel: durables.Channel) -> None:
    ids = channel.publish_many([durables.Message(b"a"), durables.Message(b"b")])
    assert "purged 1 events" in cli.ok("purge", "orders", "--up-to", ids[0], input="y\n")
    assert channel.info().first_id == ids[1]


def test_purge_up_to_a_malformed_id_is_invalid(cli: Cli, channel: durables.Channel) -> None:
    cli.fails(
        exits.INVALID, "'bogus' is not an event id", "purge", "orders", "--up-to", "bogus", "-y"
    )


def test_delete_channel_asks_first_then_deletes_with_yes(
    cli: Cli, client: durables.Client, channel: durables.Channel
) -> None:
    channel.durable("billing")
    result = cli.fails(exits.ABORTED, "aborted: nothing deleted", "delete", "orders", input="n\n")
    assert "Delete channel 'orders' with its 0 events and 1 durables (billing)?" in result.stdout
    assert client.channel_names() == ["orders"]
    assert "deleted channel 'orders'" in cli.ok("delete", "orders", "-y")
    assert client.channel_names() == []


def test_delete_durable_asks_first_and_keeps_the_channel(
    cli: Cli, channel: durables.Channel
) -> None:
    channel.durable("billing")
    channel.durable("audit")
    cli.fails(exits.ABORTED, "nothing deleted", "delete", "orders", "billing", input="\n")
    out = cli.ok("delete", "orders", "billing", input="y\n")
    assert "deleted durable 'billing' of channel 'orders'" in out
    assert channel.durable_names() == ["audit"]


# -- missing things and other failures --------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("durables", "nope"),
        ("inspect", "nope", "billing"),
        ("publish", "nope", "x"),
        ("purge", "nope", "--yes"),
        ("delete", "nope", "--yes"),
        ("tail", "nope", "billing"),
    ],
)
def test_a_missing_channel_ends_with_not_found(cli: Cli, args: tuple[str, ...]) -> None:
    cli.fails(exits.NOT_FOUND, "error: channel 'nope' does not exist", *args)


@pytest.mark.parametrize(
    "args",
    [
        ("inspect", "orders", "nope"),
        ("delete", "orders", "nope", "--yes"),
        ("tail", "orders", "nope", "--count", "1"),
    ],
)
def test_a_missing_durable_ends_with_not_found(
    cli: Cli, channel: durables.Channel, args: tuple[str, ...]
) -> None:
    cli.fails(exits.NOT_FOUND, "error: durable 'nope' does not exist on channel 'orders'", *args)


def test_an_unreachable_server_ends_with_unreachable(namespace: str) -> None:
    cli = Cli(f"redis://127.0.0.1:{free_port()}/0", namespace)
    cli.fails(exits.UNREACHABLE, "error: cannot reach redis://127.0.0.1:", "channels")


def test_a_malformed_url_is_invalid(namespace: str) -> None:
    Cli("http://example.com", namespace).fails(exits.INVALID, "error: ", "channels")


def test_the_url_and_namespace_come_from_the_environment(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    env = {"DURABLES_URL": server_url, "DURABLES_NAMESPACE": namespace}
    result = CliRunner().invoke(CLI, ["channels", "--json"], env=env)
    assert result.exit_code == exits.OK, describe(result)
    assert [c["name"] for c in json.loads(result.stdout)] == ["orders"]


def test_destructive_commands_leave_a_note_in_the_audit_log(
    cli: Cli, channel: durables.Channel
) -> None:
    channel.durable("billing")
    assert "no admin actions recorded" in cli.ok("audit")
    publish(channel, 2)
    cli.ok("purge", "orders", "--yes")
    cli.ok("delete", "orders", "billing", "--yes")
    newest, oldest = cli.json("audit")
    assert (newest["action"], newest["target"]) == ("delete-durable", "durable orders/billing")
    assert (oldest["action"], oldest["target"]) == ("purge", "channel orders")
    assert oldest["outcome"] == "purged 2 events from channel 'orders'"
    assert newest["address"].startswith("cli, ") and "@" in newest["address"]
    assert "delete-durable" in cli.ok("audit", "--count", "1")
