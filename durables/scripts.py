"""Loads the Lua scripts in `durables/lua/` once per client.

Each script becomes a typed attribute; redis-py's `Script` sends EVALSHA and
reloads the script by itself after a NOSCRIPT (a restarted server). Scripts are
called directly, never inside a pipeline: there redis-py would add a
SCRIPT EXISTS round trip per batch (see FACTS.md).
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING

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
    "read_exclusive",
    "ack_exclusive",
    "release_exclusive",
    "trim",
)


@cache
def source(name: str) -> str:
    """The text of `lua/<name>.lua`, read from the installed package."""
    return (files("durables") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


class Scripts:
    """The registered scripts of one Redis client, one attribute per operation."""

    publish: Script
    create_durable: Script
    delete_durable: Script
    delete_channel: Script
    renew_lease: Script
    attach_exclusive: Script
    read_exclusive: Script
    ack_exclusive: Script
    release_exclusive: Script
    trim: Script

    def __init__(self, redis: Redis) -> None:
        for name in NAMES:
            setattr(self, name, redis.register_script(source(name)))
