"""One exception tree: every error durables raises derives from `DurablesError`.

Each class carries a message a person can act on; Redis replies are
translated into these by their first word (see `durables.verdicts`), never swallowed.
"""

from __future__ import annotations

import warnings


class DurablesError(Exception):
    """Root of every error raised by durables."""


class ConfigError(DurablesError, ValueError):
    """A setting, URL or option is malformed or out of range."""


class InvalidNameError(DurablesError, ValueError):
    """A channel, durable, consumer or session name is not allowed."""


class PayloadError(DurablesError, ValueError):
    """A payload or its properties cannot be published (too large, wrong type)."""


class ServerVersionError(DurablesError):
    """The server is older than Redis 7.0 / Valkey 7.2, which durables needs."""


class ConnectionLostError(DurablesError, ConnectionError):
    """The server cannot be reached, or the connection dropped mid-operation."""


class SlotMovingError(ConnectionLostError):
    """A Redis Cluster is moving the operation's hash slot between nodes (a resharding): a
    redirection, TRYAGAIN, or a script stopped at a key already moved. A short outage: the
    executor sends the operation again after a pause; readers attach again. Raised only
    if it lasts past `reconnect_timeout_s`."""


class AuthenticationError(DurablesError):
    """The server refused the password in the URL, or needs one and none was given (the
    server was reached: this is not `ConnectionLostError`)."""


class UnsafeServerError(DurablesError):
    """The server is set up so that it may drop what it confirmed: an eviction policy that
    can remove durables' keys while a `maxmemory` is set. The message names the setting and
    the fix (`maxmemory-policy noeviction`, or `allow_eviction=True` to accept it knowingly)."""


class ServerFullError(DurablesError):
    """The server is at its `maxmemory` (policy `noeviction`) and refused to store more.
    Consumers can still read, acknowledge and housekeep, so a backlog drains and memory
    comes back; `used_memory` and `maxmemory` are in bytes (0 where unknown)."""

    def __init__(self, message: str, used_memory: int = 0, maxmemory: int = 0) -> None:
        super().__init__(message)
        self.used_memory = used_memory
        self.maxmemory = maxmemory


class ServerError(DurablesError):
    """The embedded server could not be started, found or stopped."""


class ChannelNotFoundError(DurablesError, LookupError):
    """The channel does not exist."""


class DurableNotFoundError(DurablesError, LookupError):
    """The durable does not exist on this channel."""


class DurableExistsError(DurablesError):
    """A durable of this name exists with another kind or filter."""


class DurableInUseError(DurablesError):
    """An exclusive durable already has an active consumer (or it lost its lease).

    `holder` is the holder's consumer token (name@host:pid:...) and `lease_left_s` how long
    its lease has left, when the server said (a live holder renews it; a dead one's lapses).
    """

    holder: str = ""
    lease_left_s: float | None = None

    @classmethod
    def from_reply(cls, rest: str) -> DurableInUseError:
        """From the rest of an `INUSE [<lease ms left>] <holder>` reply."""
        first, _, holder = rest.partition(" ")
        left_s = int(first) / 1000 if first.isdigit() and holder else None
        holder = holder if left_s is not None else rest
        if left_s is None:
            err = cls(f"already held by consumer {holder}")
        else:
            err = cls(
                f"already held by consumer {holder}, whose lease has {left_s:.1f} s left "
                "(a live holder keeps renewing it): to take over once a dead holder's lease "
                f"lapses, open it with consumer(..., wait={left_s + 1:.0f}) or wait=True; "
                "to look at the durable without consuming, use channel.get_durable(name)"
            )
        err.holder, err.lease_left_s = holder, left_s
        return err


class InvalidWindowError(ConfigError):
    """A window or prefetch was given where none is allowed, or is out of range."""


class InvalidStartError(DurablesError, ValueError):
    """A durable's start position is not 'earliest', 'latest' or an existing event id."""


class SelectorError(DurablesError, ValueError):
    """A filter expression does not parse; `position` is the 0-based offset of the fault."""

    def __init__(self, message: str, position: int, expression: str = "") -> None:
        self.position = position
        self.expression = expression
        where = f" of {expression!r}" if expression and len(expression) <= 200 else ""
        super().__init__(f"{message} at position {position}{where}")


class ChannelFullError(DurablesError):
    """The channel reached its capacity and durables still need every event in it."""


class UnconnectedError(DurablesError):
    """An update was attempted while the session is disconnected."""


class SessionInUseError(DurablesError):
    """A session of this id is live in another client; the first one keeps it.

    `lease_left_s`: how long that client's live lease has left (it renews it while alive).
    """

    lease_left_s: float | None = None

    @classmethod
    def live_elsewhere(cls, session_id: str, left_s: float) -> SessionInUseError:
        err = cls(
            f"session {session_id!r} is live in another client, whose lease has {left_s:.1f} s "
            "left (a live client keeps renewing it): close it there first; if that client "
            f"died, open it with session(..., wait={left_s + 1:.0f}) or wait=True to take over "
            "once its lease lapses"
        )
        err.lease_left_s = left_s
        return err


class SessionExpiredError(DurablesError):
    """The session's timeout passed; its queue and interests are gone."""


class ClientClosedError(DurablesError):
    """The client was closed (`close()`, or the end of its `with` block): `connect()` again."""


class ConsumerClosedError(DurablesError):
    """The consumer or subscription is closed (or lost its lease) and cannot be used."""


class LeaseLostError(DurableInUseError, ConsumerClosedError):
    """A consumer's lease lapsed (it stopped heart-beating, or another took over): it may
    neither read nor acknowledge any more; what it held is delivered again, marked."""


class AccessDeniedError(DurablesError, PermissionError):
    """The server's ACL refused a key or command (NOPERM). `command` names the refused
    command where the server said it (`xgroup|create`); the message names the ACL rule to
    add (docs/operations.md lists every command durables needs)."""

    def __init__(self, message: str, command: str = "") -> None:
        super().__init__(message)
        self.command = command


class ReplicationError(DurablesError):
    """Fewer replicas confirmed a publish than asked (`replicas=`): the event may be stored
    on the primary, but is not known to survive its loss. `confirmed` says how many did."""

    def __init__(self, message: str, confirmed: int = 0, event_ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.confirmed = confirmed
        self.event_ids = event_ids


class StalePublishError(DurablesError):
    """A copy of a publish reached the server after a later publish of its producer had
    been stored: nothing was stored for it. Only a copy whose caller had already moved on
    gets this (its reply goes to a connection given up), so an application never should."""


DEPRECATED = {"ChannelNotFound": ChannelNotFoundError, "DurableNotFound": DurableNotFoundError}
"""Old names, kept working with a warning: every other error's name ends in `Error`."""


def deprecated(module: str, name: str) -> type[DurablesError]:
    """The error an old name stands for, with a `DeprecationWarning` naming the new one."""
    if name not in DEPRECATED:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new = DEPRECATED[name]
    warnings.warn(
        f"{module}.{name} is deprecated: use {module}.{new.__name__}",
        DeprecationWarning,
        stacklevel=3,
    )
    return new


def __getattr__(name: str) -> type[DurablesError]:
    return deprecated(__name__, name)
