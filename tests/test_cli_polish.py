"""The `durables` command as a person meets it: its version, shell completion, errors on
one line with a named exit code, and progress bars on a terminal (only there)."""

from __future__ import annotations

import importlib.metadata
import os
import pty
import select
import subprocess
import time
from collections.abc import Sequence

import pytest

import durables

from .cli_support import SCRIPT, Cli, exits
from .helpers import fetch_all, publish
from .servers import free_port

RUN_TIMEOUT_S = 60.0
BIG = 12_000
"""Events in the channel purged on a terminal: more than one slice of `purge`."""


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed `durables` script, as a shell runs it (stdout and stderr are pipes)."""
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        check=False,
    )


def run_on_terminal(args: Sequence[str]) -> tuple[int, str]:
    """The script with stdout and stderr on a pseudo-terminal: its exit code and output."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [str(SCRIPT), *args], stdout=follower, stderr=follower, stdin=subprocess.DEVNULL
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, b"".join(chunks).decode(errors="replace")


# -- version and completion -------------------------------------------------------------


def test_version_is_the_installed_package_version() -> None:
    done = run("--version")
    assert done.returncode == exits.OK, done.stderr
    assert done.stdout == f"durables, version {importlib.metadata.version('durables')}\n"
    assert durables.__version__ == importlib.metadata.version("durables")


def test_bash_completion_script_is_produced() -> None:
    done = run(env={"_DURABLES_COMPLETE": "bash_source"})
    assert done.returncode == exits.OK, done.stderr
    assert "_durables_completion() {" in done.stdout
    assert "complete -o nosort -F _durables_completion durables" in done.stdout


def test_completion_offers_the_commands_that_match() -> None:
    env = {"_DURABLES_COMPLETE": "bash_complete", "COMP_WORDS": "durables me", "COMP_CWORD": "1"}
    done = run(env=env)
    assert done.returncode == exits.OK, done.stderr
    assert done.stdout.splitlines() == ["plain,metrics"]


# -- every error on one line ------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("durables", "nope"), exits.NOT_FOUND, "error: channel 'nope' does not exist"),
        (
            ("inspect", "orders", "nope"),
            exits.NOT_FOUND,
            "error: durable 'nope' does not exist on channel 'orders'",
        ),
        (
            ("create", "orders", "b", "--filter", "qty >"),
            exits.INVALID,
            "error: expected a value or condition, found end of expression at position 5",
        ),
        (
            ("create", "orders", "b", "--kind", "bogus"),
            exits.USAGE,
            "error: invalid value for '--kind': 'bogus' is not one of",
        ),
        (
            ("publish", "orders", "x", "-p", "region"),
            exits.USAGE,
            "error: invalid value for '-p' / '--property': 'region' is not NAME=VALUE",
        ),
        (("inspect", "orders"), exits.USAGE, "error: missing argument 'DURABLE'"),
        (("bogus",), exits.USAGE, "error: no such command 'bogus' (see 'durables -h')"),
        (("--bogus", "channels"), exits.USAGE, "error: no such option '--bogus'"),
    ],
)
def test_an_error_is_one_line_with_its_exit_code(
    server_url: str,
    namespace: str,
    channel: durables.Channel,
    args: tuple[str, ...],
    code: int,
    message: str,
) -> None:
    done = run("--url", server_url, "--namespace", namespace, *args)
    assert done.returncode == code, done
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(message), done.stderr


def test_an_unreachable_url_is_one_line(namespace: str) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    done = run("--url", url, "--namespace", namespace, "channels")
    assert done.returncode == exits.UNREACHABLE, done
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"error: cannot reach {url}"), done.stderr


def test_a_malformed_url_is_one_line(namespace: str) -> None:
    done = run("--url", "http://example.com", "--namespace", namespace, "channels")
    assert done.returncode == exits.INVALID, done
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: invalid durables settings: url:"), done.stderr


# -- progress bars on a terminal only ---------------------------------------------------


def test_purge_of_a_large_channel_shows_a_bar_on_a_terminal(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    durable = channel.durable("billing")
    for start in range(1, BIG + 1, 2_000):
        publish(channel, 2_000, start=start)
    args = ["--url", server_url, "--namespace", namespace, "purge", "orders", "--yes"]
    code, shown = run_on_terminal(args)
    assert code == exits.OK, shown
    assert "purging orders" in shown  # the bar, drawn and then cleared
    assert f"purged {BIG} events from channel 'orders'" in shown
    assert channel.info().length == 0 and durable.depth() == 0


def test_purge_up_to_on_a_terminal_removes_only_up_to_the_id(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    ids: list[str] = []
    for start in range(1, BIG + 1, 2_000):
        ids += publish(channel, 2_000, start=start)
    cut = ids[BIG - 1_000]
    args = ["--url", server_url, "--namespace", namespace, "purge", "orders", "--up-to", cut, "-y"]
    code, shown = run_on_terminal(args)
    assert code == exits.OK, shown
    assert f"purged {BIG - 999} events from channel 'orders'" in shown
    assert channel.info().first_id == ids[BIG - 999]


def test_purge_output_is_unchanged_when_not_a_terminal(cli: Cli, channel: durables.Channel) -> None:
    publish(channel, 3)
    assert cli.ok("purge", "orders", "--yes") == "purged 3 events from channel 'orders'\n"


def make_dead_letters(channel: durables.Channel, n: int) -> durables.Durable:
    """A shared durable (max_deliveries=1) with `n` events rolled back into its dead letters."""
    durable = channel.durable("billing", kind="shared", max_deliveries=1)
    publish(channel, n)
    with durable.consumer("w1", prefetch=n) as consumer:
        assert len(fetch_all(consumer, n)) == n
        consumer.rollback()
        assert fetch_all(consumer, 1, timeout=0.5) == []  # the dispatcher moves them
    assert len(durable.dead_letters()) == n
    return durable


def test_dead_letters_are_listed(cli: Cli, channel: durables.Channel) -> None:
    durable = make_dead_letters(channel, 2)
    listed = cli.json("dead-letters", "orders", "billing")
    assert [d["event_id"] for d in listed] == [d.origin_id for d in durable.dead_letters()]
    assert [d["data"] for d in listed] == ["e1", "e2"]
    assert "e1" in cli.ok("dead-letters", "orders", "billing")


def test_dead_letter_replay_asks_first_then_publishes_them_again(
    cli: Cli, channel: durables.Channel
) -> None:
    durable = make_dead_letters(channel, 3)
    cli.fails(
        exits.ABORTED,
        "aborted: nothing replayed",
        "dead-letters",
        "orders",
        "billing",
        "--replay",
        input="n\n",
    )
    out = cli.ok("dead-letters", "orders", "billing", "--replay", "--yes")
    assert out == "replayed 3 dead letters of durable 'billing' of channel 'orders'\n"
    assert durable.dead_letters() == [] and durable.depth() == 3


def test_dead_letter_replay_shows_a_bar_on_a_terminal(
    server_url: str, namespace: str, channel: durables.Channel
) -> None:
    durable = make_dead_letters(channel, 3)
    args = [
        "--url",
        server_url,
        "--namespace",
        namespace,
        "dead-letters",
        "orders",
        "billing",
        "--replay",
        "--yes",
    ]
    code, shown = run_on_terminal(args)
    assert code == exits.OK, shown
    assert "replaying" in shown
    assert "replayed 3 dead letters of durable 'billing' of channel 'orders'" in shown
    assert durable.dead_letters() == [] and durable.depth() == 3
