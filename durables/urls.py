"""Server URLs: which deployment, which hosts. Pure parsing, checked at the edge.

redis://[user:password@]host:port[/db]          one server (rediss:// with TLS)
redis+sentinel://[user:password@]h1:p1[,h2:p2...]/service[/db]
                                                a primary found and followed through
                                                Sentinel (rediss+sentinel:// with TLS)
redis+cluster://[user:password@]host:port       Redis Cluster (rediss+cluster://)
memory://[name]                                 an in-process store (`durables.memory`),
                                                one per name within the process

`shown(url)` is the one place a URL is formatted for people: every message, log line,
repr, CLI output and metric label shows a password as `***`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from .errors import ConfigError

Deployment = Literal["standalone", "sentinel", "cluster", "memory"]
SCHEMES: dict[str, tuple[Deployment, bool]] = {
    "redis": ("standalone", False),
    "rediss": ("standalone", True),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
    "memory": ("memory", False),
}
SENTINEL_PORT = 26379
HIDDEN = "***"
_PASSWORD_PARAMETER = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def shown(url: object) -> str:
    """`url` as people may see it: the password of its `user:password@` part (taken up to
    the last `@`, as the parser does, so one with an unencoded `/` is hidden too) and any
    `password=` parameter replaced by `***`. Anything not a str is shown by its type."""
    if not isinstance(url, str):
        return f"<{type(url).__name__}>"
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, after = rest.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:{HIDDEN}@{after}" if colon else f"{userinfo}@{after}"
    return _PASSWORD_PARAMETER.sub(rf"\g<1>{HIDDEN}", f"{scheme}{sep}{rest}")


@dataclass(frozen=True)
class ServerUrl:
    """A parsed server URL; its repr and `str` show no password."""

    url: str = field(repr=False)
    deployment: Deployment
    tls: bool
    hosts: tuple[tuple[str, int], ...]
    service: str | None = None
    """Sentinel: the name of the monitored primary; memory://: the store's name."""
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        """The URL as people may see it (`urls.shown`)."""
        return shown(self.url)

    def __str__(self) -> str:
        return self.shown


def _quoted_if_shown(part: str, url: str) -> str:
    """` 'part'` if it is in the URL as shown; else nothing (an unencoded `/` or `@` in a
    password splits the URL elsewhere, and the part would hold a piece of it)."""
    return f" {part!r}" if part in shown(url) else ""


def _host_port(part: str, default_port: int, url: str) -> tuple[str, int]:
    host, sep, port = part.rpartition(":")
    if not sep:
        host, port = part, str(default_port)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"bad host:port{_quoted_if_shown(part, url)} in {shown(url)!r}")
    return host, int(port)


def parse_url(url: str) -> ServerUrl:
    """Parse and check `url`; `ConfigError` says what is wrong."""
    if not isinstance(url, str):
        raise ConfigError(f"the server URL must be a str, got {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"scheme must be one of {', '.join(SCHEMES)}, got {shown(url)!r}")
    deployment, tls = SCHEMES[parts.scheme]
    if deployment == "memory":
        return _memory_url(url, parts.netloc, parts.path)
    credentials, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":") if credentials else ("", "", "")
    if not hostlist:
        raise ConfigError(f"no host in {shown(url)!r}")
    default = SENTINEL_PORT if deployment == "sentinel" else 6379
    hosts = tuple(_host_port(h, default, url) for h in hostlist.split(","))
    if deployment == "standalone" and len(hosts) > 1:
        raise ConfigError(f"one host only in {shown(url)!r} (several: redis+sentinel://)")
    path = [p for p in parts.path.split("/") if p]
    service = None
    if deployment == "sentinel":
        if not path:
            raise ConfigError(
                f"name the monitored primary: redis+sentinel://host:port/NAME ({shown(url)!r})"
            )
        service = path.pop(0)
    if len(path) > 1 or (path and not path[0].isdigit()):
        got = _quoted_if_shown("/".join(path), url)
        raise ConfigError(f"the database must be a number, got{got} in {shown(url)!r}")
    return ServerUrl(
        url,
        deployment,
        tls,
        hosts,
        service,
        int(path[0]) if path else 0,
        unquote(username) or None,
        unquote(password) or None,
    )


def _memory_url(url: str, name: str, path: str) -> ServerUrl:
    if path.strip("/") or not all(c.isalnum() or c in "_.-" for c in name):
        raise ConfigError(  # not the URL itself: it may carry a password
            "memory://NAME takes a name of letters, digits and '_.-' only (no user, port or path)"
        )
    return ServerUrl(url, "memory", False, (), service=name)


def tls_options(
    url: ServerUrl, ca: Path | None = None, cert: Path | None = None, key: Path | None = None
) -> dict[str, Any]:
    """redis-py's TLS keyword arguments for `url`: the server's certificate verified (against
    `ca`, else the system's CAs), and this client's certificate when given."""
    given = {"tls_ca_file": ca, "tls_cert_file": cert, "tls_key_file": key}
    if not url.tls:
        named = [name for name, value in given.items() if value is not None]
        if named:
            raise ConfigError(
                f"{', '.join(named)} given, but {url.shown!r} is not a TLS URL (use rediss://)"
            )
        return {}
    if (cert is None) != (key is None):
        raise ConfigError("tls_cert_file and tls_key_file go together")
    options: dict[str, Any] = {"ssl_cert_reqs": "required"}
    if ca is not None:
        options["ssl_ca_certs"] = str(ca)
    if cert is not None and key is not None:
        options["ssl_certfile"], options["ssl_keyfile"] = str(cert), str(key)
    return options


__all__ = ["SCHEMES", "Deployment", "ServerUrl", "parse_url", "shown", "tls_options"]
