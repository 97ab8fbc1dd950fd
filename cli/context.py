"""What every command shares: the connection options, `--json` and `--yes`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import click

import durables
from durables.server.embedded import EmbeddedServer
from durables.settings import load_settings

from . import exits, output

F = TypeVar("F", bound=Callable[..., object])


class State:
    """The group's options; the client is connected on first use and closed with the group."""

    def __init__(self, url: str | None, namespace: str | None) -> None:
        self.url = url
        self.namespace = namespace
        self._client: durables.Client | None = None

    def server_url(self) -> str:
        """`--url`, else the URL the settings name (`DURABLES_URL`, `durables.toml`), else
        the embedded server's while it runs. An admin command never starts a server: with
        none of these it ends in one line saying how to name one."""
        if self.url is None:
            settings = load_settings()
            self.url = settings.url or EmbeddedServer(settings.home_dir).status().url
            if self.url is None:
                output.fail(NO_SERVER, exits.UNREACHABLE)
        return self.url

    def client(self, **settings: object) -> durables.Client:
        """The client for `--url` and `--namespace` (no URL: the embedded server, if it
        runs; see `server_url`).

        `settings` (such as `reconnect_timeout_s`) apply when this call connects.
        """
        if self._client is None:
            url = self.server_url()
            if self.namespace is not None:
                settings["namespace"] = self.namespace
            with _quiet(CONNECTION_LOGGER):
                self._client = durables.connect(url, **settings)
        return self._client

    def live_client(self, **settings: object) -> durables.Client:
        """`client()`, connected anew if the last one gave up (its state is "closed"): a
        long-running command outlives an outage of any length."""
        if self._client is not None and self._client.state == "closed":
            self.close()
        return self.client(**settings)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


NO_SERVER = (
    "no server to talk to: set DURABLES_URL (or url in durables.toml), give --url, or start "
    "the embedded one with `durables server start`"
)

CONNECTION_LOGGER = "durables.io.executor"
"""Logs the connection's state changes; a failed first connect is reported once, as the
command's `error: ...` line, not also as a warning before it."""


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Only errors from logger `name` meanwhile."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


pass_state = click.make_pass_decorator(State)

json_option: Callable[[F], F] = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON for machines instead of text for people."
)
yes_option: Callable[[F], F] = click.option(
    "-y", "--yes", is_flag=True, help="Do not ask for confirmation."
)
