"""No message, log line, repr or CLI output shows a URL's password, on any error path we can
provoke; and each of those paths ends in one of our errors, with its own exit code."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis

import durables
import durables.aio as aio
from durables.io.transport import transport_for
from durables.settings import load_settings
from durables.urls import parse_url, shown

from .cli_support import Cli, exits
from .servers import RedisProcess, free_port, server_binary

PASSWORD = "s3cretPW42"
CONNECT_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Case:
    name: str
    url: str
    error: type[durables.DurablesError]
    code: int


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """A plain valkey whose default user needs PASSWORD (set once it answers)."""
    with RedisProcess(server_binary("valkey"), tmp_path_factory.mktemp("guarded")) as server:
        with server.client() as admin:
            admin.config_set("requirepass", PASSWORD)
        try:
            yield server
        finally:
            with redis.Redis(port=server.port, password=PASSWORD) as admin:
                admin.config_set("requirepass", "")


@pytest.fixture(scope="module")
def babbler() -> Iterator[int]:
    """A port that answers every connection in another protocol (an HTTP error page)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"<html>HTTP/1.0 400 Bad Request</html>\r\n")
                time.sleep(0.2)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    done.set()
    thread.join()
    listener.close()


def cases(guarded: RedisProcess, babbler: int) -> list[Case]:
    nowhere = free_port()
    at = f"127.0.0.1:{guarded.port}"
    return [
        Case(
            "port out of range",
            f"redis://:{PASSWORD}@127.0.0.1:99999/0",
            durables.ConfigError,
            exits.INVALID,
        ),
        Case(
            "unencoded slash",
            f"redis://:{PASSWORD[:3]}/{PASSWORD[3:]}@{at}/0",
            durables.ConfigError,
            exits.INVALID,
        ),
        Case("bad scheme", f"http://:{PASSWORD}@{at}/0", durables.ConfigError, exits.INVALID),
        Case("bad database", f"redis://:{PASSWORD}@{at}/x", durables.ConfigError, exits.INVALID),
        Case(
            "database out of range",
            f"redis://:{PASSWORD}@{at}/99",
            durables.ConfigError,
            exits.INVALID,
        ),
        Case(
            "wrong password",
            f"redis://:{PASSWORD}x@{at}/0",
            durables.AuthenticationError,
            exits.AUTHENTICATION,
        ),
        Case(
            "wrong user",
            f"redis://nobody:{PASSWORD}@{at}/0",
            durables.AuthenticationError,
            exits.AUTHENTICATION,
        ),
        Case("no password", f"redis://{at}/0", durables.AuthenticationError, exits.AUTHENTICATION),
        Case(
            "unreachable",
            f"redis://:{PASSWORD}@127.0.0.1:{nowhere}/0",
            durables.ConnectionLostError,
            exits.UNREACHABLE,
        ),
        Case(
            "another protocol",
            f"redis://:{PASSWORD}@127.0.0.1:{babbler}/0",
            durables.ConnectionLostError,
            exits.UNREACHABLE,
        ),
        Case(
            "sentinel with nothing there",
            f"redis+sentinel://:{PASSWORD}@127.0.0.1:{nowhere}/mymaster",
            durables.ConnectionLostError,
            exits.UNREACHABLE,
        ),
        Case(
            "cluster with nothing there",
            f"redis+cluster://:{PASSWORD}@127.0.0.1:{nowhere}",
            durables.ConnectionLostError,
            exits.UNREACHABLE,
        ),
        Case(
            "TLS to a plain server",
            f"rediss://:{PASSWORD}@{at}/0",
            durables.ConnectionLostError,
            exits.UNREACHABLE,
        ),
    ]


def everything_said(error: BaseException) -> str:
    """The error's message, repr and whole traceback with its causes, as a log shows it."""
    return f"{error}\n{error!r}\n{''.join(traceback.format_exception(error))}"


def sync_error(url: str) -> BaseException:
    try:
        durables.connect(url, connect_timeout_s=CONNECT_TIMEOUT_S, reconnect_timeout_s=0).close()
    except Exception as error:  # the test looks at whatever came
        return error
    raise AssertionError(f"connected to {shown(url)}")


def aio_error(url: str) -> BaseException:
    async def attempt() -> None:
        client = await aio.connect(url, connect_timeout_s=CONNECT_TIMEOUT_S, reconnect_timeout_s=0)
        await client.close()

    try:
        asyncio.run(attempt())
    except Exception as error:  # the test looks at whatever came
        return error
    raise AssertionError(f"connected to {shown(url)}")


@pytest.mark.slow
def test_no_error_path_shows_the_password_and_each_ends_in_its_own_error_and_code(
    guarded: RedisProcess, babbler: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    said: list[str] = []
    wrong: list[str] = []
    for case in cases(guarded, babbler):
        for client, attempt in (("sync", sync_error), ("aio", aio_error)):
            started = time.monotonic()
            error = attempt(case.url)
            took = time.monotonic() - started
            said.append(everything_said(error))
            if not isinstance(error, case.error) or took > CONNECT_TIMEOUT_S + 3:
                wrong.append(f"{case.name} ({client}, {took:.1f} s): {error!r}")
        result = Cli(case.url, "secrets", {"DURABLES_CONNECT_TIMEOUT_S": "2"})("channels")
        said.append(f"{result.output}\n{result.stderr}")
        lines = result.stderr.strip().splitlines()
        if result.exit_code != case.code or len(lines) != 1 or not lines[0].startswith("error: "):
            wrong.append(f"{case.name} (cli): exit {result.exit_code}, {result.stderr!r}")
    said.append(caplog.text)

    assert wrong == []
    leaks = [text for text in said if PASSWORD in text or PASSWORD[3:] in text]
    assert leaks == []


def test_reprs_of_settings_urls_and_transports_hide_the_password() -> None:
    url = f"rediss://user:{PASSWORD}@127.0.0.1:6380/0?password={PASSWORD}"
    shown_forms = [
        repr(load_settings(url=url)),
        str(load_settings(url=url)),
        repr(parse_url(url)),
        str(parse_url(url)),
        repr(transport_for(url)),
        shown(url),
    ]
    assert [PASSWORD in form for form in shown_forms] == [False] * len(shown_forms)
    assert shown(url) == "rediss://user:***@127.0.0.1:6380/0?password=***"


def test_shown_hides_the_password_and_keeps_the_rest() -> None:
    assert shown(f"redis+sentinel://u:{PASSWORD}@a:1,b:2/m") == "redis+sentinel://u:***@a:1,b:2/m"
    assert shown("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert shown(f"redis://:{PASSWORD}@h/0") == "redis://:***@h/0"
