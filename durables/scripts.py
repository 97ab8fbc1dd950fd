"""Loads the Lua scripts in `durables/lua/` once per client.

A script may pull in a library from `lua/lib/` with a line `--@include NAME`;
the text is spliced in at load time (Lua scripts cannot import), so each script
stays one operation while shared helpers exist once.

Each script becomes a typed attribute; redis-py's `Script` sends EVALSHA and
reloads the script by itself after a NOSCRIPT (a restarted server). Scripts are
called directly, never inside a pipeline: there redis-py would add a
SCRIPT EXISTS round trip per batch (see FACTS.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from redis.exceptions import NoScriptError

if TYPE_CHECKING:
    from redis import Redis
    from redis.commands.core import Script

NAMES = (
    "publish",
    "create_durable",
    "delete_durable",
    "delete_channel",
    "renew_lease",
    "attach_exclusive",
    "ack_exclusive",
    "release_exclusive",
    "trim",
    "attach_shared",
    "fetch_shared",
    "rollback_shared",
    "release_shared",
    "renew_member",
    "count_matching",
    "reap_shared",
    "place_marker",
    "release_lease",
)


INCLUDE = "--@include "


@cache
def source(name: str) -> str:
    """The text of `lua/<name>.lua`, read from the installed package, libraries spliced in."""
    text = (files("durables") / "lua" / f"{name}.lua").read_text(encoding="utf-8")
    return "".join(
        library(line.removeprefix(INCLUDE).strip()) if line.startswith(INCLUDE) else line
        for line in text.splitlines(keepends=True)
    )


@cache
def library(name: str) -> str:
    return (files("durables") / "lua" / "lib" / f"{name}.lua").read_text(encoding="utf-8")


class Scripts:
    """The registered scripts of one Redis client, one attribute per operation."""

    publish: Script
    create_durable: Script
    delete_durable: Script
    delete_channel: Script
    renew_lease: Script
    attach_exclusive: Script
    ack_exclusive: Script
    release_exclusive: Script
    trim: Script
    attach_shared: Script
    fetch_shared: Script
    rollback_shared: Script
    release_shared: Script
    renew_member: Script
    count_matching: Script
    reap_shared: Script
    place_marker: Script
    release_lease: Script

    def __init__(self, redis: Redis) -> None:
        for name in NAMES:
            setattr(self, name, redis.register_script(source(name)))


def pipelined(
    redis: Redis, script: Script, keys: Sequence[Any], args: Sequence[Any], *commands: Sequence[Any]
) -> list[Any]:
    """The script and then plain commands in one round trip; replies (errors included, not
    raised) in order. Sent with a plain EVALSHA (redis-py's Script in a pipeline would add
    a SCRIPT EXISTS round trip per batch), reloading the script after a NOSCRIPT."""
    for attempt in (1, 2):
        pipe = redis.pipeline(transaction=False)
        pipe.evalsha(script.sha, len(keys), *keys, *args)
        for command in commands:
            pipe.execute_command(*command)  # type: ignore[no-untyped-call]
        replies: list[Any] = pipe.execute(raise_on_error=False)
        if attempt == 1 and isinstance(replies[0], NoScriptError):
            redis.script_load(script.script)
            continue
        return replies
    raise AssertionError("unreachable")
