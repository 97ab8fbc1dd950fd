"""The `durables` command's long-running and process-level parts: tail, watch, housekeep,
the embedded server, sessions, demo, bench and the console script."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from click.testing import CliRunner

import durables
from durables.server.embedded import EmbeddedServer

from .cli_support import (
    BINARY_REPR,
    CLI,
    LINE_TIMEOUT_S,
    SCRIPT,
    Cli,
    exits,
    library_json,
)
from .helpers import fetch_all
from .servers import RedisProcess

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
        # a crash in the child (it died of SIGSEGV at Ctrl-C once, over TLS) shows its stack
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
        child = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        children.append(child)
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.communicate()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_tail_prints_as_events_come_and_detaches_cleanly_when_stopped(
    run_script: Any, channel: durables.Channel, stop: signal.Signals
) -> None:
    durable = channel.durable("billing")
    first = channel.publish(b"before")
    child = run_script("tail", "orders", "billing")
    assert read_line(child.stdout) == f"{first}  before\n"
    second = channel.publish(b"while tailing")
    assert read_line(child.stdout) == f"{second}  while tailing\n"  # flushed at once
    child.send_signal(stop)
    _, err = child.communicate(timeout=LINE_TIMEOUT_S)
    assert child.returncode == exits.OK, err
    assert "Traceback" not in err
    assert durable.info().consumers == ()
    # A stop is taken between events, never halfway through printing or acknowledging
    # one: what was printed is acknowledged, and nothing comes again.
    with durable.consumer() as consumer:
        assert consumer.fetch(timeout=0.5) == []


def test_tail_answers_ctrl_c_within_half_a_second_though_nothing_comes(
    run_script: Any, channel: durables.Channel
) -> None:
    channel.durable("billing")
    first = channel.publish(b"before")
    child = run_script("tail", "orders", "billing")
    assert read_line(child.stdout) == f"{first}  before\n"
    time.sleep(0.3)  # waiting in a fetch
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    child.communicate(timeout=LINE_TIMEOUT_S)
    assert child.returncode == exits.OK
    assert time.monotonic() - sent < 1.5  # a fetch's wait (0.5 s) and the detach


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


def test_watch_piped_prints_frames_says_down_since_during_an_outage_and_goes_on(
    fresh_server: RedisProcess, namespace: str
) -> None:
    with durables.connect(fresh_server.url, namespace=namespace) as setup:
        setup.channel("orders").publish(b"x")
    command = [
        str(SCRIPT),
        "--url",
        fresh_server.url,
        "--namespace",
        namespace,
        "watch",
        "--interval",
        "0.2",
    ]
    env = {**os.environ, "DURABLES_CONNECT_TIMEOUT_S": "1"}
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    try:
        frames = 0
        while frames < 2:  # written as they are taken, not at the end
            frames += "orders" in read_line(child.stdout)
        fresh_server.stop()
        while "server down since" not in (line := read_line(child.stdout)):
            pass
        assert "still trying" in line
        fresh_server.start()
        while "orders" not in read_line(child.stdout):
            pass
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=LINE_TIMEOUT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == exits.OK, err
    assert "Traceback" not in err


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
        "closed_sessions": [],
    }
    assert channel.info().length == 0
    assert "removed 0 events from 1 channels" in cli.ok("housekeep")


def test_housekeep_lists_the_sessions_it_expired(cli: Cli, client: durables.Client) -> None:
    client.channel("prices")
    for session_id in ("phone", "tablet"):
        with client.session(session_id, timeout=0.2) as s:  # kept alive for 0.2 s
            s.register_interest("prices")
    time.sleep(0.4)
    out = cli.ok("housekeep")
    assert "2 sessions expired (their timeout passed while away): phone, tablet" in out
    assert "sessions expired" not in cli.ok("housekeep")  # gone: nothing more to list


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_housekeep_every_repeats_until_stopped_even_mid_wait(
    run_script: Any, channel: durables.Channel, stop: signal.Signals
) -> None:
    child = run_script("housekeep", "--every", "0.1")
    assert "removed 0 events from 1 channels" in read_line(child.stdout)
    assert "removed 0 events from 1 channels" in read_line(child.stdout)
    child.send_signal(stop)
    _, err = child.communicate(timeout=LINE_TIMEOUT_S)
    assert child.returncode == exits.OK and "Traceback" not in err
    slow = run_script("housekeep", "--every", "3600")
    assert "removed 0 events from 1 channels" in read_line(slow.stdout)
    slow.send_signal(stop)  # an hour's wait cut short
    _, err = slow.communicate(timeout=LINE_TIMEOUT_S)
    assert slow.returncode == exits.OK and "Traceback" not in err


# -- the embedded server ----------------------------------------------------------------


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
    assert "demo finished" in cli.ok("demo", "--events", "5")


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(CLI, ["--help"])
    assert result.exit_code == exits.OK
    for command in (
        "channels",
        "channel",
        "durables",
        "inspect",
        "create",
        "purge",
        "delete",
        "publish",
        "tail",
        "watch",
        "housekeep",
        "server",
        "demo",
    ):
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


def test_bench_says_what_to_install_where_the_benchmark_is_not(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "durables_bench", None)  # makes the import fail
    said = cli.fails(
        exits.ERROR,
        "the benchmark (the package durables_bench) is not installed",
        "bench",
        "--list",
    )
    assert "pip install 'durables[bench]'" in said.stderr


def test_the_benchmark_ships_beside_the_library_and_runs_as_a_module() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "durables_bench", "--list"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "publish_single" in listed.stdout
