"""How to reach the server, chosen from the URL.

The deployment is a parameter of one executor, not a client class of its own: a
transport only knows how to open a redis-py connection pool for its URL. Standalone
servers (`redis://`, `rediss://`) today; Sentinel and Cluster plug in here as
further schemes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .errors import ConfigError


@dataclass(frozen=True)
class Transport:
    """Opens connection pools to the server at `url`."""

    url: str
    open: Callable[[str, float, float], redis.Redis]
    """(url, socket timeout s, connect timeout s) -> a redis-py client with its own pool."""

    def connect(self, socket_timeout_s: float, connect_timeout_s: float) -> redis.Redis:
        """A new client with a pool of its own (the heartbeat keeps one apart, so a hung
        socket of the application never starves lease renewal)."""
        return self.open(self.url, socket_timeout_s, connect_timeout_s)


def _standalone(url: str, socket_timeout_s: float, connect_timeout_s: float) -> redis.Redis:
    try:
        return redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=connect_timeout_s,
            socket_keepalive=True,
            retry=Retry(NoBackoff(), 0),  # one retry policy: the executor's
        )
    except ValueError as exc:
        raise ConfigError(f"malformed server URL {url!r}: {exc}") from None


OPENERS: dict[str, Callable[[str, float, float], redis.Redis]] = {
    "redis": _standalone,
    "rediss": _standalone,
}


def transport_for(url: str) -> Transport:
    """The transport for `url`'s scheme; `ConfigError` for a scheme we do not know."""
    scheme = urlsplit(url).scheme
    opener = OPENERS.get(scheme)
    if opener is None:
        raise ConfigError(f"scheme must be one of {', '.join(OPENERS)}, got {url!r}")
    return Transport(url, opener)


__all__ = ["OPENERS", "Transport", "transport_for"]
