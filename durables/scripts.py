"""The Lua scripts of `durables/lua/`: their text and SHA1, computed once, no I/O.

A script may pull in a library from `lua/lib/` with a line `--@include NAME`;
the text is spliced in at load time (Lua scripts cannot import), so each script
stays one operation while shared helpers exist once. The executor sends scripts
by SHA1 (EVALSHA, in pipelines too) and loads them after a NOSCRIPT (a restarted
or failed-over server has none).
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.resources import files

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
    "settle_shared",
    "join_shared",
    "ack_shared",
    "ack_tap",
    "leave_shared",
    "rollback_shared",
    "release_shared",
    "renew_member",
    "count_matching",
    "reap_shared",
    "place_marker",
    "release_lease",
    "touch_session",
    "claim_lease",
    "nack",
    "nack_expired",
    "session_queue",
    "leave_session",
    "spark_plan",
    "spark_ack",
    "spark_commit",
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


@cache
def sha(name: str) -> str:
    """The SHA1 that EVALSHA names the script by (what SCRIPT LOAD answers)."""
    return hashlib.sha1(source(name).encode("utf-8")).hexdigest()


__all__ = ["NAMES", "library", "sha", "source"]
