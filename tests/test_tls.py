"""rediss:// goes through redis-py's TLS to a real TLS server (Debian's redis-server;
the embedded valkey is built without TLS)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import durables
from durables import ConnectionLostError

from .secure import make_certificates, tls_config
from .servers import RedisProcess, free_port, server_binary


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[RedisProcess, int, Path]]:
    if shutil.which("redis-server") is None or shutil.which("openssl") is None:
        pytest.skip("needs Debian's redis-server (built with TLS) and openssl; CI installs them")
    certs = make_certificates(tmp_path)
    tls_port = free_port()
    extra = tls_config(certs, tls_port)
    proc = RedisProcess(server_binary("redis"), tmp_path / "srv", extra=extra).start()
    try:
        yield proc, tls_port, certs["ca.crt"]
    finally:
        proc.stop()


def test_rediss_url_publishes_and_consumes_over_tls(
    tls_server: tuple[RedisProcess, int, Path], namespace: str
) -> None:
    _, port, ca = tls_server
    url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}"
    with durables.connect(url, namespace=namespace) as client:
        ch = client.channel("secure")
        dur = ch.durable("reader")
        ch.publish(b"over tls")
        with dur.consumer() as c:
            assert [e.data for e in c.fetch(timeout=2)] == [b"over tls"]


def test_a_plain_redis_url_to_the_tls_port_is_refused_clearly(
    tls_server: tuple[RedisProcess, int, Path],
) -> None:
    _, port, _ = tls_server
    with pytest.raises(ConnectionLostError, match="cannot reach"):
        durables.connect(f"redis://127.0.0.1:{port}/0", connect_timeout_s=1, socket_timeout_s=1)
