"""What every command shares: the connection options, `--json` and `--yes`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

import durables

F = TypeVar("F", bound=Callable[..., object])


class State:
    """The group's options; the client is connected on first use and closed with the group."""

    def __init__(self, url: str | None, namespace: str | None) -> None:
        self.url = url
        self.namespace = namespace
        self._client: durables.Client | None = None

    def client(self) -> durables.Client:
        """The client for `--url` and `--namespace` (no URL: the embedded server)."""
        if self._client is None:
            if self.namespace is None:
                self._client = durables.connect(self.url)
            else:
                self._client = durables.connect(self.url, namespace=self.namespace)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


pass_state = click.make_pass_decorator(State)

json_option: Callable[[F], F] = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON for machines instead of text for people."
)
yes_option: Callable[[F], F] = click.option(
    "-y", "--yes", is_flag=True, help="Do not ask for confirmation."
)
