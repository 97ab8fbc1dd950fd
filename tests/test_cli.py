"""The `durables` command: it lists, inspects and changes what the library sees, and fails
with `error: ...` and a named exit code, never a traceback."""

from __future__ import annotations

import dataclasses
import importlib
import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import click
import pytest
from click.testing import CliRunner, Result

import durables
from durables.server import EmbeddedServer

from .servers import free_port
from .test_exclusive import fetch_all

# The package directory is cli/, installed as `durables_cli` by setuptools' editable finder,
# which mypy cannot follow: so the modules are looked up at run time and typed here.
CLI: click.Group = importlib.import_module("durables_cli.main").cli
exits: Any = importlib.import_module("durables_cli.exits")
property_value: Any = importlib.import_module("durables_cli.channels").property_value

SCRIPT = Path(sys.executable).parent / "durables"
LINE_TIMEOUT_S = 20.0
BINARY_REPR = repr(b"\x00\xff")


def describe(result: Result) -> str:
    """Everything a failed assertion needs: exit code, both streams, any exception."""
    return (
        f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}\n"
        f"exception: {result.exception!r}"
    )


def library_json(value: object) -> Any:
    """What the library returns, as JSON would carry it (tuples become lists)."""
    if isinstance(value, list):
        return [library_json(v) for v in value]
    assert dataclasses.is_dataclass(value) and not isinstance(value, type)
    return json.loads(json.dumps(dataclasses.asdict(value), default=str))


class Cli:
    """The `durables` command, run in-process against the test server and namespace."""

    def __init__(self, url: str | None, namespace: str, env: Mapping[str, str] | None = None):
        self.prefix = ["--namespace", namespace] + (["--url", url] if url else [])
        self.env = dict(env or {})

    def __call__(self, *args: str, input: str | bytes | None = None) -> Result:
        return CliRunner().invoke(CLI, [*self.prefix, *args], input=input, env=self.env)

    def ok(self, *args: str, input: str | bytes | None = None) -> str:
        """stdout of a command that must succeed."""
        result = self(*args, input=input)
        assert result.exit_code == exits.OK, describe(result)
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def fails(self, code: int, message: str, *args: str, input: str | None = None) -> Result:
        """Run a command that must end with `code` and say `message` on stderr, no traceback."""
        result = self(*args, input=input)
        assert result.exit_code == code, describe(result)
        assert message in result.stderr, describe(result)
        assert "Traceback" not in result.output
        assert isinstance(result.exception, SystemExit), describe(result)
        return result


@pytest.fixture
def cli(server_url: str, namespace: str) -> Cli:
    return Cli(server_url, namespace)


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
    assert cli.json("inspect", "orders", "billing") == library_json(durable.info())
    table = cli.ok("inspect", "orders", "billing")
    for field in dataclasses.fields(durables.DurableInfo):
        assert field.name in table
    assert "qty > 5" in table


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
        exits.CONFLICT, "error: durable 'billing' on 'orders' exists as kind='shared'",
        "create", "orders", "billing", "--kind", "serial",
    )  # fmt: skip


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
        "publish", "orders", "hello", "-k", "k1",
        "-p", "qty=5", "-p", "price=1.5", "-p", "vip=true", "-p", "region=eu",
        "-p", "code=007", "-p", 'label="42"', "-p", "note=a=b",
    )  # fmt: skip
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


# -- tail -------------------------------------------------------------------------------


def test_tail_prints_published_events_and_acknowledges_them(
    cli: Cli, channel: durables.Channel
) -> None:
    durable = channel.durable("billing")
    ids = [
        channel.publish(b"first", key="k1", properties={"region": "eu", "qty": 2}),
        channel.publish(b"\x00\xff"),
        channel.publish("third"),
    ]
    lines = cli.ok("tail", "orders", "billing", "--count", "3").splitlines()
    assert lines == [
        f'{ids[0]}  key=k1  region="eu"  qty=2  first',
        f"{ids[1]}  {BINARY_REPR}",
        f"{ids[2]}  third",
    ]
    info = durable.info()
    assert (info.depth, info.transaction_depth, info.consumers) == (0, 0, ())


def test_tail_leaves_events_past_the_count_for_the_next_consumer(
    cli: Cli, channel: durables.Channel
) -> None:
    durable = channel.durable("billing")
    ids = channel.publish_many([durables.Message(f"e{i}") for i in range(3)])
    assert len(cli.ok("tail", "orders", "billing", "-n", "2").splitlines()) == 2
    with durable.consumer() as consumer:
        (event,) = fetch_all(consumer, 1)
    assert event.id == ids[2] and not event.redelivered


def test_tail_no_ack_leaves_printed_events_to_be_delivered_again(
    cli: Cli, channel: durables.Channel
) -> None:
    durable = channel.durable("billing")
    ids = channel.publish_many([durables.Message(b"a"), durables.Message(b"b")])
    cli.ok("tail", "orders", "billing", "--count", "1", "--no-ack")
    assert durable.transaction_depth() == 2
    with durable.consumer() as consumer:
        got = fetch_all(consumer, 2)
    assert [(e.id, e.redelivered) for e in got] == [(ids[0], True), (ids[1], False)]


def test_tail_consumes_shared_durables_too(cli: Cli, channel: durables.Channel) -> None:
    durable = channel.durable("workers", kind="shared")
    ids = channel.publish_many([durables.Message(b"a"), durables.Message(b"b")])
    lines = cli.ok("tail", "orders", "workers", "--count", "2").splitlines()
    assert lines == [f"{ids[0]}  a", f"{ids[1]}  b"]
    info = durable.info()
    assert (info.depth, info.transaction_depth, info.consumers) == (0, 0, ())


def test_tail_json_prints_one_object_per_event(cli: Cli, channel: durables.Channel) -> None:
    channel.durable("billing")
    text_id = channel.publish("héllo", key="k", properties={"vip": True})
    binary_id = channel.publish(b"\xff")
    lines = cli.ok("tail", "orders", "billing", "--count", "2", "--json").splitlines()
    first, second = (json.loads(line) for line in lines)
    assert first["id"] == text_id and first["channel"] == "orders" and first["key"] == "k"
    assert first["properties"] == {"vip": True} and first["redelivery_count"] == 0
    assert (first["data"], first["encoding"]) == ("héllo", "utf-8")
    assert (second["id"], second["data"], second["encoding"]) == (binary_id, "/w==", "base64")


def test_tail_on_an_exclusive_durable_in_use_ends_with_in_use(
    cli: Cli, channel: durables.Channel
) -> None:
    durable = channel.durable("billing")
    with durable.consumer("holder"):
        cli.fails(exits.IN_USE, "error: ", "tail", "orders", "billing", "--count", "1")


def read_line(stream: IO[str]) -> str:
    """The next line a child prints, or a failure after LINE_TIMEOUT_S (never a hang)."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=LINE_TIMEOUT_S)
    except queue.Empty:
        pytest.fail(f"no output within {LINE_TIMEOUT_S} s")


@pytest.fixture
def run_script(server_url: str, namespace: str) -> Iterator[Any]:
    """Start the console script in a child process; it is killed if a test leaves it."""
    children: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        command = [str(SCRIPT), "--url", server_url, "--namespace", namespace, *args]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        children.append(child)
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.communicate()


def test_tail_prints_as_events_come_and_detaches_cleanly_on_ctrl_c(
    run_script: Any, channel: durables.Channel
) -> None:
    durable = channel.durable("billing")
    first = channel.publish(b"before")
    child = run_script("tail", "orders", "billing")
    assert read_line(child.stdout) == f"{first}  before\n"
    second = channel.publish(b"while tailing")
    assert read_line(child.stdout) == f"{second}  while tailing\n"  # flushed at once
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=LINE_TIMEOUT_S)
    assert child.returncode == exits.OK, err
    assert "Traceback" not in err
    assert durable.info().consumers == ()
    with durable.consumer() as consumer:
        left = consumer.fetch(timeout=0.5)
    # Printed events are acknowledged, except one Ctrl-C cut short as it was being printed:
    # that one may have been seen, so it comes again flagged as redelivered.
    assert [(e.id, e.redelivered) for e in left] in ([], [(second, True)])


# -- watch and housekeep ----------------------------------------------------------------


def table_rows(shown: str) -> list[list[str]]:
    """The cells of each row of a rich table, header first."""
    return [
        [cell.strip() for cell in line.strip("│┃").split(line[0])]
        for line in shown.splitlines()
        if line[:1] in ("│", "┃")
    ]


def test_watch_once_shows_channels_with_their_durables_depths(
    cli: Cli, client: durables.Client
) -> None:
    orders = client.channel("orders")
    orders.durable("billing")
    orders.durable("audit", filter="qty > 100")
    orders.publish_many([durables.Message(b"a", properties={"qty": 1})] * 3)
    client.channel("empty")
    rows = table_rows(cli.ok("watch", "--once"))
    assert rows[0] == ["channel", "length", "durable", "kind", "depth", "txn depth", "consumers"]
    assert rows[1:] == [
        ["empty", "0", "-", "-", "-", "-", "-"],
        ["orders", "3", "audit", "exclusive", "0", "0", "-"],
        ["", "", "billing", "exclusive", "3", "0", "-"],
    ]


def test_watch_once_json_is_a_snapshot_of_what_the_library_sees(
    cli: Cli, client: durables.Client
) -> None:
    orders = client.channel("orders")
    orders.durable("billing")
    orders.publish(b"a")
    (frame,) = cli.json("watch", "--once")
    assert frame["channel"] == library_json(orders.info())
    assert frame["durables"] == library_json(orders.durables())


def test_housekeep_trims_acknowledged_events_and_reports_per_channel(
    cli: Cli, channel: durables.Channel
) -> None:
    durable = channel.durable("billing")
    channel.publish_many([durables.Message(b"a"), durables.Message(b"b")])
    with durable.consumer() as consumer:
        fetch_all(consumer, 2)
    report = cli.json("housekeep")
    assert report == {
        "channels": 1,
        "removed": {"orders": 2},
        "total_removed": 2,
        "expired_sessions": [],
    }
    assert channel.info().length == 0
    assert "removed 0 events from 1 channels" in cli.ok("housekeep")


def test_housekeep_every_repeats_until_ctrl_c(run_script: Any, channel: durables.Channel) -> None:
    child = run_script("housekeep", "--every", "0.1")
    assert "removed 0 events from 1 channels" in read_line(child.stdout)
    assert "removed 0 events from 1 channels" in read_line(child.stdout)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=LINE_TIMEOUT_S)
    assert child.returncode == exits.OK and "Traceback" not in err


# -- the embedded server ----------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A home of the test's own; its server is stopped whatever the test did."""
    path = tmp_path / "home"
    try:
        yield path
    finally:
        EmbeddedServer(path).stop()


def test_server_start_status_and_stop_through_the_cli(home: Path, namespace: str) -> None:
    cli = Cli(None, namespace, env={"DURABLES_HOME": str(home)})
    assert cli.json("server", "status") == {
        "running": False,
        "pid": None,
        "port": None,
        "url": None,
        "home": str(home),
        "version": None,
    }
    assert "started: redis://127.0.0.1:" in cli.ok("server", "start", "--fsync", "always")
    assert "already running" in cli.ok("server", "start")
    status = cli.json("server", "status")
    assert status["running"] is True and status["home"] == str(home)
    assert status["url"] == f"redis://127.0.0.1:{status['port']}/0"
    assert status == library_json(EmbeddedServer(home).status())
    assert "running" in cli.ok("server", "status")

    cli.ok("channel", "orders")  # no --url: the CLI uses the embedded server of DURABLES_HOME
    with durables.connect(status["url"], namespace=namespace) as client:
        assert client.channel_names() == ["orders"]

    assert "stopped the server" in cli.ok("server", "stop")
    assert cli.json("server", "status")["running"] is False
    assert "no server was running" in cli.ok("server", "stop")


# -- demo, help and the console script --------------------------------------------------


def test_demo_runs_against_the_given_server(cli: Cli) -> None:
    pytest.importorskip("durables.demo", reason="durables/demo.py is not written yet")
    cli.ok("demo", "--events", "5")


def test_demo_says_so_when_the_library_has_no_demo(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "durables.demo", None)  # makes the import fail
    cli.fails(exits.ERROR, "error: this version of durables has no demo", "demo")


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(CLI, ["--help"])
    assert result.exit_code == exits.OK
    for command in (
        "channels", "channel", "durables", "inspect", "create", "purge", "delete",
        "publish", "tail", "watch", "housekeep", "server", "demo",
    ):  # fmt: skip
        assert f"\n  {command} " in result.stdout


def test_the_console_script_runs_outside_this_process() -> None:
    shown = subprocess.run(
        [str(SCRIPT), "--help"], capture_output=True, text=True, check=True, timeout=60
    )
    assert "Usage: durables" in shown.stdout and "DURABLES_URL" in shown.stdout
    version = subprocess.run(
        [sys.executable, "-m", "durables_cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert version.stdout.strip() == f"durables, version {durables.__version__}"


def test_sessions_lists_live_and_away_sessions_and_expiry_alerts(
    cli: Cli, client: durables.Client
) -> None:
    client.channel("prices", keyed=True)
    with client.session("gone", timeout=0.1) as s:
        s.register_interest("prices")
    time.sleep(0.3)
    client.housekeep()
    with client.session("away", timeout=30) as s:
        s.register_interest("prices")
    live = client.session("here", timeout=30)
    try:
        shown = cli.json("sessions")
        assert {s["id"]: s["state"] for s in shown["sessions"]} == {"away": "away", "here": "live"}
        assert "'gone' expired" in shown["alerts"][0]["message"]
        table = cli.ok("sessions")
        assert "away" in table and "expired" in table
    finally:
        live.close(keepalive=False)


def test_bench_passes_its_own_options_through(cli: Cli) -> None:
    listed = cli.ok("bench", "--list")
    assert "publish_single" in listed and "consume_shared" in listed
