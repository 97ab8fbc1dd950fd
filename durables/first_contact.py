"""What went wrong when a client first met its server, as one of our errors.

Both clients make their first contact (INFO) on a connection whose every timeout is
`connect_timeout_s`, so a TLS handshake with a server that speaks no TLS gives up then,
not after the socket timeout; whatever fails there comes here and leaves as an error a
person can act on, with the URL shown without its password. Pure: no I/O.
"""

from __future__ import annotations

from redis.exceptions import AuthenticationError as RedisAuthenticationError
from redis.exceptions import InvalidResponse, NoPermissionError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.sentinel import MasterNotFoundError

from .errors import (
    AccessDeniedError,
    AuthenticationError,
    ConfigError,
    ConnectionLostError,
    DurablesError,
)
from .urls import ServerUrl

_AUTH_REPLIES = ("NOAUTH", "WRONGPASS", "HELLO must be called with the client already auth")
"""Replies that mean the password was wrong or missing (redis-py raises some of them as a
plain `ResponseError`: a missing password meets HELLO's refusal under RESP3)."""


def contact_error(exc: RedisError, url: ServerUrl, connect_timeout_s: float) -> DurablesError:
    """Our error for `exc`, raised by redis-py at the first command to the server of `url`."""
    where = url.shown
    said = str(exc)
    if isinstance(exc, RedisAuthenticationError) or said.startswith(_AUTH_REPLIES):
        if url.password:
            return AuthenticationError(f"{where}: the server refused the password: {said}")
        return AuthenticationError(
            f"{where}: the server needs a password and the URL gives "
            "none (redis://[user]:PASSWORD@host:port)"
        )
    if isinstance(exc, NoPermissionError):  # reached, and refused: not "cannot reach"
        return AccessDeniedError(
            f"{where}: the server's ACL refused INFO, which durables reads at connect (the "
            f"version, eviction policy and persistence): add `+info` to the user ({said})",
            "info",
        )
    if isinstance(exc, MasterNotFoundError):
        sentinels = ",".join(f"{host}:{port}" for host, port in url.hosts)
        return ConnectionLostError(
            f"cannot reach {where}: no sentinel at {sentinels} named a primary "
            f"{url.service!r} (are the sentinels running, and is the name right?)"
        )
    if isinstance(exc, ResponseError) and "DB index is out of range" in said:
        return ConfigError(
            f"{where}: the server has no database {url.db} (its `databases` setting is lower)"
        )
    if isinstance(exc, InvalidResponse) or "Protocol error" in said:
        return ConnectionLostError(
            f"cannot reach {where}: something answers there, but not as a Redis server ({said})"
        )
    if url.tls and isinstance(exc, RedisTimeoutError):
        return ConnectionLostError(
            f"cannot reach {where}: no TLS handshake within {connect_timeout_s:g} s "
            "(does the server speak TLS? rediss:// needs it; redis:// is plain)"
        )
    return ConnectionLostError(f"cannot reach {where}: {said}")


__all__ = ["contact_error"]
