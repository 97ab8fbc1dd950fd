"""How the asyncio client reaches the server, chosen from the URL as for the sync client.

The same URLs (`redis://`, `rediss://`, `redis+sentinel://`), opened with redis-py's
asyncio client (hiredis parses replies when installed). One retry policy: the executor's.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff

from ..errors import ConfigError
from ..urls import ServerUrl, parse_url


def _common(socket_timeout_s: float, connect_timeout_s: float) -> dict[str, Any]:
    return {
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": connect_timeout_s,
        "socket_keepalive": True,
        "retry": Retry(NoBackoff(), 0),
    }


def connect(
    url: str, socket_timeout_s: float, connect_timeout_s: float, tls: dict[str, Any] | None = None
) -> aioredis.Redis:
    """A new asyncio redis-py client (with a pool of its own) for `url`'s deployment;
    `tls`: redis-py's TLS arguments (`urls.tls_options`)."""
    parsed = parse_url(url)
    options = {**_common(socket_timeout_s, connect_timeout_s), **(tls or {})}
    if parsed.deployment == "sentinel":
        return _sentinel(parsed, options)
    if parsed.deployment != "standalone":
        raise ConfigError(f"the asyncio client does not support {parsed.deployment} URLs yet")
    try:
        return aioredis.Redis.from_url(parsed.url, **options)
    except ValueError as exc:
        raise ConfigError(f"malformed server URL {parsed.url!r}: {exc}") from None


def _sentinel(url: ServerUrl, options: dict[str, Any]) -> aioredis.Redis:
    auth = {"username": url.username, "password": url.password}
    connect_timeout_s = options["socket_connect_timeout"]
    sentinels = Sentinel(  # type: ignore[no-untyped-call]
        list(url.hosts),
        sentinel_kwargs={"socket_timeout": connect_timeout_s,
                         "socket_connect_timeout": connect_timeout_s, **auth},
        **auth,
    )  # fmt: skip
    assert url.service is not None
    primary: aioredis.Redis = sentinels.master_for(url.service, db=url.db, ssl=url.tls, **options)
    return primary


__all__ = ["connect"]
