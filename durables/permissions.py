"""The least-privilege ACL user: every command durables sends, and nothing else.

The scripts' commands are read from their text (`scripts.commands_of`), the Spark
connector's scripts included: one user serves an application and its Spark queries alike
(their commands are the library's, so the list is the same either way). The rest are those
the library, the CLI, the metrics, the console and the Spark connector send themselves,
and those redis-py sends to open a connection or to learn a cluster's slot map. Pure: the
docs print `acl_rules()` and the TLS test pass runs as a user with exactly these.
"""

from __future__ import annotations

from . import scripts

CONNECTION = ("hello", "auth", "ping", "select")
"""What redis-py sends on a new connection (its `CLIENT SETINFO` is best effort: a refusal
is ignored, and Redis 7.0 has no such command for a rule to name)."""
SCRIPTING = ("evalsha", "script|load")
SERVER = ("info", "time", "wait", "config|get")
"""`config|get` only to see whether RDB snapshots are on: refused, it is not asked."""
CLUSTER = (
    "cluster|info",
    "cluster|slots",
    "cluster|shards",
    "cluster|nodes",
    "command",
    "command|docs",
    "command|getkeys",
    "readonly",
)
"""redis-py's cluster client reads the slot map and the command table (Cluster only)."""
SENT = (
    "del", "exists", "get", "hget", "hgetall", "hkeys", "hlen", "hmget", "hset", "hsetnx",
    "lpush", "lrange", "ltrim", "memory|usage", "pexpire", "pttl", "rpush", "sadd", "scan",
    "smembers", "srem", "xack", "xdel", "xgroup|create", "xinfo|groups", "xinfo|stream",
    "xinfo|consumers", "xlen", "xpending", "xrange", "xread", "xreadgroup", "xrevrange",
    "zrange",
)  # fmt: skip
"""Commands the Python side sends itself (`ops/`, metrics, figures, the console, Spark, the
pytest plugin's clean-up)."""


def commands() -> list[str]:
    """Every command a durables user needs, sorted (ACL names: `xgroup|create`)."""
    found = {*CONNECTION, *SCRIPTING, *SERVER, *CLUSTER, *SENT}
    for name in (*scripts.NAMES, *scripts.names_in("spark")):
        found.update(scripts.commands_of(name))
    return sorted(found)


def acl_rules(namespace: str = "<namespace>") -> str:
    """The rules of an `ACL SETUSER` line for a durables user of `namespace`."""
    return f"~{namespace}:* resetchannels -@all " + " ".join(f"+{c}" for c in commands())


__all__ = ["acl_rules", "commands"]
