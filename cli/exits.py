"""Named exit codes, and which of the library's errors ends with which.

Scripts branch on these, so a code never changes meaning once released.
"""

from __future__ import annotations

import durables

OK = 0
ERROR = 1
"""Any other durables error (and click's own `Abort`)."""
USAGE = 2
"""The command line itself is wrong: unknown option, bad choice, bad `-p k=v` (click's code)."""
NOT_FOUND = 3
"""The channel or durable does not exist."""
IN_USE = 4
"""The exclusive durable already has an active consumer."""
UNREACHABLE = 5
"""The server cannot be reached, or the connection dropped."""
INVALID = 6
"""The library refused a value: a name, filter, start id, payload or setting."""
CONFLICT = 7
"""A durable of that name exists with another kind or filter."""
FULL = 8
"""The channel is at its capacity and durables still need every event in it."""
SERVER = 9
"""The embedded server could not be started or stopped, or the server is too old."""
ABORTED = 10
"""A destructive command was not confirmed; nothing was changed."""
CANNOT_LISTEN = 11
"""`metrics --serve` or `console` could not listen on the address and port given."""
AUTHENTICATION = 12
"""The server refused the password: a wrong one, or none where one is needed."""
UNSAFE_SERVER = 13
"""The server could drop what it confirms (an evicting `maxmemory-policy`): refused."""
SERVER_FULL = 14
"""The server is at its `maxmemory` and refused to store more (consumers can drain it)."""
ACCESS_DENIED = 15
"""The server's ACL refused a command or key: the message names the rule to add."""

# First match wins, so subclasses come before the classes they refine.
_BY_ERROR: tuple[tuple[type[durables.DurablesError], int], ...] = (
    (durables.ChannelNotFoundError, NOT_FOUND),
    (durables.DurableNotFoundError, NOT_FOUND),
    (durables.DurableInUseError, IN_USE),
    (durables.AuthenticationError, AUTHENTICATION),
    (durables.AccessDeniedError, ACCESS_DENIED),
    (durables.UnsafeServerError, UNSAFE_SERVER),
    (durables.ServerFullError, SERVER_FULL),
    (durables.ConnectionLostError, UNREACHABLE),
    (durables.DurableExistsError, CONFLICT),
    (durables.ChannelFullError, FULL),
    (durables.ServerError, SERVER),
    (durables.ServerVersionError, SERVER),
    (durables.ConfigError, INVALID),
    (durables.InvalidNameError, INVALID),
    (durables.InvalidStartError, INVALID),
    (durables.InvalidWindowError, INVALID),
    (durables.PayloadError, INVALID),
    (durables.SelectorError, INVALID),
)


def exit_code(error: durables.DurablesError) -> int:
    """The exit code a command ends with when `error` stops it."""
    for kind, code in _BY_ERROR:
        if isinstance(error, kind):
            return code
    return ERROR
