"""What a reply or an exception from the server means: decided here, and only here.

Both clients (their executors), every deployment (a server, Sentinel's primary, a
cluster's nodes) and the cluster routing ask this module, so a new reply is classified
once, by its class or its leading word, never by swallowing every `ResponseError`:

- **outage**: a broken or timed-out connection; a server loading its data, busy with
  another's script, demoted under a blocked read (UNBLOCKED); a cluster down. Our
  `ConnectionLostError`: waited out, the client reconnects.
- **moving**: a cluster moving the slot: MOVED or ASK not followed, TRYAGAIN, redis-py's
  "TTL exhausted", a script's "non local key", "rehashing". `SlotMovingError`: sent again
  after a short pause.
- **refusal**: the ACL refused a command or a key (NOPERM, inside a script too).
  `AccessDeniedError`, naming the command and the rule to add.
- **full**: the server at its maxmemory (OOM). `ServerFullError`: consumers still drain.
- **answer**: a word our scripts or Redis answer with (NOGROUP, INUSE, FULL, ...): its
  own error (`ANSWERS`).
- **bug**: anything else, raised as it is.

Pure: the executors call `error_for` on what came back.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    NoPermissionError,
    OutOfMemoryError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import (
    AccessDeniedError,
    ChannelFullError,
    ChannelNotFoundError,
    ConnectionLostError,
    DurableInUseError,
    DurableNotFoundError,
    DurablesError,
    InvalidStartError,
    LeaseLostError,
    ReplicationError,
    ServerFullError,
    SlotMovingError,
    StalePublishError,
)
from .reply_parsers import error_word
from .scripts import commands_of

Meaning = Literal["outage", "moving", "refusal", "full", "answer", "bug"]

BROKEN = (RedisConnectionError, RedisTimeoutError)
"""A connection that broke or timed out (the socket's, not the server's word)."""
LOST = (*BROKEN, ClusterDownError, TryAgainError, ClusterError)
"""What redis-py raises rather than returns for an outage or a moving slot (its cluster
client raises CLUSTERDOWN, TRYAGAIN and "TTL exhausted"): the `except` clauses' tuple."""
OUTAGE_WORDS = frozenset({"UNBLOCKED", "BUSY", "LOADING", "MASTERDOWN", "CLUSTERDOWN"})
"""Replies after which the command did not run and the server will serve again: a blocked
read on a primary Sentinel demoted (UNBLOCKED: the connection is made anew), another
client's script past the busy threshold (say a Spark sink's commit), data loading after a
restart, a replica without its primary, a cluster down while a primary is replaced."""
MOVING_TEXT = ("non local key", "during rehashing")
"""What a reply says when a script stopped at a key already moved to the importing node
("Attempted to access a non local key in a cluster node script"), or a multi-key command
found the slot's keys split between two nodes ("TRYAGAIN Multiple keys request during
rehashing of slot")."""


def moving(exc: BaseException) -> bool:
    """Whether `exc` says the command's slot is moving between nodes (a resharding): MOVED
    or ASK not followed, TRYAGAIN, redis-py's "TTL exhausted" after following redirections
    too often, or a script stopped at a moved key. The command did not run (a script: it
    stopped at that call); sent again after a short pause, it reaches the slot's node once
    the keys are on one. CLUSTERDOWN is not one: a shard has lost its primary (an outage)."""
    if isinstance(exc, ClusterDownError):
        return False
    if isinstance(exc, (AskError, TryAgainError, ClusterError)):  # MovedError is an AskError
        return True
    return isinstance(exc, ResponseError) and any(text in str(exc) for text in MOVING_TEXT)


def meaning(exc: BaseException) -> Meaning:
    """What `exc`, raised or returned by redis-py for a command, means (see the table)."""
    if moving(exc):
        return "moving"
    if isinstance(exc, (*BROKEN, ClusterDownError)):
        return "outage"
    if not isinstance(exc, ResponseError):
        return "bug"
    if refused(exc):
        return "refusal"
    if isinstance(exc, OutOfMemoryError):  # redis-py strips the OOM word itself
        return "full"
    word = error_word(exc)[0]
    if word in OUTAGE_WORDS:
        return "outage"
    return "answer" if word in ANSWERS else "bug"


def transient(exc: BaseException) -> bool:
    """An outage or a moving slot: the command did not run and may be sent again."""
    return meaning(exc) in ("outage", "moving")


def lost(exc: BaseException, context: str) -> ConnectionLostError:
    where = f"{context}: " if context else ""
    return ConnectionLostError(f"{where}lost the connection to the server: {exc}")


def moved(exc: BaseException, context: str) -> SlotMovingError:
    where = f"{context}: " if context else ""
    return SlotMovingError(f"{where}the cluster is moving this slot between nodes: {exc}")


def error_for(exc: BaseException, context: str = "", script: str | None = None) -> BaseException:
    """Our error for what `exc` means; a bug's `exc` itself (a real failure, never
    swallowed). `context` names what the command was about; `script` the Lua script that
    was running, if any (an ACL refusal inside it names its commands)."""
    kind = meaning(exc)
    if kind == "moving":
        return moved(exc, context)
    if kind == "outage":
        return lost(exc, context)
    if kind == "bug" or not isinstance(exc, ResponseError):
        return exc
    if kind == "refusal":
        err: DurablesError = refusal(exc, script)
    elif kind == "full":
        err = ServerFullError(
            f"the server is at its maxmemory and refuses to store more ({exc}); {FULL_ADVICE}"
        )
    else:
        word, rest = error_word(exc)
        err = ANSWERS[word](rest)
    if context:
        err.args = (f"{context}: {err.args[0]}", *err.args[1:])
    return err


translate = error_for
"""The name the operations' parsers use for `error_for` on a reply they were handed."""


Translate = Callable[[str], DurablesError]


ANSWERS: dict[str, Translate] = {
    "NOCHANNEL": lambda rest: ChannelNotFoundError(rest),
    "NODURABLE": lambda rest: DurableNotFoundError(rest),
    "NOGROUP": lambda rest: DurableNotFoundError(f"no consumer group: {rest}"),
    "INUSE": DurableInUseError.from_reply,
    "LEASELOST": lambda rest: LeaseLostError(rest),
    "DETACHED": lambda rest: LeaseLostError(rest),
    "FULL": lambda rest: ChannelFullError(f"the channel is at its capacity of {rest} events"),
    "NOSTART": lambda rest: InvalidStartError(f"start event {rest} does not exist in the channel"),
    # A publish's copy that landed after its retry had been stored and answered: no caller
    # waits for it (its connection was given up), so this is seen only by a lost reply.
    "STALE": lambda rest: StalePublishError(f"publish superseded: {rest}"),
    # Too few replicas: a server's min-replicas-to-write, or memory://, which has none.
    "NOREPLICAS": lambda rest: ReplicationError(rest),
}
"""Replies that start with a word of our scripts or of Redis that says a state, each with
its error."""


_ACL_COMMAND = re.compile(r"permissions to run the '([^']+)' command")
_ACL_IN_SCRIPT = ("ACL failure in script", "The user executing the script can't", "NOPERM")
"""How a script's refused command reads: valkey names the command, Redis 7.0 does not."""
FULL_ADVICE = (
    "consumers can still read, acknowledge and housekeep at the limit, so draining the "
    "backlog (then `durables housekeep`) frees memory; or raise maxmemory, or purge"
)


def refused(exc: ResponseError) -> bool:
    """Whether the server's ACL refused the command (or a command inside a script)."""
    return isinstance(exc, NoPermissionError) or str(exc).startswith(_ACL_IN_SCRIPT)


def refusal(exc: ResponseError, script: str | None = None) -> AccessDeniedError:
    """The ACL refusal `exc` as ours, naming the command and the rule to add. A refusal
    inside a script names the commands that script runs where the server does not say
    which one it refused."""
    said = str(exc)
    named = _ACL_COMMAND.search(said)
    if named is not None:
        command = named.group(1)
        rule = f"+{command}"
    elif "access" in said and "key" in said:
        return AccessDeniedError(
            f"NOPERM {said}: the server's ACL refused a key; the user needs "
            "`~<namespace>:*` (every key durables makes starts with its namespace)"
        )
    elif script is not None:
        command = " ".join(commands_of(script))
        rule = " ".join(f"+{c}" for c in commands_of(script))
    else:
        command, rule = "", "the command"
    where = f" (in script {script})" if script else ""
    return AccessDeniedError(
        f"NOPERM {said}{where}: the server's ACL refused {command or 'a command'}; "
        f"add `{rule}` to the user's ACL rules (docs/operations.md lists every command "
        "durables needs)",
        command,
    )


__all__ = [
    "ANSWERS",
    "BROKEN",
    "FULL_ADVICE",
    "LOST",
    "Meaning",
    "error_for",
    "lost",
    "meaning",
    "moved",
    "moving",
    "refusal",
    "refused",
    "transient",
    "translate",
]
