"""What a newcomer meets in a first hour: each bad input is one `error:` line with its
documented exit code and changes nothing stored; a misspelled variable is pointed out."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest

import durables
from durables.ids import LAST_ID, MAX_SEQ
from durables.server.embedded import EmbeddedServer
from durables.settings import load_settings

from .cli_support import SCRIPT, Cli, exits
from .helpers import publish
from .test_bad_input import snapshot

PAST_THE_LAST_ID = f"{MAX_SEQ + 1}-0"


def one_error_line(cli: Cli, code: int, *args: str) -> str:
    result = cli.fails(code, "error: ", *args)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_purge_up_to_the_last_possible_id_removes_every_event(
    client: durables.Client, cli: Cli
) -> None:
    channel = client.channel("orders")
    channel.durable("audit")
    publish(channel, 3)
    assert channel.purge(up_to=LAST_ID) == 3
    publish(channel, 2)

    assert "purged 2 events" in cli.ok("purge", "orders", "--up-to", LAST_ID, "-y")
    assert channel.info().length == 0


def test_purge_up_to_an_id_past_the_last_is_one_line_and_removes_nothing(
    client: durables.Client, cli: Cli
) -> None:
    channel = client.channel("orders")
    channel.durable("audit")
    publish(channel, 3)
    stored = snapshot(client)

    with pytest.raises(durables.DurablesError, match="out of range"):
        channel.purge(up_to=PAST_THE_LAST_ID)
    line = one_error_line(cli, exits.INVALID, "purge", "orders", "--up-to", PAST_THE_LAST_ID)

    assert "out of range" in line
    assert snapshot(client) == stored


def test_the_purge_prompt_names_an_id_not_a_count(client: durables.Client, cli: Cli) -> None:
    first = publish(client.channel("orders"), 2)[0]

    result = cli.fails(
        exits.ABORTED, "nothing purged", "purge", "orders", "--up-to", first, input="n\n"
    )

    assert f"Remove the events up to and including id {first} of channel" in result.stdout


def test_an_unwritable_home_is_one_line_with_the_server_code(namespace: str) -> None:
    cli = Cli(None, namespace, {"DURABLES_HOME": "/proc/no-such-home"})

    line = one_error_line(cli, exits.SERVER, "server", "start")

    assert "/proc/no-such-home" in line and "DURABLES_HOME" in line


def test_an_admin_command_with_no_server_named_says_how_to_name_one_and_starts_none(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLES_")}
    for command in (
        ["channels"],
        ["metrics", "--serve", "0"],
        ["watch"],
        ["console", "--port", "0"],
    ):
        done = subprocess.run(
            [str(SCRIPT), *command],
            env={**env, "DURABLES_HOME": str(home)},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == exits.UNREACHABLE, (command, done.stderr)
        assert done.stdout == "", command
        (line,) = done.stderr.splitlines()
        assert line.startswith("error: no server to talk to: set DURABLES_URL"), line
        assert "durables server start" in line
    assert EmbeddedServer(home).status().running is False
    assert not (home / "server.json").exists()
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and _mentions(pid, home)]


def _mentions(pid: str, home: Path) -> bool:
    """Whether process `pid` runs with `home` in its command line or working directory."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return str(home) in cmdline or cwd.startswith(str(home))


def test_a_malformed_durables_toml_is_one_line_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server_url: str, namespace: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "durables.toml").write_text("lease_timeout_s = \n")

    with pytest.raises(durables.ConfigError, match=r"durables\.toml"):
        load_settings()
    line = one_error_line(Cli(server_url, namespace), exits.INVALID, "channels")

    assert "durables.toml is not valid TOML" in line and "line 1" in line


def test_a_misspelled_variable_is_warned_about_naming_the_closest_setting(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DURABLES_LEASE_TIMEOUT", "5")
    monkeypatch.setenv("DURABLES_NAMESPACE", "spelled-right")
    monkeypatch.setenv("DURABLES_TEST_SOMETHING", "the suite's own")

    with caplog.at_level(logging.WARNING, logger="durables.settings"):
        load_settings()

    assert [record.getMessage() for record in caplog.records] == [
        "DURABLES_LEASE_TIMEOUT is not a durables setting and is ignored: "
        "did you mean DURABLES_LEASE_TIMEOUT_S?"
    ]
