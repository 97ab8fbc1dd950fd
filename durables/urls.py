"""Server URLs: which deployment, which hosts. Pure parsing, checked at the edge.

redis://[user:password@]host:port[/db]          one server (rediss:// with TLS)
redis+sentinel://[user:password@]h1:p1[,h2:p2...]/service[/db]
                                                a primary found and followed through
                                                Sentinel (rediss+sentinel:// with TLS)
redis+cluster://[user:password@]host:port       Redis Cluster (rediss+cluster://)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from .errors import ConfigError

Deployment = Literal["standalone", "sentinel", "cluster"]
SCHEMES: dict[str, tuple[Deployment, bool]] = {
    "redis": ("standalone", False),
    "rediss": ("standalone", True),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
}
SENTINEL_PORT = 26379


@dataclass(frozen=True)
class ServerUrl:
    """A parsed server URL."""

    url: str
    deployment: Deployment
    tls: bool
    hosts: tuple[tuple[str, int], ...]
    service: str | None = None
    """Sentinel: the name of the monitored primary."""
    db: int = 0
    username: str | None = None
    password: str | None = None


def _host_port(part: str, default_port: int, url: str) -> tuple[str, int]:
    host, sep, port = part.rpartition(":")
    if not sep:
        host, port = part, str(default_port)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"bad host:port {part!r} in {url!r}")
    return host, int(port)


def parse_url(url: str) -> ServerUrl:
    """Parse and check `url`; `ConfigError` says what is wrong."""
    if not isinstance(url, str):
        raise ConfigError(f"the server URL must be a str, got {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"scheme must be one of {', '.join(SCHEMES)}, got {url!r}")
    deployment, tls = SCHEMES[parts.scheme]
    credentials, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":") if credentials else ("", "", "")
    if not hostlist:
        raise ConfigError(f"no host in {url!r}")
    default = SENTINEL_PORT if deployment == "sentinel" else 6379
    hosts = tuple(_host_port(h, default, url) for h in hostlist.split(","))
    if deployment == "standalone" and len(hosts) > 1:
        raise ConfigError(f"one host only in {url!r} (several: redis+sentinel://)")
    path = [p for p in parts.path.split("/") if p]
    service = None
    if deployment == "sentinel":
        if not path:
            raise ConfigError(
                f"name the monitored primary: redis+sentinel://host:port/NAME ({url!r})"
            )
        service = path.pop(0)
    if len(path) > 1 or (path and not path[0].isdigit()):
        raise ConfigError(f"the database must be a number, got {'/'.join(path)!r} in {url!r}")
    return ServerUrl(
        url, deployment, tls, hosts, service, int(path[0]) if path else 0,
        unquote(username) or None, unquote(password) or None,
    )  # fmt: skip


def redact(url: str) -> str:
    """`url` fit to show: a password in it replaced by `***` (the user name stays)."""
    parts = urlsplit(url)
    credentials, at, hosts = parts.netloc.rpartition("@")
    if not at or ":" not in credentials:
        return url
    user = credentials.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hosts}"))


def tls_options(
    url: ServerUrl, ca: Path | None = None, cert: Path | None = None, key: Path | None = None
) -> dict[str, Any]:
    """redis-py's TLS keyword arguments for `url`: the server's certificate verified (against
    `ca`, else the system's CAs), and this client's certificate when given."""
    given = {"tls_ca_file": ca, "tls_cert_file": cert, "tls_key_file": key}
    if not url.tls:
        named = [name for name, value in given.items() if value is not None]
        if named:
            raise ConfigError(f"{', '.join(named)} given, but {url.url!r} is not a TLS URL "
                              f"(use rediss://)")  # fmt: skip
        return {}
    if (cert is None) != (key is None):
        raise ConfigError("tls_cert_file and tls_key_file go together")
    options: dict[str, Any] = {"ssl_cert_reqs": "required"}
    if ca is not None:
        options["ssl_ca_certs"] = str(ca)
    if cert is not None and key is not None:
        options["ssl_certfile"], options["ssl_keyfile"] = str(cert), str(key)
    return options


__all__ = ["SCHEMES", "Deployment", "ServerUrl", "parse_url", "redact", "tls_options"]
