"""The Lua scripts: their text and SHA1, computed once, no I/O.

The library's own scripts are `durables/lua/<name>.lua`, named `<name>` (`NAMES`: the
executor loads them at connect). A connector built on the library keeps its scripts beside
its code, `durables/<package>/lua/<name>.lua`, named `<package>/<name>` (`names_in`): the
connector has the executor load them when it first runs one (`Executor.add_scripts`), so a
client that never uses it never loads them.

A script may pull in a library from `lua/lib/` with a line `--@include NAME`;
the text is spliced in at load time (Lua scripts cannot import), so each script
stays one operation while shared helpers exist once. The executor sends scripts
by SHA1 (EVALSHA, in pipelines too) and loads them after a NOSCRIPT (a restarted
or failed-over server has none).

A library's functions that a script never calls are left out of its text: Lua makes a
closure for every `local function` each time a script runs, and the shared consumer's
scripts pulled in about forty, most unused (tens of thousands of server instructions a
call, more than some of their commands cost).
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

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
    "fetch_serial",
    "fetch_keyed",
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
    "save_record",
    "add_members",
    "key_holders",
)


INCLUDE = "--@include "
FUNCTION = re.compile(r"local function ([A-Za-z_]\w*)\(")
"""A top-level function of a script or library: it starts a line, its `end` starts one too."""


def _file(name: str) -> Traversable:
    """Where script `name` is: `lua/<name>.lua`, or `<package>/lua/<name>.lua` for a
    connector's `<package>/<name>`."""
    package, _, base = name.rpartition("/")
    folder = files("durables") / package if package else files("durables")
    return folder / "lua" / f"{base}.lua"


def names_in(package: str) -> tuple[str, ...]:
    """The scripts of a connector's package (`spark`): `<package>/<name>` for each
    `durables/<package>/lua/<name>.lua`, sorted. Read as data: the package is not imported
    (Spark's imports pyspark)."""
    folder = files("durables") / package / "lua"
    found = (item.name for item in folder.iterdir() if item.name.endswith(".lua"))
    return tuple(sorted(f"{package}/{stem.removesuffix('.lua')}" for stem in found))


@cache
def source(name: str) -> str:
    """The text of script `name` (`_file`), read from the installed package, libraries
    spliced in, top-level functions nothing calls left out."""
    text = _file(name).read_text(encoding="utf-8")
    return unused_dropped(
        "".join(
            library(line.removeprefix(INCLUDE).strip()) if line.startswith(INCLUDE) else line
            for line in text.splitlines(keepends=True)
        )
    )


def unused_dropped(text: str) -> str:
    """`text` without the top-level `local function`s that no code outside them names
    (comment lines do not count), until every one left is named."""
    lines = text.splitlines(keepends=True)
    while True:
        code = ["" if line.lstrip().startswith("--") else line for line in lines]
        for start, end, fn in _functions(lines):
            rest = "".join(code[:start]) + "".join(code[end + 1 :])
            if not re.search(rf"\b{fn}\b", rest):
                del lines[start : end + 1]
                break
        else:
            return "".join(lines)


def _functions(lines: list[str]) -> list[tuple[int, int, str]]:
    """(first line, `end` line, name) of each top-level `local function`."""
    found, i = [], 0
    while i < len(lines):
        match = FUNCTION.match(lines[i])
        if match:
            ends = (j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "end")
            end = next(ends, None)
            if end is None:
                raise ValueError(f"lua: function {match.group(1)} has no `end` at its indent")
            found.append((i, end, match.group(1)))
            i = end
        i += 1
    return found


CALL = re.compile(
    r"\b(?:redis\.)?p?call\(\s*['\"]([A-Za-z]+)['\"](?:\s*,\s*['\"]([A-Za-z-]+)['\"])?"
)
"""A command a script calls: `redis.call('X', ...)`, or through a local alias (`call('X')`)."""
TABLE_CALL = re.compile(r"\{\s*'([A-Z]+)'()")
"""A command built as a table for `redis.call(unpack(args))` (`lib/pool.lua`'s XCLAIM)."""
SUBCOMMANDS = frozenset({"xgroup", "xinfo", "script", "config", "client", "object"})


@cache
def commands_of(name: str) -> tuple[str, ...]:
    """The commands script `name` may run (as ACL rules name them: `xgroup|create`), read
    from its text: what a user refused inside it needs."""
    found = set()
    text = source(name)
    for command, sub in [*CALL.findall(text), *TABLE_CALL.findall(text)]:
        command = command.lower()
        found.add(f"{command}|{sub.lower()}" if command in SUBCOMMANDS and sub else command)
    return tuple(sorted(found))


@cache
def library(name: str) -> str:
    return (files("durables") / "lua" / "lib" / f"{name}.lua").read_text(encoding="utf-8")


@cache
def sha(name: str) -> str:
    """The SHA1 that EVALSHA names the script by (what SCRIPT LOAD answers)."""
    return hashlib.sha1(source(name).encode("utf-8")).hexdigest()


__all__ = ["NAMES", "commands_of", "library", "names_in", "sha", "source"]
